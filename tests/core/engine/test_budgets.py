"""Budgets on the ACP stream (issue 28): each budget at, below and above its limit,
children counted toward their root, windows that reset, the repeat comparison,
observe mode on every rule kind, and the shared store's actions and results."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_proxy.config.io import config_from_dict
from acp_proxy.core.actions import Send, StoreCall, StoreReply
from acp_proxy.core.engine import ProxyCore
from acp_proxy.core.engine.budgets import BUDGET_EXCEEDED_CODE
from acp_proxy.core.trace import TracingCore
from tests.support.corekit import (
    AGENT,
    CLIENT,
    announce,
    assert_accounting,
    audits,
    decoded,
    open_session,
    req,
    resp,
    sends,
    state_update,
    update,
)

RP = "session/request_permission"
OPTIONS = [
    {"optionId": "yes", "name": "Allow", "kind": "allow_once"},
    {"optionId": "no", "name": "Reject", "kind": "reject_once"},
]


def core_with(mode: str = "enforce", **budgets: Any) -> ProxyCore:
    cfg = config_from_dict({"budgets": budgets, "policy": {"mode": mode}})
    core = ProxyCore(cfg)
    open_session(core, "s1")
    return core


def prompt(core: ProxyCore, rid: Any, sid: str = "s1", now: float = 0.0) -> list[Any]:
    return core.receive(CLIENT, req(rid, "session/prompt", {"sessionId": sid, "prompt": []}), now)


def forwarded(out: list[Any], rid: Any) -> bool:
    return any(decoded(d).get("id") == rid for d in sends(out, AGENT))


def refusal(out: list[Any]) -> dict[str, Any]:
    (frame,) = sends(out, CLIENT)
    body = decoded(frame)
    assert body["error"]["code"] == BUDGET_EXCEEDED_CODE
    return dict(body["error"])


def tool_call(sid: str, tcid: str) -> bytes:
    return update(sid, {"sessionUpdate": "tool_call", "toolCallId": tcid, "title": "t"})


def cancels(out: list[Any]) -> list[dict[str, Any]]:
    return [decoded(d) for d in sends(out, AGENT) if decoded(d).get("method") == "session/cancel"]


def permission(rid: Any, sid: str, raw: Any, options: Any = OPTIONS) -> bytes:
    call = {"toolCallId": f"tc-{rid}", "kind": "execute", "title": "run", "rawInput": raw}
    return req(rid, RP, {"sessionId": sid, "toolCall": call, "options": options})


# --------------------------------------------------------------- prompts_per_window


def test_prompts_below_and_at_the_limit_pass_and_one_above_is_refused() -> None:
    """Two prompts of a limit of two reach the agent; the third is answered with an
    error naming the budget and when it resets, and never forwarded."""
    core = core_with(prompts_per_window=2, window_s=60)
    assert forwarded(prompt(core, 1, now=1.0), 1)
    assert forwarded(prompt(core, 2, now=2.0), 2)
    out = prompt(core, 3, now=11.0)
    assert not sends(out, AGENT)
    error = refusal(out)
    assert "prompts_per_window" in error["message"]
    assert "resets in 50s" in error["message"]
    assert error["data"] == {
        "budget": "prompts_per_window",
        "count": 3,
        "limit": 2,
        "resetInSeconds": 50.0,
    }
    (record,) = audits(out, "budget_exceeded")
    assert record.fields["budget"] == "prompts_per_window"
    assert (record.fields["count"], record.fields["limit"]) == (3, 2)
    assert core.budgets.exceeded == {"prompts_per_window": 1}
    assert_accounting(core)


def test_the_window_resets() -> None:
    """Once window_s has passed since the window's first prompt, prompts pass again."""
    core = core_with(prompts_per_window=1, window_s=60)
    assert forwarded(prompt(core, 1, now=0.0), 1)
    assert not forwarded(prompt(core, 2, now=59.9), 2)
    assert forwarded(prompt(core, 3, now=60.0), 3)


