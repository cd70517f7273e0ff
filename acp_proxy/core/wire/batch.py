"""Reading a JSON-RPC batch for its refusal, without building its elements (issue 29).

ACP uses no batches: one is refused whole (docs/protocol.md section 4,
"Batches"). The refusal needs two things: how many elements it holds (each
is accounted for), and the object elements that may be requests (an agent's
are answered ``-32600`` under their ids). :func:`batch_shape` and
:func:`request_spans` find them on the bytes of a frame already known to be
valid JSON whose first byte past whitespace is ``[``: no element is decoded,
no tree is built. Memory: a few copies of the frame at most, whatever its
shape. Only the elements with an ``id`` member are scanned token by token.
"""

from __future__ import annotations

import re

from acp_proxy.core.wire.views import ID_KEY, TOKEN

__all__ = ["batch_shape", "request_spans"]

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
#: brackets of both kinds as ``{`` / ``}`` (their kind does not change a nesting depth
#: or an element count), commas kept, every other byte dropped
_STRUCTURE = bytes.maketrans(b"[]", b"{}")
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b"{}[],")
#: an innermost object or array (nothing nested inside it)
_INNERMOST = re.compile(rb"\{,*\}")
#: bytes of the shape rewritten at once: ``re.sub`` keeps a piece per match
_CHUNK = 64 * 1024


def _collapse(shape: bytes) -> bytes:
    """``shape`` without its innermost values (one level removed), rewritten a chunk at a
    time so that memory stays near the chunk's size. A chunk ends just after a ``}``:
    no innermost value spans that cut (it would hold the ``}``)."""
    pieces = []
    start, n = 0, len(shape)
    while start < n:
        end = shape.rfind(b"}", start, start + _CHUNK) + 1
        if end <= start:  # no value ends in the window: cut after the next one that does
            end = shape.find(b"}", start + _CHUNK) + 1 or n
        pieces.append(_INNERMOST.sub(b"", shape[start:end]))
        start = end
    return b"".join(pieces)


_QUOTE, _COLON, _COMMA, _OPEN_OBJECT, _OPEN_ARRAY = 0x22, 0x3A, 0x2C, 0x7B, 0x5B


def _structure(raw: bytes) -> bytes:
    """The brackets and commas of ``raw`` outside its strings (see :data:`_STRUCTURE`).
    Built piece by piece into one buffer: a ``re.sub`` would hold a piece per string."""
    if b'"' not in raw:
        return raw.translate(_STRUCTURE, _NOT_STRUCTURE)
    out = bytearray()
    pos = 0
    for string in _STRING.finditer(raw):
        out += raw[pos : string.start()].translate(_STRUCTURE, _NOT_STRUCTURE)
        pos = string.end()
    out += raw[pos:].translate(_STRUCTURE, _NOT_STRUCTURE)
    return bytes(out)


def batch_shape(raw: bytes, max_depth: int) -> int | None:
    """Elements of the array ``raw`` (valid JSON), or ``None`` when its objects and
    arrays nest deeper than ``max_depth`` (the outer array counts as one level).

    Strings skipped and all but the brackets and commas dropped (a Python step
    per string, none per byte), then innermost values removed at C speed, one
    level a pass, until only the commas between the elements are left.
    """
    shape = _structure(raw)[1:-1]
    depth = 1
    while True:
        shorter = _collapse(shape)
        if len(shorter) == len(shape):
            break
        depth += 1
        if depth > max_depth:
            return None
        shape = shorter
    if shape:
        return shape.count(b",") + 1
    return 1 if raw.strip()[1:-1].strip() else 0  # one scalar element, or none


def request_spans(raw: bytes) -> list[tuple[int, int]]:
    """The spans (start, end offsets into ``raw``) of the object elements of the batch
    ``raw`` that have an ``id`` member (in any spelling) at their top level: the only
    ones that can be requests.

    Args:
        raw: a valid JSON array, nested within ``limits.max_nesting_depth``.
    """
    if ID_KEY.search(raw) is None:
        return []  # no element names an id: none is a request
    spans: list[tuple[int, int]] = []
    depth = 0
    start = 0
    in_object = has_id = False
    key: bytes | None = None  # the string just before, at an element's top level
    for token in TOKEN.finditer(raw):
        at = token.start()
        c = raw[at]
        if c == _QUOTE:
            key = token.group() if depth == 2 and in_object else None
            continue
        if c == _COLON:
            if key is not None and ID_KEY.fullmatch(key):
                has_id = True
        elif c in (_OPEN_OBJECT, _OPEN_ARRAY):
            if depth == 1:
                start, in_object, has_id = at, c == _OPEN_OBJECT, False
            depth += 1
        elif c != _COMMA:  # a closing bracket
            depth -= 1
            if depth == 1 and in_object and has_id:
                spans.append((start, token.end()))
        key = None
    return spans
