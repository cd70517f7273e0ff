"""Byte-exact scanning of JSON object members, for splicing values between frames.

:func:`member_spans` finds where each member value of a JSON object lies in
the raw bytes, so a value can be copied into a new frame byte for byte
(proxy-chain mode, :mod:`acp_proxy.core.chain`) instead of being decoded and
re-serialized; :func:`member_text` follows a key path to one such value.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

from acp_proxy.core.wire.jsonrpc import RawId, dumps
from acp_proxy.core.wire.views import OPAQUE, VIEW_KEY
from acp_proxy.core.wire.views import TOKEN as _TOKEN

__all__ = [
    "GOVERNED_FIELD_BYTES",
    "GOVERNED_READ_BUDGET",
    "bounded_members",
    "member_spans",
    "member_text",
    "request_id_from_prefix",
    "without_member",
]

_WS = b" \t\r\n"


def member_spans(
    raw: bytes,
    start: int = 0,
    end: int | None = None,
    dups: set[str] | None = None,
    *,
    prefix: bool = False,
) -> dict[str, tuple[int, int]] | None:
    """Finds where each member value of a JSON object lies in ``raw``.

    One linear pass over ``raw[start:end]``; strings are skipped by a regular
    expression, so the cost is per structural token, not per byte.

    Args:
        raw: bytes that hold a valid JSON object between ``start`` and ``end``
            (surrounding whitespace allowed).
        start: offset of the object's text.
        end: end of the object's text (default: ``len(raw)``).
        dups: if given, receives the keys that occur more than once.
        prefix: ``raw[start:end]`` is only the start of an object: the
            members complete in it are returned (a string cut short matches
            no token, so nothing inside it is read as a member).

    Returns:
        ``{key: (value_start, value_end)}`` with offsets into ``raw``; for a
        key that occurs twice the later value wins, as in the decoders.
        ``None`` when ``raw[start:end]`` does not begin with an object.
    """
    if end is None:
        end = len(raw)
    while start < end and raw[start] in _WS:
        start += 1
    if start >= end or raw[start] != 0x7B:  # {
        return None
    spans: dict[str, tuple[int, int]] = {}
    depth = 0
    key: str | None = None
    value_start = -1
    expect_key = False
    for tok in _TOKEN.finditer(raw, start, end):
        c = raw[tok.start()]
        if depth == 1 and c != 0x7B and c != 0x5B:
            if c == 0x22:  # a key, or a string value
                if expect_key:
                    key = _decode_key(tok.group())
                    if key is None:
                        return None
                    expect_key = False
            elif c == 0x3A:  # :
                value_start = tok.end()
            else:  # , or } ends the member
                if key is not None and value_start >= 0:
                    if dups is not None and key in spans:
                        dups.add(key)
                    spans[key] = _strip(raw, value_start, tok.start())
                key, value_start = None, -1
                if c == 0x7D:  # }
                    return spans
                expect_key = True
        elif c == 0x7B or c == 0x5B:  # { [
            depth += 1
            if depth == 1:
                expect_key = True
        elif c == 0x7D or c == 0x5D:  # } ]
            depth -= 1
    return spans if prefix and depth >= 1 else None


_SAFE_INT = 2**53


def request_id_from_prefix(prefix: bytes, any_type: bool = False) -> Any:
    """The id of the request that ``prefix`` begins, when the prefix alone shows it; else None.

    For an oversize message (only its start kept): the top-level members
    complete in ``prefix`` must include ``method`` and exactly one ``id``
    (keys compared decoded, so an escaped spelling counts twice) and no
    ``result`` / ``error``. A string or a safe integer comes back decoded; any
    other number (a fraction, an exponent, an integer past 2**53) as a
    :class:`~acp_proxy.core.wire.jsonrpc.RawId` of its bytes, and so does any
    other non-null value with ``any_type`` (toward the agent); a boolean, array
    or object id otherwise gives None (JSON-RPC 2.0 section 5). A second ``id``
    after the prefix cannot be seen: callers must not answer an id in flight.
    """
    dups: set[str] = set()
    spans = member_spans(prefix, dups=dups, prefix=True)
    if spans is None or "id" in dups or "method" not in spans:
        return None
    if "result" in spans or "error" in spans or "id" not in spans:
        return None
    start, end = spans["id"]
    text = prefix[start:end]
    try:
        rid = json.loads(text)
    except ValueError:  # an integer past Python's 4300-digit limit: still a number
        return RawId(text) if text[:1] in b"-0123456789" else None
    if type(rid) is str or (type(rid) is int and -_SAFE_INT < rid < _SAFE_INT):
        return rid
    if rid is None or not (any_type or type(rid) is int or type(rid) is float):
        return None
    return RawId(text)


def _decode_key(token: bytes) -> str | None:
    body = token[1:-1]
    try:
        if b"\\" in body:
            key = json.loads(token)
            return key if isinstance(key, str) else None
        return body.decode("utf-8")
    except ValueError:
        return None


def _strip(raw: bytes, start: int, end: int) -> tuple[int, int]:
    while start < end and raw[start] in _WS:
        start += 1
    while end > start and raw[end - 1] in _WS:
        end -= 1
    return start, end


def member_text(raw: bytes, path: tuple[str, ...], value: Any) -> bytes:
    """The text of the member at ``path`` in ``raw``; ``dumps(value)`` if it cannot be found.

    A view level (:mod:`~acp_proxy.core.wire.views`) carries its own bytes: they are the text.
    """
    if type(value) is dict and VIEW_KEY in value:
        return bytes(value[VIEW_KEY])
    start, end = 0, len(raw)
    for key in path:
        spans = member_spans(raw, start, end)
        if spans is None or key not in spans:
            return dumps(value)
        start, end = spans[key]
    return raw[start:end]


def without_member(raw: bytes, path: tuple[str, ...]) -> bytes | None:
    """``raw`` with the member at ``path`` (key, value and one separating comma) cut out.

    Every other byte stays as it came (numbers, escapes, spacing, key order),
    so a rewrite changes only what it must. ``path`` names objects from the
    top level down; the last key is the member removed.

    Args:
        raw: one JSON text whose objects along ``path`` hold no repeated key.
        path: key path, e.g. ``("params", "update", "state")``.

    Returns:
        The new bytes, or ``None`` when the member cannot be found.
    """
    start, end = 0, len(raw)
    for key in path[:-1]:
        spans = member_spans(raw, start, end)
        if spans is None or key not in spans:
            return None
        start, end = spans[key]
    spans = member_spans(raw, start, end)
    if spans is None or path[-1] not in spans:
        return None
    value_start, value_end = spans[path[-1]]
    # Back from the value: optional spaces, ':', optional spaces, the key's closing quote.
    i = value_start - 1
    while raw[i] in _WS:
        i -= 1
    i -= 1  # the ':'
    while raw[i] in _WS:
        i -= 1
    key_start = i - 1  # the closing quote is at i: find the unescaped opening one
    while True:
        key_start = raw.rindex(b'"', start, key_start + 1)
        slashes = 0
        while raw[key_start - 1 - slashes] == 0x5C:  # backslash
            slashes += 1
        if slashes % 2 == 0:
            break
        key_start -= 1
    j = value_end
    while raw[j] in _WS:
        j += 1
    if raw[j] == 0x2C:  # a comma follows: cut the member and that comma
        return raw[:key_start] + raw[j + 1 :]
    k = key_start - 1  # the last member: cut the comma before it, if any
    while raw[k] in _WS:
        k -= 1
    if raw[k] == 0x2C:
        return raw[:k] + raw[value_end:]
    return raw[:key_start] + raw[value_end:]


#: Longest member value (bytes) :func:`bounded_members` decodes whole; a longer
#: object is read member by member, anything else stands in as ``OPAQUE``.
GOVERNED_FIELD_BYTES = 64 * 1024
#: Bytes :func:`bounded_members` decodes from one frame in all.
GOVERNED_READ_BUDGET = 256 * 1024
_ANY = msgspec.json.Decoder()


def bounded_members(
    raw: Any,
    depth: int = 3,
    budget: list[int] | None = None,
    start: int = 0,
    end: int | None = None,
) -> dict[str, Any] | None:
    """The members of the JSON object ``raw[start:end]``, each decoded only when small.

    ``raw`` is bytes or a buffer (a view level's ``msgspec.Raw``).

    For a governed request over ``limits.dense_message_bytes`` (whose view holds
    only routing keys): the permission rules read ``path``, ``command``,
    ``toolCall`` ... from what this returns. A member value of at most
    :data:`GOVERNED_FIELD_BYTES` is decoded (while the frame's
    :data:`GOVERNED_READ_BUDGET` lasts); a longer object is read the same
    way one level further down (``depth`` levels at most: ``toolCall`` then
    ``rawInput``); any other value, and one that cannot be decoded, is
    :data:`~acp_proxy.core.wire.views.OPAQUE`, which no matcher accepts (the
    rules then fail closed). A key repeated in one object: the later wins, as
    in the decoders. Memory: the budget, whatever the frame holds.

    Returns:
        The members, or ``None`` when ``raw[start:end]`` is not an object.
    """
    if budget is None:
        budget = [GOVERNED_READ_BUDGET]
    data: bytes = raw if type(raw) is bytes else bytes(raw)  # a view's msgspec.Raw
    spans = member_spans(data, start, end)
    if spans is None:
        return None
    out: dict[str, Any] = {}
    for key, (vs, ve) in spans.items():
        size = ve - vs
        value: Any = OPAQUE
        if size <= GOVERNED_FIELD_BYTES and size <= budget[0]:
            budget[0] -= size
            try:
                value = _ANY.decode(memoryview(data)[vs:ve])
            except (msgspec.DecodeError, RecursionError):
                value = OPAQUE
        elif depth > 0 and data[vs] == 0x7B:  # {
            inner = bounded_members(data, depth - 1, budget, vs, ve)
            value = OPAQUE if inner is None else inner
        out[key] = value
    return out
