"""Duplicate state report removal (state_update and subagent_update state mirrors)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.corekit import (
    AGENT,
    CLIENT,
    announce,
    assert_accounting,
    audits,
    chunk,
    decoded,
    enc,
    events,
    open_session,
    req,
    sends,
    state_update,
    update,
)

from acp_proxy.config import Config, DedupConfig
from acp_proxy.core.engine import ProxyCore
from acp_proxy.core.session.dedup import StateDedup

RUNNING = {"state": "running"}
IDLE = {"state": "idle"}


def parent_core(config: Config | None = None) -> ProxyCore:
    core = ProxyCore(config)
    open_session(core, "P")
    return core


def with_child(config: Config | None = None, **fields: Any) -> ProxyCore:
    core = parent_core(config)
    frame = announce("P", "C", **fields)
    assert sends(core.receive(AGENT, frame, 0.0)) == [frame]
    return core


def deliver(core: ProxyCore, frame: bytes) -> list[bytes]:
    return sends(core.receive(AGENT, frame, 1.0), CLIENT)


def test_equal_state_update_with_other_key_order_is_dropped() -> None:
    """A state_update equal as JSON to the last delivered one is dropped, key order aside."""
    core = parent_core()
    a = update(
        "P", {"sessionUpdate": "state_update", "state": "running", "detail": {"x": 1, "y": 2}}
    )
    b = update(
        "P", {"detail": {"y": 2, "x": 1}, "state": "running", "sessionUpdate": "state_update"}
    )
    assert deliver(core, a) == [a]
    out = core.receive(AGENT, b, 1.0)
    assert sends(out) == []
    assert audits(out, "duplicate_dropped")[0].fields["sessionId"] == "P"
    assert core.statistics().duplicates_removed == 1
    assert_accounting(core)


def test_state_update_after_a_different_one_is_not_dropped() -> None:
    """A → B → A: the second A differs from the last delivered (B), so it passes."""
    core = parent_core()
    a, b = state_update("P", "running"), state_update("P", "idle")
    assert deliver(core, a) == [a]
    assert deliver(core, b) == [b]
    assert deliver(core, a) == [a]
    assert deliver(core, a) == []


def test_state_update_channels_are_per_session() -> None:
    """The same snapshot on two sessions is not a duplicate."""
    core = parent_core()
    open_session(core, "Q")
    assert deliver(core, state_update("P", "idle")) == [state_update("P", "idle")]
    assert deliver(core, state_update("Q", "idle")) == [state_update("Q", "idle")]


def test_big_integers_that_differ_are_not_duplicates() -> None:
    """Snapshots differing only in an integer beyond 64 bits are different reports."""
    core = parent_core()
    a = state_update("P", "running", progress=2**80)
    b = state_update("P", "running", progress=2**80 + 1)
    assert deliver(core, a) == [a]
    assert deliver(core, b) == [b]


def test_true_and_one_are_different_snapshots() -> None:
    """JSON true and 1 are different values; 1 and 1.0 are the same number."""
    core = parent_core()
    assert deliver(core, state_update("P", "x", n=1)) != []
    assert deliver(core, state_update("P", "x", n=True)) != []
    assert (
        deliver(core, update("P", {"sessionUpdate": "state_update", "state": "x", "n": True})) == []
    )
    assert deliver(core, state_update("P", "x", n=1)) != []
    assert (
        deliver(
            core, update("P", json.loads('{"sessionUpdate":"state_update","state":"x","n":1.0}'))
        )
        == []
    )


def test_duplicate_mirror_with_nothing_else_is_dropped_whole() -> None:
    """A subagent_update repeating the child's last state and changing nothing else is dropped."""
    core = with_child(state=RUNNING, title="t")
    out = core.receive(AGENT, announce("P", "C", state={"state": "running"}, title="t"), 1.0)
    assert sends(out) == []
    assert events(out) == ["duplicate_dropped"]
    assert core.statistics().duplicates_removed == 1
    assert_accounting(core)


