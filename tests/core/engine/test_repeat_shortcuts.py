"""The shortcuts for repeated agent lines decide exactly what the paths they skip decide.

Issue 29: a line of a run repeated byte for byte reuses its first parse
(:class:`~acp_proxy.core.wire.memo.LineMemo`), a state report or mirror that is
the frame which delivered its channel's snapshot is a duplicate without a
snapshot compared (:meth:`~acp_proxy.core.session.dedup.StateDedup.repeats`),
a ``subagent_update`` read twice is viewed once, and the registry measures only
the fields whose value changed. Each is compared here with the path it skips:
two cores, one with the shortcuts and one without, take the same random
traffic (repeats, loads and resumes, closes, held children, small bounds)
and must give the same actions and the same counters.
"""

from __future__ import annotations

from typing import Any

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st
from support.corekit import (
    AGENT,
    CLIENT,
    announce,
    chunk,
    enc,
    err,
    open_session,
    req,
    resp,
    state_update,
    update,
)

from acp_proxy.config import Config, DedupConfig
from acp_proxy.config.model import BudgetsConfig, LimitsConfig
from acp_proxy.core.engine import ProxyCore
from acp_proxy.core.session import registry as registry_module
from acp_proxy.core.session.dedup import StateDedup
from acp_proxy.core.session.registry import Child
from acp_proxy.core.session.schema import view_subagent_update
from acp_proxy.core.session.size import footprint
from acp_proxy.core.wire.framing import Lines
from acp_proxy.core.wire.jsonrpc import parse
from acp_proxy.core.wire.memo import LineMemo

CAPS = {"cancel": {}}
BIG = "x" * 300  # over the small bounds below: truncation, forgetting

AGENT_LINES: list[bytes] = [
    state_update("P", "running"),
    state_update("P", "idle"),
    state_update("P", "running", step=1),
    state_update("C1", "running"),
    state_update("C1", "running", note=BIG),
    state_update("C2", "running"),  # C2: held until announced
    update("P", {"sessionUpdate": "state_update", "state": "x", "_meta": {"k": 1}}),
    enc(
        {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {"sessionId": "P", "update": {"sessionUpdate": "state_update", "state": "x"}},
            "_meta": {"t": True},
        }
    ),
    update(
        "P",
        {
            "sessionUpdate": "state_update",
            "state": "running",
            "background": [{"type": "subagent", "sessionId": "C2"}],
        },
    ),
    enc({"jsonrpc": "2.0", "id": 7, "method": "session/update", "params": {
        "sessionId": "P", "update": {"sessionUpdate": "state_update", "state": "running"}}}),
    announce("P", "C1", title="T", capabilities=CAPS, state={"state": "running"}),
    announce("P", "C1", title="T", capabilities=CAPS, state={"state": "running"}, meta={"a": 1}),
    announce("P", "C1", state={"state": "running"}),
    announce("P", "C1", state={"state": "idle"}),
    announce("P", "C1", state={"state": "idle"}, title="U"),
    announce("P", "C1", state={"state": "idle"}, description=BIG),
    announce("P", "C1", state=None),
    announce("P", "C1", title=7, state={"state": "idle"}),  # a malformed field
    announce("P", "C1"),
    announce("P", "C2", capabilities=CAPS, state={"state": "running"}),
    announce("P", "C2", state={"state": "running"}),
    announce("C1", "C3", capabilities=CAPS, state={"state": "running"}),
    announce("C1", "C3", capabilities=CAPS, state={"state": "running"}),
    chunk("P", "hello"),
    chunk("C1", "child text"),
    chunk("C2", "early"),
    update("P", {"sessionUpdate": "session_message", "senderSessionId": "C1",
                 "recipientSessionId": "C2", "content": {"type": "text", "text": "hi"}}),
    update("P", {"sessionUpdate": "state_update", "state": "running",
                 "background": [{"type": "subagent", "sessionId": "C3"}]}),
    resp(100, {}),
    err(101),
    resp(102, {}),
    resp(103, {}),
]  # fmt: skip

CLIENT_LINES: list[bytes] = [
    req(100, "session/load", {"sessionId": "P", "cwd": "/", "mcpServers": []}),
    req(101, "session/resume", {"sessionId": "P", "cwd": "/"}),
    req(102, "session/close", {"sessionId": "C1"}),  # C3 retired: unknown again
    req(103, "session/close", {"sessionId": "P"}),  # every child retired
]

