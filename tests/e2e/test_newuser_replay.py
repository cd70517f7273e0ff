"""Issue 32 item 3: ``replay --diff`` shows, per changed decision, the recorded and the
new decision with the rule, the action and the option, and folds the client's answer to a
request the new configuration answered itself into that one change."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from acp_proxy.demo.runner import POLICY, execute
from acp_proxy.shell.replay import run_replay

NO_EDITS = (
    POLICY + '\n[[permissions.rules]]\nname = "no-edits"\naction = "deny"\ntool_kind = "edit"\n'
)


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("trace") / "demo.trace.jsonl"
    run = execute(trace=str(path))
    assert run.status == 0, run.stderr
    return path


def _diff(trace: Path, tmp_path: Path, config: str | None) -> list[str]:
    args = ["--diff", str(trace)]
    if config is not None:
        cfg = tmp_path / "c.toml"
        cfg.write_text(config)
        args = ["--config", str(cfg), *args]
    out = io.StringIO()
    assert run_replay(args, out) == 1
    return out.getvalue().splitlines()


def test_a_deny_replayed_without_the_rule_names_rule_action_and_option(
    trace: Path, tmp_path: Path
) -> None:
    lines = _diff(trace, tmp_path, None)
    assert len(lines) == 2
    assert re.fullmatch(
        r'#\d+ agent->client request session/request_permission id="perm-fetch" '
        r"session=sess_main: recorded answered \(permission_decided: rule no-network-tools, "
        r"deny, option reject\), replayed forwarded \(no rule matched: the client asks the "
        r"user\)",
        lines[0],
    )
    assert re.fullmatch(r"1 of \d+ messages decided differently \(.*\)", lines[1])


def test_the_client_answer_to_a_request_now_answered_by_the_proxy_is_folded_in(
    trace: Path, tmp_path: Path
) -> None:
    lines = _diff(trace, tmp_path, NO_EDITS)
    assert len(lines) == 2, lines
    assert re.fullmatch(
        r'#\d+ agent->client request session/request_permission id="perm-edit" '
        r"session=sess_main: recorded forwarded \(permission_decided: ask, no rule matched: "
        r"the client asks the user\), "
        r"replayed answered \(permission_decided: rule no-edits, deny, option reject\); so "
        r"the client's answer #\d+ \(recorded forwarded\) is dropped \(unknown_response\)",
        lines[0],
    )
    assert re.fullmatch(r"1 of \d+ messages decided differently \(.*\)", lines[1])


def test_the_count_says_it_counts_messages_not_records() -> None:
    """A trace of 47 message records holding 45 messages (two held, then released) is
    summed up as 45 messages, and the 47 are explained."""
    from acp_proxy.shell.replay import Outcome, summary

    def outcome(seq: int, *decisions: str) -> Outcome:
        return Outcome(1, seq, {"type": "message", "seq": seq}, decisions)

    plain = [outcome(n, "forwarded") for n in range(43)]
    held = [outcome(43, "held", "released"), outcome(44, "held", "released")]
    pairs = [(o, o) for o in [*plain, *held]]
    assert summary(pairs, 0) == (
        "all 45 messages decided as recorded (the trace's 47 message records include a "
        "second one, what became of it, for each of the 2 held messages)"
    )
    assert summary(pairs[:43], 1) == "1 of 43 messages decided differently"
