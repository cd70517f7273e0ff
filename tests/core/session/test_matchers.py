"""The permission matchers: one row per rule field, each reached and deciding alone."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from acp_proxy.config.model import PermissionRule
from acp_proxy.core.session import permissions
from acp_proxy.core.session.permissions import SessionContext, Workspace, _Facts, _matches

#: The fields of a rule that choose what it says, not what it matches.
NOT_MATCHERS = {"action", "name", "method", "option", "ask_timeout_seconds"}

TOOL = {"name": "Bash", "kind": "execute", "title": "ls /ws", "rawInput": {"command": "ls /ws"}}
FACTS = _Facts(
    tool=TOOL, command="ls /ws", cwd="/ws", path="/ws/a", has_location=True, paths=("/ws/a",)
)
CONTEXT = SessionContext("C", child=True, parent_id="P", workspace=Workspace("/ws"))

#: field -> (method, a value that matches FACTS / CONTEXT, one that does not)
ROWS: dict[str, tuple[str, Any, Any]] = {
    "session": ("session/request_permission", ["C"], ["D*"]),
    "child": ("session/request_permission", True, False),
    "parent": ("session/request_permission", ["P"], ["Q"]),
    "tool_name": ("session/request_permission", ["Ba*"], ["Edit"]),
    "tool_kind": ("session/request_permission", ["execute"], ["read"]),
    "tool_title": ("session/request_permission", ["ls *"], ["rm *"]),
    "raw_input": ("session/request_permission", {"command": ["ls *"]}, {"command": ["rm *"]}),
    "command": ("terminal/create", ["ls *"], ["rm *"]),
    "cwd": ("terminal/create", ["/ws"], ["/tmp"]),
    "path": ("fs/read_text_file", ["/ws/*"], ["/etc/*"]),
    "inside_workspace": ("fs/read_text_file", True, False),
}


def test_every_matching_field_of_a_rule_has_a_matcher() -> None:
    fields = {f.name for f in attrs.fields(PermissionRule)} - NOT_MATCHERS
    assert [name for name, _ in permissions._MATCHERS] == list(ROWS)
    assert set(ROWS) == fields


@pytest.mark.parametrize("action", ["allow", "deny"])
@pytest.mark.parametrize("field", list(ROWS))
def test_each_field_alone_decides_whether_the_rule_matches(field: str, action: str) -> None:
    method, hit, miss = ROWS[field]
    facts = FACTS if method == "session/request_permission" else attrs.evolve(FACTS, tool=None)
    assert _matches(PermissionRule(action=action, method=method, **{field: hit}), facts, CONTEXT)
    assert not _matches(
        PermissionRule(action=action, method=method, **{field: miss}), facts, CONTEXT
    )


def test_a_rule_without_matchers_matches_everything() -> None:
    assert _matches(PermissionRule(action="allow", method="fs/read_text_file"), _Facts(), CONTEXT)


def test_a_tool_field_does_not_match_a_request_without_a_tool_call() -> None:
    rule = PermissionRule(action="deny", method="session/request_permission", tool_kind=["*"])
    assert not _matches(rule, attrs.evolve(FACTS, tool=None), CONTEXT)
