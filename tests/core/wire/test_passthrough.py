"""The pass-through table: one rule, read the same way by every path."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from acp_proxy.core.wire.passthrough import (
    REFERENCE_LISTS,
    UPDATE_RULES,
    envelope_uninspected,
    uninspected,
)
from acp_proxy.core.wire.runs import envelope_run

KNOWN = {"S"}


def note(update: dict[str, Any], sid: str = "S") -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": sid, "update": update},
    }


def both(body: dict[str, Any]) -> tuple[bool, bool]:
    """The verdict of the body predicate and of the envelope predicate on the same line."""
    line = msgspec.json.encode(body)
    envs = envelope_run(line)
    assert envs is not None
    assert len(envs) == 1
    return uninspected(body, KNOWN), envelope_uninspected(envs[0], KNOWN)


def test_derived_lookups_come_from_the_table() -> None:
    assert REFERENCE_LISTS == {
        "tool_call": ("content", "session"),
        "tool_call_update": ("content", "session"),
        "state_update": ("background", "subagent"),
    }


@pytest.mark.parametrize("kind", sorted(UPDATE_RULES))
def test_every_listed_kind_is_inspected_when_its_rule_says(kind: str) -> None:
    rule = UPDATE_RULES[kind]
    bare = note({"sessionUpdate": kind})
    assert both(bare) == (not rule.always, not rule.always)
    if rule.refs is not None:
        listed = note({"sessionUpdate": kind, rule.refs[0]: []})
        assert both(listed) == (False, False)


@pytest.mark.parametrize("kind", ["agent_message_chunk", "plan", "usage_update", "x_vendor"])
def test_a_kind_not_in_the_table_passes_for_a_known_session_only(kind: str) -> None:
    update = {"sessionUpdate": kind, "content": {"type": "text", "text": "hi"}}
    assert both(note(update)) == (True, True)
    assert both(note(update, sid="unknown")) == (False, False)
