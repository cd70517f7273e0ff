"""JSON-RPC 2.0 classification of one ACP frame (docs/protocol.md sections 1 and 6).

:func:`parse` turns the raw bytes of one frame into a :class:`Message` that
keeps the original bytes (``raw``) for byte-exact forwarding and exposes only
what the proxy's decisions need: kind, ``id``, ``method``, ``params``, and
the frame's :class:`~acp_proxy.core.wire.verdict.Verdict`, set once when
the message is built.

One pipeline (docs/design.md section 2): the decoders report facts
(:func:`~acp_proxy.core.wire.decode.decode`: the body, whether it is
canonical, a repeated decision key, an unreadable decision value, nesting,
bytes that are not JSON), the classifier reads the JSON-RPC shape
(:func:`~acp_proxy.core.wire.shape.classify`), and the ordered check table
(:data:`~acp_proxy.core.wire.checks.CHECKS`) gives the verdict: its first
failing row. Parser-differential guard: a message whose decision fields a
peer could read differently (a duplicated decision key, a snake_case or
``_meta`` spelling the Python SDK reads as a decision key, a lone surrogate
escape in a decision value; the table of what each SDK reads is in
:mod:`~acp_proxy.core.wire.guard`) is ``Verdict.AMBIGUOUS``, so the engine
refuses it rather than forward something the peer may read differently.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import msgspec

from acp_proxy.core.wire.checks import Limits, judge, session_id_fault
from acp_proxy.core.wire.decode import ID_MEMBERS, decode, fast_dumps, fast_loads
from acp_proxy.core.wire.guard import SNAKE_PARAMS_KEY, SNAKE_UPDATE_KEYS, exact_body, misread
from acp_proxy.core.wire.nesting import MAX_NESTING_DEPTH, nested_deeper_than
from acp_proxy.core.wire.reasons import too_deep_reason
from acp_proxy.core.wire.shape import SAFE_INT, classify
from acp_proxy.core.wire.utf8 import strict_utf8
from acp_proxy.core.wire.verdict import Facts, Kind, Shape, Verdict
from acp_proxy.core.wire.views import ID_KEY, VIEW_KEY

__all__ = [
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "MAX_NESTING_DEPTH",
    "MAX_SESSION_ID_BYTES",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "REQUEST_CANCELLED",
    "SNAKE_PARAMS_KEY",
    "SNAKE_UPDATE_KEYS",
    "Kind",
    "Message",
    "RawId",
    "Verdict",
    "canonical",
    "dumps",
    "error_frame",
    "exact_body",
    "parse",
    "reply_id",
    "too_deep",
]


PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
REQUEST_CANCELLED = -32800

JsonId = str | int


class RawId:
    """An id read from a frame as its bytes, to answer a refusal under, spelled as it came.

    For an id JSON-RPC allows that the proxy does not track (a number with a
    fraction or an exponent, an integer beyond +-(2**53 - 1) or 2**64, one
    past Python's 4300-digit limit), and toward the agent for any id it sent.
    Never tracked, never equal to a ``str`` / ``int`` id, never in audit
    fields (:attr:`text` is). :func:`error_frame` splices :attr:`raw`.

    Attributes:
        raw: the id's JSON text exactly as received (no surrounding whitespace).
    """

    __slots__ = ("raw",)

    def __init__(self, raw: bytes) -> None:
        self.raw = raw

    @property
    def text(self) -> str:
        """The id's JSON text (for audit records and logs)."""
        return self.raw.decode("utf-8", "replace")

    def __eq__(self, other: object) -> bool:
        return type(other) is RawId and other.raw == self.raw

    def __hash__(self) -> int:
        return hash((RawId, self.raw))

    def __repr__(self) -> str:
        return f"RawId({self.raw[:40]!r})"


class Message:
    """One classified frame; every attribute is set once, when it is built.

    Attributes:
        raw: the frame's bytes exactly as received, without the line ending.
        kind: the :class:`Kind`.
        body: the decoded JSON value (``dict`` for single messages, or a
            view of a large one); ``None`` for a batch or when not decoded.
        id: the request/response id (``str`` or ``int``), or ``None``.
        method: the method name of a request or notification, else ``None``.
        params: ``params`` when it is a JSON object, else ``None``.
        verdict: the :class:`~acp_proxy.core.wire.verdict.Verdict` (``OK``:
            nothing wrong).
        reason: why the verdict is not ``OK``, else ``None``.
        malformed_error: True for an error response whose ``error`` lacks an
            integer ``code`` or a string ``message`` (forwarded, but counted).
        items: the classified elements of a ``BATCH`` that can be requests (objects
            with an ``id`` member; :func:`~acp_proxy.core.wire.batch.request_spans`).
        elements: how many elements a ``BATCH`` holds (0 otherwise).
    """

    __slots__ = (
        "body",
        "elements",
        "id",
        "items",
        "kind",
        "malformed_error",
        "method",
        "params",
        "raw",
        "reason",
        "verdict",
    )

    def __init__(
        self,
        raw: bytes,
        kind: Kind,
        body: Any,
        id: JsonId | None = None,
        method: str | None = None,
        params: dict[str, Any] | None = None,
        verdict: Verdict = Verdict.OK,
        reason: str | None = None,
        malformed_error: bool = False,
        items: Sequence[Message] = (),
        elements: int = 0,
    ) -> None:
        self.raw = raw
        self.kind = kind
        self.body = body
        self.id: JsonId | None = id
        self.method: str | None = method
        self.params: dict[str, Any] | None = params
        self.verdict = verdict
        self.reason = reason
        self.malformed_error = malformed_error
        self.items = items
        self.elements = elements

    @property
    def ambiguous(self) -> bool:
        """True when the verdict is ``AMBIGUOUS`` (a peer could read it differently)."""
        return self.verdict is _AMBIGUOUS

    @property
    def parse_error(self) -> bool:
        """True when the frame is not JSON at all (``NOT_JSON``: code -32700)."""
        return self.verdict is _NOT_JSON

    @property
    def session_id(self) -> str | None:
        """``params.sessionId`` when it is a string, else ``None``."""
        p = self.params
        if p is None:
            return None
        sid = p.get("sessionId")
        return sid if type(sid) is str else None

    def __repr__(self) -> str:
        return (
            f"Message(kind={self.kind.value}, id={self.id!r}, method={self.method!r}, "
            f"verdict={self.verdict.name}, reason={self.reason!r}, {len(self.raw)} bytes)"
        )


_AMBIGUOUS = Verdict.AMBIGUOUS
_NOT_JSON = Verdict.NOT_JSON
_TOO_DEEP = Verdict.TOO_DEEP
_BATCH_VERDICT = Verdict.BATCH
_OK = Verdict.OK
_BATCH = Kind.BATCH
_INVALID = Kind.INVALID
_NOTIFICATION = Kind.NOTIFICATION
_REQUEST = Kind.REQUEST
_MISSING: Any = object()
_LIMITS: dict[tuple[int, int, int, int], Limits] = {}
_UNREAD = Shape(_INVALID)
#: Default ``limits.max_session_id_bytes``.
MAX_SESSION_ID_BYTES = 1024


#: Frames longer than this (bytes) are measured by :func:`too_dense` before any
#: decode (``limits.dense_message_bytes``). Up to it, a frame is decoded whole:
#: its tree costs at most ~15 times its size.
DENSE_CHECK_BYTES = 1024 * 1024


#: Fewest bytes per JSON value, on average, that a frame over
#: :data:`DENSE_CHECK_BYTES` must have (``limits.min_bytes_per_value``). A
#: decoded JSON value costs a Python object of ~56-180 bytes, so this keeps
#: the tree of one large message near twice its size: ``[{},{},...]``, deep
#: arrays, long runs of numbers or of short keys are refused before they are
#: built. String-heavy messages (text, diffs, base64) are far from it.
MIN_BYTES_PER_VALUE = 48


def too_deep(raw: bytes, max_depth: int) -> Message:
    """The verdict on a frame nested deeper than ``max_depth``: ``INVALID``, no id read.

    The same whichever way it was found (the decoded value walked, a decoder
    out of stack, the bytes scanned), so it never depends on the call stack.
    """
    return Message(raw, _INVALID, None, verdict=_TOO_DEEP, reason=too_deep_reason(max_depth))


def parse(
    raw: bytes,
    dense_bytes: int = DENSE_CHECK_BYTES,
    min_bytes_per_value: int = MIN_BYTES_PER_VALUE,
    max_depth: int = MAX_NESTING_DEPTH,
    max_session_id_bytes: int = MAX_SESSION_ID_BYTES,
) -> Message:
    """Decodes, classifies and judges one frame: decode -> classify -> check table.

    Args:
        raw: one frame, without its line ending.
        dense_bytes: frames longer than this are read through a view
            (:mod:`~acp_proxy.core.wire.views`: only the decision fields are
            decoded) and measured for density.
        min_bytes_per_value: the density bound (``limits.min_bytes_per_value``).
        max_depth: ``limits.max_nesting_depth``: a frame whose objects and
            arrays nest deeper is ``TOO_DEEP``, found the same way at any
            stack depth (the decoders must be called with at least
            ``max_depth`` + a few levels of recursion left).
        max_session_id_bytes: ``limits.max_session_id_bytes``.

    Returns:
        A :class:`Message` whose ``verdict`` is the first failing row of
        :data:`~acp_proxy.core.wire.checks.CHECKS` (``Verdict.OK`` when none
        fails). A verdict before ``INVALID`` (the bytes could not be read as
        JSON within the bounds) gives ``Kind.INVALID`` with no body; a batch
        is ``Kind.BATCH`` with its elements that may be requests parsed, each
        on its own bytes. This never raises.
    """
    facts = decode(raw, dense_bytes, min_bytes_per_value, max_depth)
    body = facts.body
    if type(body) is dict and not facts.faulty and facts.elements is None:
        m = _plain_call(raw, body, max_session_id_bytes)
        if m is not None:
            return m
    return _judged(raw, facts, dense_bytes, min_bytes_per_value, max_depth, max_session_id_bytes)


def _plain_call(raw: bytes, body: dict[str, Any], max_session_id_bytes: int) -> Message | None:
    """The message :func:`_judged` builds for a request or notification that nothing is
    wrong with (the decoders found nothing; ``jsonrpc`` ``"2.0"``, a string
    ``method``, no ``result`` / ``error``, ``params`` an object or absent, an id
    the proxy tracks or none, no row of the check table fails), in one function
    and no :class:`~acp_proxy.core.wire.verdict.Shape`; ``None`` for any other
    frame, which :func:`_judged` classifies and judges (issue 29: an inspected
    line of the agent's run is one of these). Its tests are
    :func:`~acp_proxy.core.wire.shape.classify`'s for these shapes and the one
    row of the table that can fail for them (``BAD_SESSION_ID``); a property test
    compares the two."""
    if body.get("jsonrpc") != "2.0" or "result" in body or "error" in body:
        return None
    method = body.get("method")
    if type(method) is not str:
        return None
    params = body.get("params")
    if params is not None and type(params) is not dict:
        return None
    rid = body.get("id", _MISSING)
    if rid is _MISSING:
        kind = _NOTIFICATION
        rid = None
    else:
        t = type(rid)
        if not (t is str or (t is int and -SAFE_INT < rid < SAFE_INT)):
            return None
        kind = _REQUEST
    if params is not None:
        if method[:1] != "_" and misread(method, params) is not None:
            return None
        if len(raw) > max_session_id_bytes:
            if session_id_fault(params, method, max_session_id_bytes) is not None:
                return None
        elif type(params.get("sessionId", "")) is not str:
            return None
        # else no string in the frame can be longer than the frame: a decoded
        # string's UTF-8 bytes are never more than its JSON spelling's
    return Message(raw, kind, body, rid, method, params)


def _judged(
    raw: bytes,
    facts: Facts,
    dense_bytes: int,
    min_bytes_per_value: int,
    max_depth: int,
    max_session_id_bytes: int,
) -> Message:
    """:func:`parse` from the decoders' facts: classify, then the check table."""
    body = facts.body
    # a frame the decoders could not read has no shape: only their rows can fail
    shape = classify(body, facts.elements) if body is not None or not facts.faulty else _UNREAD
    key = (dense_bytes, min_bytes_per_value, max_depth, max_session_id_bytes)
    limits = _LIMITS.get(key)
    if limits is None:  # a connection's limits are few: one record each, kept (at most 64)
        if len(_LIMITS) >= 64:
            _LIMITS.clear()
        limits = _LIMITS[key] = Limits(*key)
    verdict, reason = judge(facts, shape, limits)
    if verdict is _OK:
        return Message(
            raw, shape.kind, facts.body, shape.id, shape.method, shape.params, _OK, None,
            shape.malformed_error,
        )  # fmt: skip
    if verdict < Verdict.INVALID:  # not read: no body, no id
        return Message(raw, _INVALID, None, verdict=verdict, reason=reason)
    if verdict is _BATCH_VERDICT:
        spans = facts.spans or ()
        items = [parse(raw[a:b], *limits) for a, b in spans]
        return Message(
            raw, _BATCH, None, verdict=verdict, reason=reason, items=items,
            elements=facts.elements or 0,
        )  # fmt: skip
    return Message(
        raw, shape.kind, facts.body, shape.id, shape.method, shape.params, verdict, reason,
        shape.malformed_error,
    )  # fmt: skip


def canonical(
    raw: bytes, dense_bytes: int = DENSE_CHECK_BYTES, max_depth: int = MAX_NESTING_DEPTH
) -> Any:
    """The decoded value of ``raw`` when the frame is exactly canonical JSON, else ``None``.

    Canonical: ``raw`` is the compact encoding of its decoded value, so it
    repeats no key, escapes no key and holds no whitespace: every JSON parser
    reads it the same way (the parser-differential guard of :func:`parse`,
    in one decode and one encode). ``None`` means "use :func:`parse`", never
    "invalid" (a canonical ``null`` frame also gives ``None``, and so does a
    frame over ``dense_bytes``, which :func:`parse` measures first, and a
    frame nested deeper than ``max_depth``, which :func:`parse` refuses).
    """
    if len(raw) > dense_bytes or raw[:1] != b"{":  # not an object: parse (a batch unbuilt)
        return None
    try:
        body = fast_loads(raw)
    except (msgspec.DecodeError, RecursionError):
        return None
    if len(raw) >= 2 * (max_depth + 1) and nested_deeper_than(body, max_depth):
        return None
    return body if fast_dumps(body) == raw else None


def _dumps_bytes(value: Any) -> bytes:
    return dumps(value, allow_nan=False)


def dumps(value: Any, *, allow_nan: bool = True) -> bytes:
    """Serializes a JSON value compactly as UTF-8, keeping key order.

    Big integers are kept exactly; a lone surrogate falls back to ``\\u`` escapes.

    Args:
        value: a JSON-compatible value.
        allow_nan: when False, a non-finite float (``1e400`` decodes to ``inf``)
            raises instead of being written as the non-JSON ``Infinity``.

    Returns:
        UTF-8 bytes without a trailing newline.

    Raises:
        ValueError: for a non-finite float when ``allow_nan`` is False.
    """
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=allow_nan)
        return text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(value, ensure_ascii=True, separators=(",", ":"), allow_nan=allow_nan)
        return text.encode("ascii")


