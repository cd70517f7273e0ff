"""The WebSocket client topology (docs/design.md section 1, ``topology/``): ``--connect``.

``run_connect``: the proxy's stdin/stdout is the client, a remote WebSocket
endpoint is the agent. ``--listen`` is :mod:`~acp_proxy.shell.topology.listen`;
its sidecar form (``--listen ... --upstream URL``) dials one
:class:`UpstreamAgent` per client connection with the same code
(:func:`dial_agent`, :func:`remote_agent_relay`).
"""

from __future__ import annotations

import logging
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager

import trio
from trio_websocket import ConnectionRejected, HandshakeError, WebSocketConnection

from acp_proxy.config import Config
from acp_proxy.core.actions import Peer
from acp_proxy.core.engine import ProxyCore
from acp_proxy.errors import ConnectFailed
from acp_proxy.shell.observe import make_core
from acp_proxy.shell.places import apply as use_filesystem
from acp_proxy.shell.relay import AuditSink, Relay
from acp_proxy.shell.reload import LivePolicy, watch_config
from acp_proxy.shell.topology.ws_upgrade import StartupError, WsUrl, parse_ws_url, read_token
from acp_proxy.shell.transport.base import Closed, FrameTransport, Incoming
from acp_proxy.shell.transport.stdio import open_stdio_transport
from acp_proxy.shell.transport.websocket import (
    CLOSE_GOING_AWAY,
    CLOSE_NORMAL,
    WebSocketTransport,
    describe_close,
    open_websocket_client,
)

__all__ = [
    "HANDSHAKE_TIMEOUT_SECONDS",
    "UpstreamAgent",
    "dial_agent",
    "remote_agent_relay",
    "run_connect",
]

log = logging.getLogger("acp_proxy")

HANDSHAKE_TIMEOUT_SECONDS = 10.0


def dial_agent(
    target: WsUrl, headers: list[tuple[bytes, bytes]], max_message_bytes: int
) -> AbstractAsyncContextManager[WebSocketConnection]:
    """A WebSocket to a remote agent at ``target`` (``--connect``, ``--upstream``).

    Raises:
        ConnectionRejected: the endpoint answered the upgrade with an HTTP error.
        HandshakeError: no connection or no handshake answer within
            :data:`HANDSHAKE_TIMEOUT_SECONDS`.
    """
    return open_websocket_client(
        target.host,
        target.port,
        target.resource,
        secure=target.secure,
        headers=headers,
        max_message_bytes=max_message_bytes,
        connect_timeout_seconds=HANDSHAKE_TIMEOUT_SECONDS,
    )


def remote_agent_relay(
    core: ProxyCore,
    client: FrameTransport,
    agent: FrameTransport,
    cfg: Config,
    audit: AuditSink | None,
    exit_detail: Callable[[int | None], Awaitable[str]] | None = None,
) -> Relay:
    """A :class:`Relay` to an agent behind a WebSocket (no process: its status is unknown).

    After the client's EOF, the answers to its requests in flight may take
    ``process.grace_seconds`` before the agent side is closed (a WebSocket
    cannot half-close).
    """
    return Relay(
        core,
        client,
        agent,
        audit=audit,
        exit_detail=exit_detail,
        channel_batches=cfg.limits.channel_messages,
        drain_seconds=cfg.process.grace_seconds,
    )


