"""Topologies: which transports the relay connects (docs/design.md section 1, ``topology/``).

``run_stdio_process``: the proxy's stdin/stdout (client) <-> an agent subprocess.
"""

from __future__ import annotations

import logging
import signal
from collections.abc import Awaitable, Callable, Sequence
from functools import partial

import trio

from acp_proxy.config import Config
from acp_proxy.core.actions import Peer
from acp_proxy.core.engine import ProxyCore
from acp_proxy.shell.opening import Opening, stdio_core
from acp_proxy.shell.relay import AuditSink, Relay
from acp_proxy.shell.reload import LivePolicy, watch_config
from acp_proxy.shell.spawn import EarlyStart, release_signals
from acp_proxy.shell.transport.base import FrameTransport
from acp_proxy.shell.transport.process import STDERR_TAIL_BYTES, AgentProcess, AgentSignalled
from acp_proxy.shell.transport.stdio import open_stdio_transport

__all__ = ["agent_relay", "forward_signals", "run_stdio_process", "with_stderr_tail"]

log = logging.getLogger("acp_proxy")


#: after a write to the agent failed, how long its exit is awaited so that the client's
#: errors name it (status, stderr) rather than a closed stdin (seconds)
DEAF_EXIT_SECONDS = 0.25

#: logged on SIGHUP without --config (the agent does not get it: it would end the session)
NOTHING_TO_RELOAD = (
    "SIGHUP: there is nothing to reload without --config, so the session goes on "
    "(start the proxy with --config FILE to reload its policy on SIGHUP)"
)


async def forward_signals(
    agent: AgentProcess,
    kill_after_seconds: float,
    on_hup: Callable[[], Awaitable[object]] | None = None,
) -> None:
    """Passes the signals a terminal would send the agent on to its process group, until
    cancelled.

    SIGINT and SIGTERM go to the whole group (once: the agent is in
    its own session, out of the terminal's reach). A second SIGINT escalates
    to SIGTERM. After a SIGTERM, anything of the group still running
    ``kill_after_seconds`` later is killed (an agent ignoring SIGTERM must
    not keep the proxy alive). Each step is logged at info. With ``on_hup``
    (a config file to reload), SIGHUP runs it instead of reaching the agent;
    without, SIGHUP is logged (:data:`NOTHING_TO_RELOAD`) and goes nowhere.
    """

    async def kill_later() -> None:
        if not await agent.wait_group(kill_after_seconds):
            log.info("agent still running %.1fs after SIGTERM; sending SIGKILL", kill_after_seconds)
            agent.kill()

    async with trio.open_nursery() as nursery:
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM, signal.SIGHUP) as signals:
            release_signals()  # one held since an early start is delivered now, to this receiver
            interrupted = terminating = False
            async for signum in signals:
                if signum == signal.SIGHUP and on_hup is not None:
                    log.info("SIGHUP: reloading the policy (not passed on to the agent)")
                    nursery.start_soon(on_hup)
                    continue
                if signum == signal.SIGHUP:
                    log.warning(NOTHING_TO_RELOAD)
                    continue
                name = signal.Signals(signum).name
                if signum == signal.SIGINT and interrupted and not terminating:
                    log.info("second SIGINT: sending SIGTERM to the agent's process group")
                    signum = signal.SIGTERM
                else:
                    log.info("passing %s on to the agent's process group", name)
                interrupted = interrupted or signum == signal.SIGINT
                agent.signal_group(signum)
                if signum == signal.SIGTERM and not terminating:
                    terminating = True
                    nursery.start_soon(kill_later)


