"""The wire trace of a real session (docs/trace-format.md) and its replay.

The demo's scripted session runs through the real proxy with ``--trace
--trace-content --audit-log``; the trace must follow the documented schema,
agree with the audit log, and replay to the same decisions with the same
configuration and to the expected differences with a stricter one.
"""

from __future__ import annotations

import io
import json
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from acp_proxy.config.io import config_from_dict
from acp_proxy.core.trace import TRACE_FORMAT, TRACE_VERSION
from acp_proxy.demo.runner import POLICY, execute
from acp_proxy.errors import UsageError
from acp_proxy.shell.replay import compare, read_trace, replay, run_replay

DOC = Path(__file__).resolve().parents[2] / "docs/trace-format.md"


def documented() -> dict[str, set[str]]:
    """Keys per record type and the decisions, read from the tables of docs/trace-format.md."""
    text = DOC.read_text()
    parts = re.split(r"^## ", text, flags=re.MULTILINE)
    by_title = {p.split("\n", 1)[0]: p for p in parts}

    def first_column(section: str) -> list[str]:
        rows = re.findall(r"^\| `([^`]+)`(?:, `[^`]+`)* \|", section, flags=re.MULTILINE)
        cells = re.findall(r"^\| ((?:`[^`]+`(?:, )?)+) \|", section, flags=re.MULTILINE)
        return rows + [c for cell in cells for c in re.findall(r"`([^`]+)`", cell)]

    header = set(first_column(by_title["1. Header"]))
    message_part, decision_part = by_title["2. Message records"].split("Decisions:")
    message = set(first_column(message_part)) | {"conn", "ts"}
    decisions = set(first_column(decision_part))
    others: dict[str, set[str]] = {}
    for row in re.findall(r"^\| `(\w+)` \| (.+?) \|", by_title["3. Other records"], re.MULTILINE):
        others[row[0]] = set(re.findall(r"`(\w+)`", row[1])) | {"type", "conn", "ts"}
    return {"header": header, "message": message, "decisions": decisions, **others}


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    trace = tmp_path_factory.mktemp("trace") / "demo.trace.jsonl"
    run = execute(trace=str(trace))
    assert not run.errors, run.errors
    assert run.status == 0, run.stderr
    return trace, run.audit


def test_the_trace_follows_the_documented_schema(
    session: tuple[Path, list[dict[str, Any]]],
) -> None:
    trace, _audit = session
    schema = documented()
    assert {"forwarded", "held", "released", "refused", "dropped"} <= schema["decisions"]
    lines = trace.read_text().splitlines()
    head = json.loads(lines[0])
    assert set(head) <= schema["header"]
    assert (head["format"], head["version"], head["content"]) == (TRACE_FORMAT, TRACE_VERSION, True)
    records = [json.loads(line) for line in lines[1:]]
    kinds = {r["type"] for r in records}
    assert {"message", "closed"} <= kinds
    seqs = [r["seq"] for r in records if r["type"] == "message" and r["seq"] is not None]
    assert seqs == list(range(1, len(seqs) + 1))
    for r in records:
        assert set(r) <= schema[r["type"]], r
        if r["type"] == "message":
            assert r["decision"] in schema["decisions"], r
            assert r["dir"] in ("client->agent", "agent->client")
            assert isinstance(r["size"], int)
            assert isinstance(r["t"], float)
            if r["seq"] is not None:
                assert len(r["content"].encode()) == r["size"]  # nothing to redact here
    decisions = {r["decision"] for r in records if r["type"] == "message"}
    assert {"forwarded", "held", "released", "refused", "dropped"} <= decisions
    init = next(r for r in records if r.get("method") == "initialize")
    assert init["dir"] == "client->agent"


def test_the_trace_agrees_with_the_audit_log(session: tuple[Path, list[dict[str, Any]]]) -> None:
    trace, audit = session
    _head, records = read_trace(trace.read_text().splitlines())
    in_trace = [(e["event"], e.get("sessionId")) for r in records for e in r.get("events", ())]
    skip = {"suppressed", "run_started", "run_closed"}  # the chain's run records are not events
    in_audit = [(a["event"], a.get("sessionId")) for a in audit if a["event"] not in skip]
    assert in_trace == in_audit
    assert {a["pid"] for a in audit} == {_head["pid"]}
    assert {a["run"] for a in audit} == {_head["run"]}
    refused = [r["id"] for r in records if r.get("decision") == "refused"]
    rejected = [a["id"] for a in audit if a["event"] == "mutation_rejected" and "id" in a]
    assert refused == [i for i in rejected if i is not None]
    held = [r["session"] for r in records if r.get("decision") == "held"]
    assert held == [a["sessionId"] for a in audit if a["event"] == "held"]


#: The configuration the demo runs its proxy with (its permission rules).
DEMO_POLICY = tomllib.loads(POLICY)


