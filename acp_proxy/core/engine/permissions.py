"""The permission gate: the ``[permissions]`` policy applied to agent requests (issue 19).

docs/design.md section 2. The rules and their matching are
:mod:`~acp_proxy.core.session.permissions`; this part keeps what one connection
needs to apply them:

- the **policy** (:attr:`PermissionGate.policy`, built from the config in one
  place, :meth:`PermissionGate.configure`, so a reload replaces it; nothing
  per session lives in it);
- the **workspaces** the client gave (``session/new`` / ``session/fork`` on a
  successful answer, keyed by the result's ``sessionId``; ``session/load`` /
  ``session/resume`` at request time, forgotten on an error answer or a close),
  bounded like the registry's ordinary sessions (``limits.max_sessions``) and
  in bytes (``limits.max_workspace_bytes``: a request whose workspace would go
  beyond it is refused under its id);
- the ids of agent requests **the proxy answered** (so a later
  ``$/cancel_request`` for one is dropped, not forwarded);
- the **ask timers** of forwarded requests with ``ask_timeout_seconds``, and
  the requests whose timer fired (answered ``cancelled`` to the agent, still in
  flight toward the client until its late answer comes and is dropped).

A governed agent request is decided when it is *delivered*: right away for a
session the client knows, or when it is released from the hold buffer (so a
request held for a session not yet announced is decided with that session's
workspace and place in the child tree known). Agent notifications never reach
the gate.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from acp_proxy.config import Config
from acp_proxy.core.actions import Action, AuditEvent, Peer, Send
from acp_proxy.core.session.permissions import (
    TOOL_FIELDS,
    Decision,
    Policy,
    Workspace,
    answer_frame,
    cancelled_frame,
    session_context,
    workspace_from_params,
)
from acp_proxy.core.session.places import OwnFiles
from acp_proxy.core.session.sdk_reading import PathResolver
from acp_proxy.core.session.size import footprint
from acp_proxy.core.wire.guard import governed_misread
from acp_proxy.core.wire.jsonrpc import INVALID_REQUEST, Message, dumps
from acp_proxy.core.wire.jsonscan import bounded_members
from acp_proxy.core.wire.passthrough import CANCEL_REQUEST
from acp_proxy.core.wire.views import OPAQUE, VIEW_KEY

if TYPE_CHECKING:
    from acp_proxy.core.engine.context import EngineContext

_V = TypeVar("_V")

__all__ = ["PermissionGate"]

_CLIENT = Peer.CLIENT
_AGENT = Peer.AGENT

#: Client requests whose successful answer creates a session (workspace from params).
CREATES_SESSION = frozenset({"session/new", "session/fork"})
#: Client requests that open a known session id (workspace recorded at request time).
OPENS_SESSION = frozenset({"session/load", "session/resume"})
_REQUEST_PERMISSION = "session/request_permission"
#: Most tool calls remembered per session (oldest forgotten first).
MAX_TOOL_CALLS = 1024
#: Largest remembered tool call field (estimated memory); a larger one is
#: remembered as too large to read (a request naming that call is never auto-allowed).
MAX_TOOL_FIELD_BYTES = 16 * 1024


class PermissionGate:
    """Applies the permission policy to one connection's agent requests.

    Args:
        ctx: the engine context: its subagent registry (read: children, parents),
            its ledger (outcomes, counters and requests in flight), what
            ``initialize`` negotiated (the request shape to read), and its
            configuration (:meth:`configure`, followed on a reload).

    Attributes:
        policy: the compiled ``[permissions]`` section.
        workspaces: session id -> the workspace the client gave it.
        answered: agent request id -> the rule that answered it (oldest first).
        expired: agent request id -> the rule whose ``ask_timeout_seconds`` ran out
            (still in flight toward the client).
    """

    def __init__(self, ctx: EngineContext) -> None:
        self.registry = ctx.registry
        self.ledger = ledger = ctx.ledger
        self.inflight = ledger.inflight
        self.negotiated = ctx.negotiated
        self.workspaces: dict[str, Workspace] = {}
        self._creating: dict[Any, Workspace] = {}  # client request id -> workspace
        # estimated bytes of each kept workspace (by session id, by creating request id)
        self._workspace_sizes: dict[str, int] = {}
        self._creating_sizes: dict[Any, int] = {}
        #: bytes of every workspace kept or being created (``limits.max_workspace_bytes``)
        self.workspace_bytes = 0
        self.answered: dict[Any, str] = {}
        self.expired: dict[Any, str] = {}
        # agent request id -> (method, session, rule) forwarded for the client to
        # decide: its answer is audited (permission_answered); oldest first
        self.asked: dict[Any, tuple[str, Any, str | None]] = {}
        self._timers: dict[Any, tuple[float, str]] = {}  # id -> (deadline, rule)
        self._heap: list[tuple[float, int, Any]] = []  # (deadline, seq, id); lazy deletion
        self._seq = 0
        # session id -> toolCallId -> (announced fields, estimated bytes); oldest first
        self.tools: dict[str, dict[str, tuple[dict[str, Any], int]]] = {}
        self._tool_bytes: dict[str, int] = {}
        self._tool_total = 0
        #: resolves a path on the proxy's filesystem (:meth:`use_filesystem`); None: lexical only
        self.resolve: PathResolver | None = None
        #: the proxy's own files, refused to every governed request
        self.own = OwnFiles()
        ctx.follow(self)

    def use_filesystem(self, resolve: PathResolver | None, own: OwnFiles) -> None:
        """The shell shares the client's filesystem: resolve paths there, and keep
        the proxy's own files out of reach (issue 31; :mod:`~acp_proxy.core.session.places`).

        Args:
            resolve: resolves an absolute path (``..``, symbolic links of its
                longest existing prefix); ``None`` reads paths lexically only.
            own: the proxy's own files (config, watched directory, audit log,
                trace, log file, token and key files); refused even without rules.
        """
        self.resolve = resolve
        self.own = own

    def configure(self, config: Config) -> None:
        """Builds the policy from ``config`` (also on a reload: per-connection state stays)."""
        self.policy = Policy(config.permissions)
        self.observe = config.policy.mode == "observe"
        self.include_content = config.audit.include_content
        self._max_sessions = config.limits.max_sessions
        self._max_workspace_bytes = config.limits.max_workspace_bytes
        self._max_remembered = config.limits.max_pending_requests
        self._max_session_tool_bytes = config.limits.max_child_bytes
        self._max_tool_bytes = config.limits.max_registry_bytes
        #: True while some rule governs session/request_permission: the agent's
        #: tool_call / tool_call_update announcements are then remembered.
        self.remembers_tools = (
            self.policy.active and self.policy.has_rules(_REQUEST_PERMISSION)
        ) or config.budgets.repeat_limit > 0  # a repeated call is known by these fields too
        if not self.remembers_tools:
            self.tools.clear()
            self._tool_bytes.clear()
            self._tool_total = 0

    # ------------------------------------------------------------ workspaces

    def client_request(self, m: Message, sid: str | None) -> str | None:
        """A client request on its way to the agent: remembers the workspace it gives.

        Returns:
            Why it is refused (its workspace would take the kept workspaces over
            ``limits.max_workspace_bytes``), or ``None``: forward it.
        """
        method = m.method
        creates = method in CREATES_SESSION
        if not creates and (method not in OPENS_SESSION or sid is None):
            return None
        workspace = workspace_from_params(m.params)
        cap = self._max_workspace_bytes
        size = footprint([workspace.cwd, *workspace.additional_directories], cap + 1)
        replaced = 0 if creates or sid is None else self._workspace_sizes.get(sid, 0)
        if self.workspace_bytes - replaced + size > cap:
            return (
                f"its workspace (cwd and additionalDirectories, about {size} bytes) would "
                f"take the kept workspaces over limits.max_workspace_bytes ({cap})"
            )
        if creates:
            self._creating[m.id] = workspace
            self._creating_sizes[m.id] = size
            self.workspace_bytes += size
        elif sid is not None:
            self._remember(sid, workspace, size)
        return None

    def agent_answered(self, rid: Any, method: str, sid: Any, result: Any, ok: bool) -> None:
        """The agent answered client request ``rid`` (``method``, on session ``sid``)."""
        if method in CREATES_SESSION:
            workspace = self._creating.pop(rid, None)
            size = self._creating_sizes.pop(rid, 0)
            self.workspace_bytes -= size
            new = result.get("sessionId") if ok and isinstance(result, dict) else None
            if workspace is not None and type(new) is str:
                self._remember(new, workspace, size)
        elif type(sid) is str and (
            (method in OPENS_SESSION and not ok) or (method == "session/close" and ok)
        ):
            self._forget_workspace(sid)
            self._forget_tools(sid)

    def _remember(self, sid: str, workspace: Workspace, size: int) -> None:
        spaces = self.workspaces
        self._forget_workspace(sid)
        spaces[sid] = workspace
        self._workspace_sizes[sid] = size
        self.workspace_bytes += size
        while len(spaces) > self._max_sessions:
            self._forget_workspace(next(iter(spaces)))

    def _forget_workspace(self, sid: str) -> None:
        if self.workspaces.pop(sid, None) is not None:
            self.workspace_bytes -= self._workspace_sizes.pop(sid, 0)

    # -------------------------------------------------------------- deciding

    def governs(self, method: str | None) -> bool:
        """True when the policy has rules and one could govern ``method``."""
        policy = self.policy
        return (policy.active or bool(self.own)) and policy.governs(method)

    def decide(self, m: Message, now: float, out: list[Action]) -> bool:
        """Decides agent request ``m`` (in flight toward the client, one :meth:`governs`).

        The fields the rules read are read even from a frame over
        ``limits.dense_message_bytes`` (whose view holds only routing keys):
        each member up to 64 KiB is decoded, a larger one stands in as too
        large to read and the decision fails closed. A request an SDK could
        read otherwise (``params._meta`` naming a field, a snake_case alias)
        is refused.

        Returns:
            True when the proxy answered it (an option, or a refusal): it is no
            longer in flight and must not be forwarded. False: forward it (an ask
            timer is started when its rule says so).
        """
        decision = self._decision(m)
        observed = self.observe and not decision.forced and decision.rule is not None
        self._audit_decision(m, decision, observed, out)
        if observed:  # policy.mode = "observe": decided and audited, then forwarded
            return False
        return _DISPOSITIONS[decision.disposition](self, m, decision, now, out)

    def _decision(self, m: Message) -> Decision:
        """The policy's decision on ``m``; a request an SDK could read otherwise is refused."""
        sid = m.session_id
        method = m.method
        assert method is not None
        params: Any = m.params
        if params is not None and VIEW_KEY in params:
            params = bounded_members(params[VIEW_KEY]) or {}
        why = governed_misread(method, params) if params is not None else None
        if why is not None:
            return Decision(
                method,
                "deny",
                error_code=INVALID_REQUEST,
                reason=f"ambiguous message: {why}",
                forced=True,
            )
        context = session_context(sid if type(sid) is str else None, self.registry, self.workspaces)
        return self.policy.decide(
            context,
            method,
            params,
            tools=self._tools_named(sid, params),
            resolve=self.resolve,
            own=self.own,
        )

    def _audit_decision(
        self, m: Message, decision: Decision, observed: bool, out: list[Action]
    ) -> None:
        """Audits ``decision`` (if it has an event); an observed one says whether it
        would have blocked, and counts it."""
        event = decision.audit_event
        if event is None:
            return
        fields = decision.audit_fields(m.session_id, include_content=self.include_content)
        if observed:
            blocks = decision.disposition == "refuse" or decision.action == "deny"
            fields["would_block"] = blocks
            fields["observed"] = True
            if blocks and decision.rule is not None:
                wb = self.ledger.would_block
                wb[decision.rule] = wb.get(decision.rule, 0) + 1
        self.ledger.audit(out, event, _AGENT, id=m.id, **fields)

    # --- carrying a decision out, by its disposition (_DISPOSITIONS); True: the
    # proxy answered the request (no longer in flight, not forwarded)

    def _forwarded(self, m: Message, decision: Decision, now: float, out: list[Action]) -> bool:
        """Forwarded for the client to decide: an ask is remembered (its answer is
        audited), its rule's ask timer started."""
        rid: Any = m.id
        if decision.action == "ask":
            assert m.method is not None
            _remember_bounded(
                self.asked, rid, (m.method, m.session_id, decision.rule), self._max_remembered
            )
        timeout = decision.ask_timeout_seconds
        if timeout is not None and decision.rule is not None:
            self._start_timer(rid, now + timeout, decision.rule)
        return False

    def _answered_here(self, m: Message, decision: Decision, now: float, out: list[Action]) -> bool:
        """Answered with an option: remembered (a later ``$/cancel_request`` is dropped)."""
        self.inflight.pop(_AGENT, m.id)
        _remember_bounded(self.answered, m.id, decision.rule or "", self._max_remembered)
        return self._reply(m, decision, out)

    def _refused_here(self, m: Message, decision: Decision, now: float, out: list[Action]) -> bool:
        """Refused with a JSON-RPC error."""
        self.inflight.pop(_AGENT, m.id)
        return self._reply(m, decision, out)

    def _reply(self, m: Message, decision: Decision, out: list[Action]) -> bool:
        if self.inflight.gone[_AGENT] is None:
            rid: Any = m.id
            self.ledger.reply(out, _AGENT, answer_frame(rid, decision))
        else:
            self.ledger.n.dropped += 1  # decided, but nobody is left to answer
        return True

    # ------------------------------------------------------------ tool calls

    def _tools_named(self, sid: Any, params: Any) -> dict[str, dict[str, Any]] | None:
        """What the agent announced of the tool calls a request_permission names."""
        known = self.tools.get(sid) if type(sid) is str else None
        if not known or type(params) is not dict:
            return None
        calls = [params.get("toolCall")]
        subject = params.get("subject")
        if type(subject) is dict:
            calls.append(subject.get("toolCall"))
        found: dict[str, dict[str, Any]] = {}
        for call in calls:
            tcid = call.get("toolCallId") if type(call) is dict else None
            if isinstance(tcid, str) and tcid in known:
                found[tcid] = known[tcid][0]
        return found

    def remember_tool(self, sid: Any, update: dict[str, Any]) -> None:
        """Remembers what a ``tool_call`` / ``tool_call_update`` announces of a tool call.

        Its ``kind``, ``title``, ``name`` and ``rawInput`` (non-null ones; later
        announcements win), under its ``toolCallId``: a v1 client merges a
        request_permission's tool call with them, so the rules do too. Bounded
        per session (:data:`MAX_TOOL_CALLS`, ``limits.max_child_bytes``) and in
        all (``limits.max_registry_bytes``), oldest forgotten first; a field
        over :data:`MAX_TOOL_FIELD_BYTES` is remembered as too large to read.
        """
        if type(sid) is not str:
            return
        if VIEW_KEY in update:  # a large frame: only the routing keys were decoded
            update = bounded_members(update[VIEW_KEY], 1) or {}
        tcid = update.get("toolCallId")
        if type(tcid) is not str:
            return
        fields = {k: update[k] for k in TOOL_FIELDS if update.get(k) is not None}
        if not fields:
            return
        for key, value in fields.items():
            if footprint(value, MAX_TOOL_FIELD_BYTES) > MAX_TOOL_FIELD_BYTES:
                fields[key] = OPAQUE
        known = self.tools.setdefault(sid, {})
        old = known.get(tcid)
        record = {**old[0], **fields} if old is not None else fields
        size = footprint(record, self._max_session_tool_bytes) + len(tcid) + 64
        self._forget_tool(sid, tcid)
        if size > self._max_session_tool_bytes:
            return
        known = self.tools.setdefault(sid, {})
        known[tcid] = (record, size)
        self._tool_bytes[sid] = self._tool_bytes.get(sid, 0) + size
        self._tool_total += size
        while len(known) > MAX_TOOL_CALLS or self._tool_bytes[sid] > self._max_session_tool_bytes:
            self._forget_tool(sid, next(iter(known)))
        while self._tool_total > self._max_tool_bytes and self.tools:
            oldest = next(iter(self.tools))
            self._forget_tool(oldest, next(iter(self.tools[oldest])))

    def _forget_tool(self, sid: str, tcid: str) -> None:
        known = self.tools.get(sid)
        entry = known.pop(tcid, None) if known is not None else None
        if entry is not None:
            self._tool_bytes[sid] -= entry[1]
            self._tool_total -= entry[1]
        if known is not None and not known:
            del self.tools[sid]
            self._tool_bytes.pop(sid, None)

    def _forget_tools(self, sid: str) -> None:
        self._tool_total -= self._tool_bytes.pop(sid, 0)
        self.tools.pop(sid, None)

    def new_request(self, rid: Any) -> None:
        """The agent sent a new request with id ``rid``: an earlier answered one is history."""
        self.answered.pop(rid, None)

    def cancel_for_answered(self, m: Message, out: list[Action]) -> bool:
        """Drops (audited) an agent ``$/cancel_request`` naming a request the proxy answered.

        Returns:
            True when dropped; False when it names anything else (forward it).
        """
        p = m.params
        rid = p.get("requestId") if p is not None else None
        if (type(rid) is not str and type(rid) is not int) or rid not in self.answered:
            return False
        rule = self.answered.pop(rid)
        self.ledger.drop(
            out,
            m,
            _AGENT,
            AuditEvent.NOTIFICATION_DROPPED,
            f"{CANCEL_REQUEST} for request {rid!r}, already answered by the proxy (rule {rule})",
        )
        return True

    # ---------------------------------------------------------------- timers

    def _start_timer(self, rid: Any, deadline: float, rule: str) -> None:
        self._timers[rid] = (deadline, rule)
        self._seq += 1
        heapq.heappush(self._heap, (deadline, self._seq, rid))

    def next_deadline(self) -> float | None:
        """The earliest ask deadline still running, or ``None``."""
        heap = self._heap
        timers = self._timers
        while heap:
            deadline, _seq, rid = heap[0]
            entry = timers.get(rid)
            if entry is not None and entry[0] == deadline:
                return deadline
            heapq.heappop(heap)  # answered in time, or superseded
        return None

    def expire(self, now: float, out: list[Action]) -> None:
        """Answers ``cancelled`` to the agent for every forwarded request whose ask ran out.

        The client is sent a ``$/cancel_request`` for it; the request stays in
        flight toward the client (its id is still open there) until the
        client's answer comes, which is then dropped (:meth:`client_response`).
        """
        heap = self._heap
        timers = self._timers
        while heap and heap[0][0] <= now:
            deadline, _seq, rid = heapq.heappop(heap)
            entry = timers.get(rid)
            if entry is None or entry[0] != deadline:
                continue
            del timers[rid]
            pending = self.inflight.pending[_AGENT].get(rid)
            if pending is None:
                continue  # the client is gone: already answered
            rule = entry[1]
            self.expired[rid] = rule
            self.asked.pop(rid, None)
            self.ledger.audit(
                out,
                AuditEvent.PERMISSION_DECIDED,
                _AGENT,
                sessionId=pending[1],
                method=pending[0],
                id=rid,
                rule=rule,
                action="ask",
                outcome="cancelled",
                reason=f"rule {rule}: the client did not answer within ask_timeout_seconds",
            )
            if self.inflight.gone[_AGENT] is None:
                out.append(Send(_AGENT, cancelled_frame(rid)))
            cancel = {"jsonrpc": "2.0", "method": CANCEL_REQUEST, "params": {"requestId": rid}}
            out.append(Send(_CLIENT, dumps(cancel)))

    def client_answer_refused(self, rid: Any) -> bool:
        """The client's answer to agent request ``rid`` was refused (its frame): the ask
        of it, if any, ends here.

        Returns:
            True when the ask had run out, so the agent was answered already.
        """
        self._timers.pop(rid, None)
        self.asked.pop(rid, None)
        return self.expired.pop(rid, None) is not None

    def client_response(self, m: Message, out: list[Action]) -> bool:
        """A client response: drops (audited) a late answer to a request that timed out.

        Returns:
            True when dropped here; False to settle it as usual (its timer stops).
        """
        rid = m.id
        self._timers.pop(rid, None)
        rule = self.expired.pop(rid, None)
        if rule is None:
            asked = self.asked.pop(rid, None)
            if asked is not None and rid in self.inflight.pending[_AGENT]:
                self._answered_by_client(m, asked, out)
            return False
        self.inflight.pop(_AGENT, rid)
        self.ledger.drop(
            out,
            m,
            _CLIENT,
            AuditEvent.UNKNOWN_RESPONSE,
            f"late: the proxy answered the agent cancelled (rule {rule}, ask_timeout_seconds)",
        )
        return True

    def _answered_by_client(
        self, m: Message, asked: tuple[str, Any, str | None], out: list[Action]
    ) -> None:
        """Audits the client's answer to a request the proxy left to it (``permission_answered``:
        the option chosen, ``cancelled``, or the error code)."""
        method, sid, rule = asked
        body = m.body if type(m.body) is dict else {}
        fields: dict[str, Any] = {"sessionId": sid, "method": method, "id": m.id, "rule": rule}
        error = body.get("error")
        if "error" in body:
            fields["outcome"] = "error"
            code = error.get("code") if type(error) is dict else None
            fields["errorCode"] = code if type(code) is int else None
        else:
            result = body.get("result")
            outcome = result.get("outcome") if type(result) is dict else None
            if type(outcome) is dict:  # session/request_permission: the option chosen
                fields["outcome"] = outcome.get("outcome")
                fields["optionId"] = outcome.get("optionId")
            elif type(result) is dict and "action" in result:  # elicitation/create
                fields["outcome"] = result.get("action")
            else:
                fields["outcome"] = "result"
        self.ledger.audit(out, AuditEvent.PERMISSION_ANSWERED, _CLIENT, **fields)

    @property
    def watching(self) -> bool:
        """True while a client response may concern the gate (timers, timed-out requests,
        requests left to the client whose answer is audited)."""
        return bool(self._timers) or bool(self.expired) or bool(self.asked)

    def client_gone(self) -> None:
        """The client left: its requests in flight are answered by the caller; timers stop."""
        self.asked.clear()
        self._timers.clear()
        self._heap.clear()

    def agent_gone(self) -> None:
        """The agent left: no answer to a session/new will come."""
        self._creating.clear()
        self.workspace_bytes -= sum(self._creating_sizes.values())
        self._creating_sizes.clear()


def _remember_bounded(table: dict[Any, _V], key: Any, value: _V, most: int) -> None:
    """``table[key] = value``, the oldest entries forgotten past ``most``."""
    table[key] = value
    while len(table) > most:
        del table[next(iter(table))]


_CarryOut = Callable[[PermissionGate, Message, Decision, float, list[Action]], bool]

#: A decision's disposition -> how the gate carries it out.
_DISPOSITIONS: dict[str, _CarryOut] = {
    "forward": PermissionGate._forwarded,
    "answer": PermissionGate._answered_here,
    "refuse": PermissionGate._refused_here,
}
