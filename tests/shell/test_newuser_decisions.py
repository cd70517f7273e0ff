"""Issue 32 item 2: a decision the proxy takes for the user is visible: logged at notice (the
default level) with its rule and request, and the proxy's answer carries the rule in ``_meta``."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from support.corekit import AGENT, CLIENT, announce, req, resp, update

from acp_proxy.config.io import config_from_dict
from acp_proxy.core.engine import ProxyCore
from acp_proxy.shell.log_levels import NOTICE
from acp_proxy.shell.routing import route_actions

RP = "session/request_permission"
OPTIONS = [
    {"optionId": "yes", "name": "Allow", "kind": "allow_once"},
    {"optionId": "no", "name": "Reject", "kind": "reject_once"},
]
RULES: list[dict[str, Any]] = [
    {"name": "no-fetch", "action": "deny", "tool_kind": "fetch"},
    {"name": "allow-reads", "action": "allow", "tool_kind": "read"},
]


def _started() -> ProxyCore:
    core = ProxyCore(config_from_dict({"permissions": {"rules": RULES}}))
    core.receive(CLIENT, req(0, "initialize", {"protocolVersion": 1}), 0.0)
    core.receive(AGENT, resp(0, {"protocolVersion": 1}), 0.0)
    core.receive(CLIENT, req("new", "session/new", {"cwd": "/ws", "mcpServers": []}), 0.0)
    core.receive(AGENT, resp("new", {"sessionId": "S"}), 0.0)
    return core


def _ask(rid: int, kind: str) -> bytes:
    call = {"toolCallId": "c1", "title": "Tool", "kind": kind}
    return req(rid, RP, {"sessionId": "S", "toolCall": call, "options": OPTIONS})


def test_a_deny_rule_is_logged_at_notice_and_named_in_meta(
    caplog: pytest.LogCaptureFixture,
) -> None:
    core = _started()
    with caplog.at_level(logging.INFO, logger="acp_proxy"):
        out = core.receive(AGENT, _ask(7, "fetch"), 1.0)
        batch = route_actions(out, None)
    [answer] = batch[AGENT]
    assert json.loads(answer)["result"] == {
        "outcome": {"outcome": "selected", "optionId": "no"},
        "_meta": {"acp-proxy/decision": {"rule": "no-fetch", "action": "deny"}},
    }
    lines = [r.getMessage() for r in caplog.records if r.levelno == NOTICE]
    assert lines == [
        "decided for the user: permission_decided rule='no-fetch' action='deny' "
        "optionId='no' method='session/request_permission' id=7 sessionId='S' "
        "reason='rule no-fetch'"
    ]


def test_an_allow_rule_answer_names_its_rule_and_a_question_is_not_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    core = _started()
    with caplog.at_level(logging.INFO, logger="acp_proxy"):
        batch = route_actions(core.receive(AGENT, _ask(8, "read"), 1.0), None)
        meta = json.loads(batch[AGENT][0])["result"]["_meta"]
        assert meta == {"acp-proxy/decision": {"rule": "allow-reads", "action": "allow"}}
        caplog.clear()
        asked = route_actions(core.receive(AGENT, _ask(9, "edit"), 2.0), None)
    assert [json.loads(m)["id"] for m in asked[CLIENT]] == [9]
    assert [r for r in caplog.records if r.getMessage().startswith("decided")] == []


def test_the_child_allowlist_refusal_is_logged_at_notice(caplog: pytest.LogCaptureFixture) -> None:
    core = _started()
    route_actions(core.receive(AGENT, announce("S", "kid", capabilities={}), 1.0), None)
    with caplog.at_level(logging.INFO, logger="acp_proxy"):
        prompt = req(5, "session/prompt", {"sessionId": "kid", "prompt": []})
        batch = route_actions(core.receive(CLIENT, prompt, 2.0), None)
    assert json.loads(batch[CLIENT][0])["error"]["code"] == -32601
    assert [r.getMessage() for r in caplog.records] == [
        "decided for the user: mutation_rejected rule='[enforcement] child allowlist' "
        "method='session/prompt' id=5 sessionId='kid' reason='not_allowed_on_child'"
    ]


def _budgeted(mode: str) -> ProxyCore:
    cfg = {"budgets": {"prompts_per_window": 1, "window_s": 60.0}, "policy": {"mode": mode}}
    core = ProxyCore(config_from_dict(cfg))
    core.receive(CLIENT, req(0, "initialize", {"protocolVersion": 1}), 0.0)
    core.receive(AGENT, resp(0, {"protocolVersion": 1}), 0.0)
    core.receive(CLIENT, req("new", "session/new", {"cwd": "/ws", "mcpServers": []}), 0.0)
    core.receive(AGENT, resp("new", {"sessionId": "S"}), 0.0)
    core.receive(CLIENT, req(1, "session/prompt", {"sessionId": "S", "prompt": []}), 1.0)
    core.receive(AGENT, resp(1, {"stopReason": "end_turn"}), 2.0)
    return core


@pytest.mark.parametrize("mode", ["enforce", "observe"])
def test_a_budget_refusal_is_one_notice_line(caplog: pytest.LogCaptureFixture, mode: str) -> None:
    """A prompt over its budget is one notice line naming the budget, the count and the
    limit; in observe mode the same line says it would have decided and blocked."""
    core = _budgeted(mode)
    with caplog.at_level(logging.DEBUG, logger="acp_proxy"):
        prompt = req(2, "session/prompt", {"sessionId": "S", "prompt": []})
        route_actions(core.receive(CLIENT, prompt, 3.0), None)
    lines = [r.getMessage() for r in caplog.records if r.levelno == NOTICE]
    end = " would_block=True" if mode == "observe" else ""
    rule = "rule='prompts_per_window' " if mode == "observe" else ""
    lead = "would have decided (observe mode)" if mode == "observe" else "decided"
    assert lines == [
        f"{lead} for the user: budget_exceeded {rule}budget='prompts_per_window' count=2 "
        f"limit=1 method='session/prompt' id=2 sessionId='S' "
        f"reason='budget prompts_per_window (1 per 60s) used up: resets in 58s'{end}"
    ]


def test_at_warning_level_a_denial_is_not_logged(caplog: pytest.LogCaptureFixture) -> None:
    """``--log-level warning`` silences the decision lines (they are notices, not warnings)."""
    core = _started()
    with caplog.at_level(logging.WARNING, logger="acp_proxy"):
        route_actions(core.receive(AGENT, _ask(7, "fetch"), 1.0), None)
    assert caplog.records == []


def test_a_cancelled_turn_keeps_its_whole_reason(caplog: pytest.LogCaptureFixture) -> None:
    """A budget that cancels a turn, with a UUID session id (as real agents name
    sessions): the line keeps the reason whole, the one place it says what happens."""
    sid = "8ae2a653-9c7a-429b-8f30-e6dae21a7ed9"
    core = ProxyCore(config_from_dict({"budgets": {"max_tool_calls_per_turn": 1}}))
    core.receive(CLIENT, req(0, "initialize", {"protocolVersion": 1}), 0.0)
    core.receive(AGENT, resp(0, {"protocolVersion": 1}), 0.0)
    core.receive(CLIENT, req("new", "session/new", {"cwd": "/ws", "mcpServers": []}), 0.0)
    core.receive(AGENT, resp("new", {"sessionId": sid}), 0.0)
    core.receive(CLIENT, req(2, "session/prompt", {"sessionId": sid, "prompt": []}), 1.0)
    with caplog.at_level(NOTICE, logger="acp_proxy"):
        for n in range(2):
            call = {"sessionUpdate": "tool_call", "toolCallId": f"t{n}", "title": "ls"}
            route_actions(core.receive(AGENT, update(sid, call), 2.0), None)
    assert [r.getMessage() for r in caplog.records] == [
        "decided for the user: budget_exceeded budget='max_tool_calls_per_turn' count=2 "
        f"limit=1 method='session/cancel' id=2 sessionId='{sid}' reason='budget "
        "max_tool_calls_per_turn: 2 tool calls in one prompt turn (limit 1); the proxy "
        "cancels the turn'"
    ]


def test_observe_mode_says_it_would_have_decided(caplog: pytest.LogCaptureFixture) -> None:
    """``policy.mode = "observe"``: the deny rule is not carried out (the user is asked),
    and the notice line says what it would have done, not that it decided."""
    core = ProxyCore(
        config_from_dict({"policy": {"mode": "observe"}, "permissions": {"rules": RULES}})
    )
    core.receive(CLIENT, req(0, "initialize", {"protocolVersion": 1}), 0.0)
    core.receive(AGENT, resp(0, {"protocolVersion": 1}), 0.0)
    core.receive(CLIENT, req("new", "session/new", {"cwd": "/ws", "mcpServers": []}), 0.0)
    core.receive(AGENT, resp("new", {"sessionId": "S"}), 0.0)
    with caplog.at_level(logging.INFO, logger="acp_proxy"):
        batch = route_actions(core.receive(AGENT, _ask(7, "fetch"), 1.0), None)
    assert batch[CLIENT] == [_ask(7, "fetch")]  # asked: the rule was not carried out
    lines = [r.getMessage() for r in caplog.records if r.levelno == NOTICE]
    assert len(lines) == 1
    assert lines[0].startswith("would have decided (observe mode) for the user: ")
    assert "rule='no-fetch'" in lines[0]
    assert lines[0].endswith("would_block=True")
