"""The nesting limit (``limits.max_nesting_depth``): one idea, checked on bytes or on values.

Every decoder path refuses a frame whose objects and arrays nest deeper than
the limit, found the same way whether the bytes are scanned
(:func:`nesting_exceeds`) or a decoded value is walked
(:func:`nested_deeper_than`), so no verdict depends on the call stack.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["MAX_NESTING_DEPTH", "nested_deeper_than", "nesting_exceeds"]

#: Default ``limits.max_nesting_depth``: a message nesting objects and arrays
#: deeper is refused (:func:`~acp_proxy.core.wire.jsonrpc.too_deep`).
MAX_NESTING_DEPTH = 512

_NESTING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[{}\[\]]', re.DOTALL)


def nesting_exceeds(raw: bytes, limit: int) -> bool:
    """True when objects and arrays in ``raw`` open more than ``limit`` deep.

    A function of the bytes alone, valid JSON or not: the running count of
    ``{`` / ``[`` minus ``}`` / ``]`` outside strings. For valid JSON it is the
    nesting of the decoded value. One pass over the brackets and strings (a
    regular expression skips each string); only frames that failed to decode
    are scanned this way, so that a frame too deep for the decoders and one
    that is deep *and* invalid get the same verdict at any stack depth.
    """
    if len(raw) <= limit:
        return False  # each level opens with a byte (invalid bytes may never close it)
    depth = 0
    for tok in _NESTING.finditer(raw):
        c = tok.group()
        if c == b"{" or c == b"[":
            depth += 1
            if depth > limit:
                return True
        elif c == b"}" or c == b"]":
            depth -= 1
    return False


def nested_deeper_than(value: Any, limit: int) -> bool:
    """True when the decoded JSON ``value`` nests objects/arrays more than ``limit`` deep.

    Iterative (never exhausts the stack); stops as soon as the limit is passed.
    """
    stack = [(value, 0)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, dict):
            children: Any = v.values()
        elif isinstance(v, list):
            children = v
        else:
            continue
        if depth >= limit:
            return True
        stack.extend((c, depth + 1) for c in children)
    return False
