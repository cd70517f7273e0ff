"""The memory a decoded JSON value holds, estimated without ``sys.getsizeof`` walks.

docs/design.md section 1: state that outlives a message is bounded in bytes.
Counting a stored value by its JSON length undercounts what Python keeps by
up to ~25 times (an empty object is 2 bytes of JSON and ~64 bytes of dict),
so the bounds on the registry and on dedup snapshots count this instead.
"""

from __future__ import annotations

from typing import Any

__all__ = ["footprint"]

# CPython 3.11 object sizes (bytes), rounded up; containers add a slot per item.
_DICT = 232
_DICT_ITEM = 48
_LIST = 56
_LIST_ITEM = 8
_STR = 49
_SCALAR = 32


def footprint(value: Any, cap: int) -> int:
    """Bytes a decoded JSON ``value`` holds in memory, about (CPython 3.11).

    Iterative (any nesting), and stops as soon as the count exceeds ``cap``:
    the cost is at most proportional to ``cap``, whatever the value.

    Args:
        value: a JSON value as the decoders build it (dict, list, str, int,
            float, bool, None).
        cap: stop counting past this many bytes.

    Returns:
        The estimate, or a number larger than ``cap``.
    """
    total = 0
    todo = [value]
    while todo:
        v = todo.pop()
        t = type(v)
        if t is dict:
            total += _DICT + _DICT_ITEM * len(v)
            for k, item in v.items():
                total += _STR + len(k)
                todo.append(item)
        elif t is list:
            total += _LIST + _LIST_ITEM * len(v)
            todo.extend(v)
        elif t is str:
            total += _STR + len(v) * (1 if v.isascii() else 4)
        else:
            total += _SCALAR
        if total > cap:
            return total
    return total
