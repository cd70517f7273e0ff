"""The pass-through rule: which agent messages go out unchanged without a full parse.

docs/design.md section 2 (step 2, the fast path). One table, :data:`UPDATE_RULES`,
says which ``session/update`` kinds the engine must inspect and where in them
a session may be named; every path reads it: the fast-path predicates here
(:func:`uninspected` for a decoded body, :func:`envelope_uninspected` for a
run's :class:`~acp_proxy.core.wire.runs.Envelope`, :func:`chunk_uninspected`
and its bulk form :func:`chunk_static` for a run of content chunks), the hold buffer's search
for references (``AgentDirection.unknown_session``) and the session id checks
(``ProxyCore._bad_session_id``).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from operator import attrgetter
from typing import Any

import attrs
import msgspec

from acp_proxy.core.wire.guard import SNAKE_PARAMS_KEYS, SNAKE_UPDATE_KEYS, meta_misread
from acp_proxy.core.wire.runs import CHUNK_KINDS, ChunkEnvelope, Envelope, update_kind

__all__ = [
    "CANCEL_REQUEST",
    "NEEDS",
    "NEEDS_WITH_TOOLS",
    "REFERENCE_LISTS",
    "UPDATE_RULES",
    "UpdateRule",
    "chunk_static",
    "chunk_uninspected",
    "envelope_uninspected",
    "run_sessions",
    "uninspected",
]


@attrs.frozen
class UpdateRule:
    """How the engine treats one ``sessionUpdate`` kind.

    Attributes:
        always: inspected whatever it holds (the registry, dedup or the v1
            opt-in check act on it).
        ids: members of the update whose string value names a session.
        refs: ``(list member, item type)``: items of that type in that list may
            name a session by ``sessionId``; the update is inspected when it
            holds the list.
    """

    always: bool = False
    ids: tuple[str, ...] = ()
    refs: tuple[str, str] | None = None


#: sessionUpdate -> its rule; a kind not listed is forwarded without inspection
#: when its ``params.sessionId`` is known to the client (docs/protocol.md section 4).
UPDATE_RULES: dict[str, UpdateRule] = {
    "session_message": UpdateRule(always=True, ids=("senderSessionId", "recipientSessionId")),
    "subagent_update": UpdateRule(always=True, ids=("sessionId",)),
    "state_update": UpdateRule(always=True, refs=("background", "subagent")),
    "tool_call": UpdateRule(refs=("content", "session")),
    "tool_call_update": UpdateRule(refs=("content", "session")),
}

#: sessionUpdate -> (list member, item type) whose items may name a session.
REFERENCE_LISTS: dict[str, tuple[str, str]] = {
    su: rule.refs for su, rule in UPDATE_RULES.items() if rule.refs is not None
}
#: sessionUpdate -> None (always inspected) or the member whose presence makes it
#: inspected: the fast-path predicates' default table.
NEEDS: dict[str, str | None] = {
    su: None if rule.always else rule.refs[0] if rule.refs else None
    for su, rule in UPDATE_RULES.items()
}
#: :data:`NEEDS` while a permission rule governs ``session/request_permission``:
#: every ``tool_call`` / ``tool_call_update`` is inspected (the permission gate
#: remembers what it announces of the tool call); other updates are unaffected.
NEEDS_WITH_TOOLS: dict[str, str | None] = {**NEEDS, "tool_call": None, "tool_call_update": None}
#: Never on the fast path from the agent: it may name a request the hold buffer
#: keeps, and must then stay behind it (``AgentDirection.unknown_session``).
CANCEL_REQUEST = "$/cancel_request"
_NEVER: Any = object()
_NOT_IN_NOTIFICATIONS = frozenset({"id", "result", "error"})


def uninspected(body: Any, known: Collection[str], needs: dict[str, str | None] = NEEDS) -> bool:
    """True for an agent message the engine would forward unchanged.

    ``body`` is a decoded message read the same way by every parser (a
    canonical frame, or a non-ambiguous message's body). True for a JSON-RPC
    2.0 notification (string ``method``, no ``id`` / ``result`` / ``error``)
    whose ``params`` is absent, or an object without snake_case decision keys
    or a ``_meta`` naming a decision parameter (:func:`~acp_proxy.core.wire.guard.meta_misread`;
    ``field_meta``, vendor keys and metrics are content) that names a session in
    ``known`` (or none) and whose update
    :data:`UPDATE_RULES` does not mark for inspection (``needs``: :data:`NEEDS`,
    or :data:`NEEDS_WITH_TOOLS`). One call per message on the hot path.
    """
    if type(body) is not dict:
        return False
    try:  # subscripts, not .get: this runs once per forwarded message
        if body["jsonrpc"] != "2.0" or type(method := body["method"]) is not str:
            return False
    except KeyError:
        return False
    if not _NOT_IN_NOTIFICATIONS.isdisjoint(body):
        return False
    params = body.get("params")
    if params is None:
        return True
    if type(params) is not dict or not SNAKE_PARAMS_KEYS.isdisjoint(params):
        return False  # snake_case aliases: parse decides
    if "_meta" in params:
        meta = params["_meta"]
        if type(meta) is not dict or meta_misread(method, meta):
            return False  # a parameter the Python SDK reads from _meta: parse decides
    sid = params.get("sessionId")
    if type(sid) is str:
        if sid not in known:
            return False
    elif "sessionId" in params:
        return False  # not a string: refused (ProxyCore._bad_session_id)
    upd = params.get("update")
    if type(upd) is not dict:
        return method != CANCEL_REQUEST
    if not SNAKE_UPDATE_KEYS.isdisjoint(upd):
        return False
    if method != "session/update":
        return True
    su = upd.get("sessionUpdate")
    if type(su) is not str:
        return True
    need = needs.get(su, _NEVER)
    return need is _NEVER or (need is not None and need not in upd)


def envelope_uninspected(
    env: Envelope, known: Collection[str], needs: dict[str, str | None] = NEEDS
) -> bool:
    """:func:`uninspected` for an :class:`~acp_proxy.core.wire.runs.Envelope`.

    The envelope's type already rules out ``id`` / ``result`` / ``error``
    and a snake_case ``session_id`` in ``params`` (unknown keys refused);
    a ``params._meta`` naming a decision parameter
    (:func:`~acp_proxy.core.wire.guard.meta_misread`) is left to the full parse.
    """
    if env.jsonrpc != "2.0":
        return False
    params = env.params
    if params.sessionId not in known:
        return False
    upd = params.update
    if not SNAKE_UPDATE_KEYS.isdisjoint(upd):
        return False
    meta = params.meta
    if type(meta) is dict and meta_misread(env.method, meta):
        return False
    if env.method != "session/update":
        return True
    su = upd.get("sessionUpdate")
    if su is None:
        return True
    # the kind of a spelling met before, by its length, then its bytes (Raw ==
    # compares bytes): no copy, no hash of a new bytes object (issue 29)
    size = len(su)
    seen = _KIND_BY_SIZE.get(size)
    if seen is not None and seen[0] == su:
        kind = seen[1]
    else:
        kind = update_kind(su)
        if size <= _MAX_KIND_BYTES:  # at most one spelling per size: bounded
            _KIND_BY_SIZE[size] = (msgspec.Raw(bytes(su)), kind)
    need = needs.get(kind or "", _NEVER)
    return need is _NEVER or (need is not None and need not in upd)


#: raw ``sessionUpdate`` size -> the last spelling of that size met and its kind
#: (:func:`update_kind`): at most 64 spellings of at most 64 bytes, each its own copy.
_KIND_BY_SIZE: dict[int, tuple[msgspec.Raw, str | None]] = {}
_MAX_KIND_BYTES = 64


class _AnySession(Collection[str]):
    """Every session: the predicates' verdict on a message if its session is known."""

    def __contains__(self, item: object) -> bool:
        return True

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


_ANY_SESSION = _AnySession()
_sid = attrgetter("params.sessionId")


def run_sessions(envs: list[Envelope] | list[ChunkEnvelope]) -> list[str]:
    """The ``params.sessionId`` of each envelope, in order (one C pass)."""
    return list(map(_sid, envs))


def chunk_uninspected(
    env: ChunkEnvelope, known: Collection[str], needs: dict[str, str | None] = NEEDS
) -> bool:
    """:func:`uninspected` for a :data:`~acp_proxy.core.wire.runs.ChunkEnvelope`.

    Its type already rules out everything but the session and the kind:
    ``jsonrpc`` is ``"2.0"``, the method ``session/update``, there is no
    ``id`` / ``result`` / ``error``, no ``_meta`` and no snake_case key, and
    the update holds exactly ``sessionUpdate`` (one of
    :data:`~acp_proxy.core.wire.runs.CHUNK_KINDS`), ``content`` and perhaps
    ``messageId``.
    """
    if env.params.sessionId not in known:
        return False
    upd = env.params.update
    need = needs.get(upd.sessionUpdate, _NEVER)
    return need is _NEVER or (need is not None and getattr(upd, need, _UNSET) is _UNSET)


_UNSET: Any = msgspec.UNSET


def chunk_static(
    envs: list[ChunkEnvelope], needs: dict[str, str | None] = NEEDS
) -> list[bool] | None:
    """:func:`chunk_uninspected` of each envelope if its session were known.

    ``chunk_uninspected(envs[j], known, needs)`` is ``flags[j] and
    envs[j].params.sessionId in known`` for every ``known``, so the caller
    decides each line against the sessions known when its turn comes.

    Returns:
        ``None`` when every flag is True: at once for a ``needs`` table
        listing no chunk kind (:data:`NEEDS` and :data:`NEEDS_WITH_TOOLS`
        list none), where a chunk line depends on its session alone; else
        one flag per envelope.
    """
    if CHUNK_KINDS.isdisjoint(needs):
        return None
    return [chunk_uninspected(env, _ANY_SESSION, needs) for env in envs]
