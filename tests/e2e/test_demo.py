"""End to end: ``acp-proxy demo`` runs the real proxy on its scripted client and agent."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

TIMEOUT = 90
AUDIT_EVENTS = {"child_announced", "mutation_rejected", "held", "released", "duplicate_dropped"}


def _demo(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "acp_proxy", "demo", *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


@pytest.fixture(scope="module")
def records() -> list[dict[str, Any]]:
    """The ``--json`` transcript of one demo run."""
    proc = _demo("--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


def _received(records: list[dict[str, Any]]) -> list[Any]:
    return [
        r["message"]
        for r in records
        if r["type"] == "message" and r["direction"] == "proxy->client"
    ]


def _update(msg: Any) -> tuple[Any, dict[str, Any]]:
    if msg.get("method") != "session/update":
        return None, {}
    return msg["params"]["sessionId"], msg["params"]["update"]


def test_human_output_shows_the_key_facts() -> None:
    """The readable demo exits 0 and explains holding, duplicates, rejection and the audit trail."""
    proc = _demo()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "HELD, then RELEASED" in out
    assert "DUPLICATE REMOVED" in out
    assert "MUTATION REJECTED" in out
    assert "error -32601" in out
    assert "PERMITTED" in out
    for event in AUDIT_EVENTS:
        assert event in out
    assert "[FAIL]" not in out
    assert "PASS" in out


def test_json_all_checks_pass(records: list[dict[str, Any]]) -> None:
    """Every check in the JSON transcript passed and the proxy exited 0."""
    checks = [r for r in records if r["type"] == "check"]
    assert checks
    assert all(c["ok"] for c in checks), [c for c in checks if not c["ok"]]
    assert records[-1] == {"type": "result", "ok": True, "proxy_status": 0}


def test_forbidden_prompt_on_child_is_rejected(records: list[dict[str, Any]]) -> None:
    """session/prompt on the capability-less child 2 gets -32601 with data.capability null
    (no capability grants a prompt on a child: an allowlist)."""
    error = next(m["error"] for m in _received(records) if m.get("id") == 4)
    assert error["code"] == -32601
    assert error["data"]["capability"] is None
    assert error["data"]["method"] == "session/prompt"
    child2 = error["data"]["sessionId"]
    agent_in = [r["message"] for r in records if r["type"] == "agent" and r["dir"] == "in"]
    assert not any(
        m.get("method") == "session/prompt" and m["params"]["sessionId"] == child2 for m in agent_in
    )
    assert any(m.get("method") == "session/cancel" for m in agent_in)


def test_held_update_follows_session_new_response(records: list[dict[str, Any]]) -> None:
    """The update the agent sent before its session/new response arrives right after it."""
    got = _received(records)
    resp = next(i for i, m in enumerate(got) if m.get("id") == 2 and "result" in m)
    sid = got[resp]["result"]["sessionId"]
    first_update = next(i for i, m in enumerate(got) if _update(m)[0] == sid)
    assert first_update == resp + 1
    agent_out = [r["message"] for r in records if r["type"] == "agent" and r["dir"] == "out"]
    sent_update = next(i for i, m in enumerate(agent_out) if _update(m)[0] == sid)
    sent_resp = next(i for i, m in enumerate(agent_out) if m.get("id") == 2)
    assert sent_update < sent_resp


def test_duplicates_removed(records: list[dict[str, Any]]) -> None:
    """The repeated state_update and state mirrors reach the client once each."""
    agent_out = [r["message"] for r in records if r["type"] == "agent" and r["dir"] == "out"]

    def running(msgs: list[Any]) -> int:
        return sum(
            1
            for m in msgs
            if _update(m)[1].get("sessionUpdate") in ("state_update", "subagent_update")
            and (_update(m)[1].get("state") in ("running", {"state": "running"}))
        )

    assert running(agent_out) == running(_received(records)) + 3
    audit = [r["record"] for r in records if r["type"] == "audit"]
    assert sum(1 for r in audit if r["event"] == "duplicate_dropped") == 3


def test_audit_events_present(records: list[dict[str, Any]]) -> None:
    """The audit trail has child_announced, mutation_rejected, held, released, duplicate_dropped."""
    events = {r["record"]["event"] for r in records if r["type"] == "audit"}
    assert events >= AUDIT_EVENTS


def test_demo_agent_answers_unknown_methods_and_exits_on_eof() -> None:
    """The demo agent answers an unknown request with -32601 and exits 0 at end of input."""
    proc = subprocess.run(
        [sys.executable, "-m", "acp_proxy.demo_agent"],
        input='{"jsonrpc":"2.0","id":7,"method":"no/such"}\n',
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert proc.returncode == 0
    reply = json.loads(proc.stdout)
    assert reply["id"] == 7
    assert reply["error"]["code"] == -32601
