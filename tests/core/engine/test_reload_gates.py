"""A reload turning on budgets, admission or elicitation reaches a live core that
started with none of them configured (issue 29: start-up builds these gates from
the default sections; a reload must still switch each one on)."""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest

from acp_proxy.config import (
    AdmissionConfig,
    BudgetsConfig,
    Config,
    DedupConfig,
    ElicitationConfig,
    HoldConfig,
    PermissionsConfig,
    PolicyConfig,
)
from acp_proxy.config.reload import POLICY_SECTIONS, apply_reload
from acp_proxy.core.engine import ProxyCore
from acp_proxy.core.engine.budgets import BUDGET_EXCEEDED_CODE
from tests.support.corekit import AGENT, CLIENT, audits, decoded, req, resp, sends

#: one non-default value of each section a reload applies whole
CHANGED: dict[str, Any] = {
    "enforcement": attrs.evolve(Config().enforcement, reject_code=-32099),
    "hold": HoldConfig(timeout_seconds=3.0),
    "dedup": DedupConfig(state_reports=False),
    "permissions": PermissionsConfig(refuse_code=-32098),
    "budgets": BudgetsConfig(prompts_per_window=1),
    "policy": PolicyConfig(mode="observe"),
    "admission": AdmissionConfig(applies_to="all"),
    "elicitation": ElicitationConfig(secret_fields="decline"),
}


def test_every_whole_policy_section_is_listed_here() -> None:
    """A policy section added later is checked below too."""
    assert set(CHANGED) == {s for s in POLICY_SECTIONS if "." not in s}


@pytest.mark.parametrize("section", sorted(CHANGED))
def test_apply_reload_carries_each_policy_section(section: str) -> None:
    """The reloaded section is the one in force, and no restart is asked for."""
    loaded = attrs.evolve(Config(), **{section: CHANGED[section]})
    effective, restart = apply_reload(Config(), loaded)
    assert getattr(effective, section) == CHANGED[section]
    assert getattr(effective, section) != getattr(Config(), section)
    assert restart == []


def _reloaded(core: ProxyCore, **sections: Any) -> None:
    effective, restart = apply_reload(Config(), attrs.evolve(Config(), **sections))
    assert restart == []
    core.reconfigure(effective)


def _open(core: ProxyCore, servers: list[Any] | None = None, rid: int = 1) -> list[Any]:
    params = {"cwd": "/ws", "mcpServers": servers or []}
    out = core.receive(CLIENT, req(rid, "session/new", params), 0.0)
    core.receive(AGENT, resp(rid, {"sessionId": f"s{rid}"}), 0.0)
    return out


def _prompt(core: ProxyCore, rid: int, now: float) -> list[Any]:
    return core.receive(CLIENT, req(rid, "session/prompt", {"sessionId": "s1", "prompt": []}), now)


def test_a_reload_turns_on_a_prompt_budget() -> None:
    """No budget at start: prompts pass; after the reload the second prompt is refused."""
    core = ProxyCore(Config())
    _open(core)
    assert sends(_prompt(core, 10, 1.0), AGENT)
    _reloaded(core, budgets=BudgetsConfig(prompts_per_window=1, window_s=60))
    assert sends(_prompt(core, 11, 2.0), AGENT)
    out = _prompt(core, 12, 3.0)
    assert sends(out, AGENT) == []
    [answer] = sends(out, CLIENT)
    assert decoded(answer)["error"]["code"] == BUDGET_EXCEEDED_CODE


def test_a_reload_turns_on_admission_for_the_local_client() -> None:
    """``applies_to = "all"`` after a reload refuses a stdio MCP server the default admitted."""
    stdio = {"name": "sh", "command": "/bin/sh", "args": [], "env": []}
    core = ProxyCore(Config())
    core.admission.bind(None, False, None)  # the stdio drop-in's editor
    assert sends(_open(core, [stdio], rid=1), AGENT)
    _reloaded(core, admission=AdmissionConfig(applies_to="all"))
    out = _open(core, [stdio], rid=2)
    assert sends(out, AGENT) == []
    [answer] = sends(out, CLIENT)
    assert "admission.mcp_stdio" in json.dumps(decoded(answer))


def test_a_reload_turns_on_secret_field_declines() -> None:
    """A form asking for a password reaches the client before the reload and is
    declined to the agent after it."""
    form = {
        "sessionId": "s1",
        "mode": "form",
        "message": "sign in",
        "requestedSchema": {"type": "object", "properties": {"password": {"type": "string"}}},
    }
    core = ProxyCore(Config())
    _open(core)
    first = req("e1", "elicitation/create", form)
    assert sends(core.receive(AGENT, first, 1.0), CLIENT) == [first]
    _reloaded(core, elicitation=ElicitationConfig(secret_fields="decline"))
    out = core.receive(AGENT, req("e2", "elicitation/create", form), 2.0)
    assert sends(out, CLIENT) == []
    [answer] = [json.loads(d) for d in sends(out, AGENT)]
    assert answer == {"jsonrpc": "2.0", "id": "e2", "result": {"action": "decline"}}
    assert audits(out, "elicitation_declined")
