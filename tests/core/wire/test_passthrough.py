"""The pass-through table: one rule, read the same way by every path."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

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


_SPELLINGS = [
    b'"subagent_update"', b'"session_message"', b'"state_update"', b'"state\\u005fupdate"',
    b'"stateXupdate"', b'"tool_call"', b'"tool\\u005fcall"', b'"tool_cal\\u006c"',
    b'"agent_message_chunk"', b'"usage_update"', b"17", b"null", b'"x"', b'"y"',
]  # fmt: skip


@given(st.lists(st.sampled_from(_SPELLINGS), min_size=1, max_size=12), st.booleans())
def test_the_kind_remembered_by_size_is_the_kind_of_the_bytes_read(
    kinds: list[bytes], with_content: bool
) -> None:
    """Spellings of one size in any order (``subagent_update`` and ``session_message``,
    escapes of a kind and of another word): the envelope predicate, which remembers the
    last spelling of each size, agrees with the body predicate on ``json.loads``."""
    member = b',"content":[]' if with_content else b""
    for kind in kinds:
        line = (
            b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S",'
            b'"update":{"sessionUpdate":' + kind + member + b"}}}"
        )
        envs = envelope_run(line)
        assert envs is not None
        assert envelope_uninspected(envs[0], KNOWN) == uninspected(json.loads(line), KNOWN)
