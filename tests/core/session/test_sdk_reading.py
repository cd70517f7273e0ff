"""Governed fields read as the official SDKs read them (issue 31, items 1 and 4)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from acp_proxy.config.io import config_from_dict, load_config
from acp_proxy.core.session.permissions import Policy, SessionContext, Workspace
from acp_proxy.core.session.sdk_reading import read_args, tool_paths
from acp_proxy.core.wire.views import OPAQUE

STRICT = Path(__file__).resolve().parents[3] / "acp_proxy" / "config" / "strict.toml"
RP = "session/request_permission"
TC = "terminal/create"
ROOT = SessionContext("S", workspace=Workspace("/ws"))
OPTIONS = [
    {"optionId": "yes", "name": "Yes", "kind": "allow_once"},
    {"optionId": "no", "name": "No", "kind": "reject_once"},
]


def strict() -> Policy:
    return Policy(load_config(STRICT).permissions)


def policy(*rules: dict[str, Any]) -> Policy:
    return Policy(config_from_dict({"permissions": {"rules": list(rules)}}).permissions)


def terminal(command: Any, args: Any = None, **more: Any) -> dict[str, Any]:
    p: dict[str, Any] = {"sessionId": "S", "command": command, "cwd": "/ws", **more}
    if args is not None:
        p["args"] = args
    return p


@pytest.mark.parametrize(
    ("command", "args", "rule"),
    [
        ("rm", ["-rf", None, "/x"], "no-destructive-terminals"),
        ("sudo", [1, "id"], "no-destructive-terminals"),
        ("curl", [{"a": 1}, "https://example.com"], "no-network-terminals"),
        ("cat", [True, "/root/.ssh/id_rsa"], "no-credential-terminals"),
    ],
)
def test_non_string_args_are_read_as_the_python_sdk_drops_them(
    command: str, args: list[Any], rule: str
) -> None:
    """`["-rf", null, "/x"]` is matched as `rm -rf /x` (the Python SDK runs that)."""
    d = strict().decide(ROOT, TC, terminal(command, args))
    assert (d.action, d.rule, d.disposition) == ("deny", rule, "refuse")


@pytest.mark.parametrize(
    ("params", "fragment"),
    [
        (terminal("make", ["all", None]), "not strings"),
        (terminal("make", "all"), "not an array"),
        (terminal(["make"]), "command is not a string"),
        (terminal(7), "command is not a string"),
    ],
)
def test_args_the_sdks_read_differently_are_refused_when_no_deny_matches(
    params: dict[str, Any], fragment: str
) -> None:
    """A harmless command whose args one SDK drops and the other refuses: refused (strictest)."""
    d = strict().decide(ROOT, TC, params)
    assert d.disposition == "refuse"
    assert d.forced
    assert d.rule is None
    assert fragment in d.reason
    assert "SDK" in d.reason


def test_well_formed_args_are_not_refused() -> None:
    """Only a disagreement refuses: string args (or none, or null) are decided as before."""
    p = strict()
    for params in (terminal("make", ["all"]), terminal("make"), {**terminal("make"), "args": None}):
        assert p.decide(ROOT, TC, params).disposition == "forward"


def test_read_args() -> None:
    """read_args: string items kept, the disagreement named; null is no args."""
    assert read_args(None) == (None, None)
    assert read_args(["a", "b"]) == (["a", "b"], None)
    kept, why = read_args(["a", None, 2, "b"])
    assert kept == ["a", "b"]
    assert why is not None
    assert "2 item(s)" in why
    assert read_args("a")[0] is None
    assert read_args("a")[1] is not None


def test_a_kind_outside_the_schema_is_no_kind() -> None:
    """The SDKs read `"fetch "` as no kind: never auto-allowed while a deny reads kinds."""
    p = policy(
        {"action": "deny", "tool_kind": "fetch"},
        {"action": "allow", "tool_title": "*"},
    )
    for kind in ("fetch ", "FETCHX", "exec", 3):
        tool = {"toolCallId": "t", "kind": kind, "title": "x"}
        d = p.decide(ROOT, RP, {"sessionId": "S", "toolCall": tool, "options": OPTIONS})
        assert d.option_id != "yes", kind


def v1(tool: dict[str, Any]) -> dict[str, Any]:
    return {"sessionId": "S", "toolCall": {"toolCallId": "t", **tool}, "options": OPTIONS}


@pytest.mark.parametrize(
    "tool",
    [
        {"kind": "read", "locations": [{"path": "/root/.ssh/id_ed25519"}]},
        {"kind": "read", "locations": [{"path": "/ws/a"}, {"path": "/home/u/.aws/credentials"}]},
        {"kind": "edit", "content": [{"type": "diff", "path": "/ws/.env", "newText": "x"}]},
        {
            "kind": "edit",
            "content": [{"type": "diff", "changes": [{"path": "/ws/a", "oldPath": "/r/.ssh/k"}]}],
        },
        # a malformed sibling item is skipped (skip-invalid-items), the others are read
        {"kind": "read", "locations": [{"path": 3}, None, {"path": "/r/.ssh/id_rsa", "line": "x"}]},
    ],
)
def test_strict_denies_a_credential_path_named_only_in_locations_or_diffs(
    tool: dict[str, Any],
) -> None:
    """Item 4: toolCall.locations and diff paths are read by path rules."""
    d = strict().decide(ROOT, RP, v1(tool))
    assert (d.action, d.option_id, d.rule) == ("deny", "no", "no-credential-tool-locations")


def test_allow_on_path_needs_every_path() -> None:
    """An allow rule's path glob must match every named path; none named is no match."""
    p = policy({"action": "allow", "path": "/ws/*"})
    inside = {"kind": "read", "locations": [{"path": "/ws/a"}, {"path": "/ws/b/../c"}]}
    assert p.decide(ROOT, RP, v1(inside)).option_id == "yes"
    mixed = {"kind": "read", "locations": [{"path": "/ws/a"}, {"path": "/ws/../etc/x"}]}
    assert p.decide(ROOT, RP, v1(mixed)).option_id is None
    assert p.decide(ROOT, RP, v1({"kind": "read"})).option_id is None


