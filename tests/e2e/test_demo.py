"""End to end: ``acp-proxy demo`` runs the real proxy on its scripted client and agent."""

from __future__ import annotations

import copy
import json
import signal
import subprocess
import sys
from typing import Any

import pytest

from acp_proxy.demo.analysis import analyse, checks
from acp_proxy.demo.runner import execute
from acp_proxy.demo.transcript import Run

TIMEOUT = 90
AUDIT_EVENTS = {
    "child_announced",
    "mutation_rejected",
    "held",
    "released",
    "duplicate_dropped",
    "grants_revoked",
}


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


@pytest.fixture(scope="module")
def human() -> str:
    """The readable output of one demo run."""
    proc = _demo()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def _section(out: str, number: int) -> str:
    """Step ``number`` of the readable transcript, its lines joined by single spaces."""
    start = out.index(f"\n{number}. ")
    end = out.index(f"\n{number + 1}. ", start)
    return " ".join(out[start:end].split())


def test_human_output_shows_the_key_facts(human: str) -> None:
    """The readable demo exits 0 and explains holding, duplicates, rejection and the audit trail."""
    out = human
    assert "HELD, then RELEASED" in out
    assert "DUPLICATE REMOVED" in out
    assert "MUTATION REJECTED" in out
    assert "error -32601" in out
    assert "PERMITTED" in out
    assert "FRESHNESS BOUNDARY" in out
    assert "HISTORY: replayed before the resume answer" in out
    assert "RE-GRANTED" in out
    assert "11. session/prompt on sess_main asking for tools" in out
    assert "12. the client closes stdin" in out
    assert "no-network-tools" in out
    assert "permission_decided" in out
    for event in AUDIT_EVENTS:
        assert event in out
    assert "[FAIL]" not in out
    assert "PASS" in out


def test_human_output_puts_the_denied_permission_request_in_the_step_that_caused_it(
    human: str,
) -> None:
    """The agent's request for a web fetch follows the step-11 prompt that made it ask, and
    is shown as answered by the proxy (the agent got a result the client never saw)."""
    assert "perm-fetch" not in _section(human, 10)
    step11 = _section(human, 11)
    prompt = step11.index("client -> proxy [8] session/prompt")
    ask = step11.index("agent -> proxy [perm-fetch] session/request_permission")
    note = "ANSWERED by the proxy: denied by rule no-network-tools (audit: permission_decided)"
    answer = step11.index('proxy -> agent [perm-fetch] result: {"outcome": {"outcome": "selected",')
    assert prompt < ask < step11.index(note) < answer < step11.index("[perm-edit]")
    assert "DROPPED" not in step11


def test_json_all_checks_pass(records: list[dict[str, Any]]) -> None:
    """Every check in the JSON transcript passed and the proxy exited 0."""
    checks = [r for r in records if r["type"] == "check"]
    assert checks
    assert all(c["ok"] for c in checks), [c for c in checks if not c["ok"]]
    assert records[-1] == {"type": "result", "ok": True, "proxy_status": 0}


def test_one_permission_request_denied_by_the_proxy_one_forwarded(
    records: list[dict[str, Any]],
) -> None:
    asked = [
        m.get("id") for m in _received(records) if m.get("method") == "session/request_permission"
    ]
    assert asked == ["perm-edit"]  # the fetch was answered by the proxy, never shown
    outcomes = {
        m["id"]: m["result"]["outcome"]
        for m in _agent(records, "in")
        if isinstance(m.get("result"), dict) and "outcome" in m["result"]
    }
    assert outcomes == {
        "perm-fetch": {"outcome": "selected", "optionId": "reject"},
        "perm-edit": {"outcome": "selected", "optionId": "allow"},
    }


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


def _agent(records: list[dict[str, Any]], direction: str) -> list[Any]:
    return [r["message"] for r in records if r["type"] == "agent" and r["dir"] == direction]


def _names(msg: Any, method: str, session_id: str) -> bool:
    return bool(msg.get("method") == method and msg["params"].get("sessionId") == session_id)


def test_resume_of_a_child_is_refused(records: list[dict[str, Any]]) -> None:
    """session/resume on child sess_search is answered by the proxy with -32601 and the
    audit says not_allowed_on_child; the agent never receives it."""
    error = next(m["error"] for m in _received(records) if m.get("id") == 5)
    assert error["code"] == -32601
    assert error["data"] == {
        "sessionId": "sess_search",
        "method": "session/resume",
        "capability": None,
    }
    assert not any(_names(m, "session/resume", "sess_search") for m in _agent(records, "in"))
    audit = [r["record"] for r in records if r["type"] == "audit"]
    rejected = next(r for r in audit if r.get("id") == 5)
    assert rejected["event"] == "mutation_rejected"
    assert rejected["reason"] == "not_allowed_on_child"


