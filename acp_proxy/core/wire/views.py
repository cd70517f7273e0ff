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

import codecs
from typing import Any

import msgspec
from msgspec import Raw

__all__ = ["FIELD_BYTES", "MAX_REFS", "VIEW_KEY", "NotCanonical", "decode_view", "strict_utf8"]

#: Key under which every view level keeps its own bytes (no JSON key can be
#: confused with it by the engine: it never reaches a peer).
VIEW_KEY = "\x00raw"
#: Longest value (bytes) decoded into a registry field; see the module doc.
FIELD_BYTES = 256 * 1024
_CHUNK = 1 << 20
_NONE = Raw()

OVERSIZE_META_REASON = (
    f"params._meta over {FIELD_BYTES} bytes in a large message: too large to check for "
    "decision keys"
)


class NotCanonical(ValueError):
    """A decision level repeats, escapes or spaces its keys: use the strict path."""


class _Ref(msgspec.Struct, forbid_unknown_fields=False):
    type: Raw = _NONE
    sessionId: Raw = _NONE


_MEMBERS = msgspec.json.Decoder(dict[str, Raw])
_ENCODE = msgspec.json.Encoder().encode
_REFS = msgspec.json.Decoder(list[_Ref])
_ANY = msgspec.json.Decoder()
_TOP = frozenset({"jsonrpc", "id", "method", "params", "result", "error", "_meta"})
_PARAMS = frozenset(
    {
        "sessionId",
        "update",
        "_meta",
        "field_meta",
        "session_id",
        "requestId",
        "clientCapabilities",
        "protocolVersion",
        "method",  # proxy/successor envelopes wrap a method and its params
        "params",
    }
)
_UPDATE = frozenset(
    {
        "sessionUpdate",
        "sessionId",
        "senderSessionId",
        "recipientSessionId",
        "messageId",
        "title",
        "description",
        "capabilities",
        "state",
        "cwd",
        "additionalDirectories",
        "_meta",
        "content",
        "background",
        "session_update",
        "session_id",
        "sender_session_id",
        "recipient_session_id",
        "field_meta",
    }
)
_RESULT = frozenset({"sessionId", "protocolVersion"})
_ERROR = frozenset({"code", "message"})
_NESTED = {"params": _PARAMS, "update": _UPDATE, "result": _RESULT, "error": _ERROR}


def _struct(keys: frozenset[str]) -> msgspec.json.Decoder[Any]:
    """A decoder of one level into its decision members only (others skipped, never built)."""
    fields = [(k.lstrip("_") or k, Raw, _NONE) for k in sorted(keys)]
    rename = {k.lstrip("_"): k for k in keys if k.startswith("_")}
    cls = msgspec.defstruct("Level", fields, rename=rename, forbid_unknown_fields=False)
    return msgspec.json.Decoder(cls)


_STRUCTS = {keys: _struct(keys) for keys in (_TOP, _PARAMS, _UPDATE, _RESULT, _ERROR)}
# Registry fields: decoded up to FIELD_BYTES, else a stand-in.
_FIELDS = frozenset(
    {"title", "description", "capabilities", "state", "cwd", "additionalDirectories"}
)
_REF_LISTS = frozenset({"content", "background"})
#: Most ``sessionId`` members a content / background list is searched for.
MAX_REFS = 10_000


def strict_utf8(raw: bytes) -> bool:
    """True when ``raw`` is strict UTF-8 (checked in 1 MiB steps: constant memory)."""
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    view = memoryview(raw)
    try:
        for start in range(0, len(raw), _CHUNK):
            decoder.decode(view[start : start + _CHUNK])
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    return True


def _value(raw: Raw) -> Any:
    """A decision value: strings and numbers decoded; a container decoded only when small."""
    if _first(raw) in (b"{", b"[") and len(raw) > 64 * 1024:
        return raw  # not a valid decision value anyway (a container), kept as bytes
    return _ANY.decode(raw)


