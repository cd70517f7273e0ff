"""JSON-RPC 2.0 classification of one ACP frame (docs/protocol.md sections 1 and 6).

:func:`parse` turns the raw bytes of one frame into a :class:`Message` that
keeps the original bytes (``raw``) for byte-exact forwarding and exposes only
what the proxy's decisions need: kind, ``id``, ``method``, ``params``.

Parser-differential guard: a message whose decision fields are ambiguous
(a duplicated decision key in the top-level object, in ``params`` or in
``params.update``, see :mod:`~acp_proxy.core.wire.guard`) is flagged ``ambiguous`` so the
policy can refuse it rather than forward something the peer may read
differently. Other duplicate keys are content: the verdict must not depend on
which decoder happened to read the frame. The official Python SDK validates
params with pydantic ``populate_by_name``, so it also reads ``session_id`` as
``sessionId`` (and ``session_update`` ...): a non-extension request or
notification spelling a decision key in snake_case in ``params`` or
``params.update`` is flagged ``ambiguous`` too (ACP is camelCase on the wire),
and so is one whose ``params._meta`` holds a key the Python SDK hands the
handler as a parameter the proxy decides on (``session_id``; ``update`` of
``session/update``), or which spells a decision
value (method, a session id) with a lone surrogate escape. The table of
what each SDK reads is in :mod:`~acp_proxy.core.wire.guard`.

Strict UTF-8: a frame that is not strict UTF-8 (encoded surrogates
included) is not JSON for the proxy (``parse_error``): msgspec validates every
string it decodes, and the standard-library path decodes strictly first.

The fast path decodes with ``msgspec`` (exact for integers of any size,
like the standard library); a frame ``msgspec`` refuses (lone surrogates,
``1e400``) or one that may carry duplicate or escaped decision keys is
parsed again with the standard library, which detects duplicates.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Sequence
from typing import Any

import msgspec

from acp_proxy.core.wire.batch import batch_shape, request_spans
from acp_proxy.core.wire.guard import (
    SNAKE_PARAMS_KEY,
    SNAKE_UPDATE_KEYS,
    SURROGATE_REASON,
    ambiguous,
    exact_body,
    has_any_dups,
    lone_surrogate_at_decision_level,
    maybe_duplicated,
    misread,
    strict_loads,
)
from acp_proxy.core.wire.nesting import MAX_NESTING_DEPTH, nested_deeper_than, nesting_exceeds
from acp_proxy.core.wire.reasons import DEEP as _DEEP
from acp_proxy.core.wire.reasons import ID_REASON as _ID_REASON
from acp_proxy.core.wire.reasons import NOT_STRICT_UTF8 as _NOT_STRICT_UTF8
from acp_proxy.core.wire.reasons import dense_reason
from acp_proxy.core.wire.utf8 import strict_utf8
from acp_proxy.core.wire.views import (
    ID_KEY,
    VIEW_KEY,
    TooDense,
    decode_view,
)

__all__ = [
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "MAX_NESTING_DEPTH",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "REQUEST_CANCELLED",
    "SNAKE_PARAMS_KEY",
    "SNAKE_UPDATE_KEYS",
    "Kind",
    "Message",
    "RawId",
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


class Kind(enum.Enum):
    """What a frame is, by JSON-RPC 2.0 section 4-6."""

    REQUEST = "request"
    NOTIFICATION = "notification"
    RESPONSE = "response"
    ERROR_RESPONSE = "error_response"
    BATCH = "batch"
    INVALID = "invalid"


class Message:
    """One classified frame.

    Attributes:
        raw: the frame's bytes exactly as received, without the line ending.
        kind: the :class:`Kind`.
        body: the decoded JSON value (``dict`` for single messages, ``list``
            for a batch, anything for ``INVALID``); ``None`` if not JSON.
        id: the request/response id (``str`` or ``int``), or ``None``.
        method: the method name of a request or notification, else ``None``.
        params: ``params`` when it is a JSON object, else ``None``.
        reason: why the frame is ``INVALID`` (or ``ambiguous``), else ``None``.
        parse_error: True when the frame is not JSON at all (code -32700).
        ambiguous: True when a decision field is duplicated, or spelled in
            snake_case (see module doc); ``reason`` then says which.
        malformed_error: True for an error response whose ``error`` lacks an
            integer ``code`` or a string ``message`` (forwarded, but counted).
        items: the classified elements of a ``BATCH`` that can be requests (objects
            with an ``id`` member; :func:`~acp_proxy.core.wire.batch.scan_batch`).
        elements: how many elements a ``BATCH`` holds (0 otherwise).
    """

    __slots__ = (
        "ambiguous",
        "body",
        "elements",
        "id",
        "items",
        "kind",
        "malformed_error",
        "method",
        "params",
        "parse_error",
        "raw",
        "reason",
    )

    def __init__(
        self,
        raw: bytes,
        kind: Kind,
        body: Any,
        id: JsonId | None = None,
        method: str | None = None,
        params: dict[str, Any] | None = None,
    ) -> None:
        self.raw = raw
        self.kind = kind
        self.body = body
        self.id: JsonId | None = id
        self.method: str | None = method
        self.params: dict[str, Any] | None = params
        self.reason: str | None = None
        self.parse_error = False
        self.ambiguous = False
        self.malformed_error = False
        self.items: Sequence[Message] = ()
        self.elements = 0

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
            f"reason={self.reason!r}, {len(self.raw)} bytes)"
        )


_DECODER = msgspec.json.Decoder()
_ENCODER = msgspec.json.Encoder()
_fast_loads = _DECODER.decode
_fast_dumps = _ENCODER.encode


_SAFE_INT = 2**53


def _valid_id(v: Any) -> bool:
    t = type(v)
    return t is str or (t is int and -_SAFE_INT < v < _SAFE_INT)


# Enum members as module globals: ``Kind.X`` is a slow attribute lookup.
_REQUEST = Kind.REQUEST
_NOTIFICATION = Kind.NOTIFICATION
_RESPONSE = Kind.RESPONSE
_ERROR_RESPONSE = Kind.ERROR_RESPONSE
_BATCH = Kind.BATCH
_INVALID = Kind.INVALID
_PARAMS_TYPES = (dict, list)


def _classify_batch(raw: bytes, body: list[Any]) -> Message:
    m = Message(raw, _BATCH, body)
    if not body:
        m.kind = _INVALID
        m.reason = "empty batch"
        return m
    items: list[Message] = []
    for item in body:
        reason = "a batch element must be an object" if isinstance(item, list) else None
        try:
            item_raw = _dumps_bytes(item)
        except ValueError:  # 1e400 decodes to inf, which JSON cannot spell
            item_raw, reason = b"", "a number in this element is out of range"
        except RecursionError:
            item_raw, reason = b"", "this element is nested too deeply"
        if reason is None:
            items.append(classify(item_raw, item))
        else:  # a batch holds messages, not batches
            bad = Message(item_raw, _INVALID, item)
            bad.reason = reason
            items.append(bad)
    m.items = items
    return m


def classify(raw: bytes, body: Any) -> Message:
    """Classifies an already decoded JSON value.

    Args:
        raw: the bytes ``body`` was decoded from (kept as ``Message.raw``).
        body: the decoded JSON value.

    Returns:
        A :class:`Message`; never raises for any JSON value.
    """
    if not isinstance(body, dict):
        if isinstance(body, list):
            return _classify_batch(raw, body)
        m = Message(raw, _INVALID, body)
        m.reason = "not a JSON object"
        return m
    rid = body.get("id", _MISSING)
    t = type(rid)
    # An integer id must be one a JavaScript peer reads exactly (|id| < 2**53): two ids
    # it would read as one could end the wrong request in flight.
    rid_ok = t is str or (t is int and -_SAFE_INT < rid < _SAFE_INT)
    method = body.get("method", _MISSING)
    if (
        body.get("jsonrpc") == "2.0"
        and type(method) is str
        and "result" not in body
        and "error" not in body
    ):
        # The common shapes: a request or a notification.
        params = body.get("params")
        if params is None or type(params) is dict:
            if rid is _MISSING:
                m = Message(raw, _NOTIFICATION, body, None, method, params)
            elif rid_ok:
                m = Message(raw, _REQUEST, body, rid, method, params)
            else:
                m = Message(raw, _INVALID, body, None, method, params)
            if params is not None and method[:1] != "_":
                why = misread(method, params)
                if why is not None:
                    m.ambiguous = True
                    m.reason = why
            if m.kind is _INVALID:
                m.reason = _ID_REASON
            return m
    return _classify_slow(raw, body, rid, rid_ok)


def _classify_slow(raw: bytes, body: dict[str, Any], rid: Any, rid_ok: bool) -> Message:
    m = Message(raw, _INVALID, body, rid if rid_ok else None)
    if body.get("jsonrpc") != "2.0":
        m.reason = 'missing or wrong "jsonrpc" (must be "2.0")'
        return m
    method = body.get("method", _MISSING)
    if method is not _MISSING:
        if type(method) is not str:
            m.reason = '"method" must be a string'
            return m
        if "result" in body or "error" in body:
            m.reason = "a request must not carry result or error"
            return m
        params = body.get("params")
        if params is not None and not isinstance(params, _PARAMS_TYPES):
            m.reason = '"params" must be an object or an array'
            return m
        m.method = method
        m.params = params if isinstance(params, dict) else None
        if m.params is not None and not method.startswith("_"):
            why = misread(method, m.params)
            if why is not None:
                m.ambiguous = True
                m.reason = why
        if rid is _MISSING:
            m.kind = _NOTIFICATION
        elif rid_ok:
            m.kind = _REQUEST
        else:
            m.reason = _ID_REASON
        return m
    if rid is _MISSING:
        m.reason = "neither a request, a notification nor a response"
        return m
    has_result = "result" in body
    has_error = "error" in body
    if has_result == has_error:
        m.reason = "a response needs exactly one of result and error"
        return m
    if has_result:
        if not rid_ok:
            m.reason = _ID_REASON
            return m
        m.kind = _RESPONSE
        return m
    if rid is not None and not rid_ok:
        m.reason = '"id" must be a string, an integer or null'
        return m
    m.kind = _ERROR_RESPONSE
    err = body["error"]
    if not (
        isinstance(err, dict) and type(err.get("code")) is int and type(err.get("message")) is str
    ):
        m.malformed_error = True
    return m


_MISSING: Any = object()


#: Frames longer than this (bytes) are measured by :func:`too_dense` before any
#: decode (``limits.dense_message_bytes``). Up to it, a frame is decoded whole:
#: its tree costs at most ~15 times its size.
DENSE_CHECK_BYTES = 1024 * 1024


def too_deep(raw: bytes, max_depth: int) -> Message:
    """The verdict on a frame nested deeper than ``max_depth``: ``INVALID``, no id read.

    The same whichever way it was found (the decoded value walked, a decoder
    out of stack, the bytes scanned), so it never depends on the call stack.
    """
    m = Message(raw, _INVALID, None)
    m.reason = f"{_DEEP}{max_depth} levels (limits.max_nesting_depth)"
    return m


#: Fewest bytes per JSON value, on average, that a frame over
#: :data:`DENSE_CHECK_BYTES` must have (``limits.min_bytes_per_value``). A
#: decoded JSON value costs a Python object of ~56-180 bytes, so this keeps
#: the tree of one large message near twice its size: ``[{},{},...]``, deep
#: arrays, long runs of numbers or of short keys are refused before they are
#: built. String-heavy messages (text, diffs, base64) are far from it.
MIN_BYTES_PER_VALUE = 48


def parse(
    raw: bytes,
    dense_bytes: int = DENSE_CHECK_BYTES,
    min_bytes_per_value: int = MIN_BYTES_PER_VALUE,
    max_depth: int = MAX_NESTING_DEPTH,
) -> Message:
    """Decodes and classifies one frame.

    Args:
        raw: one frame, without its line ending.
        dense_bytes: frames longer than this are measured by :func:`too_dense` first.
        min_bytes_per_value: the density bound of :func:`too_dense`.
        max_depth: ``limits.max_nesting_depth``: a frame up to ``dense_bytes``
            whose objects and arrays nest deeper is :func:`too_deep`, found the
            same way at any stack depth (the decoders must be called with at
            least ``max_depth`` + a few levels of recursion left).

    Returns:
        A :class:`Message`. Bad input gives ``Kind.INVALID`` (with
        ``parse_error`` set when the bytes are not JSON). A frame over
        ``dense_bytes`` is read through a view (:mod:`~acp_proxy.core.wire.views`:
        only the decision fields are decoded); when its decision levels are
        not compact JSON it takes the strict path, unless it is
        :func:`too_dense`, then it is ``INVALID`` without being decoded. This
        never raises.
    """
    if len(raw) > dense_bytes:
        return _parse_large(raw, dense_bytes, min_bytes_per_value, max_depth)
    if raw[:1] != b"{" and _lead(raw) == b"[":
        return _parse_batch(raw, dense_bytes, min_bytes_per_value, max_depth)
    try:
        body = _fast_loads(raw)
    except RecursionError:
        return too_deep(raw, max_depth)
    except msgspec.DecodeError:  # ValidationError is a DecodeError
        return _parse_strict(raw, max_depth)
    if len(raw) >= 2 * (max_depth + 1) and nested_deeper_than(body, max_depth):
        return too_deep(raw, max_depth)
    if isinstance(body, list):
        return _parse_strict(raw, max_depth)  # batch elements re-serialized: find duplicates
    # A frame that is exactly the compact encoding of what it decodes to cannot
    # repeat a key (the encoder writes each key of a dict once) nor escape one:
    # the common case (the SDKs write compact JSON) skips the slower guard.
    if _fast_dumps(body) != raw and maybe_duplicated(raw):
        return _parse_strict(raw, max_depth)
    return classify(raw, body)


def _parse_large(raw: bytes, dense_bytes: int, min_bytes_per_value: int, max_depth: int) -> Message:
    """:func:`parse` for a frame over ``dense_bytes``: a view, never the whole tree.

    A JSON array is a batch, refused whole without reading its elements; a
    scalar is invalid; an object is read through :func:`~acp_proxy.core.wire.views.decode_view`.
    A frame msgspec cannot decode (invalid JSON, a lone surrogate escape in a
    string it reads) is a parse error here: the standard library, which would
    build the whole tree, is never used on a large frame. Nesting is checked
    first, on the bytes (:func:`~acp_proxy.core.wire.nesting.nesting_exceeds`,
    only when the frame holds more ``{`` and ``[`` than the limit: two counts
    at C speed, about 1 ms a MiB; the scan skips strings in C, about 6 ms a
    MiB), so a large frame gets the verdict a small one would, whatever the
    view decodes.
    """
    if _lead(raw) == b"[":  # a batch: its own checks, none of them a walk over the tokens
        return _parse_batch(raw, dense_bytes, min_bytes_per_value, max_depth)
    if raw.count(b"{") + raw.count(b"[") > max_depth and nesting_exceeds(raw, max_depth):
        return too_deep(raw, max_depth)
    if not strict_utf8(raw):
        m = Message(raw, _INVALID, None)
        m.parse_error = True
        m.reason = "not valid JSON: not strict UTF-8"
        return m
    if _LONG_NUMBER.search(raw):  # as the whole-frame decoders refuse it (Python's limit)
        return _long_integer(raw)
    lead = _lead(raw)
    if lead != b"{":
        m = Message(raw, _INVALID, None)
        m.reason = "not a JSON object"
        return m
    try:
        body, reason = decode_view(raw, min_bytes_per_value)
    except RecursionError:
        return too_deep(raw, max_depth)
    except msgspec.DecodeError as exc:
        m = Message(raw, _INVALID, None)
        m.parse_error = True
        m.reason = f"not valid JSON: {_short(str(exc))}"
        return m
    except TooDense:
        m = Message(raw, _INVALID, None)
        m.reason = dense_reason(dense_bytes, min_bytes_per_value)
        return m
    m = classify(raw, body)
    if reason is not None:
        if m.kind is not _INVALID:
            m.ambiguous = True
        m.reason = reason  # an unreadable id stays invalid: answered under null
    return m


def _lead(raw: bytes) -> bytes:
    """The first byte of ``raw`` past JSON whitespace (``b""`` if none)."""
    first = _FIRST.match(raw)
    return raw[first.end() : first.end() + 1] if first is not None else b""


_VALIDATE = msgspec.json.Decoder(msgspec.Raw)  # checks a whole frame, builds nothing


def _parse_batch(raw: bytes, dense_bytes: int, min_bytes_per_value: int, max_depth: int) -> Message:
    """:func:`parse` for a frame whose first byte is ``[``: a batch, refused whole, so its
    elements are never built (:mod:`~acp_proxy.core.wire.batch`). Only the object
    elements with an ``id`` member are parsed, each on its own bytes (spelled as they
    came), so that an agent's requests can be answered. The frame gets the verdict it
    would get whole first: too deep, not JSON, not strict UTF-8, a too long integer."""
    try:
        _VALIDATE.decode(raw)
    except RecursionError:
        return too_deep(raw, max_depth)
    except msgspec.DecodeError as exc:
        if raw.count(b"{") + raw.count(b"[") > max_depth and nesting_exceeds(raw, max_depth):
            return too_deep(raw, max_depth)
        m = Message(raw, _INVALID, None)
        m.parse_error = True
        m.reason = f"not valid JSON: {_short(str(exc))}" if strict_utf8(raw) else _NOT_STRICT_UTF8
        return m
    elements = batch_shape(raw, max_depth)
    if elements is None:
        return too_deep(raw, max_depth)
    if not strict_utf8(raw):
        m = Message(raw, _INVALID, None)
        m.parse_error = True
        m.reason = _NOT_STRICT_UTF8
        return m
    if _LONG_NUMBER.search(raw):
        return _long_integer(raw)
    if elements == 0:
        m = Message(raw, _INVALID, None)
        m.reason = "empty batch"
        return m
    m = Message(raw, _BATCH, None)
    m.elements = elements
    spans = request_spans(raw)
    m.items = [parse(raw[a:b], dense_bytes, min_bytes_per_value, max_depth) for a, b in spans]
    return m


def _long_integer(raw: bytes) -> Message:
    """The verdict on a frame holding an integer of more than 4300 digits (Python's
    ``int`` limit): the Python SDK cannot read it, the TypeScript SDK reads a float.
    Refused as invalid, so that its id can be answered (:func:`reply_id`); a
    parse error when the frame is not JSON otherwise either."""
    m = Message(raw, _INVALID, None)
    try:
        _ID_MEMBERS.decode(raw)  # validates the whole frame, converts no number
    except (msgspec.DecodeError, RecursionError):
        m.parse_error = True
        m.reason = "not valid JSON: an integer of more than 4300 digits"
        return m
    m.reason = "an integer of more than 4300 digits (peers read it differently)"
    return m


_FIRST = re.compile(rb"[ \t\r\n]*")
# A number value of more than 4300 digits (after "[", ":" or ","; a string holding
# such a run right after one of those is refused too: rare, and fail closed).
_LONG_NUMBER = re.compile(rb"[\[:,][ \t\r\n]*-?[0-9]{4301}")


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
        body = _fast_loads(raw)
    except (msgspec.DecodeError, RecursionError):
        return None
    if len(raw) >= 2 * (max_depth + 1) and nested_deeper_than(body, max_depth):
        return None
    return body if _fast_dumps(body) == raw else None


def _parse_strict(raw: bytes, max_depth: int) -> Message:
    """:func:`parse` with the standard library, detecting duplicate keys."""
    body: Any
    try:
        body = strict_loads(raw)
    except RecursionError:
        return too_deep(raw, max_depth)
    except ValueError as exc:
        if nesting_exceeds(raw, max_depth):  # deep and invalid: as deep, at any stack depth
            return too_deep(raw, max_depth)
        if _LONG_NUMBER.search(raw) and strict_utf8(raw):
            return _long_integer(raw)
        m = Message(raw, _INVALID, None)
        m.parse_error = True
        m.reason = f"not valid JSON: {_short(str(exc))}"
        return m
    if len(raw) >= 2 * (max_depth + 1) and nested_deeper_than(body, max_depth):
        return too_deep(raw, max_depth)
    if isinstance(body, dict) and ambiguous(body):
        m = classify(raw, body)  # refused anyway; its body tells which keys repeat
        m.ambiguous = True
        return m
    if lone_surrogate_at_decision_level(body):  # msgspec refuses these: only here
        m = classify(raw, body)
        m.ambiguous = True
        m.reason = SURROGATE_REASON
        return m
    # Decide on plain dicts: the duplicate-recording subclass must never reach
    # the engine, whose shape checks are exact (`type(x) is dict`).
    ambiguous_items = (
        [
            isinstance(e, dict) and (ambiguous(e) or lone_surrogate_at_decision_level(e))
            for e in body
        ]
        if isinstance(body, list)
        else []
    )
    if has_any_dups(body):
        body = exact_body(raw)
    m = classify(raw, body)
    if m.kind is _BATCH:
        for item, flag in zip(m.items, ambiguous_items, strict=True):
            if flag:
                item.ambiguous = True
    return m


def _short(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


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


class _IdMembers(msgspec.Struct, forbid_unknown_fields=False):
    id: msgspec.Raw = msgspec.Raw()
    method: msgspec.Raw = msgspec.Raw()


_ID_MEMBERS = msgspec.json.Decoder(_IdMembers)
_NUMBER_OR_STRING = frozenset(b'"-0123456789')


def reply_id(m: Message, any_type: bool = False) -> JsonId | RawId | None:
    """The id a refusal of the request ``m`` is answered under, spelled as it came.

    ``m.id`` when the proxy tracks it; else the id's bytes (:class:`RawId`) when
    they can be read unambiguously: the frame is JSON (strict UTF-8, not a
    parse error), not nested past the limit, has one top-level ``id`` in any
    spelling, and a ``method`` (a request); and the id is a number or a string
    (JSON-RPC 2.0 section 5: otherwise ``null``), or anything but ``null``
    with ``any_type`` (toward the agent: it waits for an answer under the id
    it wrote). Else ``None``. Reads the bytes again (one msgspec pass that
    builds nothing but two raw members): only on a refusal, never on the hot path.
    """
    body = m.body
    if isinstance(body, dict) and "id" in getattr(body, "dups", ()):
        return None  # which id a peer reads depends on its parser
    if m.id is not None:
        return m.id
    reason = m.reason
    if m.parse_error or m.kind is _BATCH or (reason is not None and reason.startswith(_DEEP)):
        return None
    raw = m.raw
    if (not isinstance(body, dict) or VIEW_KEY in body) and len(ID_KEY.findall(raw)) > 1:
        return None  # not decoded whole: no duplicate detection, so count the spellings
    try:
        members = _ID_MEMBERS.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        return None
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
        if type(value) is str or (type(value) is int and -_SAFE_INT < value < _SAFE_INT):
            return value
    return RawId(rid)
