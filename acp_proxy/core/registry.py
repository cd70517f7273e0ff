"""The shadow subagent registry (PROTOCOL.md sections 3 and 4).

Tracks which session ids the client can know, and the child-session tree
announced by ``subagent_update``: each child's parent, title, description,
capabilities, state, cwd, additional directories and ``_meta``, patched with
the protocol's semantics. A later update never changes a child's parent.
"""

from __future__ import annotations

import enum
from typing import Any

import attrs

from acp_proxy.core.patch import UNSET, apply_patch, merge_meta, meta_patch_is_noop
from acp_proxy.core.schema import SubagentUpdate

__all__ = ["Child", "Registry", "UpdateOutcome"]


@attrs.define
class Child:
    """One child session as last patched.

    Attributes:
        session_id: the child's id.
        parent_id: the immediate parent's id (never changes).
        announced_at: the core's clock (seconds) when the announcement was delivered.
        title, description, cwd: strings or ``None`` (unset).
        capabilities: the ``SubagentSessionCapabilities`` object, or ``None``
            (permits no client mutation).
        state: the last ``StateUpdate`` snapshot, or ``None`` (unconfirmed).
        additional_directories: list of paths, or ``None``.
        meta: ``_meta`` map, or ``None``.
    """

    session_id: str
    parent_id: str
    announced_at: float
    title: str | None = None
    description: str | None = None
    capabilities: dict[str, Any] | None = None
    state: dict[str, Any] | None = None
    cwd: str | None = None
    additional_directories: list[str] | None = None
    meta: dict[str, Any] | None = None

    def permits(self, capability: str) -> bool:
        """True when ``capabilities`` holds ``capability`` with an object value."""
        caps = self.capabilities
        return caps is not None and type(caps.get(capability)) is dict


class UpdateOutcome(enum.Enum):
    """What a ``subagent_update`` did to the registry."""

    ANNOUNCED = "announced"
    UPDATED = "updated"
    UNCHANGED = "unchanged"
    INVALID = "invalid"
    REFUSED = "refused"


class Registry:
    """Sessions the client knows, and the child tree.

    Sessions enter ``known`` by the rules of PROTOCOL.md section 3; the hold
    buffer asks :meth:`is_known` before delivering agent traffic.
    """

    def __init__(self, max_children: int = 10000) -> None:
        self.max_children = max_children
        self.known: set[str] = set()
        self.children: dict[str, Child] = {}
        # Known without being established as an ordinary session or a child:
        # held traffic released by hold.on_expire = "release". A later
        # announcement may still make such a session a child. Insertion
        # ordered; the oldest are forgotten beyond max_children.
        self.provisional: dict[str, None] = {}

    def is_known(self, session_id: str) -> bool:
        """True once the client could know ``session_id``."""
        return session_id in self.known

    def mark_known(self, session_id: str, *, provisional: bool = False) -> bool:
        """Marks ``session_id`` known; returns True if it was not known before.

        Args:
            session_id: the session id.
            provisional: True when the id is released to the client without
                having been established (hold timeout): it stays eligible
                for a later child announcement. False (``session/new``,
                ``session/fork``, ``session/load``, ``session/resume``) makes it
                an ordinary session.
        """
        if not provisional:
            self.provisional.pop(session_id, None)
        if session_id in self.known:
            return False
        self.known.add(session_id)
        if provisional:
            self.provisional[session_id] = None
            while len(self.provisional) > self.max_children:
                oldest = next(iter(self.provisional))
                del self.provisional[oldest]
                self.known.discard(oldest)  # its later traffic is held again
        return True

    def child(self, session_id: str) -> Child | None:
        """The child record for ``session_id``, or ``None`` for an ordinary session."""
        return self.children.get(session_id)

    def ancestors(self, session_id: str) -> list[str]:
        """Parent chain of ``session_id``, nearest first (empty for a root)."""
        chain: list[str] = []
        cur = self.children.get(session_id)
        while cur is not None and len(chain) <= len(self.children):
            chain.append(cur.parent_id)
            cur = self.children.get(cur.parent_id)
        return chain

    def would_change(self, view: SubagentUpdate) -> bool:
        """True when applying ``view`` (ignoring ``state``) changes a stored field.

        An update for an unknown child always counts as a change.
        """
        c = self.children.get(view.session_id)
        if c is None:
            return True
        for attr in ("title", "description", "capabilities", "cwd", "additional_directories"):
            patch = getattr(view, attr)
            if patch is not UNSET and patch != getattr(c, attr):
                return True
        return not meta_patch_is_noop(c.meta, view.meta)

    def apply(self, parent_id: str, view: SubagentUpdate, now: float) -> UpdateOutcome:
        """Applies a ``subagent_update`` delivered on ``parent_id``.

        The first update for an unknown child announces it under ``parent_id``;
        later ones patch its metadata (the parent is kept). An update that
        would make a session its own ancestor, or that names a session the
        client already knows as an ordinary session, is ``INVALID`` and changes
        nothing; an announcement beyond ``max_children`` is ``REFUSED``.

        Args:
            parent_id: ``params.sessionId`` of the carrying notification.
            view: the lenient view of ``params.update``.
            now: the core's clock, seconds.

        Returns:
            The :class:`UpdateOutcome`.
        """
        sid = view.session_id
        c = self.children.get(sid)
        if c is None:
            ordinary = sid in self.known and sid not in self.provisional
            if sid == parent_id or ordinary or sid in self.ancestors(parent_id):
                return UpdateOutcome.INVALID
            if len(self.children) >= self.max_children:
                return UpdateOutcome.REFUSED
            self.provisional.pop(sid, None)
            c = Child(session_id=sid, parent_id=parent_id, announced_at=now)
            self._patch(c, view)
            self.children[sid] = c
            self.known.add(sid)
            return UpdateOutcome.ANNOUNCED
        changed = self.would_change(view) or (view.state is not UNSET and view.state != c.state)
        self._patch(c, view)
        return UpdateOutcome.UPDATED if changed else UpdateOutcome.UNCHANGED

    @staticmethod
    def _patch(c: Child, view: SubagentUpdate) -> None:
        c.title = apply_patch(c.title, view.title)
        c.description = apply_patch(c.description, view.description)
        c.capabilities = apply_patch(c.capabilities, view.capabilities)
        c.state = apply_patch(c.state, view.state)
        c.cwd = apply_patch(c.cwd, view.cwd)
        c.additional_directories = apply_patch(
            c.additional_directories, view.additional_directories
        )
        c.meta = merge_meta(c.meta, view.meta)