def agent_relay(
    core: ProxyCore,
    client: FrameTransport,
    agent: AgentProcess,
    config: Config,
    audit: AuditSink | None,
    queued: dict[Peer, list[bytes]] | None = None,
) -> Relay:
    """A :class:`Relay` between ``client`` and a started agent process.

    After the agent's stdout ends, its exit is awaited for
    ``process.grace_seconds`` before its group is terminated; after the client
    goes away, the agent's stdin is closed and it is stopped the same way.
    When the agent exits before answering ``initialize``, the errors for the
    client's requests carry the last lines it wrote to stderr.
    ``queued``: frames to write first (:class:`Relay`).
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

    async def exit_detail(status: int | None) -> str:
        detail = agent.exit_reason
        if core.protocol_version is not None or not core.pending_requests(Peer.CLIENT):
            return detail
        await agent.wait_stderr(grace)
        return with_stderr_tail(detail, agent.stderr_tail)

    async def deaf_detail() -> str | None:
        # a closed stdin is most often an agent that exited (a crash at start): name that
        with trio.move_on_after(DEAF_EXIT_SECONDS):
            return await exit_detail(await agent.wait())
        return None

    return Relay(
        core,
        client,
        agent.transport,
        audit=audit,
        wait_agent=wait_agent,
        stop_agent=stop_agent,
        exit_detail=exit_detail,
        deaf_detail=deaf_detail,
        channel_batches=config.limits.channel_messages,
        queued=queued,
    )


def with_stderr_tail(detail: str, tail: bytes) -> str:
    """``detail`` plus the last lines of ``tail`` (the agent's stderr), if any.

    The tail is cut to whole lines when it holds more than one.
    """
    text = tail.decode("utf-8", "replace")
    if len(tail) >= STDERR_TAIL_BYTES and "\n" in text.rstrip("\n"):
        text = text[text.index("\n") + 1 :]  # the first line is a fragment
    text = text.strip()
    return f"{detail}; its stderr ended with: {text}" if text else detail


async def run_stdio_process(
    config: Config,
    agent_command: Sequence[str],
    audit: AuditSink | None,
    *,
    live: LivePolicy | None = None,
    watch: str | None = None,
    early: EarlyStart | None = None,
    opening: Opening | None = None,
) -> int:
    """Runs the stdio <-> subprocess topology until the agent's group has ended.

    With a reloadable ``live`` policy (a config file), SIGHUP reloads it
    instead of reaching the agent; with ``watch``, so does a change of that file.

    When the agent has exited, the client's requests in flight are answered
    at once; what is left of its process group is ended after
    ``process.grace_seconds`` (SIGTERM, then SIGKILL after
    ``process.kill_after_seconds``).

    Args:
        config: effective configuration.
        agent_command: the agent's argv.
        audit: audit sink or ``None``.
        live: the policy in force and how to reload it (default: ``config``,
            nothing to reload).
        watch: a config file whose changes reload the policy (``--watch-config``).
        early: the agent, already started from ``agent_command`` by the command
            line (:func:`~acp_proxy.shell.spawn.start_early`), else
            ``None``: it is started here.
        opening: what the opening relayed of ``early``'s first messages
            (:func:`~acp_proxy.shell.opening.open_stdio`): its core, framers and
            unwritten frames are taken over.

    Returns:
        The proxy's exit status: the agent's, or 127 when the agent cannot be
        started.

    Raises:
        AgentSignalled: the agent died of a signal (the proxy should too).
    """
    try:
        if early is not None:
            agent = AgentProcess.adopt(
                early, config.limits.max_message_bytes, logged=opening is not None
            )
        else:
            agent = await AgentProcess.start(agent_command, config.limits.max_message_bytes)
    except OSError as exc:
        log.error("cannot start agent %r: %s", agent_command[0], exc)
        return 127
    client = open_stdio_transport(config.limits.max_message_bytes)
    live = live or LivePolicy(config, None, audit)
    if opening is not None:
        core = opening.core
        client.resume(opening.framers[Peer.CLIENT], opening.ended[Peer.CLIENT])
        agent.transport.resume(opening.framers[Peer.AGENT], opening.ended[Peer.AGENT])
        relay = agent_relay(core, client, agent, config, audit, opening.queued)
    else:
        core = stdio_core(live.config, agent.process.pid)
        relay = agent_relay(core, client, agent, config, audit)
    process = config.process
    on_hup = partial(live.reload, "SIGHUP") if live.reloadable else None
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(forward_signals, agent, process.kill_after_seconds, on_hup)
            if watch is not None:
                nursery.start_soon(watch_config, watch, live)
            nursery.start_soon(agent.watch_exit)
            with live.serving(relay):
                await relay.run()
            await client.aclose()
            await agent.stop_group(process.grace_seconds, process.kill_after_seconds)
            nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            if agent.process.returncode is None:  # cancelled: no time for grace
                agent.kill()
            rc = await agent.process.wait()
    if rc < 0:
        raise AgentSignalled(-rc)
    return rc