def test_duplicate_mirror_with_another_change_loses_only_state() -> None:
    """With another change the update goes out with only "state" removed; unknown fields kept."""
    core = with_child(state=RUNNING, title="t")
    frame = announce("P", "C", state=RUNNING, title="new", vendorField={"k": [1, 2**70]})
    out = core.receive(AGENT, frame, 1.0)
    [data] = sends(out, CLIENT)
    expected = decoded(frame)
    del expected["params"]["update"]["state"]
    assert decoded(data) == expected
    assert list(decoded(data)["params"]["update"]) == list(expected["params"]["update"])
    assert core.registry.children["C"].title == "new"
    assert "duplicate_dropped" in events(out)
    assert_accounting(core)


def test_duplicate_mirror_with_unknown_field_is_rewritten_not_dropped() -> None:
    """An unknown update field is news the proxy cannot judge: forwarded, state removed."""
    core = with_child(state=RUNNING)
    frame = announce("P", "C", state=RUNNING, somethingNew=1)
    [data] = deliver(core, frame)
    assert decoded(data)["params"]["update"] == {
        "sessionUpdate": "subagent_update",
        "sessionId": "C",
        "somethingNew": 1,
    }


def test_duplicate_mirror_with_extra_envelope_fields_keeps_them() -> None:
    """A mirror whose _meta differs is news (state kept); the same _meta again is a
    duplicate, and the extra params / envelope keys survive the state removal."""
    core = with_child(state=RUNNING)
    body = json.loads(announce("P", "C", state=RUNNING))
    body["params"]["_meta"] = {"trace": "t1"}
    [data] = deliver(core, enc(body))
    assert decoded(data)["params"]["update"]["state"] == RUNNING  # _meta differs: news
    [data] = deliver(core, enc(body))
    out = decoded(data)
    assert out["params"]["_meta"] == {"trace": "t1"}
    assert "state" not in out["params"]["update"]


@pytest.mark.parametrize("where", ["top", "params", "update"])
def test_a_report_differing_only_in_meta_is_not_a_duplicate(where: str) -> None:
    """A state_update that repeats the last snapshot but carries other _meta (top level,
    params or update) is delivered."""
    core = with_child(state=RUNNING)
    first = json.loads(state_update("P", "running"))
    assert deliver(core, enc(first))
    again = json.loads(state_update("P", "running"))
    target = {"top": again, "params": again["params"], "update": again["params"]["update"]}
    target[where]["_meta"] = {"trace": "t2"}
    assert deliver(core, enc(again)) == [enc(again)]
    assert deliver(core, enc(again)) == []  # the same _meta again: a duplicate


def test_first_announcement_is_never_dropped() -> None:
    """The announcement carries a state even if an identical state was seen elsewhere."""
    core = parent_core()
    assert deliver(core, state_update("P", "running")) != []
    frame = announce("P", "C", state=RUNNING)
    assert deliver(core, frame) == [frame]
    frame2 = announce("P", "D", state=RUNNING)
    assert deliver(core, frame2) == [frame2]


def test_mirror_channel_is_separate_from_the_childs_own_channel() -> None:
    """The child's own state_update and its mirror on the parent do not dedup each other."""
    core = with_child(state=RUNNING)
    own = update("C", {"sessionUpdate": "state_update", "state": "running"})
    assert deliver(core, own) == [own]


def test_null_state_is_never_a_duplicate_and_resets() -> None:
    """state: null always passes, and the next real state after it is not a duplicate."""
    core = with_child(state=RUNNING)
    null = announce("P", "C", state=None)
    assert deliver(core, null) == [null]
    assert deliver(core, null) == [null]
    again = announce("P", "C", state=RUNNING)
    assert deliver(core, again) == [again]
    assert deliver(core, again) == []


def test_malformed_state_is_not_deduplicated() -> None:
    """A malformed state (not an object with a string state) is forwarded as is."""
    core = with_child(state=RUNNING)
    bad = announce("P", "C", state="running")
    assert deliver(core, bad) == [bad]


def test_content_chunks_are_never_deduplicated() -> None:
    """Identical content chunks are content, never state: all delivered."""
    core = parent_core()
    c = chunk("P", "same")
    assert [deliver(core, c) for _ in range(3)] == [[c]] * 3


def test_client_session_load_resets_dedup() -> None:
    """After a client session/load the replayed state is delivered again, mirrors included."""
    core = with_child(state=RUNNING)
    s = state_update("P", "idle")
    mirror = announce("P", "C", state=RUNNING)
    assert deliver(core, s) == [s]
    assert deliver(core, s) == []
    assert deliver(core, mirror) == []
    core.receive(
        CLIENT, req(9, "session/load", {"sessionId": "P", "cwd": "/", "mcpServers": []}), 2
    )
    assert deliver(core, s) == [s]
    assert deliver(core, mirror) == [mirror]


