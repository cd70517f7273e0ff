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

__all__ = ["MAX_RAW_BYTES", "StateDedup"]

Channel = tuple[str, str]

#: Longest frame :meth:`StateDedup.repeats` compares by its bytes (a state report is
#: a few hundred bytes; longer ones are compared as snapshots only).
MAX_RAW_BYTES = 4096

_UNCONFIRMED = object()


class StateDedup:
    """Last-delivered snapshot per channel, bounded in bytes.

    Args:
        max_bytes: bytes of snapshots remembered (each counted as the size of
            the message that carried it, an upper bound); beyond it the least
            recently delivered channels are forgotten, so their next report is
            delivered (never wrongly dropped).
        max_raw_bytes: bytes of the frames that delivered the snapshots kept
            beside them (:meth:`repeats`; frames of at most
            :data:`MAX_RAW_BYTES` each, not counted in ``max_bytes``, so what
            is remembered and forgotten does not depend on them). Past it the
            least recently delivered frames are let go (their snapshots stay):
            their repeats are found by :meth:`is_duplicate`.
    """

    def __init__(self, max_bytes: int = 8 * 1024 * 1024, max_raw_bytes: int = 64 * 1024) -> None:
        self._last: dict[Channel, Any] = {}
        self._sizes: dict[Channel, int] = {}
        self.max_bytes = max_bytes
        #: Bytes currently remembered.
        self.nbytes = 0
        # channel -> the frame that delivered its snapshot (issue 29: repeats
        # found by one bytes comparison, before any snapshot is built)
        self._raws: dict[Channel, bytes] = {}
        self.max_raw_bytes = max_raw_bytes
        self.raw_bytes = 0

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

    def repeats(self, channel: Channel, raw: bytes) -> bool:
        """True when ``raw`` is, byte for byte, the frame that delivered ``channel``'s
        last snapshot (kept by :meth:`delivered`).

        Exact: a snapshot is a function of the frame's bytes (the frame is
        decoded by a pure function of its bytes and the connection's fixed
        limits; a mirror that omits ``update._meta`` takes the ``_meta`` of the
        last mirror, which is then the one this frame gave), and equality of
        JSON values is reflexive (JSON has no NaN), so ``repeats`` implies
        :meth:`is_duplicate`. False says nothing: compare the snapshots.
        """
        return self._raws.get(channel) == raw

    def last(self, channel: Channel) -> Any:
        """The last snapshot delivered on ``channel``, or ``None``."""
        return self._last.get(channel)

    def delivered(
        self, channel: Channel, snapshot: Any, nbytes: int = 0, raw: bytes | None = None
    ) -> None:
        """Records ``snapshot`` as delivered on ``channel`` (``None`` resets it).

        Args:
            channel: the channel.
            snapshot: a decoded JSON value, or ``None``.
            nbytes: its size in bytes (the carrying message's length will do).
            raw: the frame that carried it, whose snapshot it is (for :meth:`repeats`).
        """
        self._forget(channel)
        if snapshot is None or nbytes > self.max_bytes:
            return
        self._last[channel] = snapshot
        self._sizes[channel] = nbytes
        self.nbytes += nbytes
        while self.nbytes > self.max_bytes:
            self._forget(next(iter(self._last)))
        if raw is not None and channel in self._last and len(raw) <= MAX_RAW_BYTES:
            raws = self._raws
            while raws and self.raw_bytes + len(raw) > self.max_raw_bytes:
                # the least recently delivered frame goes (its snapshot stays)
                self.raw_bytes -= len(raws.pop(next(iter(raws))))
            if self.raw_bytes + len(raw) <= self.max_raw_bytes:
                raws[channel] = raw
                self.raw_bytes += len(raw)

    def _forget(self, channel: Channel) -> None:
        if self._last.pop(channel, _UNCONFIRMED) is not _UNCONFIRMED:
            self.nbytes -= self._sizes.pop(channel)
            raw = self._raws.pop(channel, None)
            if raw is not None:
                self.raw_bytes -= len(raw)

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
