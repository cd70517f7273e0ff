"""The WebSocket server topology (docs/design.md section 1, ``topology/``): ``--listen``.

``run_listen``: a WebSocket server; every connection is a client with its own
agent subprocess, :class:`ProxyCore` (registry, hold buffer, audit context)
and :class:`Relay`. ``--connect`` is :mod:`~acp_proxy.shell.topology.connect`.

Upgrade requests failing :func:`~acp_proxy.shell.topology.ws_upgrade.check_upgrade` get its
HTTP status (404, 421 for a ``Host`` that does not name the listener, 403
for a browser ``Origin`` not allowed, 401); then too many connections (or shutting down) is
503, an agent that cannot start 500. A non-loopback bind needs a token.
At most ``max_connections + max_pending_handshakes`` TCP connections are open
at once (:class:`_BoundedListener`); one accepted beyond that is closed at once.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import signal
import sys
from collections.abc import Callable, Sequence

import trio
from trio_websocket import (
    ConnectionClosed,
    Endpoint,
    WebSocketRequest,
)

from acp_proxy.config import Config
from acp_proxy.core.actions import Audit, Peer
from acp_proxy.core.engine import ProxyCore
from acp_proxy.shell.audit import AuditLog
from acp_proxy.shell.relay import AuditSink
from acp_proxy.shell.topology.connect import HANDSHAKE_TIMEOUT_SECONDS
from acp_proxy.shell.topology.stdio import agent_relay
from acp_proxy.shell.topology.ws_upgrade import (
    StartupError,
    WsUrl,
    accepted_hosts,
    check_upgrade,
    is_loopback,
    parse_ws_url,
    read_token,
)
from acp_proxy.shell.transport.process import AgentProcess
from acp_proxy.shell.transport.websocket import (
    CLOSE_GOING_AWAY,
    CLOSE_INTERNAL_ERROR,
    CLOSE_NORMAL,
    CLOSE_TIMEOUT_SECONDS,
    WebSocketTransport,
    describe_close,
)
from acp_proxy.shell.transport.ws_bytes import ByteCountingServer

__all__ = ["run_listen"]

log = logging.getLogger("acp_proxy")

#: at most one warning per this many seconds about connections closed at the bound
REFUSAL_LOG_SECONDS = 10.0


def _endpoint(ep: Endpoint | str) -> str:
    if isinstance(ep, str):
        return ep
    return f"[{ep.address}]:{ep.port}" if ep.address.version == 6 else f"{ep.address}:{ep.port}"


def _address(sockname: tuple[str, int] | tuple[str, int, int, int]) -> str:
    host, port = sockname[0], sockname[1]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _request_host(request: WebSocketRequest) -> str | None:
    """The upgrade request's ``Host`` header.

    trio-websocket exposes wsproto's ``Request`` event only as ``_event``;
    wsproto keeps ``Host`` out of ``extra_headers``.
    """
    host = getattr(getattr(request, "_event", None), "host", None)
    return host if isinstance(host, str) else None


class _StreamSlots:
    """Counts the TCP streams the listeners hold open: handshakes in progress and upgraded.

    Args:
        limit: streams open at once; a stream accepted beyond it is refused.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.open = 0
        #: streams refused so far
        self.refused = 0
        self._logged = 0
        self._next_log = -float("inf")

    def take(self) -> bool:
        """Takes a slot for a stream just accepted; ``False`` (counted, logged) when full."""
        if self.open < self.limit:
            self.open += 1
            return True
        self.refused += 1
        now = trio.current_time()
        if now >= self._next_log:
            log.warning(
                "%d TCP connections open (listen.max_connections + "
                "listen.max_pending_handshakes): closed %d new connection(s) at once",
                self.limit,
                self.refused - self._logged,
            )
            self._logged = self.refused
            self._next_log = now + REFUSAL_LOG_SECONDS
        return False

    def release(self) -> None:
        """Frees the slot of a stream that closed."""
        self.open -= 1


class _SlotStream(trio.abc.Stream):
    """An accepted TCP stream holding one slot of :class:`_StreamSlots` until closed.

    Its ``repr`` is the peer's address: trio-websocket's ``request.remote`` is
    the ``repr`` of a stream that is not a ``trio.SocketStream``.
    """

    def __init__(self, stream: trio.SocketStream, release: Callable[[], None]) -> None:
        self._stream = stream
        self._release: Callable[[], None] | None = release
        try:
            self._peer = _address(stream.socket.getpeername())
        except OSError:
            self._peer = "unknown peer"

    def __repr__(self) -> str:
        return self._peer

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self._stream.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self._stream.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        return await self._stream.receive_some(max_bytes)

    async def aclose(self) -> None:
        """Frees the slot (the first time only), then closes the socket."""
        release, self._release = self._release, None
        if release is not None:
            release()
        await self._stream.aclose()


