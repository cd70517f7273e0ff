"""The shape of the trace records ``acp-proxy replay`` reads (docs/trace-format.md).

A trace is input: a record with a key of the wrong type (``conn`` a list,
``t`` an object, ``events`` a string) ends the replay with one sentence naming
the record and the key (exit 2), never a traceback. Only the keys replay reads
are checked; other keys are free (a later trace version may add some).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from acp_proxy.core.actions import Peer
from acp_proxy.core.trace import Record
from acp_proxy.errors import UsageError

__all__ = ["check_records"]

_DIRECTIONS = frozenset(p.direction for p in Peer)
_PEERS = frozenset(p.value for p in Peer)


def _int(v: object) -> bool:
    return type(v) is int


def _number(v: object) -> bool:
    return type(v) in (int, float) and math.isfinite(v)  # type: ignore[arg-type]


def _str(v: object) -> bool:
    return type(v) is str


def _maybe(check: Callable[[object], bool]) -> Callable[[object], bool]:
    return lambda v: v is None or check(v)


def _hex(v: object) -> bool:
    if type(v) is not str:
        return False
    try:
        bytes.fromhex(v)
    except ValueError:
        return False
    return True


def _events(v: object) -> bool:
    return type(v) is list and all(type(e) is dict and _str(e.get("event")) for e in v)


#: key -> (check, what it must be): every key replay reads, for any record type.
_KEYS: dict[str, tuple[Callable[[object], bool], str]] = {
    "type": (_str, "a string"),
    "conn": (lambda v: _int(v) and v >= 0, "a non-negative integer"),  # type: ignore[operator]
    "seq": (_maybe(_int), "an integer or null"),
    "of": (_maybe(_int), "an integer or null"),
    "t": (_number, "a finite number"),
    "dir": (lambda v: _str(v) and v in _DIRECTIONS, '"client->agent" or "agent->client"'),
    "kind": (_maybe(_str), "a string"),
    "decision": (_str, "a string"),
    "method": (_maybe(_str), "a string or null"),
    "for_method": (_maybe(_str), "a string or null"),
    "session": (_maybe(_str), "a string or null"),
    "detail": (_maybe(_str), "a string or null"),
    "size": (lambda v: _int(v) and 0 <= v < 1 << 62, "a non-negative integer"),  # type: ignore[operator]
    "complete": (lambda v: type(v) is bool, "true or false"),
    "content": (_str, "a string"),
    "content_hex": (_hex, "a string of hexadecimal digits"),
    "events": (_events, 'a list of objects with an "event" string'),
}
#: keys a record of a type must have.
_REQUIRED: dict[str, tuple[str, ...]] = {"message": ("dir", "decision"), "closed": ("peer",)}


def check_records(records: Sequence[Record], where: str) -> None:
    """Checks every key replay reads of every record.

    Args:
        records: the trace's records after the header (record 1 is the line after it).
        where: the trace's name, for the message.

    Raises:
        UsageError: ``"<where> is not a valid trace: record N: key 'conn' must be
            a non-negative integer, not a list"`` (one sentence).
    """
    for n, rec in enumerate(records, 1):
        kind = rec.get("type")
        for key, (check, what) in _KEYS.items():
            if key in rec and not check(rec[key]):
                _fail(where, n, f"key {key!r} must be {what}, not {_name(rec[key])}")
        peer = rec.get("peer")
        if kind == "closed" and not (_str(peer) and peer in _PEERS):
            _fail(where, n, 'key \'peer\' must be "client" or "agent"')
        for key in _REQUIRED.get(kind if isinstance(kind, str) else "", ()):
            if key not in rec:
                _fail(where, n, f"a {kind} record needs the key {key!r}")


def _name(value: object) -> str:
    names = {list: "a list", dict: "an object", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    if type(value) in (int, float):
        return f"the number {value!r}"
    return names.get(type(value), type(value).__name__)


def _fail(where: str, n: int, what: str) -> None:
    raise UsageError(f"{where} is not a valid trace: record {n}: {what}")
