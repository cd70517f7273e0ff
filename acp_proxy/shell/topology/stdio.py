"""Topologies: which transports the relay connects (docs/design.md section 1, ``topology/``).

``run_stdio_process``: the proxy's stdin/stdout (client) <-> an agent subprocess.
"""

from __future__ import annotations

import logging
import signal
from collections.abc import Sequence

import trio

from acp_proxy.config import Config
from acp_proxy.core.engine import ProxyCore
from acp_proxy.shell.relay import AuditSink, Relay
from acp_proxy.shell.transport.base import FrameTransport
from acp_proxy.shell.transport.process import AgentProcess
from acp_proxy.shell.transport.stdio import open_stdio_transport

__all__ = ["forward_signals", "run_stdio_process"]

log = logging.getLogger("acp_proxy")


async def forward_signals(agent: AgentProcess, kill_after_seconds: float | None = None) -> None:
    """Passes SIGINT and SIGTERM received by the proxy on to the agent, until cancelled.

    Args:
        agent: the agent process.
        kill_after_seconds: after a SIGTERM, an agent still running this long
            later is killed (an agent ignoring SIGTERM must not keep the proxy
            alive, nor be orphaned when the proxy is then killed); ``None``: never.
    """

    async def kill_later() -> None:
        assert kill_after_seconds is not None
        with trio.move_on_after(kill_after_seconds):
            await agent.wait()
            return
        log.warning("agent still running %.1fs after SIGTERM; killing it", kill_after_seconds)
        agent.kill()

    async with trio.open_nursery() as nursery:
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            escalating = False
            async for signum in signals:
                log.info("passing signal %d on to the agent", signum)
                agent.send_signal(signum)
                if signum == signal.SIGTERM and kill_after_seconds is not None and not escalating:
                    escalating = True
                    nursery.start_soon(kill_later)


def agent_relay(
    core: ProxyCore,
    client: FrameTransport,
    agent: AgentProcess,
    config: Config,
    audit: AuditSink | None,
) -> Relay:
    """A :class:`Relay` between ``client`` and a started agent process.

    After the agent's stdout ends, its exit is awaited for
    ``process.grace_seconds`` before it is terminated; after the client goes
    away, the agent's stdin is closed and it is stopped the same way.
    """
    grace = config.process.grace_seconds
    kill_after = config.process.kill_after_seconds

    async def wait_agent() -> int | None:
        with trio.move_on_after(grace):
            return await agent.wait()
        log.warning("agent closed stdout but did not exit; terminating it")
        return await agent.stop(0, kill_after)

    async def stop_agent() -> int:
        return await agent.stop(grace, kill_after)

    return Relay(
        core,
        client,
        agent.transport,
        audit=audit,
        wait_agent=wait_agent,
        stop_agent=stop_agent,
        channel_batches=config.limits.channel_messages,
    )


async def run_stdio_process(
    config: Config, agent_command: Sequence[str], audit: AuditSink | None
) -> int:
    """Runs the stdio <-> subprocess topology until the agent has exited.

    Args:
        config: effective configuration.
        agent_command: the agent's argv.
        audit: audit sink or ``None``.

    Returns:
        The proxy's exit status: the agent's (128+N for signal N), or 127 when
        the agent cannot be started.
    """
    try:
        agent = await AgentProcess.start(agent_command, config.limits.max_message_bytes)
    except OSError as exc:
        log.error("cannot start agent %r: %s", agent_command[0], exc)
        return 127
    client = open_stdio_transport(config.limits.max_message_bytes)
    core = ProxyCore(config)
    relay = agent_relay(core, client, agent, config, audit)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(forward_signals, agent, config.process.kill_after_seconds)
        nursery.start_soon(agent.watch_exit, config.process.grace_seconds)
        result = await relay.run()
        nursery.cancel_scope.cancel()
    await client.aclose()
    status = result.agent_status
    if status is None:
        status = await agent.wait()
    return status
