"""Views of large frames: the fields the proxy decides on, decoded; the rest left as bytes.

docs/design.md section 2. A frame longer than ``limits.dense_message_bytes``
is never decoded whole. :func:`decode_view` reads each decision level (top
level, ``params``, ``params.update``, ``result``, ``error``) as its members'
raw bytes (zero-copy ``msgspec.Raw``), requires that level to be exactly the
compact encoding of those members (so no key repeats, hides behind an escape
or differs by spacing: every parser reads the same keys; else the strict
path decides), and decodes only the members the proxy decides on. Everything
else (``params.prompt``, tool output, ...) is never built. So one message
costs about its own bytes plus a few objects per decision-level key, whatever
its shape (``[{},{},...]`` inside a prompt, deep arrays, long strings).

Each level is a plain ``dict`` holding the decision keys present, plus
:data:`VIEW_KEY` mapped to the level's own bytes (a zero-copy
``msgspec.Raw``): code that compares key sets sees "more keys than these",
and equality of two views is equality of their bytes, so a view is never
mistaken for a smaller message.

Values the registry keeps (``title``, ``capabilities``, ``state``, ``_meta``
...) are decoded when at most :data:`FIELD_BYTES` long; a longer one is past
every registry bound anyway and stands in as ``None`` (``capabilities``:
``{}``, which grants nothing: fail closed). A ``params._meta`` longer than
that cannot be checked for decision keys and makes the frame ambiguous.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec
from msgspec import Raw

from acp_proxy.core.wire.keys import CAPABILITY_KEYS as _CAPABILITY_KEYS
from acp_proxy.core.wire.keys import VIEW_ERROR as _ERROR
from acp_proxy.core.wire.keys import VIEW_FIELDS as _FIELDS
from acp_proxy.core.wire.keys import VIEW_PARAMS as _PARAMS
from acp_proxy.core.wire.keys import VIEW_REF_LISTS as _REF_LISTS
from acp_proxy.core.wire.keys import VIEW_RESULT as _RESULT
from acp_proxy.core.wire.keys import VIEW_TOP as _TOP
from acp_proxy.core.wire.keys import VIEW_UPDATE as _UPDATE
from acp_proxy.core.wire.reasons import DUPLICATE_REASON, oversize_meta_reason

__all__ = [
    "FIELD_BYTES",
    "ID_KEY",
    "MAX_REFS",
    "OPAQUE",
    "VIEW_KEY",
    "TooDense",
    "decode_view",
    "too_dense",
]


class _ViewKey:
    """The type of :data:`VIEW_KEY`: not a string, so no JSON key can ever equal it."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "VIEW_KEY"


#: Key under which every view level keeps its own bytes. It is not a string:
#: JSON object keys always are, so no peer can write a dict the proxy takes for
#: a view (a ``"\u0000raw"`` key is just a key).
VIEW_KEY: Any = _ViewKey()
#: The session a reference that cannot be read names: never known, so the message
#: bearing it is held (and expires as the hold buffer says).
UNREADABLE_REFERENCE = "\x00unreadable session reference"
#: Levels of views below the top level: ``params``, ``params.update`` and the
#: ``params.params`` of a proxy-chain envelope; deeper objects are never read.
MAX_VIEW_DEPTH = 3
#: Bytes of field values one frame may decode in all (registry fields, ``_meta``,
#: small decision containers); past it a value stands in as too large.
DECODE_BUDGET = 1024 * 1024
#: Longest value (bytes) decoded into a registry field; see the module doc.
FIELD_BYTES = 256 * 1024
_NONE = Raw()

OVERSIZE_META_REASON = oversize_meta_reason(FIELD_BYTES)


class TooDense(ValueError):
    """A decision level holds more members than one per ``min_bytes_per_value`` bytes."""


#: Every spelling of the key ``id`` in JSON text (``i`` and ``d`` escaped or not; their
#: hex digits have no letters): a frame with one match at most has at most one top-level id.
ID_KEY = re.compile(rb'"(?:i|\\u0069)(?:d|\\u0064)"')
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
#: A JSON string (escapes included) or one structural character (also used by jsonscan).
TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[{}\[\],:]', re.DOTALL)


