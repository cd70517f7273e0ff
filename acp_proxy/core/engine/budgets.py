"""The budget gate: ``[budgets]`` applied to one connection's stream (issue 28).

docs/design.md ("Budgets"). Counted per root session (a child's traffic counts
toward the session at the top of its tree, read from the registry):

- a client ``session/prompt`` is checked against ``prompts_per_window`` and
  ``max_tokens`` before it goes on: beyond, the proxy answers it with an error
  (:data:`BUDGET_EXCEEDED_CODE`) naming the budget and when it resets;
- a forwarded prompt opens a *turn* of its root, ended by the prompt's answer
  (protocol v1) or, once the agent accepted it (v2), by an ``idle`` state
  report on the root; one ``tool_call`` more than ``max_tool_calls_per_turn``
  in it, or ``max_turn_s`` passing, makes the proxy send ``session/cancel`` for
  the root to the agent, and the turn's later permission requests are answered
  ``cancelled`` by the proxy;
- the same tool call asked for permission more than ``repeat_limit`` times in
  a session is answered by the proxy with a reject option the agent offered,
  else ``cancelled``.

With a store (``budgets.store``) the prompt and token counters are the
store's, under ``budgets.key``: a prompt waits in the core for a
:class:`~acp_proxy.core.actions.StoreCall` ``"reserve"`` and its
:class:`~acp_proxy.core.actions.StoreReply` (the client's later messages wait
behind it, in order), and token growth is sent as ``"add"`` calls, one in
flight at a time. Per-turn limits are always counted here.

In ``policy.mode = "observe"`` every decision is audited (``would_block``) and
counted, but nothing is refused, answered or cancelled.
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING, Any

from acp_proxy.config import Config
from acp_proxy.core.actions import Action, AuditEvent, Peer, Report, StoreCall, StoreReply
from acp_proxy.core.session.budgets import (
    PromptWindow,
    RepeatCounter,
    TokenTally,
    Turn,
    repeat_key,
)
from acp_proxy.core.session.permissions import cancelled_frame, choose_option
from acp_proxy.core.wire.jsonrpc import Message, dumps
from acp_proxy.core.wire.jsonscan import bounded_members
from acp_proxy.core.wire.views import VIEW_KEY

if TYPE_CHECKING:
    from acp_proxy.core.engine.context import EngineContext

__all__ = ["BUDGET_EXCEEDED_CODE", "BudgetGate"]

_CLIENT = Peer.CLIENT
_AGENT = Peer.AGENT

#: JSON-RPC error code of a prompt refused by a budget (server-defined range)
BUDGET_EXCEEDED_CODE = -32029
#: reject kinds a repeated tool call is answered with, most preferred first
_REJECT_KINDS = ("reject_once", "reject_always")


def _seconds(value: float) -> str:
    return f"{value:.0f}s" if value >= 1 else f"{value:.3f}s"


class BudgetGate:
    """Applies ``[budgets]`` to one connection.

    Args:
        ctx: the engine context: its registry (a session's root), its ledger
            (outcomes, counters, requests in flight), what its permission gate
            remembers of the agent's tool calls
            (:attr:`~acp_proxy.core.engine.permissions.PermissionGate.tools`, session
            -> toolCallId -> (fields, bytes): a v1 request naming a tool call by
            id is compared with the announced kind, title and raw input), and its
            configuration (:meth:`configure`, followed on a reload).

    Attributes:
        exceeded: budget name -> decisions that found it used up (metrics).
        waiting: the prompt waiting for the store's reply, else ``None``.
        principal: the connection's principal (the store key's default), if known.
        turns: root session -> its open turn.
    """

    def __init__(self, ctx: EngineContext) -> None:
        self.registry = ctx.registry
        self._tools = ctx.gate.tools
        self.ledger = ledger = ctx.ledger
        self.inflight = ledger.inflight
        self.exceeded: dict[str, int] = {}
        self.waiting: tuple[StoreCall, Message] | None = None
        self.principal: str | None = None
        self.turns: dict[str, Turn] = {}
        self._by_prompt: dict[Any, str] = {}  # prompt request id -> root
        self._heap: list[tuple[float, int, str]] = []  # (deadline, seq, root); lazy deletion
        self._seq = 0
        self._windows: dict[str, PromptWindow] = {}
        self._tickets = 0
        self._tokens_unsent = 0
        self._adding = False
        self._store_down_said = False
        ctx.follow(self)

    def configure(self, config: Config) -> None:
        """Takes ``[budgets]`` and ``policy.mode`` (also on a reload; counts stay)."""
        b = self.config = config.budgets
        limits = config.limits
        self.observe = config.policy.mode == "observe"
        self.store = b.store
        self.watches_prompts = bool(b.prompts_per_window or b.max_tokens)
        self.watches_turns = bool(b.max_tool_calls_per_turn or b.max_turn_s)
        self.watches_tools = bool(b.max_tool_calls_per_turn)
        self.watches_usage = bool(b.max_tokens)
        self.watches_repeats = bool(b.repeat_limit)
        self.active = self.watches_prompts or self.watches_turns or self.watches_repeats
        if not hasattr(self, "tokens"):
            self.tokens = TokenTally(limits.max_sessions)
            self.repeats = RepeatCounter(limits.max_sessions)
        self._max_roots = limits.max_sessions

    # ---------------------------------------------------------------- helpers

    def root(self, sid: Any) -> str | None:
        """The root session of ``sid`` (itself when it is no child), or ``None``."""
        if type(sid) is not str:
            return None
        chain = self.registry.ancestors(sid)
        return chain[-1] if chain else sid

    @property
    def key(self) -> str:
        """The store key of this connection's counters."""
        return self.config.key or self.principal or "anonymous"

    def _decided(
        self,
        out: list[Action],
        budget: str,
        count: float,
        limit: float,
        source: Peer,
        reason: str,
        **fields: Any,
    ) -> None:
        """Audits and counts one budget decision (``would_block`` in observe mode)."""
        self.exceeded[budget] = self.exceeded.get(budget, 0) + 1
        extra: dict[str, Any] = {}
        if self.observe:
            wb = self.ledger.would_block
            wb[budget] = wb.get(budget, 0) + 1
            extra = {"would_block": True, "rule": budget}
        self.ledger.audit(
            out,
            AuditEvent.BUDGET_EXCEEDED,
            source,
            budget=budget,
            count=count,
            limit=limit,
            reason=reason,
            **fields,
            **extra,
        )

    # ---------------------------------------------------------------- prompts

    def prompt(self, m: Message, sid: Any, now: float, out: list[Action]) -> bool:
        """A client ``session/prompt`` request (before it is tracked and forwarded).

        Returns:
            True when the gate took it: answered (refused), or waiting for the
            store (:attr:`waiting`; :meth:`store_result` goes on). False: forward it.
        """
        if self.store:
            self._tickets += 1
            b = self.config
            call = StoreCall(
                self._tickets,
                "reserve",
                self.key,
                prompt_limit=b.prompts_per_window,
                token_limit=b.max_tokens,
                window_s=b.window_s,
                commit_over=self.observe,
            )
            self.waiting = (call, m)
            out.append(call)
            return True
        return self._local_prompt(m, sid, now, out)

    def _local_prompt(self, m: Message, sid: Any, now: float, out: list[Action]) -> bool:
        b = self.config
        root = self.root(sid) or ""
        if b.max_tokens:
            used = self.tokens.used(root)
            if used > b.max_tokens and self._refuse(
                m, out, "max_tokens", used, b.max_tokens, root, None, "for this session"
            ):
                return True
        if b.prompts_per_window:
            window = self._windows.pop(root, None) or PromptWindow()
            self._windows[root] = window
            while len(self._windows) > self._max_roots:
                del self._windows[next(iter(self._windows))]
            allowed, count = window.take(now, b.prompts_per_window, b.window_s, self.observe)
            if not allowed:
                reset = window.reset_in(now, b.window_s)
                return self._refuse(
                    m, out, "prompts_per_window", count, b.prompts_per_window, root, reset, ""
                )
        return False

    def _refuse(
        self,
        m: Message,
        out: list[Action],
        budget: str,
        count: int,
        limit: int,
        root: str,
        reset_in: float | None,
        scope: str,
    ) -> bool:
        """Refuses prompt ``m`` for ``budget`` (only audits it in observe mode)."""
        b = self.config
        per = f"{limit} per {_seconds(b.window_s)}" if budget == "prompts_per_window" else limit
        when = (
            f"resets in {_seconds(reset_in)}"
            if reset_in is not None
            else "does not reset in this session"
        )
        reason = f"budget {budget} ({per}{' ' + scope if scope else ''}) used up: {when}"
        self._decided(
            out, budget, count, limit, _CLIENT, reason, sessionId=root, method=m.method, id=m.id
        )
        if self.observe:
            return False
        data = {
            "budget": budget,
            "count": count,
            "limit": limit,
            "resetInSeconds": None if reset_in is None else round(reset_in, 3),
        }
        self.ledger.answer(
            out,
            _CLIENT,
            m.id,
            BUDGET_EXCEEDED_CODE,
            f"acp-proxy: session/prompt refused: {reason}",
            data,
        )
        return True

    def store_result(
        self, call: StoreCall, reply: StoreReply, now: float, out: list[Action]
    ) -> Message | None:
        """The store answered ``call``.

        Returns:
            For the waiting prompt's ``"reserve"``: the prompt when it may go on
            (the caller forwards it), ``None`` when it was answered here. For an
            ``"add"``: ``None`` (the next batch of token growth is sent, if any).
        """
        if call.op == "add":
            self._adding = False
            if not reply.ok:
                self._store_down(reply, out)
            self._send_tokens(out)
            return None
        waiting = self.waiting
        if waiting is None or waiting[0].ticket != call.ticket:
            return None
        self.waiting = None
        m = waiting[1]
        sid = m.session_id
        if not reply.ok:
            self._store_down(reply, out)
            if self.config.store_fail == "open":
                return None if self._local_prompt(m, sid, now, out) else m
            reason = f"budget store unreachable: {reply.error}"
            self._decided(
                out,
                "store",
                0,
                0,
                _CLIENT,
                reason,
                sessionId=self.root(sid),
                method=m.method,
                id=m.id,
                store=self.store,
            )
            if self.observe:
                return m
            self.ledger.answer(
                out,
                _CLIENT,
                m.id,
                BUDGET_EXCEEDED_CODE,
                f"acp-proxy: session/prompt refused: the budget store {self.store} cannot "
                f"be reached ({reply.error}); try again when it is back",
                {"budget": "store", "store": self.store},
            )
            return None
        self._store_down_said = False
        if reply.allowed or reply.budget is None:
            return m
        budget = reply.budget
        count = reply.tokens if budget == "max_tokens" else reply.prompts
        limit = self.config.max_tokens if budget == "max_tokens" else self.config.prompts_per_window
        refused = self._refuse(
            m,
            out,
            budget,
            count,
            limit,
            self.root(sid) or "",
            reply.reset_in_s,
            f"for key {self.key!r}",
        )
        return None if refused else m

    def _store_down(self, reply: StoreReply, out: list[Action]) -> None:
        if self._store_down_said:
            return
        self._store_down_said = True
        then = (
            "counting in this proxy meanwhile (store_fail = open)"
            if self.config.store_fail == "open"
            else "prompts are refused meanwhile (store_fail = closed)"
        )
        out.append(
            Report("warning", f"budget store {self.store} unreachable: {reply.error}; {then}")
        )

    # ------------------------------------------------------------------ turns

    def prompt_forwarded(self, m: Message, sid: Any, now: float) -> None:
        """A ``session/prompt`` went to the agent: a new turn of its root."""
        root = self.root(sid)
        if root is None:
            return
        old = self.turns.pop(root, None)
        if old is not None:
            self._by_prompt.pop(old.prompt_id, None)
        limit = self.config.max_turn_s
        deadline = now + limit if limit else None
        self.turns[root] = Turn(m.id, now, deadline)
        self._by_prompt[m.id] = root
        while len(self.turns) > self._max_roots:
            gone = self.turns.pop(next(iter(self.turns)))
            self._by_prompt.pop(gone.prompt_id, None)
        if deadline is not None:
            self._seq += 1
            heapq.heappush(self._heap, (deadline, self._seq, root))

    def prompt_answered(self, rid: Any, ok: bool, version: int | None) -> None:
        """The agent answered prompt ``rid``: the turn ends (v2: unless it accepted it)."""
        root = self._by_prompt.get(rid)
        if root is None:
            return
        turn = self.turns.get(root)
        if turn is None or turn.prompt_id != rid:
            return
        if ok and version is not None and version >= 2:
            turn.accepted = True
            return
        self._end(root)

    def state_report(self, sid: Any, update: dict[str, Any]) -> None:
        """A ``state_update``: ``idle`` on a root ends its accepted (v2) turn."""
        if type(sid) is not str or update.get("state") != "idle":
            return
        turn = self.turns.get(sid)
        if turn is not None and turn.accepted:
            self._end(sid)

    def _end(self, root: str) -> None:
        turn = self.turns.pop(root, None)
        if turn is not None:
            self._by_prompt.pop(turn.prompt_id, None)

    def tool_call(self, sid: Any, out: list[Action]) -> None:
        """A ``tool_call`` update on ``sid``: counted toward its root's open turn."""
        root = self.root(sid)
        turn = self.turns.get(root) if root is not None else None
        if turn is None:
            return
        turn.tool_calls += 1
        limit = self.config.max_tool_calls_per_turn
        if limit and turn.tool_calls > limit and turn.over is None:
            assert root is not None
            self._cancel(
                root,
                turn,
                "max_tool_calls_per_turn",
                turn.tool_calls,
                limit,
                f"{turn.tool_calls} tool calls in one prompt turn (limit {limit})",
                out,
            )

    def _cancel(
        self,
        root: str,
        turn: Turn,
        budget: str,
        count: float,
        limit: float,
        why: str,
        out: list[Action],
    ) -> None:
        """Ends ``turn``: ``session/cancel`` for ``root`` to the agent (audit only in observe)."""
        turn.over = budget
        reason = f"budget {budget}: {why}; " + (
            "would cancel the turn" if self.observe else "the proxy cancels the turn"
        )
        self._decided(
            out,
            budget,
            count,
            limit,
            _AGENT,
            reason,
            sessionId=root,
            method="session/cancel",
            id=turn.prompt_id,
        )
        if self.observe or self.inflight.gone[_AGENT] is not None:
            return
        cancel = {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": root}}
        self.ledger.originate(out, _AGENT, dumps(cancel), f"budget {budget}")

    def next_deadline(self) -> float | None:
        """The earliest ``max_turn_s`` deadline of an open turn, or ``None``."""
        heap = self._heap
        while heap:
            deadline, _seq, root = heap[0]
            turn = self.turns.get(root)
            if turn is not None and turn.deadline == deadline and turn.over is None:
                return deadline
            heapq.heappop(heap)
        return None

    def expire(self, now: float, out: list[Action]) -> None:
        """Cancels every open turn whose ``max_turn_s`` has passed."""
        heap = self._heap
        while heap and heap[0][0] <= now:
            deadline, _seq, root = heapq.heappop(heap)
            turn = self.turns.get(root)
            if turn is None or turn.deadline != deadline or turn.over is not None:
                continue
            limit = self.config.max_turn_s
            self._cancel(
                root,
                turn,
                "max_turn_s",
                round(now - turn.started, 3),
                limit,
                f"the prompt turn was not answered within {_seconds(limit)}",
                out,
            )

    # ----------------------------------------------------------------- tokens

    def usage(self, sid: Any, update: dict[str, Any], out: list[Action]) -> None:
        """A ``usage_update`` (``used``: tokens in the session's context)."""
        if VIEW_KEY in update:  # a large frame: decode only its small members
            update = bounded_members(update[VIEW_KEY], 1) or {}
        used = update.get("used")
        root = self.root(sid)
        if type(used) is not int or used < 0 or root is None:
            return
        grown = self.tokens.report(root, sid, used)
        if grown and self.store:
            self._tokens_unsent += grown
            self._send_tokens(out)

    def _send_tokens(self, out: list[Action]) -> None:
        if self._adding or not self._tokens_unsent:
            return
        self._tickets += 1
        call = StoreCall(
            self._tickets,
            "add",
            self.key,
            amount=self._tokens_unsent,
            window_s=self.config.window_s,
        )
        self._tokens_unsent = 0
        self._adding = True
        out.append(call)

    # ------------------------------------------------------------ permissions

    def permission(self, m: Message, out: list[Action]) -> bool:
        """An agent ``session/request_permission`` (in flight toward the client).

        Returns:
            True when the proxy answered it (a cancelled turn, a repeated tool
            call): it must not be forwarded.
        """
        root = self.root(m.session_id)
        if root is None:
            return False
        return self._in_cancelled_turn(m, root, out) or self._repeated_call(m, out)

    def _in_cancelled_turn(self, m: Message, root: str, out: list[Action]) -> bool:
        """A permission request of a turn a budget cancelled: answered cancelled."""
        turn = self.turns.get(root)
        if turn is None or turn.over is None:
            return False
        self._decided(
            out,
            turn.over,
            turn.tool_calls,
            0,
            _AGENT,
            f"budget {turn.over}: the prompt turn was cancelled; its permission "
            "requests are answered cancelled",
            sessionId=m.session_id,
            method=m.method,
            id=m.id,
        )
        if self.observe:
            return False
        self._answer(m, cancelled_frame(m.id if m.id is not None else 0), out)
        return True

    def _repeated_call(self, m: Message, out: list[Action]) -> bool:
        """``repeat_limit``: the same tool call asked too often in a session is
        rejected (with a reject option the agent offered, else cancelled)."""
        limit = self.config.repeat_limit
        if not limit:
            return False
        sid = m.session_id
        params: Any = m.params
        if params is not None and VIEW_KEY in params:
            params = bounded_members(params[VIEW_KEY]) or {}
        if type(params) is not dict or type(sid) is not str:
            return False
        call = self._named_call(sid, params)
        if not call:
            return False
        count = self.repeats.count(sid, repeat_key(call))
        if count <= limit:
            return False
        chosen = choose_option(params.get("options"), _REJECT_KINDS)
        answer = (
            f"rejected with option {chosen[0]!r}" if chosen is not None else "answered cancelled"
        )
        self._decided(
            out,
            "repeat_limit",
            count,
            limit,
            _AGENT,
            f"budget repeat_limit: the same tool call asked {count} times in this session "
            f"(limit {limit}); {answer}",
            sessionId=sid,
            method=m.method,
            id=m.id,
            optionId=chosen[0] if chosen is not None else None,
        )
        if self.observe:
            return False
        if chosen is not None:
            outcome = {"outcome": "selected", "optionId": chosen[0]}
            frame = dumps({"jsonrpc": "2.0", "id": m.id, "result": {"outcome": outcome}})
        else:
            frame = cancelled_frame(m.id if m.id is not None else 0)
        self._answer(m, frame, out)
        return True

    def _named_call(self, sid: str, params: dict[str, Any]) -> dict[str, Any]:
        """The tool call a request names (v1 ``toolCall`` over what the agent announced
        of it, the request's own fields winning; v2 ``subject.toolCall``); empty: none."""
        own = params.get("toolCall")
        call: dict[str, Any] = {}
        if type(own) is dict:
            tcid = own.get("toolCallId")
            known = self._tools.get(sid)
            if known is not None and isinstance(tcid, str) and tcid in known:
                call.update(known[tcid][0])  # announced first; the request's own fields win
            call.update((k, v) for k, v in own.items() if v is not None)
        subject = params.get("subject")
        if type(subject) is dict and type(subject.get("toolCall")) is dict:
            call.update(subject["toolCall"])
        return call

    def _answer(self, m: Message, frame: bytes, out: list[Action]) -> None:
        self.inflight.pop(_AGENT, m.id)
        self.ledger.reply(out, _AGENT, frame)

    def closed(self, sid: str) -> None:
        """``sid`` was closed: its repeat counts and turn go."""
        self.repeats.forget(sid)
        self._end(sid)

    def counts(self) -> dict[str, Any]:
        """What ``/status`` shows of this gate."""
        return {
            "exceeded": dict(self.exceeded),
            "openTurns": len(self.turns),
            "store": self.store or None,
            "key": self.key if self.store else None,
            "waitingForStore": self.waiting is not None,
        }
