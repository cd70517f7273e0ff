"""``acp-proxy replay`` never shows a traceback (issue 31, item 7).

A property over every key of every record type (docs/trace-format.md): the
key set to a value of any wrong type, in a trace that otherwise replays.
The proxy's entry point returns 0 or 1 (the replay ran) or 2 with one sentence
on stderr, never a traceback.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acp_proxy.cli import main
from acp_proxy.core.trace import TRACE_FORMAT

HEAD = {"type": "header", "format": TRACE_FORMAT, "version": 1, "content": True}
INIT = '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}'
ANSWER = '{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}'
VALID: list[dict[str, Any]] = [
    {"type": "message", "conn": 1, "seq": 1, "t": 0.0, "dir": "client->agent",
     "kind": "request", "id": 0, "method": "initialize", "session": None, "size": len(INIT),
     "decision": "forwarded", "events": [], "content": INIT},
    {"type": "message", "conn": 1, "seq": 2, "t": 0.1, "dir": "agent->client",
     "kind": "response", "id": 0, "method": None, "for_method": "initialize", "for_seq": 1,
     "size": len(ANSWER), "decision": "forwarded", "events": [], "content": ANSWER,
     "protocolVersion": 1, "duration": 0.1, "peer": "agent"},
    {"type": "message", "conn": 1, "seq": 3, "t": 0.2, "dir": "agent->client",
     "kind": "oversize", "size": 10, "complete": True, "decision": "dropped",
     "events": [{"event": "oversize_message", "reason": "x"}]},
    {"type": "message", "conn": 1, "seq": None, "of": 3, "t": 0.2, "dir": "agent->client",
     "decision": "dropped", "content_hex": "7b7d"},
    {"type": "timer", "conn": 1, "t": 0.3, "events": []},
    {"type": "closed", "conn": 1, "t": 0.4, "peer": "agent", "detail": "agent exited",
     "events": []},
    {"type": "proxy", "conn": 1, "t": 0.4, "to": "client", "kind": "error", "id": 5,
     "for_method": "x", "size": 3, "decision": "answered"},
]  # fmt: skip
KEYS = sorted({k for rec in VALID for k in rec})

WRONG = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


def run(path: Path, *flags: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    status = main(["replay", *flags, str(path)])
    return status, capsys.readouterr().err


def test_the_valid_trace_replays(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The base trace of the property replays (so a failure below is the mutation's)."""
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in [HEAD, *VALID]))
    status, err = run(path, capsys=capsys)
    assert (status, err) == (0, "")


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(index=st.integers(0, len(VALID) - 1), key=st.sampled_from(KEYS), value=WRONG,
       diff=st.booleans())  # fmt: skip
def test_any_key_of_any_wrong_type_ends_in_one_sentence(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    index: int,
    key: str,
    value: Any,
    diff: bool,
) -> None:
    """Every record key set to any value: exit 0/1, or 2 with one line, never a traceback."""
    records = [dict(r) for r in VALID]
    records[index][key] = value
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in [HEAD, *records]))
    status, err = run(path, *(["--diff"] if diff else []), capsys=capsys)
    assert "Traceback" not in err
    if status == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1
        assert lines[0].startswith("acp-proxy: ")
        assert "not a valid trace" in lines[0] or "without content" in lines[0]
    else:
        assert status in (0, 1)
        assert err == ""


def test_conn_as_a_list_names_the_record_and_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The hostile review's case: a record whose conn is a list (was a traceback, exit 1)."""
    records = [dict(r) for r in VALID]
    records[0]["conn"] = [1]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in [HEAD, *records]))
    status, err = run(path, capsys=capsys)
    assert status == 2
    assert "record 1: key 'conn' must be a non-negative integer, not a list" in err