def test_replay_with_the_same_config_decides_as_recorded(
    session: tuple[Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    trace, _audit = session
    _head, records = read_trace(trace.read_text().splitlines())
    pairs = compare(records, replay(config_from_dict(DEMO_POLICY), records))
    assert len(pairs) > 30
    assert [(o.seq, o.decisions) for o, _ in pairs] == [
        (o.seq, mine.decisions if mine else None) for o, mine in pairs
    ]
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    out = io.StringIO()
    assert run_replay(["--config", str(policy), "--diff", str(trace)], out) == 0
    messages = [r for r in records if r.get("type") == "message"]
    held = [r for r in messages if r.get("decision") == "held"]
    assert held  # the count's two numbers differ
    assert len(pairs) == len(messages) - len(held)
    assert out.getvalue().strip() == (
        f"all {len(pairs)} messages decided as recorded (the trace's {len(messages)} message "
        f"records include a second one, what became of it, for each of the {len(held)} "
        "held messages)"
    )


def test_replay_with_a_stricter_config_shows_the_expected_differences(
    session: tuple[Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    """Without ``session/cancel`` in the mutation table, the cancels the demo sends to a
    child are dropped: exactly the ones that were forwarded differ."""
    trace, _audit = session
    _head, records = read_trace(trace.read_text().splitlines())
    strict = config_from_dict(
        {**DEMO_POLICY, "enforcement": {"child_mutations": {"session/cancel": ""}}}
    )
    differ = [
        (o, mine)
        for o, mine in compare(records, replay(strict, records))
        if mine and o.decisions != mine.decisions
    ]
    cancels = [
        r["seq"]
        for r in records
        if r.get("method") == "session/cancel" and r.get("decision") == "forwarded"
    ]
    assert len(cancels) == 2
    assert [o.seq for o, _ in differ] == cancels
    assert all(m.decisions == ("dropped",) for _, m in differ)
    assert all(m.record["events"][0]["event"] == "mutation_rejected" for _, m in differ)
    config = tmp_path / "strict.toml"
    config.write_text(POLICY + '\n[enforcement.child_mutations]\n"session/cancel" = ""\n')
    out = io.StringIO()
    assert run_replay(["--diff", "--config", str(config), str(trace)], out) == 1
    lines = out.getvalue().splitlines()
    assert len(lines) == 3
    assert "recorded forwarded, replayed dropped (mutation_rejected" in lines[0]
    assert lines[-1].startswith(
        f"2 of {len(compare(records, records))} messages decided differently ("
    )


def test_replay_needs_a_trace_with_content(tmp_path: Path) -> None:
    bare = tmp_path / "bare.jsonl"
    bare.write_text(
        json.dumps({"type": "header", "format": TRACE_FORMAT, "version": 1, "content": False})
        + "\n"
    )
    with pytest.raises(UsageError, match="without content"):
        run_replay([str(bare)], io.StringIO())
    other = tmp_path / "other.jsonl"
    other.write_text('{"type": "header", "format": "acp-proxy-trace", "version": 99}\n')
    with pytest.raises(UsageError, match="version 99"):
        run_replay([str(other)], io.StringIO())


_MSG = {"type": "message", "seq": 1, "dir": "client->agent", "content": "{}"}


@pytest.mark.parametrize(
    "records",
    [
        [{**_MSG, "conn": "abc", "decision": "forwarded"}],
        [{"type": "closed", "conn": 1, "peer": "zzz"}],
        [{**_MSG, "t": {}, "decision": "forwarded"}],
        [_MSG, {"type": "message", "of": 1, "dir": "client->agent"}],
    ],
    ids=["conn-not-a-number", "unknown-peer", "time-not-a-number", "no-decision"],
)
def test_replay_of_a_hostile_trace_is_a_usage_error_not_a_traceback(
    tmp_path: Path, records: list[dict[str, Any]]
) -> None:
    """A record of the wrong shape (found by a hostile review: tracebacks) names the file."""
    bad = tmp_path / "bad.jsonl"
    head = {"type": "header", "format": TRACE_FORMAT, "version": 1, "content": True}
    bad.write_text("".join(json.dumps(r) + "\n" for r in [head, *records]))
    with pytest.raises(UsageError, match="not a valid trace"):
        run_replay([str(bad)], io.StringIO())


def test_replay_refuses_a_trace_with_too_many_connections(tmp_path: Path) -> None:
    """One engine per connection: a trace naming more than the bound is refused up front."""
    bad = tmp_path / "many.jsonl"
    head = {"type": "header", "format": TRACE_FORMAT, "version": 1, "content": True}
    lines = [json.dumps(head)] + [
        json.dumps({"type": "closed", "conn": i, "side": "client"}) for i in range(5000)
    ]
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(UsageError, match="5000 connections"):
        run_replay([str(bad)], io.StringIO())
