"""The pure budget counters (acp_proxy/core/session/budgets.py, issue 28)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from acp_proxy.core.session.budgets import PromptWindow, RepeatCounter, TokenTally, repeat_key


def test_a_window_allows_up_to_its_limit_and_resets_after_window_s() -> None:
    w = PromptWindow()
    assert w.take(10.0, 2, 60.0, False) == (True, 1)
    assert w.take(20.0, 2, 60.0, False) == (True, 2)
    assert w.take(30.0, 2, 60.0, False) == (False, 3)
    assert w.count == 2  # a refused prompt is not counted
    assert w.reset_in(30.0, 60.0) == 40.0
    assert w.take(70.0, 2, 60.0, False) == (True, 1)  # the window started at 10.0


def test_observe_counts_prompts_beyond_the_limit() -> None:
    w = PromptWindow()
    w.take(0.0, 1, 60.0, True)
    assert w.take(1.0, 1, 60.0, True) == (False, 2)
    assert w.count == 2


@given(st.dictionaries(st.text(max_size=4), st.integers() | st.text(max_size=3), max_size=6))
def test_the_same_call_with_keys_in_any_order_is_one_repeat_key(raw: dict[str, object]) -> None:
    """Key order never matters; the kind, the title and every argument do."""
    shuffled = dict(reversed(list(raw.items())))
    call = {"kind": "execute", "title": "run", "rawInput": raw}
    assert repeat_key(call) == repeat_key({**call, "rawInput": shuffled})
    assert repeat_key(call) != repeat_key({**call, "rawInput": {**raw, "\x00extra": 1}})
    assert repeat_key(call) != repeat_key({**call, "kind": "edit"})
    assert repeat_key(call) != repeat_key({**call, "title": "walk"})


def test_a_v2_name_stands_for_the_title() -> None:
    assert repeat_key({"kind": "k", "name": "t", "rawInput": 1}) == repeat_key(
        {"kind": "k", "title": "t", "rawInput": 1}
    )


def test_repeats_are_counted_per_session_and_bounded() -> None:
    r = RepeatCounter(max_sessions=2)
    assert [r.count("a", "k") for _ in range(3)] == [1, 2, 3]
    assert r.count("b", "k") == 1
    r.count("c", "k")  # a third session forgets the oldest
    assert r.count("a", "k") == 1


def test_tokens_count_each_sessions_high_water_mark_toward_its_root() -> None:
    t = TokenTally(max_sessions=10)
    assert t.report("r", "r", 100) == 100
    assert t.report("r", "child", 50) == 50
    assert t.report("r", "r", 80) == 0  # lower: nothing given back
    assert t.report("r", "r", 130) == 30
    assert t.used("r") == 180
