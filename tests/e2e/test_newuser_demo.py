"""Issue 32 item 8: the demo leaves no trace behind unless asked, and its hint names the
program as the user ran it."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import pytest

from acp_proxy.demo import invocation, run_demo


def test_the_demo_removes_its_trace_unless_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(sys, "argv", [".venv/bin/acp-proxy", "demo", "--json"])
    assert run_demo(["--json"]) == 0
    assert list(tmp_path.iterdir()) == []
    assert capsys.readouterr().err == (
        "\nThe proxy's wire trace was removed with the run; to keep it and try another "
        "configuration on it (no agent is started):\n"
        "  .venv/bin/acp-proxy demo --trace demo.trace.jsonl\n"
        "  .venv/bin/acp-proxy replay --diff --config FILE demo.trace.jsonl\n"
    )


def test_the_demo_keeps_the_trace_it_is_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "argv", ["acp-proxy", "demo"])
    trace = tmp_path / "t.jsonl"
    assert run_demo(["--json", "--trace", str(trace)]) == 0
    assert json.loads(trace.read_text().splitlines()[0])["started"].endswith("Z")
    assert capsys.readouterr().err == (
        f"\nThe proxy's wire trace (kept): {trace}\n"
        "Try another configuration on it (no agent is started):\n"
        f"  acp-proxy replay --diff --config FILE {trace}\n"
    )


@pytest.mark.parametrize(
    ("argv0", "shown"),
    [
        ("acp-proxy", "acp-proxy"),
        ("/opt/x/bin/acp-proxy", "/opt/x/bin/acp-proxy"),
        ("/r/acp_proxy/__main__.py", f"{sys.executable} -m acp_proxy"),
    ],
)
def test_the_hint_names_the_program_as_run(
    monkeypatch: pytest.MonkeyPatch, argv0: str, shown: str
) -> None:
    monkeypatch.setattr(sys, "argv", [argv0])
    assert invocation() == shown


def test_the_report_names_the_program_as_run(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "argv", [".venv/bin/acp-proxy", "demo"])
    assert run_demo([]) == 0
    out = capsys.readouterr().out
    assert "Use it: put `.venv/bin/acp-proxy [--audit-log FILE] --` in front of" in out
    assert "`.venv/bin/acp-proxy demo --json` prints the raw messages" in out
