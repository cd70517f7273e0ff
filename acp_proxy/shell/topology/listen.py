"""The WebSocket server topology (docs/design.md section 1, ``topology/``): ``--listen``.

``run_listen``: a WebSocket server; every connection is a client with its own
agent (a subprocess, or with ``upstream`` a WebSocket to a remote agent:
the sidecar form), :class:`ProxyCore` (registry, hold buffer, audit context)
and :class:`Relay`. ``--connect`` is :mod:`~acp_proxy.shell.topology.connect`,
whose dialling and relay the sidecar form shares.

Each accepted upgrade is answered with an ``Acp-Connection-Id`` header (a
random id, logged and in the connection's audit records as
``connectionId``), for a load balancer's affinity. ``GET /healthz`` and
``GET /readyz`` on the listen port answer 200 (``/readyz`` 503 once SIGTERM
has started draining). SIGHUP, and a change of the ``--watch-config`` file,
reload the policy of every connection (:mod:`acp_proxy.shell.reload`).

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
import os
import signal
import sys
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import attrs
import trio
from trio_websocket import (
    ConnectionClosed,
    Endpoint,
    WebSocketRequest,
)

from acp_proxy.config import Config
from acp_proxy.core.actions import Audit, AuditEvent, Peer
from acp_proxy.core.engine import ProxyCore
from acp_proxy.shell.audit import AuditLog
from acp_proxy.shell.observe import make_core
from acp_proxy.shell.places import apply as use_filesystem
from acp_proxy.shell.relay import AuditSink, Relay, RelayResult
from acp_proxy.shell.reload import LivePolicy, watch_config
from acp_proxy.shell.topology.connect import (
    HANDSHAKE_TIMEOUT_SECONDS,
    UpstreamAgent,
    remote_agent_relay,
)
from acp_proxy.shell.topology.principals import Authenticator, read_tokens_file, token_note
from acp_proxy.shell.topology.queue_share import QueueShare
from acp_proxy.shell.topology.stdio import agent_relay
from acp_proxy.shell.topology.ws_upgrade import (
    StartupError,
    WsUrl,
    accepted_hosts,
    check_upgrade,
    is_loopback,
    parse_ws_url,
    probe_response,
    read_token,
    with_reason_phrase,
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


#: bytes asked of one read of a connection's agent: what is read stays queued until the
#: client takes it, so 256 KiB reads (the stdio form's) held about 470 KiB per busy
#: connection, 64.7 MiB for 50 (issue 29's bound: < 64 MiB); 64 KiB, as before them
LISTEN_READ_BYTES = 64 * 1024

log = logging.getLogger("acp_proxy")

#: at most one warning per this many seconds about connections closed at the bound
REFUSAL_LOG_SECONDS = 10.0

#: the header of the 101 answer naming the connection (the transport RFD's name)
CONNECTION_ID_HEADER = b"Acp-Connection-Id"

#: bytes of an HTTP request head read to tell a health probe from an upgrade
MAX_HEAD_BYTES = 8192

#: the longest close reason a WebSocket close frame carries, in bytes
MAX_CLOSE_REASON_BYTES = 123

#: WebSocket close code of a connection whose principal was revoked (policy violation)
CLOSE_POLICY_VIOLATION = 1008


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
    """Adds ``connection``, ``connectionId`` (and ``principal``) to every record (for
    non-AuditLog sinks)."""

    def __init__(self, sink: AuditSink, context: dict[str, object]) -> None:
        self._sink = sink
        self._context = context

    def write(self, record: Audit) -> None:
        self._sink.write(Audit(record.event, record.direction, {**record.fields, **self._context}))


def _connection_sink(
    audit: AuditSink | None, connection: int, connection_id: str, principal: str | None = None
) -> AuditSink | None:
    if audit is None:
        return None
    context: dict[str, object] = {"connection": connection, "connectionId": connection_id}
    if principal is not None:
        context["principal"] = principal
    if isinstance(audit, AuditLog):
        return audit.with_context(**context)
    return _ContextSink(audit, context)


def _close_reason(text: str) -> str:
    """``text`` cut to what a close frame carries (whole UTF-8 characters)."""
    return text.encode("utf-8")[:MAX_CLOSE_REASON_BYTES].decode("utf-8", "ignore")


class _Replay(trio.abc.Stream):
    """A stream whose first bytes read are ``head`` (already read from ``stream``), and
    whose first bytes written (the handshake's answer) get a standard reason phrase.

    Its ``repr`` is the wrapped stream's (the peer's address, for trio-websocket).
    """

    def __init__(self, stream: trio.abc.Stream, head: bytes) -> None:
        self._stream = stream
        self._head = head
        self._answered = False

    def __repr__(self) -> str:
        return repr(self._stream)

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        if not self._answered:  # the handshake's answer: give its status line a reason phrase
            self._answered = True
            data = with_reason_phrase(bytes(data))
        await self._stream.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self._stream.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        if self._head:
            n = len(self._head) if max_bytes is None else max_bytes
            chunk, self._head = self._head[:n], self._head[n:]
            return chunk
        return await self._stream.receive_some(max_bytes)

    async def aclose(self) -> None:
        await self._stream.aclose()


class _ProbingServer(ByteCountingServer):
    """A :class:`ByteCountingServer` that answers the health probes on the same port.

    The request head is read first (bounded by the handshake timeout and
    :data:`MAX_HEAD_BYTES`); a probe (:func:`probe_response`) is answered
    and closed, anything else goes on to the WebSocket handshake with the
    bytes read replayed.
    """

    def __init__(
        self,
        handler: Callable[[WebSocketRequest], Awaitable[None]],
        listeners: list[_BoundedListener],
        *,
        ready: Callable[[], bool],
        **kwargs: Any,
    ) -> None:
        # Typed as socket listeners, but only served with
        # trio.serve_listeners, which takes any trio.abc.Listener.
        super().__init__(handler, listeners, **kwargs)  # type: ignore[arg-type]
        self._ready = ready

    async def _handle_connection(self, stream: trio.abc.Stream) -> None:
        head = b""
        with trio.move_on_after(self._connect_timeout) as scope:
            while b"\r\n\r\n" not in head and len(head) < MAX_HEAD_BYTES:
                try:
                    chunk = await stream.receive_some(MAX_HEAD_BYTES)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    chunk = b""
                if not chunk:
                    break
                head += chunk
        if scope.cancelled_caught or not head:
            await trio.aclose_forcefully(stream)
            return
        answer = probe_response(head, ready=self._ready())
        if answer is None:
            await super()._handle_connection(_Replay(stream, head))
            return
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await stream.send_all(answer)
        await stream.aclose()


@attrs.frozen
class _Incoming:
    """One upgrade request being served: its number, ``Acp-Connection-Id``, peer, audit
    and principal (``--tokens-file``)."""

    request: WebSocketRequest
    conn: int
    connection_id: str
    remote: str
    audit: AuditSink | None
    principal: str | None = None


class _Listener:
    """Per-connection handler and shutdown of ``run_listen``.

    Args:
        cfg: the configuration the server started with (``listen``,
            ``limits``, ``process``: these never change at run time).
        url: the listen URL.
        agent_cmd: the agent's argv (spawn form), or empty.
        upstream: the remote agent's URL and its parse (sidecar form), or ``None``.
        audit: the audit sink.
        token: the bearer token required of clients, or ``None``.
        hosts: the ``Host`` names accepted (:func:`accepted_hosts`).
        live: the policy in force; each new connection's core starts with it.
        auth: the tokens accepted (``token`` and the ``--tokens-file`` principals).
    """

    def __init__(
        self,
        cfg: Config,
        url: WsUrl,
        agent_cmd: Sequence[str],
        upstream: tuple[str, WsUrl] | None,
        audit: AuditSink | None,
        token: bytes | None,
        hosts: frozenset[str] | None,
        live: LivePolicy,
        auth: Authenticator | None = None,
    ) -> None:
        self.cfg = cfg
        self.url = url
        # as given: a sandboxed command (SandboxedCommand) carries the agent's own argv
        # and the environment it starts with (env_deny applied), which list() dropped
        self.agent_cmd = agent_cmd
        self.upstream = upstream
        self.audit = audit
        self.token = token
        self.hosts = hosts
        self.live = live
        self.auth = auth or Authenticator(token=token)
        #: connection number -> (principal, client transport) of open connections
        self._open: dict[int, tuple[str | None, WebSocketTransport]] = {}
        self.active = 0
        self.stopping = False
        self._ids = itertools.count(1)
        self._transports: set[WebSocketTransport] = set()
        #: the queue bound the open connections' relays share (issue 29)
        self.queues = QueueShare()
        self._idle = trio.Event()
        self._idle.set()

    def ready(self) -> bool:
        """``/readyz``: new connections are accepted (not draining)."""
        return not self.stopping

    async def handle(self, request: WebSocketRequest) -> None:
        """Checks the upgrade request, then serves the connection."""
        remote = _endpoint(request.remote)
        refusal = check_upgrade(
            request.path,
            _request_host(request),
            request.headers,
            path=self.url.path,
            token=None,
            allowed_origins=self.cfg.listen.allowed_origins,
            allowed_hosts=self.hosts,
        )
        principal = None
        if refusal is None:
            accepted, principal = self.auth.check(request.headers)
            if not accepted:
                refusal = (401, "missing or wrong bearer token")
        if refusal is None and (self.stopping or self.active >= self.cfg.listen.max_connections):
            refusal = (503, "shutting down" if self.stopping else "too many connections")
        if refusal is not None:
            status, reason = refusal
            log.warning("refused a connection from %s: HTTP %d, %s", remote, status, reason)
            if self.audit is not None:
                fields = {"status": status, "reason": reason, "remote": remote}
                self.audit.write(Audit(AuditEvent.CONNECTION_REJECTED, None, fields))
            headers = [(b"WWW-Authenticate", b"Bearer")] if status == 401 else []
            with contextlib.suppress(ConnectionClosed):
                await request.reject(status, extra_headers=headers, body=f"{reason}\n".encode())
            return
        if self.active == 0:
            self._idle = trio.Event()
        self.active += 1
        try:
            conn, connection_id = next(self._ids), str(uuid.uuid4())
            audit = _connection_sink(self.audit, conn, connection_id, principal)
            incoming = _Incoming(request, conn, connection_id, remote, audit, principal)
            if self.upstream is None:
                await self._serve(incoming)
            else:
                await self._serve_upstream(incoming)
        finally:
            self._open.pop(conn, None)
            self.active -= 1
            if self.active == 0:
                self._idle.set()

    async def _accept(self, c: _Incoming, agent: str) -> WebSocketTransport | None:
        """Accepts the upgrade (with ``Acp-Connection-Id``); ``None`` if the client went."""
        try:
            ws = await c.request.accept(
                extra_headers=[(CONNECTION_ID_HEADER, c.connection_id.encode("ascii"))]
            )
        except ConnectionClosed:
            return None
        who = "" if c.principal is None else f" (principal {c.principal})"
        log.info(
            "connection %d (id %s) from %s%s: %s", c.conn, c.connection_id, c.remote, who, agent
        )
        if c.audit is not None:
            c.audit.write(Audit(AuditEvent.CONNECTION_OPENED, None, {"remote": c.remote}))
        max_bytes = self.cfg.limits.max_message_bytes
        transport = WebSocketTransport(ws, Peer.CLIENT, max_bytes, audit=c.audit)
        self._open[c.conn] = (c.principal, transport)
        return transport

    def bind(self, core: ProxyCore, c: _Incoming) -> ProxyCore:
        """Binds the connection's principal to ``core`` (remote; directories resolved
        on this machine's filesystem, symlinks followed)."""
        core.admission.bind(c.principal, True, os.path.realpath)
        core.budgets.principal = c.principal  # the budget store's key by default (issue 28)
        return core

    def reload_tokens(self, trigger: str, nursery: trio.Nursery) -> bool:
        """Reads ``--tokens-file`` again: new principals are accepted, and the open
        connections of a principal removed (or whose token changed) are closed (1008).

        A file that cannot be read changes nothing (logged, audited). Returns
        False then, or when there is no tokens file.
        """
        path = self.cfg.listen.tokens_file
        if not path:
            return False
        try:
            principals = read_tokens_file(path)
        except StartupError as exc:
            log.error(
                "%s: tokens file reload failed, the principals in force stay: %s", trigger, exc
            )
            if self.audit is not None:
                failed = {"trigger": trigger, "reason": str(exc)}
                self.audit.write(Audit(AuditEvent.CONFIG_RELOAD_FAILED, None, failed))
            return False
        old = self.auth.principals
        revoked = sorted(n for n, d in old.items() if principals.get(n) != d)
        self.auth.principals = principals
        closing = [t for _, (who, t) in self._open.items() if who is not None and who in revoked]
        for transport in closing:
            nursery.start_soon(transport.aclose, CLOSE_POLICY_VIOLATION, "principal revoked")
        log.info(
            "%s: tokens file reloaded: %d principal(s), %d revoked, %d connection(s) closed",
            trigger,
            len(principals),
            len(revoked),
            len(closing),
        )
        if self.audit is not None:
            fields: dict[str, object] = {
                "trigger": trigger,
                "tokensFile": path,
                "principals": len(principals),
                "revoked": revoked,
                "connections": len(closing),
            }
            self.audit.write(Audit(AuditEvent.CONFIG_RELOADED, None, fields))
        return True

    async def _relay(
        self, client: WebSocketTransport, relay: Relay, *tasks: Callable[[], Awaitable[object]]
    ) -> RelayResult:
        """Runs ``relay`` with the client's keepalive and ``tasks``; reloads apply to it."""
        self._transports.add(client)
        self.queues.add(relay)
        try:
            async with trio.open_nursery() as nursery:
                if self.stopping:
                    nursery.start_soon(client.aclose, CLOSE_GOING_AWAY, "acp-proxy is stopping")
                listen = self.cfg.listen
                nursery.start_soon(
                    client.keepalive, listen.ping_interval_seconds, listen.ping_timeout_seconds
                )
                for task in tasks:
                    nursery.start_soon(task)
                with self.live.serving(relay):
                    result = await relay.run()
                nursery.cancel_scope.cancel()
        finally:
            self._transports.discard(client)
            self.queues.discard(relay)
        return result

    @staticmethod
    def _client_close(client: WebSocketTransport) -> str:
        who = "acp-proxy" if client.closed_by_proxy else "client"
        return f"{who} closed the connection: {describe_close(client.close_reason)}"

    @staticmethod
    def _closed(c: _Incoming, why: str) -> None:
        log.info("connection %d closed: %s", c.conn, why)
        if c.audit is not None:
            c.audit.write(Audit(AuditEvent.CONNECTION_CLOSED, None, {"reason": why}))

    async def _serve(self, c: _Incoming) -> None:
        request, conn, audit = c.request, c.conn, c.audit
        cfg = self.cfg
        try:
            agent = await AgentProcess.start(self.agent_cmd, cfg.limits.max_message_bytes)
            agent.transport.read_size = LISTEN_READ_BYTES
        except OSError as exc:
            log.error("connection %d: cannot start agent %r: %s", conn, self.agent_cmd[0], exc)
            with contextlib.suppress(ConnectionClosed):
                await request.reject(500, body=b"cannot start the agent\n")
            return
        try:
            pid = f"agent pid {agent.process.pid}"
            client = await self._accept(c, pid)
            if client is None:
                return
            core = self.bind(use_filesystem(make_core(self.live.config, agent.process.pid)), c)
            relay = agent_relay(core, client, agent, cfg, audit)
            result = await self._relay(client, relay, agent.watch_exit)
            if result.client_closed_first:
                why = self._client_close(client)
            else:
                status = result.agent_status
                why = agent.exit_reason
                await client.aclose(CLOSE_NORMAL if status == 0 else CLOSE_INTERNAL_ERROR, why)
            await agent.stop_group(cfg.process.grace_seconds, cfg.process.kill_after_seconds)
            self._closed(c, why)
        finally:
            with trio.CancelScope(shield=True):
                if agent.process.returncode is None:  # cancelled: no time for grace
                    agent.kill()
                await agent.transport.aclose()
                await agent.wait()

    async def _serve_upstream(self, c: _Incoming) -> None:
        """The sidecar form: the agent is a WebSocket to the upstream, dialled per connection.

        The upgrade is accepted first; an upstream that refuses, cannot be
        reached or drops is then reported as an agent exit: the client's
        requests in flight are answered with an error naming it and the
        connection is closed (1011, the reason; 1000 when the upstream closed
        normally).
        """
        assert self.upstream is not None
        url, target = self.upstream
        client = await self._accept(c, f"upstream {url}")
        if client is None:
            return
        cfg = self.cfg
        audit = c.audit
        upstream = UpstreamAgent(url, target, cfg.limits.max_message_bytes, audit)

        async def exit_detail(_status: int | None) -> str:
            return upstream.describe_end()

        relay = remote_agent_relay(
            self.bind(use_filesystem(make_core(self.live.config)), c),
            client,
            upstream,
            cfg,
            audit,
            exit_detail,
        )
        listen = cfg.listen

        async def keepalive() -> None:
            await upstream.keepalive(listen.ping_interval_seconds, listen.ping_timeout_seconds)

        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(upstream.run)
                result = await self._relay(client, relay, keepalive)
                await upstream.aclose()
        finally:
            with trio.CancelScope(shield=True):
                await upstream.aclose()
        if result.client_closed_first:
            why = self._client_close(client)
        else:
            why = upstream.describe_end()
            code = CLOSE_NORMAL if upstream.closed_normally else CLOSE_INTERNAL_ERROR
            await client.aclose(code, _close_reason(why))
        self._closed(c, why)

    async def shutdown(self, connections: trio.Nursery) -> None:
        """Closes every connection (1001), waits for their agents, then cancels the rest."""
        self.stopping = True
        for client in list(self._transports):
            connections.start_soon(client.aclose, CLOSE_GOING_AWAY, "acp-proxy is stopping")
        process = self.cfg.process
        with trio.move_on_after(process.grace_seconds + process.kill_after_seconds + 5):
            await self._idle.wait()
        connections.cancel_scope.cancel()