def error_frame(rid: JsonId | RawId | None, code: int, message: str, data: Any = None) -> bytes:
    """Builds a JSON-RPC error response frame (JSON-RPC 2.0 section 5.1).

    Args:
        rid: the id of the request answered (a :class:`RawId` is written as its
            bytes), or ``None`` when unknown.
        code: the JSON-RPC error code (docs/protocol.md section 6).
        message: a one-line human-readable description.
        data: optional structured detail; omitted when ``None``.

    Returns:
        The frame's bytes, without a trailing newline.
    """
    err: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    if type(rid) is RawId:
        return b'{"jsonrpc":"2.0","id":' + rid.raw + b',"error":' + dumps(err) + b"}"
    return dumps({"jsonrpc": "2.0", "id": rid, "error": err})


_NUMBER_OR_STRING = frozenset(b'"-0123456789')


def reply_id(m: Message, any_type: bool = False) -> JsonId | RawId | None:
    """The id a refusal of the request ``m`` is answered under, spelled as it came.

    ``m.id`` when the proxy tracks it; else the id's bytes (:class:`RawId`) when
    they can be read unambiguously: the frame is JSON (strict UTF-8, not a
    parse error; one nested past the limit is scanned, not decoded), has one
    top-level ``id`` in any spelling, and a ``method`` (a request); and the id
    is a number or a string (JSON-RPC 2.0 section 5: otherwise ``null``), or anything but ``null``
    with ``any_type`` (toward the agent: it waits for an answer under the id
    it wrote). Else ``None``. Reads the bytes again (one msgspec pass that
    builds nothing but two raw members): only on a refusal, never on the hot path.
    """
    body = m.body
    if isinstance(body, dict) and "id" in getattr(body, "dups", ()):
        return None  # which id a peer reads depends on its parser
    if m.id is not None:
        return m.id
    verdict = m.verdict
    if verdict is _NOT_JSON or m.kind is _BATCH:
        return None
    if verdict is _TOO_DEEP:  # never decoded: its top-level members scanned, at any depth
        return _scanned_id(m.raw, any_type)
    return _id_bytes(m.raw, body, any_type)