def _level_dups(data: bytes, keys: frozenset[str]) -> bool:
    """True when a key of ``keys`` occurs twice among the members of the object ``data``.

    One pass over the object's tokens (strings skipped by a regular
    expression; keys compared decoded, so an escaped spelling counts):
    constant memory, linear time.
    """
    seen: set[str] = set()
    depth = 0
    expect_key = False
    for tok in TOKEN.finditer(data):
        c = data[tok.start()]
        if c == 0x22:
            if depth == 1 and expect_key:
                text = tok.group()
                key = _ANY.decode(text) if b"\\" in text else text[1:-1].decode()
                if key in keys:
                    if key in seen:
                        return True
                    seen.add(key)
                expect_key = False
        elif c == 0x7B or c == 0x5B:  # { [
            depth += 1
            expect_key = depth == 1
        elif c == 0x7D or c == 0x5D:  # } ]
            depth -= 1
        elif c == 0x2C and depth == 1:  # ,
            expect_key = True
    return False


class _Ref(msgspec.Struct, forbid_unknown_fields=False):
    type: Raw = _NONE
    sessionId: Raw = _NONE


_ENCODE = msgspec.json.Encoder().encode
_REFS = msgspec.json.Decoder(list[_Ref])
_ANY = msgspec.json.Decoder()
_NESTED = {"params": _PARAMS, "update": _UPDATE, "result": _RESULT, "error": _ERROR}


def _struct(keys: frozenset[str]) -> msgspec.json.Decoder[Any]:
    """A decoder of one level into its decision members only (others skipped, never built)."""
    fields = [(k.lstrip("_") or k, Raw, _NONE) for k in sorted(keys)]
    rename = {k.lstrip("_"): k for k in keys if k.startswith("_")}
    cls = msgspec.defstruct("Level", fields, rename=rename, forbid_unknown_fields=False)
    return msgspec.json.Decoder(cls)


_STRUCTS = {keys: _struct(keys) for keys in (_TOP, _PARAMS, _UPDATE, _RESULT, _ERROR)}
_MEMBERS = msgspec.json.Decoder(dict[str, Raw])
#: Fewest bytes per possible member (``":``) for a level to be read member by
#: member (a member read costs ~150 bytes: the level's memory stays under 2x).
BYTES_PER_MEMBER = 75
_LEVEL_LITERALS = {keys: tuple(f'"{k}"'.encode() for k in sorted(keys)) for keys in _STRUCTS}
#: Most ``sessionId`` members read from one long content / background list.
MAX_REFS = 1_000


#: Stands in for a decision value too large to read (a container over 1 KiB where a
#: string or number belongs): hashable, JSON-serializable, and no type check the
#: engine makes (``str``, ``int``, ``dict``, ``list``) accepts it.
OPAQUE = ("acp-proxy: value too large to read",)


def _value(raw: Raw) -> Any:
    """A decision value: strings and numbers decoded; a container decoded only when small
    (at most 1 KiB: a decision value is never a container, the classifier refuses it)."""
    if _first(raw) in (b"{", b"[") and len(raw) > 1024:
        return OPAQUE  # not a valid decision value anyway (a container)
    return _ANY.decode(raw)


def _first(raw: Raw) -> bytes:
    return memoryview(raw)[:1].tobytes()


def _members(
    raw: Raw, keys: frozenset[str], plain: bool, min_bytes_per_value: int
) -> list[tuple[str, Raw]]:
    """The decision members of one level, as raw bytes.

    Always a struct of the decision members (last one wins, as in both SDKs),
    the others skipped unbuilt. Unless ``plain`` (no decision key spelled
    twice in the frame, nothing escaped), the level is first checked for a
    decision key that occurs twice among its own members: when its bytes hold
    a ``\\u`` escape or one of its decision-key literals twice, either (a
    small level, or few possible members: at most one ``":`` per
    :data:`BYTES_PER_MEMBER` bytes)
    every member is read as raw bytes and the level must be exactly their
    compact encoding, or its tokens are scanned.

    Raises:
        TooDense: the scan would cost more than one Python step per
            ``min_bytes_per_value`` bytes.
        Ambiguous: a decision key occurs twice in the level.
    """
    if not plain:
        data = bytes(raw)
        if b"\\u" in data or any(data.count(lit) > 1 for lit in _LEVEL_LITERALS[keys]):
            compact = False
            if len(data) <= 64 * 1024 or data.count(b'":') * BYTES_PER_MEMBER <= len(data):
                members = _MEMBERS.decode(data)  # bounded: about 2 x the level's bytes
                compact = _ENCODE(members) == data
                del members
            if not compact:
                if too_dense(data, 0, min_bytes_per_value):
                    raise TooDense  # the scan below costs a Python step per value
                if _level_dups(data, keys):
                    raise Ambiguous(DUPLICATE_REASON)
    level = _STRUCTS[keys].decode(raw)
    names = level.__struct_encode_fields__
    values = [getattr(level, f) for f in level.__struct_fields__]
    return [(k, v) for k, v in zip(names, values, strict=True) if len(v)]


