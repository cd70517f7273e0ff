"""Duplicate state report removal (PROTOCOL.md section 4, "State reports and duplicates").

Per channel, the last state snapshot delivered to the client. Channels: a
session's own ``state_update`` stream (``("self", sessionId)``), and each
child's state mirrored on its parent's ``subagent_update``
(``("mirror", childId)``). A report equal (as a JSON value) to the last one
delivered on its channel is a duplicate. ``None`` (activity unconfirmed)
never is, and nothing after it is a duplicate of what came before it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["StateDedup"]

Channel = tuple[str, str]

_UNCONFIRMED = object()


class StateDedup:
    """Last-delivered snapshot per channel."""

    def __init__(self) -> None:
        self._last: dict[Channel, Any] = {}

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

    def delivered(self, channel: Channel, snapshot: Any) -> None:
        """Records ``snapshot`` as delivered on ``channel`` (``None`` resets it)."""
        if snapshot is None:
            self._last.pop(channel, None)
        else:
            self._last[channel] = snapshot

    def reset_session(self, session_id: str, child_ids: list[str]) -> None:
        """Forgets ``session_id``'s own channel and the mirrors it carries."""
        self._last.pop(("self", session_id), None)
        for cid in child_ids:
            self._last.pop(("mirror", cid), None)

    def __len__(self) -> int:
        return len(self._last)


def _json_equal(a: Any, b: Any) -> bool:
    """Equality of JSON values: ``1`` != ``true``, ``1`` == ``1.0``, key order ignored."""
    ta, tb = type(a), type(b)
    if ta is bool or tb is bool:
        return ta is tb and a == b
    if ta is dict:
        return (
            tb is dict and a.keys() == b.keys() and all(_json_equal(v, b[k]) for k, v in a.items())
        )
    if ta is list:
        return tb is list and len(a) == len(b) and all(map(_json_equal, a, b))
    if (ta is int or ta is float) and (tb is int or tb is float):
        return bool(a == b)
    return ta is tb and bool(a == b)