class _BoundedListener(trio.abc.Listener[trio.abc.Stream]):
    """A TCP listener whose accepted streams hold slots of ``slots`` (shared by all listeners).

    A connection accepted while every slot is taken is closed at once and
    never handed out. ``trio.serve_listeners`` closes every stream its handler
    leaves open (handshake timeout, rejection, cancellation), so every slot
    handed out is freed.
    """

    def __init__(self, listener: trio.SocketListener, slots: _StreamSlots) -> None:
        self.listener = listener
        self._slots = slots

    async def accept(self) -> trio.abc.Stream:
        """The next connection that gets a slot."""
        while True:
            stream = await self.listener.accept()
            if self._slots.take():
                return _SlotStream(stream, self._slots.release)
            await trio.aclose_forcefully(stream)

    async def aclose(self) -> None:
        await self.listener.aclose()


class _ContextSink:
    """Adds ``connection`` to the fields of every record (for non-AuditLog sinks)."""

    def __init__(self, sink: AuditSink, connection: int) -> None:
        self._sink = sink
        self._connection = connection

    def write(self, record: Audit) -> None:
        self._sink.write(
            Audit(record.event, record.direction, {**record.fields, "connection": self._connection})
        )


def _connection_sink(audit: AuditSink | None, connection: int) -> AuditSink | None:
    if audit is None:
        return None
    if isinstance(audit, AuditLog):
        return audit.with_context(connection=connection)
    return _ContextSink(audit, connection)


class _Listener:
    """Per-connection handler and shutdown of ``run_listen``."""

    def __init__(
        self,
        cfg: Config,
        url: WsUrl,
        agent_cmd: Sequence[str],
        audit: AuditSink | None,
        token: bytes | None,
        hosts: frozenset[str] | None,
    ) -> None:
        self.cfg = cfg
        self.url = url
        self.agent_cmd = list(agent_cmd)
        self.audit = audit
        self.token = token
        self.hosts = hosts
        self.active = 0
        self.stopping = False
        self._ids = itertools.count(1)
        self._transports: set[WebSocketTransport] = set()
        self._idle = trio.Event()
        self._idle.set()

    async def handle(self, request: WebSocketRequest) -> None:
        """Checks the upgrade request, then serves the connection."""
        remote = _endpoint(request.remote)
        refusal = check_upgrade(
            request.path,
            _request_host(request),
            request.headers,
            path=self.url.path,
            token=self.token,
            allowed_origins=self.cfg.listen.allowed_origins,
            allowed_hosts=self.hosts,
        )
        if refusal is None and (self.stopping or self.active >= self.cfg.listen.max_connections):
            refusal = (503, "shutting down" if self.stopping else "too many connections")
        if refusal is not None:
            status, reason = refusal
            log.warning("refused a connection from %s: HTTP %d, %s", remote, status, reason)
            if self.audit is not None:
                fields = {"status": status, "reason": reason, "remote": remote}
                self.audit.write(Audit("connection_rejected", None, fields))
            headers = [(b"WWW-Authenticate", b"Bearer")] if status == 401 else []
            with contextlib.suppress(ConnectionClosed):
                await request.reject(status, extra_headers=headers, body=f"{reason}\n".encode())
            return
        if self.active == 0:
            self._idle = trio.Event()
        self.active += 1
        try:
            await self._serve(request, next(self._ids), remote)
        finally:
            self.active -= 1
            if self.active == 0:
                self._idle.set()

    async def _serve(self, request: WebSocketRequest, conn_id: int, remote: str) -> None:
        cfg = self.cfg
        max_bytes = cfg.limits.max_message_bytes
        audit = _connection_sink(self.audit, conn_id)
        try:
            agent = await AgentProcess.start(self.agent_cmd, max_bytes)
        except OSError as exc:
            log.error("connection %d: cannot start agent %r: %s", conn_id, self.agent_cmd[0], exc)
            with contextlib.suppress(ConnectionClosed):
                await request.reject(500, body=b"cannot start the agent\n")
            return
        try:
            try:
                ws = await request.accept()
            except ConnectionClosed:
                return
            log.info("connection %d from %s: agent pid %d", conn_id, remote, agent.process.pid)
            if audit is not None:
                audit.write(Audit("connection_opened", None, {"remote": remote}))
            client = WebSocketTransport(ws, Peer.CLIENT, max_bytes, audit=audit)
            relay = agent_relay(ProxyCore(cfg), client, agent, cfg, audit)
            self._transports.add(client)
            try:
                async with trio.open_nursery() as nursery:
                    if self.stopping:
                        nursery.start_soon(client.aclose, CLOSE_GOING_AWAY, "acp-proxy is stopping")
                    ping = (cfg.listen.ping_interval_seconds, cfg.listen.ping_timeout_seconds)
                    nursery.start_soon(client.keepalive, *ping)
                    nursery.start_soon(agent.watch_exit)
                    result = await relay.run()
                    nursery.cancel_scope.cancel()
            finally:
                self._transports.discard(client)
            if result.client_closed_first:
                who = "acp-proxy" if client.closed_by_proxy else "client"
                why = f"{who} closed the connection: {describe_close(client.close_reason)}"
            else:
                status = result.agent_status
                why = f"agent exited with status {status}"
                await client.aclose(CLOSE_NORMAL if status == 0 else CLOSE_INTERNAL_ERROR, why)
            await agent.stop_group(cfg.process.grace_seconds, cfg.process.kill_after_seconds)
            log.info("connection %d closed: %s", conn_id, why)
            if audit is not None:
                audit.write(Audit("connection_closed", None, {"reason": why}))
        finally:
            with trio.CancelScope(shield=True):
                if agent.process.returncode is None:  # cancelled: no time for grace
                    agent.kill()
                await agent.transport.aclose()
                await agent.wait()

    async def shutdown(self, connections: trio.Nursery) -> None:
        """Closes every connection (1001), waits for their agents, then cancels the rest."""
        self.stopping = True
        for client in list(self._transports):
            connections.start_soon(client.aclose, CLOSE_GOING_AWAY, "acp-proxy is stopping")
        process = self.cfg.process
        with trio.move_on_after(process.grace_seconds + process.kill_after_seconds + 5):
            await self._idle.wait()
        connections.cancel_scope.cancel()