class Ambiguous(ValueError):
    """A peer could read a decision level differently from the proxy (``args[0]``: why)."""


def _level(
    raw: Raw,
    keys: frozenset[str],
    reasons: list[str],
    plain: bool,
    mbpv: int,
    depth: int = 0,
    budget: list[int] | None = None,
) -> Any:
    """One view level: a dict of the decision keys present plus :data:`VIEW_KEY`.

    ``depth`` 0 is the top level (whose first byte the caller checked:
    leading whitespace is allowed there); ``budget`` holds the bytes of field
    values the frame may still decode.

    Raises:
        TooDense: see :func:`_members`.
    """
    if budget is None:
        budget = [DECODE_BUDGET]
    if depth > 0 and _first(raw) != b"{":  # the top level was checked by the caller
        return _value(raw)  # not an object: the classifier reports it
    if depth > MAX_VIEW_DEPTH:
        return OPAQUE  # no envelope is this deep: never read
    out: dict[str, Any] = {VIEW_KEY: raw}
    for key, value in _members(raw, keys, plain, mbpv):
        if key in _NESTED:
            out[key] = _level(value, _NESTED[key], reasons, plain, mbpv, depth + 1, budget)
        elif key in _REF_LISTS:
            out[key] = _refs(value, "session" if key == "content" else "subagent")
        elif key in _FIELDS or key == "_meta" or key == "field_meta" or key == "clientCapabilities":
            if len(value) <= min(FIELD_BYTES, budget[0]) and not (
                len(value) > 64 * 1024 and too_dense(bytes(value), 0, mbpv)
            ):
                budget[0] -= len(value)
                decoded = _ANY.decode(value)
                if (
                    key == "capabilities"
                    and _ENCODE(decoded) != memoryview(value)
                    and _level_dups(bytes(value), _CAPABILITY_KEYS)
                ):
                    raise Ambiguous(DUPLICATE_REASON)  # its keys decide
                out[key] = decoded
            elif key == "capabilities":
                out[key] = {}  # grants nothing: fail closed
            else:
                if keys is _PARAMS and key != "clientCapabilities":
                    reasons.append(OVERSIZE_META_REASON)
                out[key] = None
        else:
            out[key] = _value(value)
    return out


_SESSION_ID_MEMBER = re.compile(rb'"sessionId"[ \t\r\n]*:[ \t\r\n]*("[^"\\]*(?:\\.[^"\\]*)*")')


def _refs(raw: Raw, kind: str) -> Any:
    """A ``content`` / ``background`` list reduced to ``{"type", "sessionId"}`` items:
    only what the hold buffer reads (``kind``: the item type that references a session).

    Up to :data:`FIELD_BYTES` of objects the list is decoded into small
    structs. A longer list is never decoded: every ``"sessionId"`` string
    member found in it (at most :data:`MAX_REFS`) counts as a reference of
    ``kind``, so the message is held until each is known (fail closed; memory
    stays that of the ids). A long list with ``\\u`` escapes (a key could hide
    behind one) counts as referencing a session nobody can know.
    """
    if _first(raw) != b"[":
        return OPAQUE
    data = bytes(raw)
    if b'"sessionId"' not in data and b"\\u" not in data:
        return []
    if len(data) <= FIELD_BYTES:
        try:
            return [
                {
                    "type": _value(r.type) if len(r.type) else None,
                    "sessionId": _value(r.sessionId),
                }
                for r in _REFS.decode(data)
                if len(r.sessionId)
            ]
        except msgspec.ValidationError:
            pass  # an item that is not an object: searched as a long list is
    elif b"\\u" in data:
        return [{"type": kind, "sessionId": UNREADABLE_REFERENCE}]
    out: list[dict[str, Any]] = []
    for match in _SESSION_ID_MEMBER.finditer(data):
        out.append({"type": kind, "sessionId": _ANY.decode(match.group(1))})
        if len(out) >= MAX_REFS:
            break
    return out


