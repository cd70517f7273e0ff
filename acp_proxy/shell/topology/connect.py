"""The WebSocket client topology (docs/design.md section 1, ``topology/``): ``--connect``.

``run_connect``: the proxy's stdin/stdout is the client, a remote WebSocket
endpoint is the agent. ``--listen`` is :mod:`~acp_proxy.shell.topology.listen`.
"""

from __future__ import annotations

import logging
import signal
import sys
from collections.abc import AsyncIterator

import trio
from trio_websocket import ConnectionRejected, HandshakeError

from acp_proxy.config import Config
from acp_proxy.core.actions import Peer
from acp_proxy.core.engine import ProxyCore
from acp_proxy.errors import ConnectFailed
from acp_proxy.shell.relay import AuditSink, Relay
from acp_proxy.shell.topology.ws_upgrade import StartupError, WsUrl, parse_ws_url, read_token
from acp_proxy.shell.transport.base import FrameTransport
from acp_proxy.shell.transport.stdio import open_stdio_transport
from acp_proxy.shell.transport.websocket import (
    CLOSE_GOING_AWAY,
    CLOSE_NORMAL,
    WebSocketTransport,
    describe_close,
    open_websocket_client,
)

__all__ = ["HANDSHAKE_TIMEOUT_SECONDS", "run_connect"]

log = logging.getLogger("acp_proxy")

HANDSHAKE_TIMEOUT_SECONDS = 10.0


async def run_connect(cfg: Config, url: str, audit: AuditSink | None) -> int:
    """Relays the proxy's stdin/stdout (client) to the remote agent at ``url``.

    Sends ``Authorization: Bearer`` when ``listen.token_file`` is set; pings
    with the ``listen`` keepalive settings. SIGINT/SIGTERM close the
    connection (1001) and end the relay.

    Returns:
        0 when the client closed stdin (or a signal, or the agent closed
        normally); 1 when the connection closes abnormally.

    Raises:
        StartupError: a bad URL or token file; the endpoint refused the
            upgrade with 401, 403 or 404 (the sentence names the fix).
        ConnectFailed: the endpoint cannot be reached or refused otherwise.
    """
    target = parse_ws_url(url, default_host=None)
    token = read_token(cfg.listen.token_file) if cfg.listen.token_file else None
    headers = [(b"Authorization", b"Bearer " + token)] if token is not None else []
    client = open_stdio_transport(cfg.limits.max_message_bytes)
    try:
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            return await _connect(cfg, target, headers, client, audit, signals)
    except ConnectionRejected as exc:
        raise _rejection(url, target, exc.status_code) from None
    except HandshakeError as exc:
        detail = str(exc) or type(exc).__name__
        raise ConnectFailed(f"cannot connect to {url}: {detail}") from None
    finally:
        await client.aclose()


def _rejection(url: str, target: WsUrl, status: int) -> Exception:
    """The error for an upgrade ``url`` refused with HTTP ``status``: what to fix, when known."""
    refused = f"{url} refused the connection (HTTP {status})"
    if status == 401:
        return StartupError(
            f"{refused}: the bearer token is missing or wrong; "
            "pass the server's token with --token-file (listen.token_file)"
        )
    if status == 403:
        return StartupError(
            f"{refused}: the server does not allow this client's Origin; "
            "add it to listen.allowed_origins on the server"
        )
    if status == 404:
        return StartupError(
            f"{refused}: nothing serves the path {target.path!r} there; "
            "use the path the server was started with (--listen ws://HOST:PORT/PATH)"
        )
    return ConnectFailed(refused)


async def _connect(
    cfg: Config,
    target: WsUrl,
    headers: list[tuple[bytes, bytes]],
    client: FrameTransport,
    audit: AuditSink | None,
    signals: AsyncIterator[int],
) -> int:
    max_bytes = cfg.limits.max_message_bytes
    signalled = False

    async def stop_on_signal(agent: WebSocketTransport) -> None:
        nonlocal signalled
        async for signum in signals:
            log.info("signal %d: closing the connection", signum)
            signalled = True
            await agent.aclose(CLOSE_GOING_AWAY, "acp-proxy is stopping")

    async with open_websocket_client(
        target.host,
        target.port,
        target.resource,
        secure=target.secure,
        headers=headers,
        max_message_bytes=max_bytes,
        connect_timeout_seconds=HANDSHAKE_TIMEOUT_SECONDS,
    ) as ws:
        agent = WebSocketTransport(ws, Peer.AGENT, max_bytes, audit=audit)
        relay = Relay(
            ProxyCore(cfg),
            client,
            agent,
            audit=audit,
            channel_batches=cfg.limits.channel_messages,
            drain_seconds=cfg.process.grace_seconds,
        )
        async with trio.open_nursery() as nursery:
            nursery.start_soon(stop_on_signal, agent)
            ping = (cfg.listen.ping_interval_seconds, cfg.listen.ping_timeout_seconds)
            nursery.start_soon(agent.keepalive, *ping)
            result = await relay.run()
            nursery.cancel_scope.cancel()
    reason = agent.close_reason
    if result.client_closed_first or signalled:
        return 0
    if reason is not None and reason.code in (CLOSE_NORMAL, CLOSE_GOING_AWAY):
        log.info("the agent closed the connection: %s", describe_close(reason))
        return 0
    print(f"acp-proxy: the agent connection closed: {describe_close(reason)}", file=sys.stderr)
    return 1
