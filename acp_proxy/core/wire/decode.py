"""The decoders of the wire: one frame's bytes to :class:`~acp_proxy.core.wire.verdict.Facts`.

docs/design.md section 2 ("The wire: one pipeline"). A decoder reports what
it found (the body, whether the frame is canonical, a repeated decision key,
an unreadable decision value, nesting past the limit, bytes that are not
JSON) and judges nothing: the check table orders the faults. A decoder stops
at the first fact that makes the rest unreadable (a frame too deep is not
decoded further).

The fast path decodes with ``msgspec`` (exact for integers of any size,
like the standard library); a frame ``msgspec`` refuses (lone surrogates,
``1e400``) or one that may carry duplicate or escaped decision keys is
decoded again with the standard library, which detects duplicates. A frame
over ``dense_bytes`` is read through a view (:mod:`~acp_proxy.core.wire.views`:
only the decision fields are decoded); a batch is never decoded whole
(:mod:`~acp_proxy.core.wire.batch`).

Strict UTF-8: a frame that is not strict UTF-8 (encoded surrogates
included) is not JSON for the proxy: msgspec validates every string it
decodes, and the standard-library path decodes strictly first.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from acp_proxy.core.wire import reasons
from acp_proxy.core.wire.batch import batch_shape, request_spans
from acp_proxy.core.wire.guard import (
    ambiguous,
    exact_body,
    has_any_dups,
    lone_surrogate_at_decision_level,
    maybe_duplicated,
    strict_loads,
)
from acp_proxy.core.wire.nesting import nested_deeper_than, nesting_exceeds
from acp_proxy.core.wire.utf8 import strict_utf8
from acp_proxy.core.wire.verdict import Facts, Faults
from acp_proxy.core.wire.views import TooDense, decode_view

__all__ = ["ID_MEMBERS", "decode", "fast_dumps", "fast_loads", "lead"]

_DECODER = msgspec.json.Decoder()
_ENCODER = msgspec.json.Encoder()
fast_loads = _DECODER.decode
fast_dumps = _ENCODER.encode
_VALIDATE = msgspec.json.Decoder(msgspec.Raw)  # checks a whole frame, builds nothing
_TOO_DEEP = Faults(too_deep=True)  # never changed: one for every frame too deep


class _IdMembers(msgspec.Struct, forbid_unknown_fields=False):
    id: msgspec.Raw = msgspec.Raw()
    method: msgspec.Raw = msgspec.Raw()


#: Reads a frame's top-level ``id`` and ``method`` as raw bytes (validates the whole
#: frame, converts no number).
ID_MEMBERS = msgspec.json.Decoder(_IdMembers)
_FIRST = re.compile(rb"[ \t\r\n]*")
# A number value of more than 4300 digits (after "[", ":" or ","; a string holding
# such a run right after one of those is refused too: rare, and fail closed).
_LONG_NUMBER = re.compile(rb"[\[:,][ \t\r\n]*-?[0-9]{4301}")


def decode(raw: bytes, dense_bytes: int, min_bytes_per_value: int, max_depth: int) -> Facts:
    """The facts of one frame (without its line ending); never raises.

    Args:
        raw: the frame.
        dense_bytes: frames longer than this are read through a view.
        min_bytes_per_value: the density bound of a view.
        max_depth: ``limits.max_nesting_depth``: nesting past it is found the
            same way at any stack depth (the decoders must be called with at
            least ``max_depth`` + a few levels of recursion left).
    """
    if len(raw) > dense_bytes:
        return _decode_large(raw, min_bytes_per_value, max_depth)
    if raw[:1] != b"{" and lead(raw) == b"[":
        return _decode_batch(raw, max_depth)
    try:
        body = fast_loads(raw)
    except RecursionError:
        return _TOO_DEEP
    except msgspec.DecodeError:  # ValidationError is a DecodeError
        return _decode_strict(raw, max_depth)
    if len(raw) >= 2 * (max_depth + 1) and nested_deeper_than(body, max_depth):
        return _TOO_DEEP
    # A frame that is exactly the compact encoding of what it decodes to cannot
    # repeat a key (the encoder writes each key of a dict once) nor escape one:
    # the common case (the SDKs write compact JSON) skips the slower guard.
    if fast_dumps(body) == raw:
        return Facts(body, True)
    if maybe_duplicated(raw):
        return _decode_strict(raw, max_depth)
    return Facts(body)


def _decode_large(raw: bytes, min_bytes_per_value: int, max_depth: int) -> Facts:
    """A frame over ``dense_bytes``: a view, never the whole tree.

    A JSON array is a batch, refused whole without reading its elements; a
    scalar is not an object; an object is read through
    :func:`~acp_proxy.core.wire.views.decode_view`. A frame msgspec cannot
    decode (invalid JSON, a lone surrogate escape in a string it reads) is
    not JSON here: the standard library, which would build the whole tree, is
    never used on a large frame. Nesting is checked first, on the bytes
    (:func:`~acp_proxy.core.wire.nesting.nesting_exceeds`, only when the
    frame holds more ``{`` and ``[`` than the limit: two counts at C speed,
    about 1 ms a MiB; the scan skips strings in C, about 6 ms a MiB), so a
    large frame gets the verdict a small one would, whatever the view decodes.
    """
    first = lead(raw)
    if first == b"[":  # a batch: its own checks, none of them a walk over the tokens
        return _decode_batch(raw, max_depth)
    if raw.count(b"{") + raw.count(b"[") > max_depth and nesting_exceeds(raw, max_depth):
        return _TOO_DEEP
    if not strict_utf8(raw):
        return Faults(not_json=reasons.NOT_STRICT_UTF8)
    if _LONG_NUMBER.search(raw):  # as the whole-frame decoders refuse it (Python's limit)
        return _long_integer(raw)
    if first != b"{":
        return Facts()  # not an object: the classifier says so
    try:
        body, reason = decode_view(raw, min_bytes_per_value)
    except RecursionError:
        return _TOO_DEEP
    except msgspec.DecodeError as exc:
        return Faults(not_json=f"not valid JSON: {_short(str(exc))}")
    except TooDense:
        return Faults(too_dense=True)
    if reason is None:
        return Facts(body)
    if reason == reasons.DUPLICATE_REASON:
        return Faults(body, repeated=reason)
    return Faults(body, unreadable=reason)


def lead(raw: bytes) -> bytes:
    """The first byte of ``raw`` past JSON whitespace (``b""`` if none)."""
    first = _FIRST.match(raw)
    return raw[first.end() : first.end() + 1] if first is not None else b""


def _decode_batch(raw: bytes, max_depth: int) -> Facts:
    """A frame whose first byte is ``[``: a batch, refused whole, so its elements are
    never built (:mod:`~acp_proxy.core.wire.batch`). Only the spans of the object
    elements with an ``id`` member are found, so that an agent's requests can be
    answered. The frame gets the facts it would get whole first: too deep, not JSON,
    not strict UTF-8, a too long integer."""
    try:
        _VALIDATE.decode(raw)
    except RecursionError:
        return _TOO_DEEP
    except msgspec.DecodeError as exc:
        if raw.count(b"{") + raw.count(b"[") > max_depth and nesting_exceeds(raw, max_depth):
            return _TOO_DEEP
        if strict_utf8(raw):
            return Faults(not_json=f"not valid JSON: {_short(str(exc))}")
        return Faults(not_json=reasons.NOT_STRICT_UTF8)
    elements = batch_shape(raw, max_depth)
    if elements is None:
        return _TOO_DEEP
    if not strict_utf8(raw):
        return Faults(not_json=reasons.NOT_STRICT_UTF8)
    if _LONG_NUMBER.search(raw):
        return _long_integer(raw)
    if elements == 0:
        return Faults(elements=0)
    return Faults(elements=elements, spans=request_spans(raw))


def _long_integer(raw: bytes) -> Facts:
    """A frame holding an integer of more than 4300 digits (Python's ``int`` limit):
    the Python SDK cannot read it, the TypeScript SDK reads a float. Not JSON
    when the frame is not JSON otherwise either."""
    try:
        ID_MEMBERS.decode(raw)  # validates the whole frame, converts no number
    except (msgspec.DecodeError, RecursionError):
        return Faults(not_json=reasons.LONG_INTEGER_NOT_JSON)
    return Faults(long_integer=True)


def _decode_strict(raw: bytes, max_depth: int) -> Facts:
    """The standard library, detecting repeated keys."""
    body: Any
    try:
        body = strict_loads(raw)
    except RecursionError:
        return _TOO_DEEP
    except ValueError as exc:
        if nesting_exceeds(raw, max_depth):  # deep and invalid: as deep, at any stack depth
            return _TOO_DEEP
        if _LONG_NUMBER.search(raw) and strict_utf8(raw):
            return _long_integer(raw)
        return Faults(not_json=f"not valid JSON: {_short(str(exc))}")
    if len(raw) >= 2 * (max_depth + 1) and nested_deeper_than(body, max_depth):
        return _TOO_DEEP
    if isinstance(body, dict) and ambiguous(body):
        return Faults(body, repeated=reasons.REPEATED_KEY)  # its body tells which keys repeat
    if lone_surrogate_at_decision_level(body):  # msgspec refuses these: only here
        return Faults(body, unreadable=reasons.SURROGATE_REASON)
    # Decide on plain dicts: the duplicate-recording subclass must never reach
    # the engine, whose shape checks are exact (`type(x) is dict`).
    if has_any_dups(body):
        body = exact_body(raw)
    return Facts(body)


def _short(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