def too_dense(
    raw: bytes,
    dense_bytes: int = 1024 * 1024,
    min_bytes_per_value: int = 48,
) -> bool:
    """True when ``raw`` is longer than ``dense_bytes`` and holds more JSON values
    than one per ``min_bytes_per_value`` bytes.

    Values are counted without decoding and without copying: commas and
    opening brackets are counted in C, then those inside strings are taken
    off string by string (stopping as soon as the frame is known not to be
    dense). Linear in ``len(raw)``, constant extra memory; never raises.
    """
    n = len(raw)
    if n <= dense_bytes:
        return False
    allowed = n // min_bytes_per_value
    values = raw.count(b",") + raw.count(b"[") + raw.count(b"{") + 1
    if values <= allowed:
        return False
    excess = values - allowed  # structural-looking bytes that strings must account for
    count = raw.count
    for match in _STRING.finditer(raw):
        start, end = match.span()
        if end - start > 2:
            excess -= count(b",", start, end) + count(b"[", start, end) + count(b"{", start, end)
            if excess <= 0:
                return False
    return True


def _plain(raw: bytes) -> bool:
    """True when no decision key can be repeated or escaped anywhere in ``raw``:
    no ``\\u`` escape, and no decision-key literal occurs twice (counted in C)."""
    if b"\\u" in raw:
        return False
    return all(raw.count(lit) < 2 for lit in _LITERALS)


_LITERALS = tuple(f'"{k}"'.encode() for k in sorted(_TOP | _PARAMS | _UPDATE | {"cancel"}))


def decode_view(raw: bytes, min_bytes_per_value: int = 48) -> tuple[Any, str | None]:
    """The view of one large frame (see the module doc).

    Args:
        raw: one frame whose first non-space byte is ``{`` (strict UTF-8).

    Returns:
        ``(body, reason)``: the top-level view, and a reason to treat the frame
        as ambiguous (``None`` when there is none).

    Raises:
        msgspec.DecodeError: not valid JSON, or a decision value msgspec refuses
            (a lone surrogate escape, ...): use the strict path.
        TooDense: a decision level that is not compact JSON has more than one
            member per ``min_bytes_per_value`` bytes.
        RecursionError: nested too deeply for the decoder.
    """
    reasons: list[str] = []
    try:
        body = _level(Raw(raw), _TOP, reasons, _plain(raw), min_bytes_per_value)
    except Ambiguous as exc:
        return _ambiguous_view(raw, min_bytes_per_value), str(exc)
    return body, (reasons[0] if reasons else None)


def _ambiguous_view(raw: bytes, min_bytes_per_value: int) -> dict[str, Any]:
    """The view of a frame refused for a repeated decision key: read again without the
    duplicate checks (the last of a repeated key, as the whole-frame decoder reads it),
    so the checks before the ambiguity (shape, session id) see what a small frame
    shows them; else only what names the answer (jsonrpc, id, method). The id only
    when it is not itself repeated (else the answer goes under null)."""
    body: dict[str, Any]
    try:
        body = _level(Raw(raw), _TOP, [], True, min_bytes_per_value)
    except (Ambiguous, msgspec.DecodeError, RecursionError):
        top = _STRUCTS[_TOP].decode(raw)
        body = {VIEW_KEY: Raw(raw)}
        for name in ("jsonrpc", "id", "method"):
            value: Raw = getattr(top, name)
            if len(value):
                body[name] = _value(value)
    if "id" in body and len(ID_KEY.findall(raw)) > 1:
        body["id"] = OPAQUE  # the id itself may be the repeated key: none is read
    return body
