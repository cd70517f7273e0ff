"""The pass-through rule: which agent messages go out unchanged without a full parse.

docs/design.md section 2 (step 2, the fast path). One table, :data:`UPDATE_RULES`,
says which ``session/update`` kinds the engine must inspect and where in them
a session may be named; every path reads it: the fast-path predicates here
(:func:`uninspected` for a decoded body, :func:`envelope_uninspected` for a
run's :class:`~acp_proxy.core.wire.runs.Envelope`), the hold buffer's search
for references (``AgentDirection.unknown_session``) and the session id checks
(``ProxyCore._bad_session_id``).
"""

from __future__ import annotations

from collections.abc import Collection
from itertools import chain, compress
from operator import attrgetter, methodcaller
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
    "body_sessions",
    "chunk_inspected",
    "chunk_uninspected",
    "envelope_uninspected",
    "run_inspected",
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
    need = needs.get(update_kind(su) or "", _NEVER)
    return need is _NEVER or (need is not None and need not in upd)


_jsonrpc = attrgetter("jsonrpc")
_sid = attrgetter("params.sessionId")
_update = attrgetter("params.update")
_meta = attrgetter("params.meta")
_kind = methodcaller("get", "sessionUpdate", b"null")  # absent: as a kind that is no string
_NO_META = frozenset({msgspec.UnsetType, type(None)})
_V2 = frozenset({"2.0"})


def run_inspected(
    envs: list[Envelope],
    known: set[str] | frozenset[str],
    needs: dict[str, str | None] = NEEDS,
) -> list[int]:
    """The positions in ``envs`` of the envelopes :func:`envelope_uninspected` is False for.

    The same verdicts as calling it on each, in bulk: what every envelope of a
    run shares is checked once, in C (``jsonrpc`` is ``"2.0"``, every
    ``sessionId`` is in ``known``, no update holds a snake_case decision key,
    no ``_meta`` object), and each distinct ``sessionUpdate`` spelling is
    looked up once. When all of that holds, an envelope whose kind
    :data:`UPDATE_RULES` leaves alone passes whatever else it holds, so the
    predicate runs only on the envelopes of a listed kind; otherwise it runs
    on every envelope.

    Returns:
        Increasing positions; empty when the whole run may go out unchanged.
    """
    updates = list(map(_update, envs))
    if not (
        _V2.issuperset(map(_jsonrpc, envs))
        and known.issuperset(map(_sid, envs))
        and SNAKE_UPDATE_KEYS.isdisjoint(chain.from_iterable(updates))
        and _NO_META.issuperset(map(type, map(_meta, envs)))
    ):
        return [j for j, env in enumerate(envs) if not envelope_uninspected(env, known, needs)]
    kinds = list(map(bytes, map(_kind, updates)))
    listed = {k for k in set(kinds) if needs.get(update_kind(k) or "", _NEVER) is not _NEVER}
    if not listed:
        return []
    return [
        j
        for j in compress(range(len(envs)), map(listed.__contains__, kinds))
        if not envelope_uninspected(envs[j], known, needs)
    ]


def run_sessions(envs: list[Envelope]) -> set[str]:
    """The distinct ``params.sessionId`` of a run's envelopes."""
    return set(map(_sid, envs))


def body_sessions(bodies: list[Any]) -> set[str]:
    """The distinct string ``params.sessionId`` of decoded bodies (others are skipped)."""
    out: set[str] = set()
    for body in bodies:
        if type(body) is dict and type(params := body.get("params")) is dict:
            sid = params.get("sessionId")
            if type(sid) is str:
                out.add(sid)
    return out


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


def chunk_inspected(
    envs: list[ChunkEnvelope],
    known: set[str] | frozenset[str],
    needs: dict[str, str | None] = NEEDS,
) -> list[int]:
    """The positions in ``envs`` of the envelopes :func:`chunk_uninspected` is False for.

    With a ``needs`` table listing no chunk kind (:data:`NEEDS` and
    :data:`NEEDS_WITH_TOOLS` list none), a chunk envelope is inspected only
    for an unknown session: one C pass over the run's sessions decides it
    whole when all are known; otherwise each envelope is judged.
    """
    if known.issuperset(map(_sid, envs)) and CHUNK_KINDS.isdisjoint(needs):
        return []
    return [j for j, env in enumerate(envs) if not chunk_uninspected(env, known, needs)]