def test_opaque_locations_are_never_allowed() -> None:
    """A location too large to read: asked (fail closed), never auto-allowed."""
    p = policy({"action": "deny", "path": "**/.ssh/**"}, {"action": "allow", "tool_kind": "read"})
    d = p.decide(ROOT, RP, v1({"kind": "read", "locations": [OPAQUE]}))
    assert d.disposition == "forward"
    assert d.forced
    assert d.action == "ask"


def test_tool_paths() -> None:
    """tool_paths: locations, v1 diff path, v2 changes path / oldPath; other content ignored."""
    tool = {
        "locations": [{"path": "/a"}, "x", {"path": None}],
        "content": [
            {"type": "content", "path": "/not"},
            {"type": "diff", "path": "/b"},
            {"type": "diff", "changes": [{"path": "/c", "oldPath": "/d"}, 5]},
        ],
    }
    assert tool_paths(tool).paths == ("/a", "/b", "/c", "/d")
    assert tool_paths({"locations": "nope"}).paths == ()


def test_path_and_a_command_matcher_can_never_match() -> None:
    """path reads a tool call subject: with cwd (a command subject) the rule is refused."""
    from acp_proxy.config import ConfigError

    with pytest.raises(ConfigError, match="can never match"):
        policy({"action": "deny", "path": "/x", "cwd": "/y"})


@pytest.mark.parametrize(
    "subject",
    [
        {"type": "command", "command": ["sudo", "ls"], "cwd": "/ws"},
        {"type": "command", "command": "ls"},
        {"type": "command", "command": "ls", "cwd": 7},
    ],
)
def test_a_command_subject_both_sdks_refuse_is_refused_not_asked(subject: dict[str, Any]) -> None:
    """A v2 command subject without a string command or cwd: refused (both SDKs refuse it)."""
    params = {"sessionId": "S", "subject": subject, "options": OPTIONS}
    d = strict().decide(ROOT, RP, params)
    assert d.disposition == "refuse"
    assert "both SDKs refuse" in d.reason