def _scanned_id(raw: bytes, any_type: bool) -> JsonId | RawId | None:
    """The id of a strict UTF-8 frame read by a scan of its top-level members (no
    recursion): one ``id`` in any spelling, a ``method``, no ``result`` / ``error``
    (:func:`~acp_proxy.core.wire.jsonscan.request_id_from_prefix`), else ``None``."""
    from acp_proxy.core.wire.jsonscan import request_id_from_prefix  # it imports this module

    return request_id_from_prefix(raw, any_type) if strict_utf8(raw) else None


def _id_bytes(raw: bytes, body: Any, any_type: bool) -> JsonId | RawId | None:
    """:func:`reply_id` read from the bytes of a frame that is JSON within the limits."""
    if (not isinstance(body, dict) or VIEW_KEY in body) and len(ID_KEY.findall(raw)) > 1:
        return None  # not decoded whole: no duplicate detection, so count the spellings
    try:
        members = ID_MEMBERS.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        # msgspec refuses what the standard library decoded (a lone surrogate escape,
        # 1e400): the frame is JSON and its repeated keys are known, so scan it
        return (
            _scanned_id(raw, any_type) if isinstance(body, dict) and VIEW_KEY not in body else None
        )
    rid = bytes(members.id)
    if not rid or not len(members.method) or (rid == b"null" and not any_type):
        return None
    if not (any_type or rid[0] in _NUMBER_OR_STRING):
        return None
    if rid[0] == 0x22 or len(rid) < 20:  # a tracked id is its value: in-flight checks see it
        try:
            value = json.loads(rid)
        except ValueError:
            value = None
        if type(value) is str or (type(value) is int and -SAFE_INT < value < SAFE_INT):
            return value
    return RawId(rid)
