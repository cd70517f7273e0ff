"""The engine's dispatch tables: every row is reached by the message it is keyed by.

Each test replaces the rows of one table with recorders that call the original
row, drives one :class:`ProxyCore` through a message per row, and asserts the
row that ran. A row the engine no longer consults, or a key read from the wrong
place, fails here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from support.corekit import announce, events, open_session, req, resp, sends, update

from acp_proxy.config import Config
from acp_proxy.config.io import config_from_dict
from acp_proxy.config.model import PERMISSION_METHODS
from acp_proxy.core.actions import Peer
from acp_proxy.core.engine import ProxyCore
from acp_proxy.core.engine import agent as agent_module
from acp_proxy.core.engine import client as client_module
from acp_proxy.core.engine import permissions as permissions_module
from acp_proxy.core.engine.elicitation import ELICITATION_CREATE
from acp_proxy.core.session.registry import UpdateOutcome

CLIENT, AGENT = Peer.CLIENT, Peer.AGENT


def _record(monkeypatch: pytest.MonkeyPatch, table: dict[Any, Any]) -> list[Any]:
    """Replaces each row of ``table`` by one recording its key, then running the row."""
    seen: list[Any] = []

    def spy(key: Any, row: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any) -> Any:
            seen.append(key)
            return row(*args)

        return run

    for key, row in list(table.items()):
        monkeypatch.setitem(table, key, spy(key, row))
    return seen


def _inspecting_core() -> ProxyCore:
    """A core whose fast path hands every update kind of the table to the agent
    direction (a tool budget, a token budget, a permission rule remembering tools)."""
    return ProxyCore(
        config_from_dict(
            {
                "budgets": {"max_tool_calls_per_turn": 50, "max_tokens": 10**9},
                "permissions": {
                    "rules": [{"method": "session/request_permission", "action": "ask"}]
                },
            }
        )
    )


UPDATES: dict[str, dict[str, Any]] = {
    "subagent_update": {"sessionId": "C", "capabilities": {}},
    "session_message": {"sender": "S", "recipient": "S", "content": []},
    "tool_call": {"toolCallId": "t1", "title": "ls", "kind": "read"},
    "tool_call_update": {"toolCallId": "t1", "status": "completed"},
    "usage_update": {"used": 10, "size": 1000},
    "state_update": {"state": "idle"},
}


def test_the_update_table_has_a_reader_per_kind_the_engine_acts_on() -> None:
    assert set(agent_module._UPDATE_READERS) == set(UPDATES)


@pytest.mark.parametrize("kind", sorted(UPDATES))
def test_each_update_kind_dispatches_to_its_reader(
    monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    seen = _record(monkeypatch, agent_module._UPDATE_READERS)
    core = _inspecting_core()
    open_session(core, "S")
    out = core.receive(AGENT, update("S", {"sessionUpdate": kind, **UPDATES[kind]}), 1.0)
    assert seen == [kind]
    assert sends(out, CLIENT)  # each is forwarded (the first of its kind)


def test_a_kind_without_a_reader_is_forwarded_unread(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _record(monkeypatch, agent_module._UPDATE_READERS)
    core = _inspecting_core()
    open_session(core, "S")
    frame = update("S", {"sessionUpdate": "plan", "entries": []})
    assert sends(core.receive(AGENT, frame, 1.0), CLIENT) == [frame]
    assert seen == []


def test_the_state_reader_drops_a_repeated_report() -> None:
    core = ProxyCore(Config())
    open_session(core, "S")
    frame = update("S", {"sessionUpdate": "state_update", "state": "idle"})
    assert sends(core.receive(AGENT, frame, 1.0), CLIENT) == [frame]
    out = core.receive(AGENT, frame, 2.0)
    assert sends(out, CLIENT) == []
    assert events(out) == ["duplicate_dropped"]


@pytest.mark.parametrize(
    "method", [*PERMISSION_METHODS, ELICITATION_CREATE], ids=lambda m: m.replace("/", "_")
)
def test_each_gated_agent_request_dispatches_to_its_gate(
    monkeypatch: pytest.MonkeyPatch, method: str
) -> None:
    seen = _record(monkeypatch, agent_module._REQUEST_READERS)
    core = ProxyCore(Config())
    open_session(core, "S")
    out = core.receive(AGENT, req(7, method, {"sessionId": "S"}), 1.0)
    assert seen == [method]
    assert sends(out, CLIENT)  # no rule: forwarded for the client to answer


def test_a_request_no_gate_decides_is_forwarded(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _record(monkeypatch, agent_module._REQUEST_READERS)
    core = ProxyCore(Config())
    open_session(core, "S")
    frame = req(7, "terminal/output", {"sessionId": "S", "terminalId": "t"})
    assert sends(core.receive(AGENT, frame, 1.0), CLIENT) == [frame]
    assert seen == []


def test_the_outcome_table_covers_every_registry_outcome() -> None:
    assert set(agent_module._OUTCOMES) == set(UpdateOutcome)


def test_each_registry_outcome_dispatches_to_its_row(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _record(monkeypatch, agent_module._OUTCOMES)
    core = ProxyCore(config_from_dict({"limits": {"max_children": 2}}))
    open_session(core, "P")
    open_session(core, "O")

    def step(frame: bytes, outcome: UpdateOutcome, event: str) -> None:
        seen.clear()
        out = core.receive(AGENT, frame, 1.0)
        assert seen == [outcome]
        assert event in events(out)

    step(announce("P", "C", capabilities={}), UpdateOutcome.ANNOUNCED, "child_announced")
    step(announce("P", "C", capabilities={}), UpdateOutcome.UNCHANGED, "child_updated")
    step(
        announce("P", "C", capabilities={"session/prompt": {}}),
        UpdateOutcome.UPDATED,
        "child_updated",
    )
    step(announce("P", "O", capabilities={}), UpdateOutcome.CONFLICT, "registry_conflict")
    step(announce("C", "P", capabilities={}), UpdateOutcome.INVALID, "invalid_subagent_update")
    step(announce("P", "D", capabilities={}), UpdateOutcome.REFUSED, "notification_dropped")


SETTLED: list[tuple[str, dict[str, Any], Any]] = [
    ("initialize", {"protocolVersion": 1}, {"protocolVersion": 1}),
    ("session/new", {"cwd": "/", "mcpServers": []}, {"sessionId": "N"}),
    ("session/fork", {"sessionId": "S", "cwd": "/", "mcpServers": []}, {"sessionId": "F"}),
    ("session/load", {"sessionId": "S", "cwd": "/", "mcpServers": []}, {}),
    ("session/resume", {"sessionId": "S", "cwd": "/", "mcpServers": []}, {}),
    ("session/close", {"sessionId": "S"}, {}),
]


def test_the_settle_table_has_a_row_per_method_whose_answer_settles_something() -> None:
    assert set(agent_module._SETTLES) == {method for method, _, _ in SETTLED}


@pytest.mark.parametrize(("method", "params", "result"), SETTLED, ids=lambda v: str(v))
def test_each_answer_dispatches_to_what_it_settles(
    monkeypatch: pytest.MonkeyPatch, method: str, params: dict[str, Any], result: Any
) -> None:
    seen = _record(monkeypatch, agent_module._SETTLES)
    core = ProxyCore(Config())
    open_session(core, "S")
    seen.clear()  # the session/new that opened S
    assert sends(core.receive(CLIENT, req(9, method, params), 1.0), AGENT)
    assert sends(core.receive(AGENT, resp(9, result), 2.0), CLIENT)
    assert seen == [method]
    if isinstance(result, dict) and "sessionId" in result:
        assert core.registry.is_known(result["sessionId"])


def test_an_answer_that_settles_nothing_more_reaches_no_row(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen = _record(monkeypatch, agent_module._SETTLES)
    core = ProxyCore(Config())
    open_session(core, "S")
    seen.clear()  # the session/new that opened S
    core.receive(CLIENT, req(9, "session/set_mode", {"sessionId": "S", "modeId": "x"}), 1.0)
    assert sends(core.receive(AGENT, resp(9, {}), 2.0), CLIENT)
    assert seen == []


# ------------------------------------------------- the client direction's checks

CHECKS = ["enforcement", "admission", "workspace", "budget"]


def _checking_core() -> ProxyCore:
    """A core where each check of the client direction can refuse something."""
    core = ProxyCore(
        config_from_dict(
            {
                "admission": {"roots": ["/ws", "/etc"], "applies_to": "all"},
                "sandbox": {"enabled": True, "workspace": ["/ws", "/srv"]},
                "budgets": {"prompts_per_window": 1},
            }
        )
    )
    core.receive(CLIENT, req("new", "session/new", {"cwd": "/ws", "mcpServers": []}), 0.0)
    core.receive(AGENT, resp("new", {"sessionId": "S"}), 0.0)
    core.receive(AGENT, announce("S", "C", capabilities={}), 0.0)
    core.receive(CLIENT, req("p1", "session/prompt", {"sessionId": "S", "prompt": []}), 0.0)
    return core


def test_the_client_checks_run_in_order() -> None:
    names = [c.__name__.removeprefix("_check_") for c in client_module._CHECKS]
    assert names == CHECKS


_PROMPT_C = req(1, "session/prompt", {"sessionId": "C", "prompt": []})
_NEW_OUTSIDE_ROOTS = req(2, "session/new", {"cwd": "/srv", "mcpServers": []})
_NEW_OUTSIDE_WORKSPACE = req(
    3, "session/new", {"cwd": "/ws", "additionalDirectories": ["/etc"], "mcpServers": []}
)
_PROMPT_S = req(4, "session/prompt", {"sessionId": "S", "prompt": []})


@pytest.mark.parametrize(
    ("refused_by", "frame", "event"),
    [
        ("enforcement", _PROMPT_C, "mutation_rejected"),
        ("admission", _NEW_OUTSIDE_ROOTS, "admission_refused"),
        ("workspace", _NEW_OUTSIDE_WORKSPACE, "request_refused"),
        ("budget", _PROMPT_S, "budget_exceeded"),
    ],
)
def test_each_client_check_is_reached_and_the_first_refusal_ends_the_message(
    monkeypatch: pytest.MonkeyPatch, refused_by: str, frame: bytes, event: str
) -> None:
    core = _checking_core()
    seen: list[str] = []

    def spy(check: Callable[..., bool]) -> Callable[..., bool]:
        def run(*args: Any) -> bool:
            seen.append(check.__name__.removeprefix("_check_"))
            return check(*args)

        return run

    monkeypatch.setattr(client_module, "_CHECKS", tuple(spy(c) for c in client_module._CHECKS))
    out = core.receive(CLIENT, frame, 1.0)
    assert seen == CHECKS[: CHECKS.index(refused_by) + 1]
    assert event in events(out)
    assert sends(out, AGENT) == []


def test_a_message_every_check_passes_is_forwarded(monkeypatch: pytest.MonkeyPatch) -> None:
    core = _checking_core()
    core.receive(AGENT, resp("p1", {"stopReason": "end_turn"}), 0.5)
    frame = req(5, "session/set_mode", {"sessionId": "S", "modeId": "x"})
    assert sends(core.receive(CLIENT, frame, 1.0), AGENT) == [frame]


# ------------------------------------------ the permission gate's dispositions

_OPTIONS = [
    {"optionId": "yes", "name": "Allow", "kind": "allow_once"},
    {"optionId": "no", "name": "Reject", "kind": "reject_once"},
]


def _ask(rid: int, kind: str) -> bytes:
    call = {"toolCallId": f"c{rid}", "title": "Tool", "kind": kind}
    return req(
        rid, "session/request_permission", {"sessionId": "S", "toolCall": call, "options": _OPTIONS}
    )


_RM = req(3, "terminal/create", {"sessionId": "S", "command": "rm", "args": ["-rf", "/"]})


@pytest.mark.parametrize(
    ("frame", "disposition", "to"),
    [
        (_ask(1, "read"), "answer", AGENT),
        (_ask(2, "edit"), "forward", CLIENT),
        (_RM, "refuse", AGENT),
    ],
)
def test_each_disposition_of_a_permission_decision_is_carried_out_by_its_row(
    monkeypatch: pytest.MonkeyPatch, frame: bytes, disposition: str, to: Peer
) -> None:
    seen = _record(monkeypatch, permissions_module._DISPOSITIONS)
    core = ProxyCore(
        config_from_dict(
            {
                "permissions": {
                    "rules": [
                        {"action": "allow", "tool_kind": ["read"]},
                        {"action": "ask", "tool_kind": ["edit"]},
                        {"action": "deny", "method": "terminal/create", "command": ["rm *"]},
                    ]
                }
            }
        )
    )
    open_session(core, "S")
    out = core.receive(AGENT, frame, 1.0)
    assert seen == [disposition]
    assert len(sends(out, to)) == 1
    assert set(permissions_module._DISPOSITIONS) == {"answer", "forward", "refuse"}
