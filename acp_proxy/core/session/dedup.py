"""Duplicate state report removal (docs/protocol.md section 4, "State reports and duplicates").

Per channel, the last state snapshot delivered to the client. Channels: a
session's own ``state_update`` stream (``("self", sessionId)``), and each
child's state mirrored on its parent's ``subagent_update``
(``("mirror", childId)``). A report equal (as a JSON value) to the last one
delivered on its channel is a duplicate. ``None`` (activity unconfirmed)
never is, and nothing after it is a duplicate of what came before it.
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = ["StateDedup"]

Channel = tuple[str, str]

_UNCONFIRMED = object()


class StateDedup:
    """Last-delivered snapshot per channel, bounded in bytes.

    Args:
        max_bytes: bytes of snapshots remembered (each counted as the size of
            the message that carried it, an upper bound); beyond it the least
            recently delivered channels are forgotten, so their next report is
            delivered (never wrongly dropped).
    """

    def __init__(self, max_bytes: int = 8 * 1024 * 1024) -> None:
        self._last: dict[Channel, Any] = {}
        self._sizes: dict[Channel, int] = {}
        self.max_bytes = max_bytes
        #: Bytes currently remembered.
        self.nbytes = 0

    def is_duplicate(self, channel: Channel, snapshot: Any) -> bool:
        """True when ``snapshot`` equals the last one delivered on ``channel``.

        Args:
            channel: ``("self", sessionId)`` or ``("mirror", childId)``.
            snapshot: a decoded JSON value; ``None`` is never a duplicate.
        """
        if snapshot is None:
            return False
        last = self._last.get(channel, _UNCONFIRMED)
        return last is not _UNCONFIRMED and _json_equal(last, snapshot)

    def last(self, channel: Channel) -> Any:
        """The last snapshot delivered on ``channel``, or ``None``."""
        return self._last.get(channel)

    def delivered(self, channel: Channel, snapshot: Any, nbytes: int = 0) -> None:
        """Records ``snapshot`` as delivered on ``channel`` (``None`` resets it).

        Args:
            channel: the channel.
            snapshot: a decoded JSON value, or ``None``.
            nbytes: its size in bytes (the carrying message's length will do).
        """
        self._forget(channel)
        if snapshot is None or nbytes > self.max_bytes:
            return
        self._last[channel] = snapshot
        self._sizes[channel] = nbytes
        self.nbytes += nbytes
        while self.nbytes > self.max_bytes:
            self._forget(next(iter(self._last)))

    def _forget(self, channel: Channel) -> None:
        if self._last.pop(channel, _UNCONFIRMED) is not _UNCONFIRMED:
            self.nbytes -= self._sizes.pop(channel)

    def reset_session(self, session_id: str, descendant_ids: list[str]) -> None:
        """Starts a new epoch for ``session_id`` and its descendants (a load or
        resume request or response, a close): their own channels and their
        mirrors are forgotten, so the next report is delivered even if it repeats."""
        for sid in (session_id, *descendant_ids):
            self._forget(("self", sid))
            self._forget(("mirror", sid))

    def __len__(self) -> int:
        return len(self._last)


_encode = msgspec.json.encode


def _json_equal(a: Any, b: Any) -> bool:
    """Equality of JSON values: ``1`` != ``true``, ``1`` == ``1.0``, key order ignored.

    Python's ``==`` is coarser (it also finds ``1 == True``), so values it finds
    unequal are unequal; values it finds equal are equal as JSON when neither
    holds a boolean (no ``true`` / ``false`` in their encodings; a string
    spelling one only sends them to the exact walk). Both in C: a repeated
    state report is recognized without a Python loop over it (issue 29).
    """
    try:
        if a != b:
            return False
        ea, eb = _encode(a), _encode(b)
    except (RecursionError, msgspec.EncodeError, OverflowError, TypeError, ValueError):
        return _json_walk(a, b)  # nested past C's recursion, or not encodable
    if b"true" not in ea and b"false" not in ea and b"true" not in eb and b"false" not in eb:
        return True
    return _json_walk(a, b)


def _json_walk(a: Any, b: Any) -> bool:
    """:func:`_json_equal` value by value: iterative, so a state nested however deep never
    exhausts the stack."""
    pairs = [(a, b)]
    while pairs:
        x, y = pairs.pop()
        tx, ty = type(x), type(y)
        if tx is dict:
            if ty is not dict or x.keys() != y.keys():
                return False
            pairs.extend((v, y[k]) for k, v in x.items())
        elif tx is list:
            if ty is not list or len(x) != len(y):
                return False
            pairs.extend(zip(x, y, strict=True))
        elif tx is bool or ty is bool:
            if tx is not ty or x != y:
                return False
        elif (tx is int or tx is float) and (ty is int or ty is float):
            if x != y:
                return False
        elif tx is not ty or x != y:
            return False
    return True