def _first(raw: Raw) -> bytes:
    return memoryview(raw)[:1].tobytes()


def _members(raw: Raw, keys: frozenset[str], plain: bool) -> list[tuple[str, Raw]]:
    """The decision members of one level, as raw bytes.

    ``plain`` (no decision key is spelled twice in the frame and nothing is
    escaped): a struct of the decision members, the others skipped unbuilt.
    Otherwise every member is read and the level must be exactly the compact
    encoding of them (no repeated, escaped or spaced keys).

    Raises:
        NotCanonical: see above.
    """
    if plain:
        level = _STRUCTS[keys].decode(raw)
        names = level.__struct_encode_fields__
        values = [getattr(level, f) for f in level.__struct_fields__]
        return [(k, v) for k, v in zip(names, values, strict=True) if len(v)]
    members = _MEMBERS.decode(raw)
    if _ENCODE(members) != memoryview(raw):
        raise NotCanonical
    return [(k, v) for k, v in members.items() if k in keys]


def _level(raw: Raw, keys: frozenset[str], reasons: list[str], plain: bool) -> Any:
    """One view level: a dict of the decision keys present plus :data:`VIEW_KEY`.

    Raises:
        NotCanonical: the level is not exactly the compact encoding of its members.
    """
    if _first(raw) != b"{":
        return _value(raw)  # not an object: the classifier reports it
    out: dict[str, Any] = {VIEW_KEY: raw}
    for key, value in _members(raw, keys, plain):
        if key in _NESTED:
            out[key] = _level(value, _NESTED[key], reasons, plain)
        elif key in _REF_LISTS:
            out[key] = _refs(value)
        elif key in _FIELDS or key == "_meta" or key == "field_meta" or key == "clientCapabilities":
            if len(value) <= FIELD_BYTES:
                decoded = _ANY.decode(value)
                if key == "capabilities" and _ENCODE(decoded) != memoryview(value):
                    raise NotCanonical  # its keys decide: no repeats or escapes
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


def _refs(raw: Raw) -> Any:
    """A ``content`` / ``background`` list reduced to ``{"type", "sessionId"}`` items
    (only what the hold buffer reads; a list without ``"sessionId"`` is not decoded)."""
    if _first(raw) != b"[":
        return raw
    data = bytes(raw)
    refs = data.count(b'"sessionId"')
    if refs == 0 and b"\\u" not in data:
        return []
    if refs > MAX_REFS:
        return raw  # not searched (the hold buffer sees no reference)
    items = _REFS.decode(data)
    return [
        {"type": _value(r.type) if len(r.type) else None, "sessionId": _value(r.sessionId)}
        for r in items
        if len(r.sessionId)
    ]


def _plain(raw: bytes) -> bool:
    """True when no decision key can be repeated or escaped anywhere in ``raw``:
    no ``\\u`` escape, and no decision-key literal occurs twice (counted in C)."""
    if b"\\u" in raw:
        return False
    return all(raw.count(lit) < 2 for lit in _LITERALS)


_LITERALS = tuple(f'"{k}"'.encode() for k in sorted(_TOP | _PARAMS | _UPDATE | {"cancel"}))


def decode_view(raw: bytes) -> tuple[Any, str | None]:
    """The view of one large frame (see the module doc).

    Args:
        raw: one frame whose first non-space byte is ``{`` (strict UTF-8).

    Returns:
        ``(body, reason)``: the top-level view, and a reason to treat the frame
        as ambiguous (``None`` when there is none).

    Raises:
        msgspec.DecodeError: not valid JSON, or a decision value msgspec refuses
            (a lone surrogate escape, ...): use the strict path.
        NotCanonical: a decision level is not compact JSON: use the strict path.
        RecursionError: nested too deeply for the decoder.
    """
    reasons: list[str] = []
    body = _level(Raw(raw), _TOP, reasons, _plain(raw))
    return body, (reasons[0] if reasons else None)
