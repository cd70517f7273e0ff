"""A run's verdicts, reached before its inspected messages run, are each message's own.

``ProxyCore._run`` judges a whole run first (in bulk); an inspected message
may make the registry forget a session the rest of the run was judged by,
and the rest is then judged again. Each test compares ``receive`` of a run
with ``receive`` of its frames one by one.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from support.corekit import (
    AGENT,
    CLIENT,
    announce,
    assert_accounting,
    chunk,
    one_send_per_message,
    open_session,
    req,
    resp,
    update,
)

from acp_proxy.config import Config, LimitsConfig
from acp_proxy.core.engine import ProxyCore
from acp_proxy.core.wire.framing import Lines


def _cores(**limits: int) -> tuple[ProxyCore, ProxyCore]:
    cores = [ProxyCore(Config(limits=LimitsConfig(**limits))) for _ in range(2)]
    for core in cores:
        open_session(core, "A")
        core.receive(CLIENT, req("new-B", "session/new", {"cwd": "/", "mcpServers": []}), 0.0)
    return cores[0], cores[1]


def _same(one: ProxyCore, many: ProxyCore, frames: list[bytes]) -> list[Any]:
    expected: list[Any] = []
    for raw in frames:
        expected.extend(one.receive(AGENT, raw, 1.0))
    got = one_send_per_message(many.receive(AGENT, Lines(b"\n".join(frames)), 1.0))
    assert got == expected
    assert many.statistics() == one.statistics()
    assert_accounting(many)
    return got


def test_a_session_the_registry_forgets_mid_run_is_held_after_that_point() -> None:
    """max_sessions=1: the answer that makes B known forgets A; A's later chunk is held."""
    frames = [chunk("A", "before"), resp("new-B", {"sessionId": "B"}), chunk("A", "after")]
    one, many = _cores(max_sessions=1)
    got = _same(one, many, frames)
    assert not many.registry.is_known("A")
    assert [a for a in got if getattr(a, "data", None) == frames[2]] == []  # held, not sent


def test_a_child_announced_mid_run_passes_after_its_announcement() -> None:
    """Verdicts reached before the announcement send the child's chunk the slow way: same result."""
    frames = [
        chunk("A", "x"),
        chunk("K", "early"),
        announce("A", "K"),
        chunk("K", "late"),
        chunk("A", "y"),
    ]
    _same(*_cores(), frames)


_FRAMES = [
    chunk("A", "a"),
    chunk("B", "b"),
    chunk("K", "k"),
    announce("A", "K"),
    update("A", {"content": {"type": "text", "text": "t"}, "sessionUpdate": "agent_message_chunk"}),
    update("A", {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "x"}),
    update("A", {"sessionUpdate": "agent_thought_chunk", "content": [], "messageId": "m"}),
    resp("new-B", {"sessionId": "B"}),
]


@given(frames=st.lists(st.sampled_from(_FRAMES), min_size=1, max_size=10), small=st.booleans())
def test_any_run_of_chunks_and_session_changes_equals_frame_by_frame(
    frames: list[bytes], small: bool
) -> None:
    """Chunks, announcements, tool calls and session answers in any order: same verdicts."""
    _same(*_cores(**({"max_sessions": 1} if small else {})), frames)
