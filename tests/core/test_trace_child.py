"""A traced ``subagent_update`` says what the child grants after it and whether that is fresh
(docs/trace-format.md, the ``child`` key): what ``acp-proxy view`` draws in its session tree."""

from __future__ import annotations

from typing import Any

from support.corekit import AGENT, CLIENT, announce, req, resp

from acp_proxy.core.trace import MAX_GRANTS, TracingCore


def traced() -> tuple[TracingCore, list[Any]]:
    records: list[Any] = []
    core = TracingCore(emit=records.append)
    core.receive(CLIENT, req(0, "initialize", {"protocolVersion": 2, "capabilities": {}}), 0.0)
    core.receive(AGENT, resp(0, {"protocolVersion": 2}), 0.0)
    core.receive(CLIENT, req(1, "session/new", {"cwd": "/", "mcpServers": []}), 0.0)
    core.receive(AGENT, resp(1, {"sessionId": "P"}), 0.0)
    del records[:]
    return core, records


def test_announcement_and_patches_record_the_grants() -> None:
    """The grants are the keys with an object value (``null`` and ``_meta`` grant nothing);
    a patch without ``capabilities`` keeps them; ``capabilities: null`` clears them."""
    core, records = traced()
    core.receive(AGENT, announce("P", "C", capabilities={"cancel": {}, "x": None, "_meta": {}}), 1)
    core.receive(AGENT, announce("P", "C", title="t"), 2)
    core.receive(AGENT, announce("P", "C", capabilities=None), 3)
    assert [r["child"] for r in records] == [
        {"sessionId": "C", "grants": ["cancel"], "fresh": True},
        {"sessionId": "C", "grants": ["cancel"], "fresh": True},
        {"sessionId": "C", "grants": [], "fresh": True},
    ]


def test_grants_are_not_fresh_between_a_parent_resume_and_the_re_announcement() -> None:
    """A replayed announcement during the parent's resume is recorded not fresh; the one
    after the answer fresh again."""
    core, records = traced()
    core.receive(AGENT, announce("P", "C", capabilities={"cancel": {}}), 1)
    core.receive(CLIENT, req(2, "session/resume", {"sessionId": "P", "cwd": "/"}), 2)
    core.receive(AGENT, announce("P", "C", capabilities={"cancel": {}}), 3)
    core.receive(AGENT, resp(2, {}), 4)
    core.receive(AGENT, announce("P", "C", capabilities={"cancel": {}}), 5)
    fresh = [r["child"]["fresh"] for r in records if "child" in r]
    assert fresh == [True, False, True]


def test_many_or_long_capability_names_are_bounded() -> None:
    """An agent's capability names cannot make the trace grow without bound."""
    core, records = traced()
    caps = {f"k{i:03}": {} for i in range(100)} | {"y" * 65: {}}
    core.receive(AGENT, announce("P", "C", capabilities=caps), 1)
    grants = records[0]["child"]["grants"]
    assert len(grants) == MAX_GRANTS
    assert all(len(k) <= 64 for k in grants)


def test_messages_that_touch_no_child_have_no_child_key() -> None:
    """Only an announcement or update of a child carries ``child``."""
    core, records = traced()
    core.receive(CLIENT, req(3, "session/prompt", {"sessionId": "P", "prompt": []}), 1)
    core.receive(AGENT, resp(3, {"stopReason": "end_turn"}), 2)
    assert all("child" not in r for r in records)