STEP = st.one_of(
    st.tuples(st.just("agent"), st.lists(st.sampled_from(AGENT_LINES), min_size=1, max_size=6)),
    st.tuples(st.just("agent_frame"), st.lists(st.sampled_from(AGENT_LINES), max_size=1)),
    st.tuples(st.just("client"), st.lists(st.sampled_from(CLIENT_LINES), min_size=1, max_size=1)),
    st.tuples(st.just("reload"), st.lists(st.booleans(), min_size=1, max_size=1)),
)

CONFIGS = [
    Config(),
    Config(limits=LimitsConfig(max_child_bytes=400, max_registry_bytes=900, max_dedup_bytes=700)),
    Config(dedup=DedupConfig(state_reports=False)),
    Config(budgets=BudgetsConfig(max_turn_s=5.0)),  # state reports counted by the turn budget
]


def _without_shortcuts(core: ProxyCore) -> ProxyCore:
    """``core`` taking every path the shortcuts skip: each line parsed again, each
    update viewed again, snapshots always compared, every field measured again."""
    core._inspected = core._reparse  # type: ignore[method-assign]
    core.agent._view = view_subagent_update  # type: ignore[method-assign]
    core.dedup.repeats = lambda channel, raw: False  # type: ignore[method-assign]
    core.agent.repeated_report = lambda m, out: False  # type: ignore[method-assign]
    return core


def _STORED(a: attrs.Attribute[Any], v: Any) -> bool:
    return a.name != "measured"  # the incremental measure's own record


def _forget_measures(core: ProxyCore) -> None:
    for c in core.registry.children.values():
        c.measured = None


def _run(config: Config, steps: list[tuple[str, list[Any]]], shortcuts: bool) -> list[Any]:
    core = ProxyCore(config)
    if not shortcuts:
        _without_shortcuts(core)
    core.receive(
        CLIENT, req(0, "initialize", {"protocolVersion": 1, "clientCapabilities": {}}), 0.0
    )
    core.receive(AGENT, resp(0, {"protocolVersion": 1}), 0.0)
    open_session(core, "P")
    trail: list[Any] = []
    for t, (kind, items) in enumerate(steps):
        now = float(t)
        if not shortcuts:
            _forget_measures(core)
        if kind == "agent":
            out = core.receive(AGENT, Lines(b"\n".join(items)), now)
        elif kind == "agent_frame":
            out = core.receive(AGENT, items[0], now) if items else core.handle_timer(now + 100)
        elif kind == "client":
            out = core.receive(CLIENT, items[0], now)
        else:
            core.reconfigure(attrs.evolve(config, dedup=DedupConfig(state_reports=items[0])))
            out = []
        trail.append(out)
        trail.append(attrs.asdict(core.statistics()))
        trail.append(
            {cid: attrs.asdict(c, filter=_STORED) for cid, c in core.registry.children.items()}
        )
    trail.append(core.registry.nbytes)
    trail.append(core.dedup.nbytes)
    return trail


@settings(max_examples=300, deadline=None)
@given(config=st.sampled_from(CONFIGS), steps=st.lists(STEP, max_size=25))
def test_the_shortcuts_decide_as_the_paths_they_skip(
    config: Config, steps: list[tuple[str, list[Any]]]
) -> None:
    assert _run(config, steps, shortcuts=True) == _run(config, steps, shortcuts=False)


def test_a_repeated_state_report_is_dropped_without_a_second_parse() -> None:
    core = ProxyCore()
    open_session(core, "P")
    line = state_update("P", "running")
    parsed: list[bytes] = []

    def counting(raw: bytes) -> Any:
        parsed.append(raw)
        return core._reparse(raw)

    memo = LineMemo(counting)
    core._inspected = memo.parse  # type: ignore[method-assign]
    first = core.receive(AGENT, Lines(line), 0.0)
    again = core.receive(AGENT, Lines(line), 0.0)
    assert [type(a).__name__ for a in first] == ["Send"]
    assert [a.event for a in again] == ["duplicate_dropped"]  # type: ignore[union-attr]
    assert parsed == [line]
    assert len(memo) == 1
    assert core.dedup.repeats(("self", "P"), line)
    assert core.statistics().duplicates_removed == 1


@given(st.lists(st.sampled_from([*AGENT_LINES, b"{", b'{"a":1,"a":2}', b"[1]"]), max_size=30))
def test_the_line_memo_gives_what_parse_gives(lines: list[bytes]) -> None:
    memo = LineMemo(parse, entries=3, max_line_bytes=200)
    for raw in lines:
        got, want = memo.parse(raw), parse(raw)
        assert {s: getattr(got, s) for s in got.__slots__ if s != "items"} == {
            s: getattr(want, s) for s in want.__slots__ if s != "items"
        }
    assert len(memo) <= 3


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=12,
)


