"""Hold buffer for agent traffic on sessions the client cannot know yet.

docs/design.md section 3, "Hold buffer". Messages are held per session id in
arrival order. Bounds: ``max_messages_per_session``, ``max_bytes`` over all
held messages, ``max_sessions`` held at once, and ``timeout_seconds`` per
held session counted from its first held message. Only the raw bytes are
kept while held; messages are parsed again on release. The buffer only
stores and evicts; the engine decides what release or drop means.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

import attrs

from acp_proxy.config import HoldConfig
from acp_proxy.config.records import FrozenRecord, Record
from acp_proxy.core.wire.jsonrpc import Message, parse
from acp_proxy.core.wire.views import VIEW_KEY

__all__ = ["Evicted", "HoldBuffer", "announced_child"]


@attrs.define(eq=False, repr=False)
class _Held(Record):
    first_at: float
    # (raw frame, child id it announces or None); only bytes are kept, the
    # parsed form is rebuilt on release (held traffic is cold, memory is not)
    entries: deque[tuple[bytes | Message, str | None]] = attrs.field(factory=deque)
    nbytes: int = 0


@attrs.frozen(eq=False, repr=False)
class Evicted(FrozenRecord):
    """A held session taken out of the buffer before it became known.

    Attributes:
        session_id: the held session id.
        messages: its held messages, in arrival order.
        reason: ``"timeout"``, ``"max_messages_per_session"``, ``"max_bytes"``,
            ``"max_sessions"`` or the caller's reason (``"agent_exited"``).
    """

    session_id: str
    messages: list[Message]
    reason: str


def announced_child(msg: Message) -> str | None:
    """The child id a ``subagent_update`` notification names, else ``None``."""
    if msg.method != "session/update" or msg.params is None:
        return None
    upd = msg.params.get("update")
    if type(upd) is dict and upd.get("sessionUpdate") == "subagent_update":
        cid = upd.get("sessionId")
        if type(cid) is str:
            return cid
    return None


class HoldBuffer:
    """Per-session FIFO queues with global bounds.

    Args:
        config: the ``[hold]`` settings.
        parser: parses a held frame again on release (the core's own
            :func:`~acp_proxy.core.wire.jsonrpc.parse` settings). A message read
            through a view (a large frame) is kept as it is instead: its
            verdict must not depend on where it is parsed again.
    """

    def __init__(self, config: HoldConfig, parser: Callable[[bytes], Message] = parse) -> None:
        self.config = config
        self._parse = parser
        # Insertion order = order of first hold; with a fixed timeout the
        # first entry always has the earliest deadline.
        self._held: dict[str, _Held] = {}
        self.total_bytes = 0
        self.total_messages = 0
        self._announcing: dict[str, int] = {}  # child id -> held announcements naming it

    def __contains__(self, session_id: str) -> bool:
        return session_id in self._held

    def __len__(self) -> int:
        return len(self._held)

    def hold(self, session_id: str, msg: Message, now: float) -> list[Evicted]:
        """Holds ``msg`` under ``session_id``.

        Args:
            session_id: the unknown session the message bears.
            msg: the message (its ``raw`` length counts against ``max_bytes``).
            now: the core's clock, seconds.

        Returns:
            Sessions evicted to respect the bounds (possibly ``session_id``
            itself, then including ``msg`` as its last message).
        """
        cfg = self.config
        size = len(msg.raw)
        evicted: list[Evicted] = []
        h = self._held.get(session_id)
        if h is not None and len(h.entries) >= cfg.max_messages_per_session:
            ev = self._evict(session_id, "max_messages_per_session")
            ev.messages.append(msg)
            return [ev]
        if size > cfg.max_bytes:
            if h is not None:
                ev = self._evict(session_id, "max_bytes")
                ev.messages.append(msg)
                return [ev]
            return [Evicted(session_id, [msg], "max_bytes")]
        while self.total_bytes + size > cfg.max_bytes and self._held:
            oldest = next(iter(self._held))
            evicted.append(self._evict(oldest, "max_bytes"))
        if session_id not in self._held:
            while len(self._held) >= cfg.max_sessions:
                evicted.append(self._evict(next(iter(self._held)), "max_sessions"))
            h = self._held[session_id] = _Held(first_at=now)
        else:
            h = self._held[session_id]
        child = announced_child(msg)
        if child is not None:
            self._announcing[child] = self._announcing.get(child, 0) + 1
        h.entries.append((msg if VIEW_KEY in (msg.body or ()) else msg.raw, child))
        h.nbytes += size
        self.total_bytes += size
        self.total_messages += 1
        return evicted

    def announces(self, session_id: str) -> bool:
        """True when a held ``subagent_update`` names ``session_id`` as its child."""
        return session_id in self._announcing

    def take(self, session_id: str) -> list[Message]:
        """Removes and returns the messages held for ``session_id`` (in order)."""
        h = self._held.pop(session_id, None)
        if h is None:
            return []
        self.total_bytes -= h.nbytes
        self.total_messages -= len(h.entries)
        out: list[Message] = []
        announcing = self._announcing
        for raw, child in h.entries:
            if child is not None:
                left = announcing[child] - 1
                if left:
                    announcing[child] = left
                else:
                    del announcing[child]
            out.append(raw if isinstance(raw, Message) else self._parse(raw))
        return out

    def next_deadline(self) -> float | None:
        """The earliest expiry time (seconds on the core's clock), or ``None``."""
        for h in self._held.values():
            return h.first_at + self.config.timeout_seconds
        return None

    def expire(self, now: float) -> list[Evicted]:
        """Evicts every session whose timeout has passed at ``now``."""
        out: list[Evicted] = []
        timeout = self.config.timeout_seconds
        while self._held:
            sid, h = next(iter(self._held.items()))
            if h.first_at + timeout > now:
                break
            out.append(self._evict(sid, "timeout"))
        return out

    def evict_all(self, reason: str) -> list[Evicted]:
        """Evicts everything (used when the agent has exited)."""
        return [self._evict(sid, reason) for sid in list(self._held)]

    def _evict(self, session_id: str, reason: str) -> Evicted:
        return Evicted(session_id, self.take(session_id), reason)

    def held_frames(self) -> list[bytes]:
        """The raw frames held now, every session in order (for the tracer; not the hot path)."""
        return [
            raw.raw if isinstance(raw, Message) else raw
            for h in self._held.values()
            for raw, _child in h.entries
        ]
