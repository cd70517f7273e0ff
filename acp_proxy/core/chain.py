"""Proxy-chain mode: the proxy as a component under an ACP conductor (docs/protocol.md section 5).

Under a conductor the proxy has one connection, to the conductor, and on it
two kinds of traffic:

* the client side, plain: ``proxy/initialize`` (the client's ``initialize``),
  then ordinary client requests and notifications, responses to the requests
  the proxy sends the client;
* the successor side, inside ``proxy/successor`` envelopes whose params are
  ``{"method": ..., "params": ..., "_meta": ...}``: requests and
  notifications in both directions; the wrapped request's result or error
  travels unchanged as the result or error of the envelope request.

:class:`ChainAdapter` turns this into the two-peer world of
:class:`~acp_proxy.core.engine.ProxyCore`, so the core sees exactly the
client->agent and agent->client messages it sees standalone (registry,
enforcement, hold and dedup work unchanged):

* conductor frames -> ``(Peer, inner frame)`` for the core (:meth:`ChainAdapter.unwrap`);
* core sends to ``Peer.AGENT`` -> envelopes, core sends to ``Peer.CLIENT``
  -> written as they are (:meth:`ChainAdapter.wrap`). Every ``Send`` the
  adapter returns goes to the conductor, addressed ``Peer.CLIENT``.

Request ids. Both the envelopes the proxy sends and the successor's requests
it passes on to the client are requests *the proxy* sends on the conductor
connection, so both take ids from one counter (integers from 1):

* a client request ``B`` forwarded to the successor goes out as envelope
  ``E``; the envelope's response comes back to the core as the response to
  ``B``;
* a successor request arriving as envelope ``C`` reaches the core (and the
  client) with a fresh id ``X``; the client's response to ``X`` goes back as
  the response to ``C``.

Cancellation is hop-scoped ("never forwarded to another hop"). A
``$/cancel_request`` the conductor sends for one of *its* envelope requests
``C`` (plain, as the schema says, or wrapped in an envelope, as the Rust SDK
sends it) becomes the successor's cancel of ``X`` toward the client. A plain
cancel naming a client request ``B`` passes through the core and leaves as
the proxy's own cancel of envelope ``E``: plain in the schema's
``proxy/successor`` dialect, wrapped in ``_proxy/successor`` in the Rust
SDK's dialect (which is how that SDK cancels a request sent to a successor).
A cancel naming nothing in flight is dropped with an audit record.

Spelling: ``proxy/initialize`` / ``proxy/successor`` and the Rust SDK's
``_proxy/initialize`` / ``_proxy/successor`` are both accepted; the proxy
wraps in the dialect of the ``proxy/initialize`` it received (default: the
schema's).

``_meta``: the wrapped message's own ``_meta`` lives in its params and is
carried byte for byte both ways. An envelope's ``_meta`` is hop-local
(schema: "the conductor does not copy it into the message it unwraps"): it
is not copied into the unwrapped message, and the proxy sets none on its own
envelopes.

Bytes: the wrapped params, results and errors are spliced into the new frame
byte for byte (:func:`~acp_proxy.core.wire.jsonscan.member_spans`); only the
short JSON-RPC frame around them is written anew. A ``$/cancel_request``
whose id is translated is re-serialized. An envelope whose params repeat ``method`` or ``params`` is
refused (-32600, or dropped if a notification): which copy counts would
depend on the reader.

Refused by the adapter itself: a plain ``initialize`` (acp-proxy is then the
last component, where a proxy cannot run), with -32600; a malformed
envelope, with -32602; an envelope from the successor wrapping
``proxy/successor`` or ``proxy/initialize`` (either spelling), with -32600:
passed on to the client it would be the proxy's own request to the conductor,
which routes it back to the successor as if the client had sent it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from acp_proxy.core.actions import Action, Audit, AuditEvent, Peer, Report, Send
from acp_proxy.core.engine import ProxyCore
from acp_proxy.core.wire.framing import Incoming, Lines, Oversize, Partial
from acp_proxy.core.wire.jsonrpc import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    Kind,
    Message,
    dumps,
    error_frame,
    parse,
)
from acp_proxy.core.wire.jsonscan import member_spans, member_text
from acp_proxy.core.wire.verdict import Verdict
from acp_proxy.core.wire.views import VIEW_KEY

__all__ = ["ChainAdapter", "ChainStatistics", "ToCore"]

JsonId = str | int

_INITIALIZE = {"proxy/initialize": "", "_proxy/initialize": "_"}
_SUCCESSOR = {"proxy/successor": "", "_proxy/successor": "_"}
_CANCEL = "$/cancel_request"


def _frame(rid: JsonId | None, has_id: bool, members: list[tuple[str, bytes]]) -> bytes:
    parts = [b'{"jsonrpc":"2.0"']
    if has_id:
        parts.append(b',"id":' + dumps(rid))
    for name, text in members:
        parts.append(b',"' + name.encode() + b'":' + text)
    parts.append(b"}")
    return b"".join(parts)


def _valid_id(v: Any) -> bool:
    return type(v) is str or (type(v) is int and -(2**53) < v < 2**53)


@attrs.frozen(slots=True)
class ToCore:
    """An inner frame for the core.

    Attributes:
        peer: the side it comes from (``CLIENT``: the conductor's client-side
            traffic; ``AGENT``: unwrapped successor traffic).
        data: the frame, without a line ending.
    """

    peer: Peer
    data: bytes


@attrs.frozen
class ChainStatistics:
    """Counters of one :class:`ChainAdapter`.

    Attributes:
        successor_requests_in_flight: requests wrapped to the successor, not yet answered.
        conductor_requests_in_flight: successor requests passed on, not yet answered.
        wrapped: messages sent to the successor inside an envelope (or as a
            translated cancel).
        unwrapped: messages taken out of envelopes from the conductor.
        answered: conductor messages the adapter answered itself (bad envelope,
            plain ``initialize``).
        dropped: messages the adapter dropped with an audit record.
        successor_method: the envelope spelling used on output.
    """

    successor_requests_in_flight: int
    conductor_requests_in_flight: int
    wrapped: int
    unwrapped: int
    answered: int
    dropped: int
    successor_method: str


class ChainAdapter:
    """Maps a conductor connection onto a :class:`ProxyCore` (see the module doc).

    Args:
        core: the engine; the adapter feeds it and translates its actions.

    Like the core, no method raises on anything the conductor sends.
    """

    def __init__(self, core: ProxyCore) -> None:
        self.core = core
        self._prefix: str | None = None  # "" or "_" once the conductor has shown its dialect
        self._next = 0
        # envelope id E we sent -> the client request id B it carries, and back
        self._out: dict[JsonId, JsonId] = {}
        self._out_by_inner: dict[JsonId, JsonId] = {}
        # id X we gave a successor request -> the conductor's envelope id C, and back
        self._in: dict[JsonId, JsonId] = {}
        self._in_by_env: dict[JsonId, JsonId] = {}
        self._n = {"wrapped": 0, "unwrapped": 0, "answered": 0, "dropped": 0}

    # ----------------------------------------------------------------- API

    @property
    def successor_method(self) -> str:
        """The envelope method used on output: ``proxy/successor`` or ``_proxy/successor``."""
        return f"{self._prefix or ''}proxy/successor"

    def receive(self, incoming: Incoming | Sequence[Incoming], now: float) -> list[Action]:
        """Handles what the framer read from the conductor: one item, or a list in order.

        As :meth:`ProxyCore.receive <acp_proxy.core.engine.ProxyCore.receive>`
        takes them: each frame is unwrapped (a run of lines frame by frame);
        an oversize message or a half-written last line is the client's.

        Args:
            incoming: a frame (``bytes``, without its line ending), a
                :class:`~acp_proxy.core.wire.framing.Lines` run, an
                :class:`~acp_proxy.core.wire.framing.Oversize` or
                :class:`~acp_proxy.core.wire.framing.Partial` report, or a list of them.
            now: the current time, seconds.

        Returns:
            Actions in order; every ``Send`` goes to the conductor.
        """
        if type(incoming) is bytes:
            return self._frame(incoming, now)
        items: Sequence[Incoming] = incoming if type(incoming) is list else [incoming]  # type: ignore[list-item]
        out: list[Action] = []
        for item in items:
            if type(item) is bytes:
                out.extend(self._frame(item, now))
            elif type(item) is Lines:
                for frame in item.frames():
                    out.extend(self._frame(frame, now))
            elif type(item) is Oversize:
                # its prefix holds the conductor's envelope id, never a client id: not read
                bare = Oversize(item.size_bytes, item.complete)
                out.extend(self.wrap(self.core.receive(Peer.CLIENT, bare, now)))
            elif type(item) is Partial:
                out.extend(self.wrap(self.core.receive(Peer.CLIENT, item, now)))
        return out

    def _frame(self, raw: bytes, now: float) -> list[Action]:
        out: list[Action] = []
        for item in self.unwrap(raw):
            if isinstance(item, ToCore):
                out.extend(self.wrap(self.core.receive(item.peer, item.data, now)))
            else:
                out.append(item)
        return out

    def conductor_closed(self, now: float, detail: str = "") -> list[Action]:
        """The conductor's stream ended: client and successor are both gone.

        Requests in flight either way are answered with errors (written if the
        conductor still reads), held traffic is dropped with audit records.
        """
        text = detail or "conductor closed the connection"
        out = self.wrap(self.core.peer_closed(Peer.CLIENT, now, text))
        out.extend(self.wrap(self.core.peer_closed(Peer.AGENT, now, text)))
        self._out.clear()
        self._out_by_inner.clear()
        self._in.clear()
        self._in_by_env.clear()
        return out

    def get_timer(self) -> float | None:
        """When :meth:`handle_timer` must next be called (seconds), or ``None``."""
        return self.core.get_timer()

    def handle_timer(self, now: float) -> list[Action]:
        """Runs the core's timer and translates what it sends."""
        return self.wrap(self.core.handle_timer(now))

    def statistics(self) -> ChainStatistics:
        """A snapshot of the counters (see :class:`ChainStatistics`)."""
        return ChainStatistics(
            successor_requests_in_flight=len(self._out),
            conductor_requests_in_flight=len(self._in),
            successor_method=self.successor_method,
            **self._n,
        )

    # ------------------------------------------------- conductor -> core

    def unwrap(self, raw: bytes) -> list[ToCore | Action]:
        """Maps one conductor frame to inner frames for the core.

        Returns:
            :class:`ToCore` items to feed the core in order, and actions the
            adapter takes itself (answers to bad envelopes, audits).
        """
        limits = self.core.config.limits
        # an envelope nests its message two levels down (params.message)
        m = parse(
            raw, limits.dense_message_bytes, limits.min_bytes_per_value,
            limits.max_nesting_depth + 2,
        )  # fmt: skip
        out: list[ToCore | Action] = []
        if m.kind is Kind.BATCH:  # ACP uses no batches: the core refuses it whole
            out.append(ToCore(Peer.CLIENT, m.raw))
            return out
        self._inbound(m, out)
        return out

    def _inbound(self, m: Message, out: list[ToCore | Action]) -> None:
        kind = m.kind
        method = m.method
        if kind is Kind.INVALID:
            out.append(ToCore(Peer.CLIENT, m.raw))
        elif kind is Kind.RESPONSE or kind is Kind.ERROR_RESPONSE:
            self._inbound_response(m, out)
        elif m.verdict is not Verdict.OK or method is None:
            out.append(ToCore(Peer.CLIENT, m.raw))  # the core refuses it
        elif method in _SUCCESSOR:
            if self._prefix is None:
                self._prefix = _SUCCESSOR[method]
            self._from_successor(m, out)
        elif method in _INITIALIZE and kind is Kind.REQUEST:
            self._prefix = _INITIALIZE[method]
            params = self._member(m, ("params",), m.body.get("params"))
            inner = _frame(m.id, True, [("method", b'"initialize"'), *params])
            out.append(ToCore(Peer.CLIENT, inner))
        elif method == "initialize" and kind is Kind.REQUEST:
            reason = (
                "running as a chain proxy (no agent command): expected proxy/initialize, "
                "got initialize; to wrap an agent, run acp-proxy -- AGENT_CMD"
            )
            self._refuse(m, out, INVALID_REQUEST, reason)
        elif method == _CANCEL and kind is Kind.NOTIFICATION:
            target = self._cancel_target(m.params)
            if target is not None and target in self._in_by_env:
                # The conductor cancels its envelope C: the successor cancels X.
                self._n["unwrapped"] += 1
                out.append(
                    ToCore(Peer.AGENT, self._cancel_frame(m.params, self._in_by_env[target]))
                )
            else:
                out.append(ToCore(Peer.CLIENT, m.raw))  # the client cancels its own request
        else:
            out.append(ToCore(Peer.CLIENT, m.raw))

    def _inbound_response(self, m: Message, out: list[ToCore | Action]) -> None:
        rid = m.id
        if rid is None or rid not in self._out:
            out.append(ToCore(Peer.CLIENT, m.raw))  # answers a request we passed to the client
            return
        inner_id = self._out.pop(rid)
        self._out_by_inner.pop(inner_id, None)
        self._n["unwrapped"] += 1
        if m.ambiguous:
            reason = "the successor's response has duplicate keys"
            frame = error_frame(inner_id, INVALID_REQUEST, f"acp-proxy: {reason}")
            out.append(
                Audit(
                    AuditEvent.INVALID_MESSAGE,
                    Peer.AGENT.direction,
                    {"id": inner_id, "reason": reason},
                )
            )
            out.append(ToCore(Peer.AGENT, frame))
            return
        name = "result" if m.kind is Kind.RESPONSE else "error"
        value = member_text(m.raw, (name,), m.body.get(name))
        out.append(ToCore(Peer.AGENT, _frame(inner_id, True, [(name, value)])))

    def _from_successor(self, m: Message, out: list[ToCore | Action]) -> None:
        env = m.params
        inner_method = env.get("method") if env is not None else None
        inner_params = env.get("params") if env is not None else None
        if type(inner_method) is not str or not (
            inner_params is None or isinstance(inner_params, dict | list)
        ):
            reason = f"{m.method} params need a string method and object, array or null params"
            self._refuse(m, out, INVALID_PARAMS, reason)
            return
        assert env is not None
        # The envelope's own keys decide where the message goes: refuse duplicates.
        dups: set[str] = set()
        top = member_spans(m.raw)
        if top is not None and "params" in top:
            member_spans(m.raw, *top["params"], dups=dups)
        if dups & {"method", "params"}:
            reason = f"duplicate {' and '.join(sorted(dups & {'method', 'params'}))} in {m.method}"
            self._refuse(m, out, INVALID_REQUEST, reason)
            return
        if inner_method in _SUCCESSOR or inner_method in _INITIALIZE:
            # Passed on, it would leave as *our* request on the conductor
            # connection, which the conductor reads as ours to our successor.
            reason = f"the successor sent {inner_method}, a method only the conductor sends"
            self._refuse(m, out, INVALID_REQUEST, reason)
            return
        params = self._member(m, ("params", "params"), inner_params)
        members = [("method", dumps(inner_method)), *params]
        if m.kind is Kind.NOTIFICATION:
            if inner_method == _CANCEL:
                # Rust SDK style: the successor cancels its envelope C, named by id.
                target = self._cancel_target(
                    inner_params if isinstance(inner_params, dict) else None
                )
                if target is None or target not in self._in_by_env:
                    self._drop(
                        out,
                        Peer.AGENT,
                        AuditEvent.NOTIFICATION_DROPPED,
                        _CANCEL,
                        target,
                        "cancels no request in flight from the successor",
                    )
                    return
                assert isinstance(inner_params, dict)
                self._n["unwrapped"] += 1
                out.append(
                    ToCore(Peer.AGENT, self._cancel_frame(inner_params, self._in_by_env[target]))
                )
                return
            self._n["unwrapped"] += 1
            out.append(ToCore(Peer.AGENT, _frame(None, False, members)))
            return
        assert m.id is not None
        inner_id = self._new_id()
        self._in[inner_id] = m.id
        self._in_by_env[m.id] = inner_id
        self._n["unwrapped"] += 1
        out.append(ToCore(Peer.AGENT, _frame(inner_id, True, members)))

    # ------------------------------------------------- core -> conductor

    def wrap(self, actions: Iterable[Action]) -> list[Action]:
        """Maps core actions to conductor actions: sends to ``AGENT`` become envelopes.

        Args:
            actions: what the core returned, in order.

        Returns:
            Actions in the same order; every ``Send`` is addressed ``Peer.CLIENT``
            (the conductor).
        """
        out: list[Action] = []
        for a in actions:
            if isinstance(a, Send) and a.to is Peer.AGENT:
                self._to_successor(a.data, out)
            else:
                out.append(a)
        return out

    def _to_successor(self, data: bytes, out: list[Action]) -> None:
        m = parse(data)
        kind = m.kind
        if kind is Kind.REQUEST or kind is Kind.NOTIFICATION:
            assert m.method is not None
            if kind is Kind.NOTIFICATION and m.method == _CANCEL:
                self._cancel_to_successor(m, out)
                return
            params = self._member(m, ("params",), m.body.get("params"))
            inner = [("method", dumps(m.method)), *params]
            env_id: JsonId | None = None
            if kind is Kind.REQUEST:
                assert m.id is not None
                env_id = self._new_id()
                self._out[env_id] = m.id
                self._out_by_inner[m.id] = env_id
            self._n["wrapped"] += 1
            out.append(Send(Peer.CLIENT, self._envelope(env_id, kind is Kind.REQUEST, inner)))
            return
        if (kind is Kind.RESPONSE or kind is Kind.ERROR_RESPONSE) and m.id in self._in:
            assert m.id is not None
            env_id = self._in.pop(m.id)
            if self._in_by_env.get(env_id) == m.id:  # a reused envelope id may have replaced it
                del self._in_by_env[env_id]
            name = "result" if kind is Kind.RESPONSE else "error"
            value = member_text(m.raw, (name,), m.body.get(name))
            self._n["wrapped"] += 1
            out.append(Send(Peer.CLIENT, _frame(env_id, True, [(name, value)])))
            return
        reason = f"a {kind.value} for the successor that answers no envelope"
        self._drop(out, Peer.CLIENT, AuditEvent.UNKNOWN_RESPONSE, m.method, m.id, reason)
        out.append(Report("warning", f"dropped {reason}"))

    def _cancel_to_successor(self, m: Message, out: list[Action]) -> None:
        """The client cancels its request B: cancel our envelope E on this hop."""
        target = self._cancel_target(m.params)
        env_id = self._out_by_inner.get(target) if target is not None else None
        if env_id is None:
            self._drop(
                out,
                Peer.CLIENT,
                AuditEvent.NOTIFICATION_DROPPED,
                _CANCEL,
                target,
                "cancels no request in flight to the successor",
            )
            return
        assert m.params is not None
        self._n["wrapped"] += 1
        frame = self._cancel_frame(m.params, env_id)
        if self._prefix == "_":
            params = member_text(frame, ("params",), None)
            frame = self._envelope(
                None, False, [("method", b'"$/cancel_request"'), ("params", params)]
            )
        out.append(Send(Peer.CLIENT, frame))

    # ------------------------------------------------------------ helpers

    def _new_id(self) -> int:
        self._next += 1
        return self._next

    def _envelope(
        self, rid: JsonId | None, is_request: bool, inner: list[tuple[str, bytes]]
    ) -> bytes:
        body = b"{" + b",".join(b'"' + k.encode() + b'":' + v for k, v in inner) + b"}"
        return _frame(rid, is_request, [("method", dumps(self.successor_method)), ("params", body)])

    @staticmethod
    def _member(m: Message, path: tuple[str, ...], value: Any) -> list[tuple[str, bytes]]:
        """``[("params", exact bytes)]``, or ``[]`` when the value is absent or null."""
        if value is None:
            return []
        return [("params", member_text(m.raw, path, value))]

    @staticmethod
    def _cancel_target(params: dict[str, Any] | None) -> JsonId | None:
        rid = params.get("requestId") if params is not None else None
        return rid if _valid_id(rid) else None

    @staticmethod
    def _cancel_frame(params: dict[str, Any] | None, rid: JsonId) -> bytes:
        if params is not None and VIEW_KEY in params:
            # A cancel over limits.dense_message_bytes (a view): only requestId is kept.
            params = {}
        new = dict(params or {})
        new["requestId"] = rid
        return dumps({"jsonrpc": "2.0", "method": _CANCEL, "params": new})

    def _refuse(self, m: Message, out: list[ToCore | Action], code: int, reason: str) -> None:
        """Answers a conductor request itself (or drops a notification), with an audit record."""
        if m.kind is Kind.REQUEST and m.id in self.core.pending_ids(Peer.CLIENT):
            # that id is still in flight: an answer would be its second (the core's rule)
            self._drop(out, Peer.CLIENT, AuditEvent.REQUEST_DROPPED, m.method, m.id, reason)
        elif m.kind is Kind.REQUEST:
            self._n["answered"] += 1
            out.append(
                Audit(
                    AuditEvent.INVALID_MESSAGE,
                    Peer.CLIENT.direction,
                    {"method": m.method, "id": m.id, "reason": reason},
                )
            )
            out.append(Send(Peer.CLIENT, error_frame(m.id, code, f"acp-proxy: {reason}")))
        else:
            self._drop(out, Peer.CLIENT, AuditEvent.NOTIFICATION_DROPPED, m.method, None, reason)
        out.append(Report("warning", f"conductor sent {m.method}: {reason}"))

    def _drop(
        self,
        out: list[Any],
        source: Peer,
        event: AuditEvent,
        method: str | None,
        rid: Any,
        reason: str,
    ) -> None:
        self._n["dropped"] += 1
        fields = {"method": method, "id": rid, "reason": reason}
        out.append(Audit(event, source.direction, fields))