def test_parent_resume_revokes_until_reannounced(records: list[dict[str, Any]]) -> None:
    """A resume of sess_main revokes its children's grants (grants_revoked, count 2); the
    replayed announcement of sess_search, cancel capability included, arrives before the
    answer; the cancel sent between the answer and the re-announcement is dropped
    (stale_after_parent_reload) and the one after the re-announcement reaches the agent."""
    audit = [r["record"] for r in records if r["type"] == "audit"]
    revoked = [r for r in audit if r["event"] == "grants_revoked"]
    assert [(r["sessionId"], r["method"], r["count"]) for r in revoked] == [
        ("sess_main", "session/resume", 2)
    ]
    stale = [
        r for r in audit if r["event"] == "mutation_rejected" and r["method"] == "session/cancel"
    ]
    assert [(r["sessionId"], r["capability"], r["reason"]) for r in stale] == [
        ("sess_search", "cancel", "stale_after_parent_reload")
    ]

    msgs = [(r["direction"], r["message"]) for r in records if r["type"] == "message"]
    request = next(i for i, (d, m) in enumerate(msgs) if d == "client->proxy" and m.get("id") == 6)
    answer = next(i for i, (d, m) in enumerate(msgs) if d == "proxy->client" and m.get("id") == 6)
    assert "result" in msgs[answer][1]

    def search_announcements(lo: int, hi: int) -> list[Any]:
        return [
            m
            for d, m in msgs[lo:hi]
            if d == "proxy->client"
            and _update(m)[1].get("sessionUpdate") == "subagent_update"
            and _update(m)[1].get("sessionId") == "sess_search"
            and "capabilities" in _update(m)[1]
        ]

    assert [_update(m)[1]["capabilities"] for m in search_announcements(request, answer)] == [
        {"cancel": {}}
    ]
    assert [_update(m)[1]["capabilities"] for m in search_announcements(answer, len(msgs))] == [
        {"cancel": {}}
    ]

    sent = [
        m for d, m in msgs if d == "client->proxy" and _names(m, "session/cancel", "sess_search")
    ]
    assert len(sent) == 3
    agent_in = _agent(records, "in")
    # What the agent received, in order: the first cancel, the resume, the prompt that made
    # it re-announce, the last cancel; nothing between the resume and that prompt.
    order = [
        m.get("id", "cancel")
        for m in agent_in
        if m.get("id") in (6, 7) or _names(m, "session/cancel", "sess_search")
    ]
    assert order == ["cancel", 6, 7, "cancel"]


def test_boundary_checks_fail_when_the_proxy_leaks() -> None:
    """The demo's own checks notice a stale cancel, a child resume or a missing
    grants_revoked: fed a run doctored that way, the matching check fails."""
    run = execute()
    assert all(c.ok for c in checks(run, analyse(run))), run.errors

    def failing(doctored: Run) -> list[str]:
        return [c.name for c in checks(doctored, analyse(doctored)) if not c.ok]

    def leak(label: str, before_id: int) -> Run:
        r = copy.deepcopy(run)
        at = next(
            k
            for k, e in enumerate(r.agent_log)
            if e["dir"] == "in" and e["message"].get("id") == before_id
        )
        r.agent_log.insert(at, {"dir": "in", "message": r.events[r.marks[label]].message})
        return r

    assert [n for n in failing(leak("stale_cancel", 7)) if "between the resume answer" in n]
    assert [n for n in failing(leak("resume_child", 6)) if "session/resume on child" in n]
    no_revoke = copy.deepcopy(run)
    no_revoke.audit = [a for a in run.audit if a.get("event") != "grants_revoked"]
    assert [n for n in failing(no_revoke) if "revoked the grants" in n]


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
    """The audit trail has child_announced, mutation_rejected, held, released,
    duplicate_dropped and grants_revoked."""
    events = {r["record"]["event"] for r in records if r["type"] == "audit"}
    assert events >= AUDIT_EVENTS


def test_demo_agent_answers_unknown_methods_and_exits_on_eof() -> None:
    """The demo agent (``python -m acp_proxy.demo.agent``) answers an unknown request with
    -32601, exits 0 at end of input and writes nothing to stderr (no runpy warning)."""
    proc = subprocess.run(
        [sys.executable, "-m", "acp_proxy.demo.agent"],
        input='{"jsonrpc":"2.0","id":7,"method":"no/such"}\n',
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert proc.returncode == 0
    assert proc.stderr == ""
    reply = json.loads(proc.stdout)
    assert reply["id"] == 7
    assert reply["error"]["code"] == -32601


def test_demo_agent_resume_replays_then_reannounces_on_the_next_prompt() -> None:
    """The demo agent alone: session/resume sends each child's announcement (with
    capabilities) and the current state_update before its answer; the next prompt
    re-announces both children with complete capabilities before its own answer."""
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 2}},
        {"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": "/"}},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "session/prompt",
            "params": {"sessionId": "sess_main"},
        },
        {
            "jsonrpc": "2.0",
            "id": 4,
            "method": "session/resume",
            "params": {"sessionId": "sess_main"},
        },
        {
            "jsonrpc": "2.0",
            "id": 5,
            "method": "session/prompt",
            "params": {"sessionId": "sess_main"},
        },
    ]
    proc = subprocess.run(
        [sys.executable, "-m", "acp_proxy.demo.agent"],
        input="".join(json.dumps(m) + "\n" for m in lines),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert proc.returncode == 0
    out = [json.loads(line) for line in proc.stdout.splitlines()]
    answer = {m["id"]: i for i, m in enumerate(out) if "id" in m}

    def between(lo: int, hi: int) -> list[tuple[str, Any]]:
        return [
            (_update(m)[1]["sessionUpdate"], _update(m)[1].get("capabilities"))
            for m in out[lo + 1 : hi]
        ]

    assert out[answer[4]]["result"] == {}
    assert between(answer[3], answer[4]) == [
        ("subagent_update", {"cancel": {}}),
        ("subagent_update", {}),
        ("state_update", None),
    ]
    assert between(answer[4], answer[5])[1:3] == [
        ("subagent_update", {"cancel": {}}),
        ("subagent_update", {}),
    ]


def test_the_demo_agent_ends_quietly_on_ctrl_c() -> None:
    """SIGINT (the proxy passes Ctrl-C on to its agent): exit 130, no traceback."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "acp_proxy.demo.agent"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None
    assert proc.stdout is not None
    proc.stdin.write(
        b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}\n'
    )
    proc.stdin.flush()
    assert b'"result"' in proc.stdout.readline()  # serving: the loop waits for stdin
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert b"Traceback" not in err