class _TokensReload:
    """What ``--watch-config`` reloads when the tokens file changes."""

    def __init__(self, listener: _Listener, nursery: trio.Nursery) -> None:
        self._listener = listener
        self._nursery = nursery

    async def reload(self, trigger: str) -> bool:
        return self._listener.reload_tokens(f"{trigger} (tokens file)", self._nursery)


def on_sighup(listener: _Listener, nursery: trio.Nursery) -> None:
    """What SIGHUP does to a ``--listen`` server: reloads the policy (:class:`LivePolicy`).

    A server is never stopped by SIGHUP (a closing terminal, a supervisor's
    reload): every connection and its agent go on, under the reloaded policy.
    """
    if listener.live.reloadable:  # else reload() says there is nothing to reload
        log.info("SIGHUP: reloading the policy (%d connections)", listener.active)
    listener.reload_tokens("SIGHUP", nursery)
    nursery.start_soon(listener.live.reload, "SIGHUP")


async def run_listen(
    cfg: Config,
    url: str,
    agent_cmd: Sequence[str],
    audit: AuditSink | None,
    *,
    upstream: str | None = None,
    live: LivePolicy | None = None,
    watch: str | None = None,
    generated_token: str | None = None,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> int:
    """Serves ACP over WebSocket at ``url``, one agent per connection, until SIGINT/SIGTERM.

    Prints ``acp-proxy: listening on ws://HOST:PORT/PATH`` (the bound port) to
    stderr once accepting. SIGHUP reloads the policy; SIGINT/SIGTERM stop
    accepting upgrades (``/readyz`` answers 503 while the connections drain).

    Args:
        cfg: effective configuration (``listen``, ``limits``, ``process``).
        url: ``ws://HOST:PORT/PATH``; an empty host means 127.0.0.1, port 0 any.
        agent_cmd: the agent's argv, started once per connection (empty with
            ``upstream``).
        audit: audit sink; each connection's records carry ``connection`` and
            ``connectionId``.
        upstream: ``ws://HOST:PORT/PATH`` of a remote agent: one WebSocket to
            it per connection instead of a subprocess (the sidecar form).
        live: the policy in force and how to reload it (default: ``cfg``,
            nothing to reload).
        watch: a config file whose changes reload the policy (``--watch-config``).
        generated_token: the token file the command line generated (no token
            given): where it is is printed once listening.
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
    remote = None if upstream is None else (upstream, parse_ws_url(upstream, default_host=None))
    live = live or LivePolicy(cfg, None, audit)
    token = read_token(cfg.listen.token_file) if cfg.listen.token_file else None
    principals = read_tokens_file(cfg.listen.tokens_file) if cfg.listen.tokens_file else {}
    auth = Authenticator(token=token, principals=principals)
    loopback = await is_loopback(target.host)
    if not auth.required and not loopback:
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
        token=auth.required,
        allowed_hosts=cfg.listen.allowed_hosts,
    )
    listener = _Listener(cfg, target, agent_cmd, remote, audit, token, hosts, live, auth)
    slots = _StreamSlots(cfg.listen.max_connections + cfg.listen.max_pending_handshakes)
    try:
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM, signal.SIGHUP) as signals:
            async with trio.open_nursery() as connections, trio.open_nursery() as accepting:
                server = _ProbingServer(
                    listener.handle,
                    [_BoundedListener(s, slots) for s in sockets],
                    handler_nursery=connections,
                    max_message_size=cfg.limits.max_message_bytes,
                    connect_timeout=HANDSHAKE_TIMEOUT_SECONDS,
                    disconnect_timeout=CLOSE_TIMEOUT_SECONDS,
                    ready=listener.ready,
                )
                await accepting.start(server.run)
                if watch is not None:
                    await accepting.start(watch_config, watch, live)
                    if cfg.listen.tokens_file:
                        await accepting.start(
                            watch_config, cfg.listen.tokens_file, _TokensReload(listener, accepting)
                        )
                addresses = [_address(s.socket.getsockname()) for s in sockets]
                urls = [f"ws://{address}{target.path}" for address in addresses]
                if generated_token is not None:
                    print(token_note(generated_token, urls), file=sys.stderr, flush=True)
                print(f"acp-proxy: listening on {' '.join(urls)}", file=sys.stderr, flush=True)
                task_status.started(urls)
                async for signum in signals:
                    if signum == signal.SIGHUP:
                        on_sighup(listener, accepting)
                        continue
                    log.info("signal %d: stopping", signum)
                    break
                # still accepting while draining: upgrades get 503, /readyz 503
                await listener.shutdown(connections)
                accepting.cancel_scope.cancel()
    finally:
        if generated_token is not None:  # the token dies with the listener
            with contextlib.suppress(OSError):
                os.unlink(generated_token)
    return 0