def _walk(c: Child, cap: int) -> int:
    """The one walk over every tracked field (the registry's measure before issue 29)."""
    n = 0
    for value in (c.title, c.description, c.capabilities, c.state, c.cwd,
                  c.additional_directories, c.meta):  # fmt: skip
        if value is not None:
            n += footprint(value, cap - n)
            if n > cap:
                return n
    return n


FIELD = st.sampled_from(["title", "description", "capabilities", "state", "cwd", "meta"])


@given(
    st.lists(st.tuples(FIELD, st.one_of(st.none(), st.text(max_size=40), JSON)), max_size=12),
    st.integers(1, 600),
)
def test_incremental_measure_agrees_with_the_walk(changes: list[Any], cap: int) -> None:
    c = Child(session_id="c", parent_id="p", announced_at=0.0)
    for attr, value in changes:
        if attr in ("capabilities", "state", "meta") and not isinstance(value, dict | None):
            value = {"v": value}
        setattr(c, attr, value)
        got, want = registry_module._fields_bytes(c, cap), _walk(c, cap)
        assert got == want or (got > cap and want > cap)


@given(
    st.lists(
        st.tuples(st.sampled_from(["a", "b", "c"]), st.sampled_from([0, 1, 2, None])), max_size=30
    )
)
def test_repeats_implies_is_duplicate(events: list[tuple[str, int | None]]) -> None:
    dedup = StateDedup(max_bytes=120, max_raw_bytes=20)
    frames = {0: b"zero", 1: b"one-a-longer-frame", 2: b"two"}
    snaps: dict[int, Any] = {0: ["zero"], 1: ["one"], 2: ["two"]}
    for sid, k in events:
        channel = ("self", sid)
        if k is None:
            dedup.reset_session(sid, [])
            continue
        if dedup.repeats(channel, frames[k]):
            assert dedup.is_duplicate(channel, snaps[k])
        if not dedup.is_duplicate(channel, snaps[k]):
            dedup.delivered(channel, snaps[k], 40, frames[k])
        kept = [f for s in "abc" for f in frames.values() if dedup.repeats(("self", s), f)]
        assert dedup.raw_bytes == sum(map(len, kept)) <= 20


def test_a_repeated_report_naming_a_retired_child_is_held_not_dropped() -> None:
    """The same bytes, but a session they name left the registry meanwhile: the
    repeat is held as the whole path holds it, on both cores."""
    named = update(
        "P",
        {
            "sessionUpdate": "state_update",
            "state": "running",
            "background": [{"type": "subagent", "sessionId": "C3"}],
        },
    )
    steps: list[tuple[str, list[Any]]] = [
        ("client", [req(9, "session/new", {"cwd": "/", "mcpServers": []})]),
        ("agent", [resp(9, {"sessionId": "Q"})]),
        ("agent", [announce("Q", "C3", capabilities=CAPS, state={"state": "running"})]),
        ("agent", [named]),
        ("client", [req(102, "session/close", {"sessionId": "Q"})]),
        ("agent", [resp(102, {})]),  # C3 retired with Q: unknown again
        ("agent", [named]),
    ]
    fast, slow = _run(Config(), steps, True), _run(Config(), steps, False)
    assert fast == slow
    held = fast[3 * 6]  # the actions of the last step
    assert [a.event for a in held] == ["held"]  # type: ignore[union-attr]


def test_a_repeated_report_of_a_forgotten_session_is_held_not_dropped() -> None:
    """``limits.max_sessions`` forgets the oldest ordinary session (its traffic is held
    again) without forgetting its reports: its repeat is held, not dropped."""
    config = Config(limits=LimitsConfig(max_sessions=1))
    line = state_update("P", "running")
    steps: list[tuple[str, list[Any]]] = [
        ("agent", [line]),
        ("client", [req(9, "session/new", {"cwd": "/", "mcpServers": []})]),
        ("agent", [resp(9, {"sessionId": "Q"})]),  # P forgotten
        ("agent", [line]),
    ]
    fast, slow = _run(config, steps, True), _run(config, steps, False)
    assert fast == slow
    assert [a.event for a in fast[3 * 3]] == ["held"]  # type: ignore[union-attr]
