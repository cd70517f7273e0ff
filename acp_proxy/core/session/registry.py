"""The shadow subagent registry (docs/protocol.md sections 3 and 4).

Tracks which session ids the client can know, and the child-session tree
announced by ``subagent_update``: each child's parent, title, description,
capabilities, state, cwd, additional directories and ``_meta``, patched with
the protocol's semantics. A later update never changes a child's parent.

Freshness boundary (section 4): a client ``session/load`` / ``session/resume``
of a session revokes the mutation grants of every descendant
(:attr:`Child.fresh` false) until the agent re-announces it, with
``capabilities``, after a successful response. Updates applied while an
ancestor is still being opened are history: registered, never granting.

Fail closed: an id whose announcement the proxy could not register (registry
full, a cycle) or whose parent was closed is kept in :attr:`Registry.denied`;
the policy refuses every mutation naming it.
"""

from __future__ import annotations

import enum
from typing import Any

import attrs

from acp_proxy.core.session.patch import UNSET, apply_patch, merge_meta, meta_patch_is_noop
from acp_proxy.core.session.schema import SubagentUpdate
from acp_proxy.core.session.size import footprint

__all__ = ["MAX_DEPTH", "Child", "Registry", "UpdateOutcome"]

#: Deepest nesting of children (a child of a child ... counts each level); an
#: announcement deeper than this is refused and its id denied (fail closed).
MAX_DEPTH = 64


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
        fresh: False while the child's grants are revoked by a load or
            resume of an ancestor (until its re-announcement after the
            response); a stale child permits no mutation.
        nbytes: bytes the tracked fields hold in memory (about; see
            :func:`~acp_proxy.core.session.size.footprint`).
        truncated: True once the tracked fields outgrew a byte bound and all
            but ``capabilities`` were dropped.
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
    fresh: bool = True
    nbytes: int = 0
    truncated: bool = False
    #: (the cap counted to, the tracked fields' values, each one's footprint)
    #: when last measured (:func:`_fields_bytes`): a field still holding the same
    #: object is not measured again (values are never changed in place, only replaced).
    measured: tuple[int, tuple[Any, ...], tuple[int, ...]] | None = attrs.field(
        default=None, repr=False, eq=False
    )

    def permits(self, capability: str) -> bool:
        """True when the child is fresh and ``capabilities`` holds ``capability``
        with an object value (``_meta`` never grants)."""
        caps = self.capabilities
        return (
            self.fresh
            and caps is not None
            and capability != "_meta"
            and type(caps.get(capability)) is dict
        )


class UpdateOutcome(enum.Enum):
    """What a ``subagent_update`` did to the registry."""

    ANNOUNCED = "announced"
    CONFLICT = "conflict"  # announced, but the id was known as an ordinary or provisional session
    UPDATED = "updated"
    UNCHANGED = "unchanged"
    INVALID = "invalid"
    REFUSED = "refused"