class UpstreamAgent(FrameTransport):
    """The agent side of one sidecar connection: a WebSocket to ``--upstream``.

    :meth:`run` dials (in the connection's nursery) while the relay already
    reads the client; until the upstream has answered, reads and writes wait.
    An upstream that refuses or cannot be reached ends this side at once, as
    an agent that exits does: the relay answers the client's requests in
    flight with :meth:`describe_end`.

    Args:
        url: the upstream URL, as given (for messages).
        target: the parsed URL.
        max_message_bytes: largest message, in UTF-8 bytes.
        audit: the connection's audit sink.
    """

    name = "agent"

    def __init__(
        self, url: str, target: WsUrl, max_message_bytes: int, audit: AuditSink | None
    ) -> None:
        self.url = url
        self._target = target
        self._max = max_message_bytes
        self._audit = audit
        self._ready = trio.Event()
        self._done = trio.Event()
        #: the open connection, once the upstream accepted
        self.transport: WebSocketTransport | None = None
        #: why the upstream could not be reached, if it could not
        self.failure: str | None = None

    async def run(self) -> None:
        """Dials the upstream and holds the connection open until this side is closed."""
        try:
            async with dial_agent(self._target, [], self._max) as ws:
                self.transport = WebSocketTransport(ws, Peer.AGENT, self._max, audit=self._audit)
                self._ready.set()
                await self._done.wait()
        except ConnectionRejected as exc:
            self.failure = f"upstream {self.url} refused the connection (HTTP {exc.status_code})"
        except HandshakeError as exc:
            detail = str(exc) or type(exc).__name__
            self.failure = f"cannot connect to upstream {self.url}: {detail}"
        finally:
            self._ready.set()
            self._done.set()
        if self.failure is not None:
            log.warning("%s", self.failure)

    def describe_end(self) -> str:
        """Why the upstream side ended (the refusal, or the close code and reason)."""
        if self.failure is not None:
            return self.failure
        reason = self.transport.close_reason if self.transport is not None else None
        return f"upstream closed the connection: {describe_close(reason)}"

    @property
    def closed_normally(self) -> bool:
        """The upstream closed with 1000 or 1001."""
        reason = self.transport.close_reason if self.transport is not None else None
        return reason is not None and reason.code in (CLOSE_NORMAL, CLOSE_GOING_AWAY)

    async def receive_batch(self) -> list[Incoming] | None:
        await self._ready.wait()
        if self.transport is None:
            return None
        return await self.transport.receive_batch()

    async def send_batch(self, frames: list[bytes]) -> None:
        await self._ready.wait()
        if self.transport is None:
            raise Closed(self.failure or "upstream gone")
        await self.transport.send_batch(frames)

    async def close_write(self) -> None:
        await self.aclose()

    async def aclose(self, code: int = CLOSE_NORMAL, reason: str | None = None) -> None:
        """Closes the upstream connection (or stops dialling); idempotent."""
        if self.transport is not None:
            await self.transport.aclose(code, reason)
        self._done.set()

    async def keepalive(self, interval_seconds: float, timeout_seconds: float) -> None:
        """:meth:`WebSocketTransport.keepalive` once connected."""
        await self._ready.wait()
        if self.transport is not None:
            await self.transport.keepalive(interval_seconds, timeout_seconds)


async def run_connect(
    cfg: Config,
    url: str,
    audit: AuditSink | None,
    *,
    live: LivePolicy | None = None,
    watch: str | None = None,
) -> int:
    """Relays the proxy's stdin/stdout (client) to the remote agent at ``url``.

    Sends ``Authorization: Bearer`` when ``listen.token_file`` is set; pings
    with the ``listen`` keepalive settings. SIGINT/SIGTERM close the
    connection (1001) and end the relay; SIGHUP reloads the policy
    (``live``), as does a change of the file ``watch``.

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
    live = live or LivePolicy(cfg, None, audit)
    client = open_stdio_transport(cfg.limits.max_message_bytes)
    try:
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM, signal.SIGHUP) as signals:
            return await _connect(live, target, headers, client, audit, signals, watch)
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
    live: LivePolicy,
    target: WsUrl,
    headers: list[tuple[bytes, bytes]],
    client: FrameTransport,
    audit: AuditSink | None,
    signals: AsyncIterator[int],
    watch: str | None,
) -> int:
    cfg = live.config
    max_bytes = cfg.limits.max_message_bytes
    signalled = False

    async def on_signals(agent: WebSocketTransport, nursery: trio.Nursery) -> None:
        nonlocal signalled
        async for signum in signals:
            if signum == signal.SIGHUP:
                nursery.start_soon(live.reload, "SIGHUP")
                continue
            log.info("signal %d: closing the connection", signum)
            signalled = True
            await agent.aclose(CLOSE_GOING_AWAY, "acp-proxy is stopping")

    async with dial_agent(target, headers, max_bytes) as ws:
        agent = WebSocketTransport(ws, Peer.AGENT, max_bytes, audit=audit)
        # the client is this machine's editor: the proxy's own files out of its reach (issue 31)
        core = use_filesystem(make_core(cfg))
        relay = remote_agent_relay(core, client, agent, cfg, audit)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(on_signals, agent, nursery)
            if watch is not None:
                nursery.start_soon(watch_config, watch, live)
            ping = (cfg.listen.ping_interval_seconds, cfg.listen.ping_timeout_seconds)
            nursery.start_soon(agent.keepalive, *ping)
            with live.serving(relay):
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