def test_a_childs_prompt_counts_toward_its_root() -> None:
    """A prompt naming a child (granted by a vendor capability) uses its root's budget."""
    cfg = config_from_dict(
        {
            "budgets": {"prompts_per_window": 1},
            "enforcement": {"child_mutations": {"session/prompt": "prompt"}},
        }
    )
    core = ProxyCore(cfg)
    open_session(core, "s1")
    core.receive(AGENT, announce("s1", "c1", capabilities={"prompt": {}}), 0.0)
    assert forwarded(prompt(core, 1, "s1"), 1)
    out = prompt(core, 2, "c1")
    assert not forwarded(out, 2)
    assert audits(out, "budget_exceeded")[0].fields["sessionId"] == "s1"
    core2 = ProxyCore(cfg)
    open_session(core2, "s2")
    assert forwarded(prompt(core2, 1, "s2"), 1)  # another root, its own budget


# ------------------------------------------------------------ max_tool_calls_per_turn


def test_tool_calls_at_the_limit_pass_and_one_more_cancels_the_root() -> None:
    """Two tool calls (the root's and a child's) of a limit of two are fine; the third
    makes the proxy send session/cancel for the root and refuse the turn's further
    permission requests; the tool_call updates themselves still reach the client."""
    core = core_with(max_tool_calls_per_turn=2)
    core.receive(AGENT, announce("s1", "c1"), 0.0)
    prompt(core, 1)
    assert not cancels(core.receive(AGENT, tool_call("s1", "a"), 1.0))
    assert not cancels(core.receive(AGENT, tool_call("c1", "b"), 1.0))
    out = core.receive(AGENT, tool_call("c1", "c"), 1.0)
    assert sends(out, CLIENT)  # forwarded all the same
    assert cancels(out) == [
        {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s1"}}
    ]
    record = audits(out, "budget_exceeded")[0]
    assert (record.fields["budget"], record.fields["count"], record.fields["limit"]) == (
        "max_tool_calls_per_turn",
        3,
        2,
    )
    assert not cancels(core.receive(AGENT, tool_call("s1", "d"), 1.0))  # once per turn
    out = core.receive(AGENT, permission(7, "c1", {"cmd": "ls"}), 2.0)
    assert not sends(out, CLIENT)
    assert decoded(sends(out, AGENT)[0]) == {
        "jsonrpc": "2.0",
        "id": 7,
        "result": {"outcome": {"outcome": "cancelled"}},
    }
    assert_accounting(core)
    # the turn ends with its answer; the next turn counts afresh
    core.receive(AGENT, resp(1, {"stopReason": "cancelled"}), 3.0)
    prompt(core, 2)
    assert not cancels(core.receive(AGENT, tool_call("s1", "e"), 4.0))
    assert sends(core.receive(AGENT, permission(8, "s1", {"cmd": "ls"}), 4.0), CLIENT)


def test_tool_calls_outside_a_turn_are_not_counted() -> None:
    """Without an open prompt turn, tool calls cancel nothing."""
    core = core_with(max_tool_calls_per_turn=1)
    for tcid in "abc":
        assert not cancels(core.receive(AGENT, tool_call("s1", tcid), 0.0))


def test_a_proxy_cancel_is_the_proxys_in_the_trace() -> None:
    """The session/cancel the proxy sends is a ``proxy`` record, decision ``originated``."""
    records: list[dict[str, Any]] = []
    core = TracingCore(
        config_from_dict({"budgets": {"max_tool_calls_per_turn": 1}}), emit=records.append
    )
    open_session(core, "s1")
    prompt(core, 1)
    core.receive(AGENT, tool_call("s1", "a"), 0.0)
    core.receive(AGENT, tool_call("s1", "b"), 0.0)
    mine = [r for r in records if r["type"] == "proxy"]
    assert mine == [
        {
            "type": "proxy",
            "t": 0.0,
            "to": "agent",
            "kind": "notification",
            "id": None,
            "method": "session/cancel",
            "session": "s1",
            "for_method": None,
            "size": mine[0]["size"],
            "decision": "originated",
            "reason": "budget max_tool_calls_per_turn",
        }
    ]


# ------------------------------------------------------------------------ max_turn_s


def test_a_turn_answered_in_time_is_not_cancelled_and_a_late_one_is() -> None:
    """The timer deadline is max_turn_s after the prompt; answered before it, nothing
    happens; not answered, the root is cancelled when the timer fires."""
    core = core_with(max_turn_s=30)
    prompt(core, 1, now=10.0)
    assert core.get_timer() == 40.0
    core.receive(AGENT, resp(1, {"stopReason": "end_turn"}), 39.0)
    assert core.get_timer() is None
    assert not cancels(core.handle_timer(40.0))
    prompt(core, 2, now=50.0)
    assert not cancels(core.handle_timer(79.9))
    out = core.handle_timer(80.0)
    assert cancels(out) == [
        {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s1"}}
    ]
    assert audits(out, "budget_exceeded")[0].fields["budget"] == "max_turn_s"
    assert core.get_timer() is None
    assert_accounting(core)


def test_a_v2_turn_ends_with_idle_not_with_its_acceptance() -> None:
    """Protocol v2 answers a prompt on acceptance; the turn runs until an idle report."""
    core = ProxyCore(config_from_dict({"budgets": {"max_turn_s": 30}}))
    core.receive(CLIENT, req(0, "initialize", {"protocolVersion": 2}), 0.0)
    core.receive(AGENT, resp(0, {"protocolVersion": 2}), 0.0)
    open_session(core, "s1")
    prompt(core, 1, now=0.0)
    core.receive(AGENT, resp(1, {"messageId": "m1"}), 1.0)
    assert core.get_timer() == 30.0
    core.receive(AGENT, state_update("s1", "idle", stopReason="end_turn"), 2.0)
    assert core.get_timer() is None


@pytest.mark.trio
async def test_max_turn_s_on_the_virtual_clock(autojump_clock: Any) -> None:
    """On trio's clock the deadline the core gives passes at max_turn_s exactly."""
    import trio

    core = core_with(max_turn_s=5)
    prompt(core, 1, now=trio.current_time())
    deadline = core.get_timer()
    assert deadline is not None
    await trio.sleep_until(deadline)
    assert cancels(core.handle_timer(trio.current_time()))
    assert trio.current_time() == pytest.approx(5.0)


# ------------------------------------------------------------------------ max_tokens


def test_tokens_at_the_limit_pass_and_above_refuse_the_next_prompt() -> None:
    """usage_update reporting exactly max_tokens leaves prompts passing; more refuses
    the next one; a child's usage counts toward its root."""
    core = core_with(max_tokens=1000)
    core.receive(AGENT, announce("s1", "c1"), 0.0)
    prompt(core, 1)
    core.receive(AGENT, update("s1", {"sessionUpdate": "usage_update", "used": 600}), 0.0)
    core.receive(AGENT, update("c1", {"sessionUpdate": "usage_update", "used": 400}), 0.0)
    assert forwarded(prompt(core, 2), 2)
    out = core.receive(AGENT, update("c1", {"sessionUpdate": "usage_update", "used": 401}), 0.0)
    assert sends(out, CLIENT)  # usage still reaches the client
    out = prompt(core, 3)
    assert not forwarded(out, 3)
    error = refusal(out)
    assert "max_tokens" in error["message"]
    assert error["data"]["count"] == 1001


def test_a_lower_usage_report_does_not_give_tokens_back() -> None:
    """used is the context size: a compaction lowering it does not lower the count."""
    core = core_with(max_tokens=100)
    core.receive(AGENT, update("s1", {"sessionUpdate": "usage_update", "used": 101}), 0.0)
    core.receive(AGENT, update("s1", {"sessionUpdate": "usage_update", "used": 5}), 0.0)
    assert not forwarded(prompt(core, 1), 1)


# ---------------------------------------------------------------------- repeat_limit


def test_repeats_up_to_the_limit_reach_the_client_and_beyond_are_rejected() -> None:
    """The same call (rawInput keys in another order) asked a third time with a limit of
    two is answered with the reject option the agent offered; another argument is a
    new call; with no reject option the answer is cancelled."""
    core = core_with(repeat_limit=2)
    assert sends(core.receive(AGENT, permission(1, "s1", {"a": 1, "b": 2}), 0.0), CLIENT)
    assert sends(core.receive(AGENT, permission(2, "s1", {"b": 2, "a": 1}), 0.0), CLIENT)
    out = core.receive(AGENT, permission(3, "s1", {"b": 2, "a": 1}), 0.0)
    assert not sends(out, CLIENT)
    answer = decoded(sends(out, AGENT)[0])
    assert answer["result"] == {"outcome": {"outcome": "selected", "optionId": "no"}}
    record = audits(out, "budget_exceeded")[0]
    assert (record.fields["budget"], record.fields["count"], record.fields["limit"]) == (
        "repeat_limit",
        3,
        2,
    )
    assert sends(core.receive(AGENT, permission(4, "s1", {"a": 1, "b": 3}), 0.0), CLIENT)
    only_allow = [OPTIONS[0]]
    out = core.receive(AGENT, permission(5, "s1", {"a": 1, "b": 2}, only_allow), 0.0)
    assert decoded(sends(out, AGENT)[0])["result"] == {"outcome": {"outcome": "cancelled"}}
    assert_accounting(core)


# ---------------------------------------------------------------------- observe mode


def test_observe_mode_forwards_every_budget_decision_and_counts_it() -> None:
    """In observe mode each budget is decided and audited with would_block and its name,
    and the message goes on as if no budget existed (no refusal, cancel or answer)."""
    core = core_with(
        "observe", prompts_per_window=1, max_tool_calls_per_turn=1, repeat_limit=1, max_tokens=1
    )
    prompt(core, 1)
    core.receive(AGENT, update("s1", {"sessionUpdate": "usage_update", "used": 5}), 0.0)
    out = prompt(core, 2)
    assert forwarded(out, 2)
    assert {a.fields["rule"] for a in audits(out, "budget_exceeded")} == {
        "max_tokens",
        "prompts_per_window",
    }
    assert all(a.fields["would_block"] is True for a in audits(out, "budget_exceeded"))
    core.receive(AGENT, tool_call("s1", "a"), 0.0)
    out = core.receive(AGENT, tool_call("s1", "b"), 0.0)
    assert not cancels(out)
    assert audits(out, "budget_exceeded")[0].fields["rule"] == "max_tool_calls_per_turn"
    core.receive(AGENT, permission(9, "s1", {"x": 1}), 0.0)
    out = core.receive(AGENT, permission(10, "s1", {"x": 1}), 0.0)
    assert sends(out, CLIENT)
    assert "repeat_limit" in {a.fields["rule"] for a in audits(out, "budget_exceeded")}
    assert core.ledger.would_block["prompts_per_window"] == 1
    # the would-be cancel, then each permission request of the would-be cancelled turn
    assert core.ledger.would_block["max_tool_calls_per_turn"] == 3
    assert_accounting(core)


def test_observe_mode_on_permission_rules_and_the_protocol_rules_stay() -> None:
    """A deny rule in observe mode audits would_block with the rule's name and forwards;
    a mutation on a child without its capability is still refused (never relaxed)."""
    cfg = config_from_dict(
        {
            "policy": {"mode": "observe"},
            "permissions": {
                "rules": [{"name": "no-exec", "action": "deny", "tool_kind": "execute"}]
            },
        }
    )
    core = ProxyCore(cfg)
    open_session(core, "s1")
    out = core.receive(AGENT, permission(1, "s1", {"cmd": "rm"}), 0.0)
    assert sends(out, CLIENT)
    assert not sends(out, AGENT)
    (record,) = audits(out, "permission_decided")
    assert record.fields["rule"] == "no-exec"
    assert record.fields["would_block"] is True
    assert core.ledger.would_block == {"no-exec": 1}
    core.receive(AGENT, announce("s1", "c1"), 0.0)
    out = core.receive(CLIENT, req(5, "session/prompt", {"sessionId": "c1", "prompt": []}), 0.0)
    assert not sends(out, AGENT)
    assert audits(out, "mutation_rejected")


def test_observe_mode_on_admission_rules_forwards_and_counts() -> None:
    """An admission refusal in observe mode is audited with would_block and its rule,
    counted per rule, and the request reaches the agent byte for byte, unanswered."""
    cfg = config_from_dict({"policy": {"mode": "observe"}, "admission": {"roots": ["/srv"]}})
    core = ProxyCore(cfg)
    core.admission.bind("alice", True, None)
    frame = req(7, "session/new", {"cwd": "/etc", "mcpServers": []})
    out = core.receive(CLIENT, frame, 0.0)
    assert sends(out, AGENT) == [frame]
    assert sends(out, CLIENT) == []
    (record,) = audits(out, "admission_refused")
    assert record.fields["would_block"] is True
    assert record.fields["rule"] == "admission.roots"
    assert core.ledger.would_block == {"admission.roots": 1}
    core.reconfigure(config_from_dict({"admission": {"roots": ["/srv"]}}))
    out = core.receive(CLIENT, req(8, "session/new", {"cwd": "/etc", "mcpServers": []}), 0.0)
    assert sends(out, AGENT) == []
    assert decoded(sends(out, CLIENT)[0])["error"]["data"]["rule"] == "admission.roots"
    assert_accounting(core)


def test_observe_mode_on_elicitation_rules_forwards_and_counts() -> None:
    """A URL-mode elicitation to a host no rule allows is shown to the client in observe
    mode (audited would_block with its rule), not declined."""
    cfg = config_from_dict({"policy": {"mode": "observe"}, "elicitation": {"url_hosts": []}})
    core = ProxyCore(cfg)
    open_session(core, "s1")
    params = {
        "sessionId": "s1",
        "mode": "url",
        "url": "https://evil.example/login",
        "message": "sign in",
        "elicitationId": "e1",
    }
    frame = req("e", "elicitation/create", params)
    out = core.receive(AGENT, frame, 0.0)
    assert sends(out, CLIENT) == [frame]
    assert sends(out, AGENT) == []
    (record,) = audits(out, "elicitation_declined")
    assert record.fields["would_block"] is True
    assert core.ledger.would_block == {"elicitation.url_hosts": 1}
    core.reconfigure(config_from_dict({"elicitation": {"url_hosts": []}}))
    out = core.receive(AGENT, req("f", "elicitation/create", params), 0.0)
    assert sends(out, CLIENT) == []
    assert decoded(sends(out, AGENT)[0]) == {
        "jsonrpc": "2.0",
        "id": "f",
        "result": {"action": "decline"},
    }


def test_a_reload_switches_the_mode() -> None:
    """reconfigure from observe to enforce makes the next decision block."""
    core = core_with("observe", prompts_per_window=1)
    prompt(core, 1)
    assert forwarded(prompt(core, 2), 2)
    core.reconfigure(config_from_dict({"budgets": {"prompts_per_window": 1}}))
    assert not forwarded(prompt(core, 3), 3)


def test_fast_path_unchanged_without_budgets() -> None:
    """Without budgets a tool_call or usage_update goes on the fast path (no inspection)."""
    core = core_with()
    assert "usage_update" not in core._needs
    core2 = core_with(max_tokens=5, max_tool_calls_per_turn=1)
    assert core2._needs["usage_update"] is None
    assert core2._needs["tool_call"] is None


# ------------------------------------------------------------------ the store, in core


def store_core(**budgets: Any) -> ProxyCore:
    return core_with(store="redis://127.0.0.1:6399/0", key="team", **budgets)


def test_with_a_store_a_prompt_waits_for_the_reserve_and_later_traffic_keeps_order() -> None:
    """The prompt becomes a StoreCall; client messages after it wait behind it; an allowed
    reply forwards the prompt and then the rest, in order."""
    core = store_core(prompts_per_window=5, max_tokens=100, window_s=60)
    frames = [
        req(1, "session/prompt", {"sessionId": "s1", "prompt": []}),
        json.dumps(
            {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s1"}}
        ).encode(),
    ]
    out = core.receive(CLIENT, frames, 0.0)
    (call,) = [a for a in out if type(a) is StoreCall]
    assert (call.op, call.key, call.prompt_limit, call.token_limit, call.window_s) == (
        "reserve",
        "team",
        5,
        100,
        60.0,
    )
    assert not sends(out, AGENT)
    assert_accounting(core)  # the waiting prompt counts as held
    out = core.store_result(call, StoreReply(ok=True, allowed=True, prompts=1), 0.0)
    sent = [decoded(d) for d in sends(out, AGENT)]
    assert [s.get("method") for s in sent] == ["session/prompt", "session/cancel"]
    assert_accounting(core)


def test_a_store_refusal_names_the_budget_and_the_reset() -> None:
    core = store_core(prompts_per_window=1)
    out = prompt(core, 1)
    (call,) = [a for a in out if type(a) is StoreCall]
    reply = StoreReply(ok=True, allowed=False, budget="prompts_per_window", prompts=2, reset_in_s=9)
    out = core.store_result(call, reply, 0.0)
    error = refusal(out)
    assert "resets in 9s" in error["message"]
    assert "'team'" in error["message"]


def test_store_unreachable_fails_closed_by_default_and_open_when_configured() -> None:
    """closed: the prompt is refused with an error naming the store; open: counted here."""
    core = store_core(prompts_per_window=1)
    call = next(a for a in prompt(core, 1) if type(a) is StoreCall)
    out = core.store_result(call, StoreReply(ok=False, error="connection refused"), 0.0)
    assert "redis://127.0.0.1:6399/0" in refusal(out)["message"]
    assert [r.level for r in out if type(r).__name__ == "Report"] == ["warning"]
    core = store_core(prompts_per_window=1, store_fail="open")
    for rid, allowed in ((1, True), (2, False)):
        call = next(a for a in prompt(core, rid) if type(a) is StoreCall)
        out = core.store_result(call, StoreReply(ok=False, error="down"), 0.0)
        assert forwarded(out, rid) is allowed
    reports = [r for r in out if type(r).__name__ == "Report"]
    assert reports == []  # logged once


def test_token_growth_goes_to_the_store_one_call_at_a_time() -> None:
    """usage_update growth becomes "add" calls; growth while one is out is sent after."""
    core = store_core(max_tokens=1000)
    out = core.receive(AGENT, update("s1", {"sessionUpdate": "usage_update", "used": 10}), 0.0)
    (call,) = [a for a in out if type(a) is StoreCall]
    assert (call.op, call.amount) == ("add", 10)
    out = core.receive(AGENT, update("s1", {"sessionUpdate": "usage_update", "used": 25}), 0.0)
    assert not [a for a in out if type(a) is StoreCall]
    out = core.store_result(call, StoreReply(ok=True, tokens=10), 0.0)
    (call2,) = [a for a in out if type(a) is StoreCall]
    assert (call2.op, call2.amount) == ("add", 15)
    assert not any(type(a) is Send for a in out)


def test_a_v1_request_naming_an_announced_tool_call_is_compared_by_what_was_announced() -> None:
    """A request carrying only a toolCallId is compared with the kind, title and raw input
    the agent's tool_call announced: the same announced call is a repeat, another is not."""
    core = core_with(repeat_limit=1)

    def announced(tcid: str, raw: Any) -> None:
        upd = {"sessionUpdate": "tool_call", "toolCallId": tcid, "kind": "edit", "rawInput": raw}
        core.receive(AGENT, update("s1", upd), 0.0)

    def ask(rid: int, tcid: str) -> list[Any]:
        params = {"sessionId": "s1", "toolCall": {"toolCallId": tcid}, "options": OPTIONS}
        return core.receive(AGENT, req(rid, RP, params), 0.0)

    announced("a", {"path": "/x", "n": 1})
    announced("b", {"n": 1, "path": "/x"})
    announced("c", {"n": 2, "path": "/x"})
    assert sends(ask(1, "a"), CLIENT)
    assert not sends(ask(2, "b"), CLIENT)  # the same call again
    assert sends(ask(3, "c"), CLIENT)  # another argument


def test_the_trace_keeps_messages_waiting_for_the_store_held_then_decided() -> None:
    """Traced: the prompt waiting for the store and a message behind it are ``held``; the
    store's answer gives each a later record (``of``) with its decision, in order."""
    records: list[dict[str, Any]] = []
    cfg = config_from_dict(
        {"budgets": {"prompts_per_window": 1, "store": "redis://127.0.0.1:6399/0"}}
    )
    core = TracingCore(cfg, emit=records.append)
    open_session(core, "s1")
    records.clear()
    cancel = json.dumps(
        {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s1"}}
    ).encode()
    out = core.receive(CLIENT, [req(1, "session/prompt", {"sessionId": "s1"}), cancel], 0.0)
    call = next(a for a in out if type(a) is StoreCall)
    second = core.receive(CLIENT, req(2, "session/prompt", {"sessionId": "s1"}), 0.0)
    assert not [a for a in second if type(a) is StoreCall]
    assert [r["decision"] for r in records] == ["held", "held", "held"]
    first, behind, prompt2 = (r["seq"] for r in records)
    out = core.store_result(call, StoreReply(ok=True, allowed=True, prompts=1), 1.0)
    call2 = next(a for a in out if type(a) is StoreCall)  # the second prompt asks in turn
    refusal = StoreReply(ok=True, allowed=False, budget="prompts_per_window", prompts=2)
    core.store_result(call2, refusal, 2.0)
    later = [(r["of"], r["method"], r["decision"]) for r in records[3:]]
    assert later == [
        (first, "session/prompt", "forwarded"),
        (behind, "session/cancel", "forwarded"),
        (prompt2, "session/prompt", "refused"),
    ]
    assert_accounting(core)


def test_a_reload_dropping_the_prompt_budget_keeps_the_client_order() -> None:
    """A reload that stops watching prompts while one waits for the store: later client
    messages still queue behind it (they overtook it and the messages queued with it)."""
    core = store_core(prompts_per_window=5)
    cancel = json.dumps(
        {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s1"}}
    ).encode()
    out = core.receive(CLIENT, [req(1, "session/prompt", {"sessionId": "s1"}), cancel], 0.0)
    call = next(a for a in out if type(a) is StoreCall)
    store = {"store": "redis://127.0.0.1:6399/0", "key": "team"}
    core.reconfigure(config_from_dict({"budgets": store}))
    assert not sends(prompt(core, 2), AGENT)  # behind the waiting prompt
    out = core.store_result(call, StoreReply(ok=True, allowed=True, prompts=1), 1.0)
    sent = [(d.get("method"), d.get("id")) for d in map(decoded, sends(out, AGENT))]
    assert sent == [("session/prompt", 1), ("session/cancel", None), ("session/prompt", 2)]
    assert_accounting(core)


def test_the_client_going_while_a_prompt_waits_for_the_store_drops_it() -> None:
    """A prompt waiting for the store when the client goes is dropped (audited), and the
    store's late answer forwards nothing."""
    core = store_core(prompts_per_window=5)
    call = next(a for a in prompt(core, 1) if type(a) is StoreCall)
    out = core.peer_closed(CLIENT, 1.0, "client went")
    assert audits(out, "request_dropped")
    assert_accounting(core)
    assert not sends(core.store_result(call, StoreReply(ok=True), 2.0))
    assert_accounting(core)


def test_a_reload_takes_new_limits_and_the_mode_but_keeps_the_store() -> None:
    """apply_reload: budgets limits and policy.mode are policy; the store keys need a
    restart (they are named, and the running ones stay)."""
    from acp_proxy.config.reload import apply_reload

    running = config_from_dict({"budgets": {"store": "redis://127.0.0.1:1/0", "key": "a"}})
    loaded = config_from_dict(
        {
            "budgets": {"store": "redis://127.0.0.1:2/0", "key": "b", "prompts_per_window": 3},
            "policy": {"mode": "observe"},
        }
    )
    effective, restart = apply_reload(running, loaded)
    assert effective.budgets.prompts_per_window == 3
    assert effective.policy.mode == "observe"
    assert (effective.budgets.store, effective.budgets.key) == ("redis://127.0.0.1:1/0", "a")
    assert restart == ["budgets.store", "budgets.key"]


@pytest.mark.parametrize(
    ("budgets", "key"),
    [
        ({"store": "http://x:1/0"}, "budgets.store"),
        ({"store_fail": "maybe"}, "budgets.store_fail"),
        ({"window_s": 0}, "budgets.window_s"),
        ({"repeat_limit": -1}, "budgets.repeat_limit"),
        ({"prompts": 1}, "budgets.prompts"),
    ],
)
def test_bad_budget_settings_are_config_errors_naming_the_key(
    budgets: dict[str, Any], key: str
) -> None:
    from acp_proxy.config import ConfigError

    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        config_from_dict({"budgets": budgets})
    with pytest.raises(ConfigError, match=r"policy\.mode"):
        config_from_dict({"policy": {"mode": "watch"}})


def test_a_prompt_allowed_by_the_store_is_enforced_again_on_the_registry_of_then() -> None:
    """A child's grant withdrawn while its prompt waited for the store: the prompt is
    refused as a mutation when the store's answer comes (never forwarded)."""
    cfg = config_from_dict(
        {
            "budgets": {"prompts_per_window": 5, "store": "redis://127.0.0.1:6399/0"},
            "enforcement": {"child_mutations": {"session/prompt": "prompt"}},
        }
    )
    core = ProxyCore(cfg)
    open_session(core, "s1")
    core.receive(AGENT, announce("s1", "c1", capabilities={"prompt": {}}), 0.0)
    call = next(a for a in prompt(core, 1, "c1") if type(a) is StoreCall)
    core.receive(AGENT, announce("s1", "c1", capabilities={}), 0.0)
    out = core.store_result(call, StoreReply(ok=True, allowed=True, prompts=1), 0.0)
    assert not sends(out, AGENT)
    assert audits(out, "mutation_rejected")
    assert_accounting(core)


# ------------------------------------------------------------------------- fuzzing

_SIDS = st.sampled_from(["s1", "c1", "zz", 3])
_BUDGET_UPDATES = st.fixed_dictionaries(
    {"sessionUpdate": st.sampled_from(["tool_call", "usage_update", "state_update", 5])},
    optional={
        "toolCallId": st.sampled_from(["a", "b", 1]),
        "used": st.one_of(st.integers(-5, 3000), st.just("x"), st.none()),
        "state": st.sampled_from(["idle", "running", None, 1]),
        "kind": st.sampled_from(["edit", None]),
        "rawInput": st.one_of(st.none(), st.dictionaries(st.sampled_from("ab"), st.integers())),
    },
)
_BUDGET_MESSAGES = st.fixed_dictionaries(
    {"jsonrpc": st.just("2.0")},
    optional={
        "id": st.one_of(st.integers(0, 4), st.sampled_from(["p", None])),
        "method": st.sampled_from(
            ["session/prompt", "session/update", RP, "session/close", "session/cancel"]
        ),
        "params": st.fixed_dictionaries(
            {},
            optional={
                "sessionId": _SIDS,
                "update": _BUDGET_UPDATES,
                "toolCall": st.fixed_dictionaries(
                    {"toolCallId": st.sampled_from(["a", "b"])},
                    optional={"rawInput": st.dictionaries(st.sampled_from("ab"), st.integers())},
                ),
                "options": st.sampled_from([OPTIONS, [], None]),
            },
        ),
        "result": st.sampled_from([{}, {"stopReason": "end_turn"}, {"messageId": "m"}]),
    },
)
_STEPS = st.lists(
    st.one_of(
        st.tuples(
            st.sampled_from(["client", "agent"]), _BUDGET_MESSAGES.map(lambda m: json.dumps(m))
        ),
        st.tuples(st.just("timer"), st.just("")),
        st.tuples(st.just("store"), st.sampled_from(["ok", "over", "tokens", "down"])),
        st.tuples(st.just("close"), st.sampled_from(["client", "agent"])),
    ),
    max_size=30,
)
_REPLIES = {
    "ok": StoreReply(ok=True, allowed=True, prompts=1),
    "over": StoreReply(ok=True, allowed=False, budget="prompts_per_window", prompts=9),
    "tokens": StoreReply(ok=True, allowed=False, budget="max_tokens", tokens=99),
    "down": StoreReply(ok=False, error="down"),
}


@settings(deadline=None)
@given(
    steps=_STEPS,
    mode=st.sampled_from(["enforce", "observe"]),
    store=st.sampled_from(["", "redis://127.0.0.1:6399/0"]),
    fail=st.sampled_from(["closed", "open"]),
)
def test_fuzz_budgets_never_raise_and_account_for_every_message(
    steps: list[tuple[str, str]], mode: str, store: str, fail: str
) -> None:
    """Any traffic with every budget on (with or without a store, answering anything)
    never raises, and accepted == forwarded + answered + dropped + held throughout."""
    core = core_with(
        mode,
        prompts_per_window=2,
        window_s=5,
        max_tool_calls_per_turn=1,
        max_turn_s=3,
        max_tokens=1000,
        repeat_limit=1,
        store=store,
        store_fail=fail,
    )
    core.receive(AGENT, announce("s1", "c1"), 0.0)
    calls: list[StoreCall] = []
    for k, (kind, arg) in enumerate(steps):
        now = float(k)
        if kind in ("client", "agent"):
            out = core.receive(CLIENT if kind == "client" else AGENT, arg.encode(), now)
        elif kind == "timer":
            out = core.handle_timer(now)
        elif kind == "close":
            out = core.peer_closed(CLIENT if arg == "client" else AGENT, now, "gone")
        elif calls:
            out = core.store_result(calls.pop(0), _REPLIES[arg], now)
        else:
            continue
        calls.extend(a for a in out if type(a) is StoreCall)
        assert_accounting(core)
        deadline = core.get_timer()
        assert deadline is None or isinstance(deadline, float)


def test_the_shipped_budgets_example_loads() -> None:
    """config/examples/budgets.toml is a valid configuration in observe mode."""
    from pathlib import Path

    from acp_proxy.config.io import load_config

    path = Path(__file__).resolve().parents[3] / "config" / "examples" / "budgets.toml"
    cfg = load_config(path)
    assert cfg.policy.mode == "observe"
    assert cfg.budgets.max_tool_calls_per_turn == 200