class Registry:
    """Sessions the client knows, and the child tree.

    Sessions enter ``known`` by the rules of docs/protocol.md section 3; the hold
    buffer asks :meth:`is_known` before delivering agent traffic.
    """

    def __init__(
        self,
        max_children: int = 10000,
        *,
        max_sessions: int = 4096,
        max_child_bytes: int = 256 * 1024,
        max_registry_bytes: int = 16 * 1024 * 1024,
    ) -> None:
        self.max_children = max_children
        self.max_sessions = max_sessions
        self.max_child_bytes = max_child_bytes
        self.max_registry_bytes = max_registry_bytes
        self.known: set[str] = set()
        self.children: dict[str, Child] = {}
        # Ordinary sessions in the order they became known; the oldest beyond
        # max_sessions are forgotten.
        self.ordinary: dict[str, None] = {}
        #: Bytes of tracked fields over all children.
        self.nbytes = 0
        #: True when the last :meth:`apply` truncated the child's fields.
        self.truncated_last = False
        #: True when the last :meth:`apply` ended a child's revocation (re-announced
        #: with capabilities after its ancestors' load / resume was answered).
        self.restored_last = False
        # Known without being established as an ordinary session or a child:
        # held traffic released by hold.on_expire = "release". A later
        # announcement may still make such a session a child. Insertion
        # ordered; the oldest are forgotten beyond max_children.
        self.provisional: dict[str, None] = {}
        # Sessions with a client session/load or session/resume in flight:
        # id -> [requests in flight, True if the first request made it known].
        self.opening: dict[str, list[Any]] = {}
        # Ids every mutation on which is refused: announcements that could not
        # be registered, children of closed sessions. Insertion ordered, at
        # most max_children; beyond that ``denied_overflow`` is set and every
        # id that is not an ordinary session is treated as denied.
        self.denied: dict[str, None] = {}
        self.denied_overflow = False

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
            if session_id not in self.children:
                self._remember_ordinary(session_id)
        if session_id in self.known:
            return False
        self.known.add(session_id)
        if provisional:
            self.provisional[session_id] = None
            while len(self.provisional) > self.max_children:
                oldest = next(iter(self.provisional))
                del self.provisional[oldest]
                self.known.discard(oldest)  # its later traffic is held again
                # never established, now forgotten: fail closed (a client
                # mutation naming it must not pass as on an unknown session)
                self.deny(oldest)
        return True

    def _remember_ordinary(self, session_id: str) -> None:
        ordinary = self.ordinary
        ordinary.pop(session_id, None)
        ordinary[session_id] = None
        while len(ordinary) > self.max_sessions:
            oldest = next(iter(ordinary))
            del ordinary[oldest]
            if oldest not in self.children and oldest not in self.opening:
                self.known.discard(oldest)  # its later traffic is held again

    def is_fresh(self, session_id: str) -> bool:
        """True when the child and every child above it are fresh (no ancestor's load or
        resume has revoked the grants of its subtree since it was last announced)."""
        c = self.children.get(session_id)
        for _ in range(MAX_DEPTH + 1):
            if c is None:
                return True
            if not c.fresh:
                return False
            c = self.children.get(c.parent_id)
        return False

    def is_ordinary(self, session_id: str) -> bool:
        """True for a session created, loaded or resumed (and answered) as ordinary."""
        return (
            session_id in self.known
            and session_id not in self.children
            and session_id not in self.provisional
            and session_id not in self.opening
        )

    def is_denied(self, session_id: str) -> bool:
        """True when mutations naming ``session_id`` must be refused as on an unknown child."""
        if session_id in self.denied:
            return True
        return self.denied_overflow and not self.is_ordinary(session_id)

    def deny(self, session_id: str) -> None:
        """Records ``session_id`` as a child the proxy cannot enforce precisely."""
        self.denied[session_id] = None
        if len(self.denied) > self.max_children:
            del self.denied[next(iter(self.denied))]
            self.denied_overflow = True

    def begin_open(self, session_id: str) -> bool:
        """A client ``session/load`` / ``session/resume`` of ``session_id`` is forwarded.

        The id becomes provisionally known (its replay flows) and every
        descendant loses its grants (:attr:`Child.fresh`).

        Returns:
            True if the id was not known before (held traffic may be released).
        """
        for cid in self.descendants(session_id):
            self.children[cid].fresh = False
        entry = self.opening.get(session_id)
        newly = session_id not in self.known
        if entry is None:
            self.opening[session_id] = [1, newly]
        else:
            entry[0] += 1
        self.known.add(session_id)
        self.denied.pop(session_id, None)
        return newly

    def end_open(self, session_id: str, ok: bool) -> None:
        """The agent answered a ``session/load`` / ``session/resume`` of ``session_id``.

        Success makes it an ordinary session (unless it was announced as a
        child meanwhile); an error answer forgets an id the request made known.
        Revoked grants stay revoked either way, until re-announcement.
        """
        entry = self.opening.get(session_id)
        if entry is None:
            return
        entry[0] -= 1
        if ok:
            self.provisional.pop(session_id, None)
            entry[1] = False  # established: an error to another request forgets nothing
            if session_id not in self.children:
                self._remember_ordinary(session_id)
        if entry[0] > 0:
            return
        del self.opening[session_id]
        if entry[1] and session_id not in self.children:
            self.known.discard(session_id)

    def in_history(self, session_id: str) -> bool:
        """True when ``session_id`` or an ancestor is being opened or is a stale child:
        announcements under it are replayed history and grant nothing."""
        for sid in [session_id, *self.ancestors(session_id)]:
            if sid in self.opening:
                return True
            c = self.children.get(sid)
            if c is not None and not c.fresh:
                return True
        return False

    def descendants(self, session_id: str) -> list[str]:
        """Every child below ``session_id``, parents before their children."""
        below: dict[str, list[str]] = {}
        for c in self.children.values():
            below.setdefault(c.parent_id, []).append(c.session_id)
        out: list[str] = []
        todo = list(below.get(session_id, ()))
        seen = {session_id}
        while todo:
            cid = todo.pop()
            if cid in seen:
                continue
            seen.add(cid)
            out.append(cid)
            todo.extend(below.get(cid, ()))
        return out

    def retire_descendants(self, session_id: str) -> list[str]:
        """``session_id`` was closed: its descendants leave the registry and are denied.

        Returns:
            The ids removed.
        """
        gone = self.descendants(session_id)
        for cid in gone:
            self.nbytes -= self.children.pop(cid).nbytes
            self.known.discard(cid)
            self.deny(cid)
        return gone

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

    def apply(
        self,
        parent_id: str,
        view: SubagentUpdate,
        now: float,
        would_change: bool | None = None,
    ) -> UpdateOutcome:
        """Applies a ``subagent_update`` delivered on ``parent_id``.

        The first update for an unknown child announces it under ``parent_id``;
        later ones patch its metadata (the parent is kept). An announcement of
        an id known as an ordinary, provisional or opening session registers it
        as a child all the same (``CONFLICT``: when in doubt, enforce). An
        update that would make a session its own ancestor is ``INVALID`` and
        changes nothing; an announcement beyond ``max_children`` is
        ``REFUSED``. The caller denies the id in both cases.

        Under an ancestor being opened (or a stale one) the update is history:
        a new child starts stale, and a stale child stays stale. Otherwise an
        update that carries ``capabilities`` makes the child fresh again.

        Args:
            parent_id: ``params.sessionId`` of the carrying notification.
            view: the lenient view of ``params.update``.
            now: the core's clock, seconds.
            would_change: :meth:`would_change` of ``view``, when the caller has
                just asked it (``None``: asked here).

        Returns:
            The :class:`UpdateOutcome`.
        """
        sid = view.session_id
        c = self.children.get(sid)
        self.truncated_last = False
        self.restored_last = False
        history = self.in_history(parent_id if c is None else c.parent_id)
        if c is None:
            if sid == parent_id or sid in self.ancestors(parent_id):
                return UpdateOutcome.INVALID
            if len(self.children) >= self.max_children:
                return UpdateOutcome.REFUSED
            if len(self.ancestors(parent_id)) >= MAX_DEPTH - 1:
                return UpdateOutcome.REFUSED  # chains stay short: walks up them stay cheap
            c = Child(session_id=sid, parent_id=parent_id, announced_at=now, fresh=not history)
            self._patch(c, view)
            size = min(_fields_bytes(c, self.max_child_bytes), self.max_child_bytes)
            if self.nbytes + size > self.max_registry_bytes:
                return UpdateOutcome.REFUSED
            self._account(c)
            conflict = sid in self.known
            self.provisional.pop(sid, None)
            self.denied.pop(sid, None)
            self.ordinary.pop(sid, None)
            self.children[sid] = c
            self.known.add(sid)
            return UpdateOutcome.CONFLICT if conflict else UpdateOutcome.ANNOUNCED
        if would_change is None:
            would_change = self.would_change(view)
        changed = would_change or (view.state is not UNSET and view.state != c.state)
        self._patch(c, view)
        self._account(c)
        if not history and view.capabilities is not UNSET and not c.fresh:
            c.fresh = True
            changed = True
            self.restored_last = True
        return UpdateOutcome.UPDATED if changed else UpdateOutcome.UNCHANGED

    def _account(self, c: Child) -> None:
        """Keeps ``c`` within ``max_child_bytes`` and the registry within
        ``max_registry_bytes`` (fail closed: capabilities go last, and with them
        every grant)."""
        old = c.nbytes
        size = _fields_bytes(c, self.max_child_bytes)
        if size > self.max_child_bytes or self.nbytes - old + size > self.max_registry_bytes:
            c.title = c.description = c.cwd = None
            c.state = c.meta = c.additional_directories = None
            c.truncated = True
            self.truncated_last = True
            size = _fields_bytes(c, self.max_child_bytes)
            if size > self.max_child_bytes or self.nbytes - old + size > self.max_registry_bytes:
                c.capabilities = None
                c.measured = None  # holds nothing the child no longer does
                size = 0
        self.nbytes += size - old
        c.nbytes = size

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


def _fields_bytes(c: Child, cap: int) -> int:
    """Bytes ``c``'s tracked fields hold in memory (:func:`footprint`; counting stops
    past ``cap``: the result is exact up to ``cap``, else some number above it).

    Incremental (issue 29): each field's footprint (counted up to ``cap``) is
    kept in :attr:`Child.measured`, and a field that holds the same object as
    when it was measured is not walked again. Exact, because the registry
    replaces a field's value and never changes one in place: the same object
    has the same footprint. The sum of the fields' footprints is exact when it
    is at most ``cap``, and above ``cap`` when it is not (a footprint counted up
    to ``cap`` is exact or above ``cap``), as the one walk over all fields gives.
    """
    values = (
        c.title,
        c.description,
        c.capabilities,
        c.state,
        c.cwd,
        c.additional_directories,
        c.meta,
    )
    last = c.measured
    if last is not None and last[0] != cap:
        last = None
    sizes = [0] * len(values)
    n = 0
    for i, value in enumerate(values):
        if value is None:
            continue
        size = last[2][i] if last is not None and last[1][i] is value else footprint(value, cap)
        sizes[i] = size
        n += size
    c.measured = (cap, values, tuple(sizes))
    return n