def test_dedup_can_be_disabled() -> None:
    """[dedup] state_reports = false forwards every repeat."""
    core = with_child(Config(dedup=DedupConfig(state_reports=False)), state=RUNNING)
    s = state_update("P", "idle")
    mirror = announce("P", "C", state=RUNNING)
    for frame in (s, s, mirror, mirror):
        assert deliver(core, frame) == [frame]
    assert core.statistics().duplicates_removed == 0


json_leaf = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=3)
)
json_vals = st.recursive(
    json_leaf,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=8,
)


@given(value=json_vals)
def test_state_dedup_equal_values_are_duplicates(value: Any) -> None:
    """A snapshot is a duplicate of itself (and of its key-reordered copy) once delivered."""
    d = StateDedup()
    ch = ("self", "S")
    if value is None:
        assert not d.is_duplicate(ch, value)
        return
    assert not d.is_duplicate(ch, value)
    d.delivered(ch, value)
    assert d.is_duplicate(ch, json.loads(json.dumps(value)))
    assert not d.is_duplicate(("self", "T"), value)


@given(a=json_vals, b=json_vals)
def test_state_dedup_matches_json_equality(a: Any, b: Any) -> None:
    """Duplicate iff equal as JSON values (bool is not a number, key order ignored)."""
    d = StateDedup()
    ch = ("mirror", "C")
    d.delivered(ch, a)

    def norm(v: Any) -> Any:
        if isinstance(v, bool) or v is None or isinstance(v, str):
            return (type(v).__name__, v)
        if isinstance(v, int | float):
            return ("num", v)
        if isinstance(v, list):
            return ("list", tuple(norm(x) for x in v))
        return ("obj", frozenset((k, norm(x)) for k, x in v.items()))

    expected = a is not None and b is not None and norm(a) == norm(b)
    assert d.is_duplicate(ch, b) is expected


def test_duplicate_mirror_rewrite_cuts_only_the_state_member() -> None:
    """The rewrite splices the original line: numbers (1e400, 1E2), escapes and spacing
    elsewhere stay byte for byte; only the state member and its comma go."""
    core = with_child(state=RUNNING)
    frame = announce("P", "C", state=RUNNING, title="new").replace(
        b'"title"', b'"big":1e400,"n":1E2,"s":"\\/", "title"'
    )
    out = core.receive(AGENT, frame, 1.0)
    cut = b',"state":' + json.dumps(RUNNING, separators=(",", ":")).encode()
    assert cut in frame
    assert sends(out) == [frame.replace(cut, b"")]
    assert core.statistics().duplicates_removed == 1
    assert core.registry.children["C"].title == "new"


@given(a=json_vals, b=json_vals)
def test_json_equal_shortcut_agrees_with_the_walk(a: Any, b: Any) -> None:
    """The C shortcut of _json_equal (Python ==, then no boolean in either encoding)
    gives the exact walk's verdict."""
    from acp_proxy.core.session.dedup import _json_equal, _json_walk

    assert _json_equal(a, b) is _json_walk(a, b)
    assert _json_equal(a, json.loads(json.dumps(a))) is True


def test_json_equal_keeps_booleans_apart_from_numbers_at_any_depth() -> None:
    """1 == True in Python, never as JSON: nested, in a list, or as the whole value."""
    from acp_proxy.core.session.dedup import _json_equal

    assert not _json_equal({"a": [1, {"b": 0}]}, {"a": [True, {"b": 0}]})
    assert not _json_equal({"a": [1, {"b": 0}]}, {"a": [1, {"b": False}]})
    assert not _json_equal(1.0, True)
    assert _json_equal({"a": [1, {"b": 0.0}], "t": "true"}, {"t": "true", "a": [1.0, {"b": 0}]})
    assert _json_equal({"x": True}, {"x": True})
    assert _json_equal([float("inf")], [float("inf")])
    assert not _json_equal([float("inf")], [None])
    deep: Any = 1
    other: Any = 1.0
    for _ in range(100_000):  # past C's recursion: the iterative walk decides
        deep, other = [deep], [other]
    assert _json_equal(deep, other)
    assert not _json_equal(deep, [other])