def on_sighup(listener: _Listener) -> None:
    """What SIGHUP does to a ``--listen`` server: the reload hook.

    A server is never stopped by SIGHUP (a closing terminal, a supervisor's
    reload): every connection and its agent go on. Nothing is reloaded yet;
    the hook only logs.
    """
    log.info(
        "SIGHUP: serving on (%d connections); nothing to reload, the configuration is unchanged",
        listener.active,
    )


async def run_listen(
    cfg: Config,
    url: str,
    agent_cmd: Sequence[str],
    audit: AuditSink | None,
    *,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> int:
    """Serves ACP over WebSocket at ``url``, one agent per connection, until SIGINT/SIGTERM.

    Prints ``acp-proxy: listening on ws://HOST:PORT/PATH`` (the bound port) to
    stderr once accepting.

    Args:
        cfg: effective configuration (``listen``, ``limits``, ``process``).
        url: ``ws://HOST:PORT/PATH``; an empty host means 127.0.0.1, port 0 any.
        agent_cmd: the agent's argv, started once per connection.
        audit: audit sink; each connection's records carry ``connection``.
        task_status: started with the listening URLs (for ``nursery.start``).

    Returns:
        0 after a signal.

    Raises:
        StartupError: a bad URL or token file, a non-loopback bind without a
            token, or an address that cannot be bound (in use, not local).
    """
    target = parse_ws_url(url, default_host="127.0.0.1")
    if target.secure:
        raise StartupError("--listen serves ws:// only; terminate TLS in front of it")
    token = read_token(cfg.listen.token_file) if cfg.listen.token_file else None
    loopback = await is_loopback(target.host)
    if token is None and not loopback:
        raise StartupError(
            f"refusing to listen on non-loopback address {target.host!r} without a bearer "
            "token: set listen.token_file (--token-file), or bind 127.0.0.1"
        )
    try:
        sockets = await trio.open_tcp_listeners(target.port, host=target.host)
    except OSError as exc:
        raise StartupError(f"cannot listen on {url}: {exc.strerror or exc}") from None
    hosts = accepted_hosts(
        target.host,
        loopback=loopback,
        token=token is not None,
        allowed_hosts=cfg.listen.allowed_hosts,
    )
    listener = _Listener(cfg, target, agent_cmd, audit, token, hosts)
    slots = _StreamSlots(cfg.listen.max_connections + cfg.listen.max_pending_handshakes)
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM, signal.SIGHUP) as signals:
        async with trio.open_nursery() as connections:
            async with trio.open_nursery() as accepting:
                server = ByteCountingServer(
                    listener.handle,
                    # Typed as socket listeners, but only served with
                    # trio.serve_listeners, which takes any trio.abc.Listener.
                    [_BoundedListener(s, slots) for s in sockets],  # type: ignore[misc]
                    handler_nursery=connections,
                    max_message_size=cfg.limits.max_message_bytes,
                    connect_timeout=HANDSHAKE_TIMEOUT_SECONDS,
                    disconnect_timeout=CLOSE_TIMEOUT_SECONDS,
                )
                await accepting.start(server.run)
                addresses = [_address(s.socket.getsockname()) for s in sockets]
                urls = [f"ws://{address}{target.path}" for address in addresses]
                print(f"acp-proxy: listening on {' '.join(urls)}", file=sys.stderr, flush=True)
                task_status.started(urls)
                async for signum in signals:
                    if signum == signal.SIGHUP:
                        on_sighup(listener)
                        continue
                    log.info("signal %d: stopping", signum)
                    break
                accepting.cancel_scope.cancel()
            await listener.shutdown(connections)
    return 0
