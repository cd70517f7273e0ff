"""Patch semantics, the lenient subagent_update view and the subagent registry."""

from __future__ import annotations

import copy
from typing import Any

import cattrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    invariant,
    rule,
)

from acp_proxy.core.session.patch import UNSET, Unset, apply_patch, merge_meta, meta_patch_is_noop
from acp_proxy.core.session.registry import Registry, UpdateOutcome
from acp_proxy.core.session.schema import PATCH_FIELDS, converter, view_subagent_update

scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=4)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=6,
)
patches = st.just(UNSET) | st.none() | values
metas = st.none() | st.dictionaries(st.sampled_from("abcd"), st.none() | values, max_size=4)
meta_patches = st.just(UNSET) | metas


# ------------------------------------------------------------------ patch


@given(current=st.none() | values, patch=patches)
def test_apply_patch_twice_equals_once(current: Any, patch: Any) -> None:
    """A whole-value patch is idempotent."""
    once = apply_patch(current, patch)
    assert apply_patch(once, patch) == once


@given(current=st.none() | values)
def test_empty_patch_changes_nothing(current: Any) -> None:
    """An omitted field (UNSET) leaves the stored value as it is."""
    assert apply_patch(current, UNSET) == current


@given(current=st.none() | values)
def test_null_patch_always_clears(current: Any) -> None:
    """null clears whatever was stored."""
    assert apply_patch(current, None) is None


@given(current=st.none() | values, value=values.filter(lambda v: v is not None))
def test_value_patch_replaces(current: Any, value: Any) -> None:
    """A value replaces the stored one whole."""
    assert apply_patch(current, value) == value


def meta_model(current: dict[str, Any] | None, patch: Any) -> dict[str, Any] | None:
    if patch is UNSET:
        return current
    if patch is None:
        return None
    out = dict(current or {})
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = v
    return out or None


stored_metas = st.none() | st.dictionaries(
    st.sampled_from("abcd"), values.filter(lambda v: v is not None), min_size=1, max_size=4
)


@given(current=stored_metas, patch=meta_patches)
def test_merge_meta_follows_per_key_semantics(current: Any, patch: Any) -> None:
    """_meta patches by top-level key: omitted keys stay, null keys go, values replace."""
    before = copy.deepcopy(current)
    merged = merge_meta(current, patch)
    assert merged == meta_model(before, patch)
    assert current == before  # the stored map is never mutated in place
    assert merge_meta(merged, patch) == merged  # idempotent
    assert meta_patch_is_noop(merged, patch)


def test_meta_null_key_removes_and_meta_null_clears_all() -> None:
    """{"k": null} removes one key; _meta: null clears the whole map."""
    assert merge_meta({"a": 1, "b": 2}, {"a": None}) == {"b": 2}
    assert merge_meta({"a": 1}, {"a": None}) is None
    assert merge_meta({"a": 1, "b": 2}, None) is None
    assert merge_meta({"a": 1}, {}) == {"a": 1}


def test_meta_has_no_deep_merge() -> None:
    """A _meta key's object value replaces the old one; nested keys are not merged."""
    assert merge_meta({"v": {"x": 1, "y": 2}}, {"v": {"y": 3}}) == {"v": {"y": 3}}


def test_meta_patch_noop_detection() -> None:
    """meta_patch_is_noop is False exactly when something would change."""
    assert meta_patch_is_noop({"a": 1}, {"a": 1})
    assert meta_patch_is_noop(None, {"a": None})
    assert not meta_patch_is_noop({"a": 1}, {"a": 2})
    assert not meta_patch_is_noop({"a": 1}, None)


# ------------------------------------------------------------------ lenient view


@pytest.mark.parametrize(
    ("wire", "value"),
    [
        ("title", 7),
        ("title", True),
        ("title", ["x"]),
        ("description", {"a": 1}),
        ("cwd", 1.5),
        ("additionalDirectories", "ab"),
        ("additionalDirectories", ["a", 1]),
        ("additionalDirectories", {"a": "b"}),
        ("capabilities", [1]),
        ("capabilities", "cancel"),
        ("capabilities", True),
        ("state", "x"),
        ("state", {"state": 7}),
        ("state", {"other": "running"}),
        ("state", ["running"]),
        ("_meta", [1]),
        ("_meta", "m"),
    ],
)
def test_malformed_optional_field_counts_as_not_reported(wire: str, value: Any) -> None:
    """A malformed optional field is UNSET (listed in malformed) and never changes the registry."""
    view = view_subagent_update({"sessionId": "C", wire: value})
    assert view is not None
    attr = PATCH_FIELDS[wire][0]
    assert getattr(view, attr) is UNSET
    assert view.malformed == (wire,)
    reg = Registry()
    good = view_subagent_update(
        {
            "sessionId": "C",
            "title": "t",
            "description": "d",
            "cwd": "/w",
            "additionalDirectories": ["/a"],
            "capabilities": {"cancel": {}},
            "state": {"state": "running"},
            "_meta": {"k": 1},
        }
    )
    assert good is not None
    assert reg.apply("P", good, 0.0) is UpdateOutcome.ANNOUNCED
    before = copy.deepcopy(reg.children["C"])
    assert reg.apply("P", view, 1.0) is UpdateOutcome.UNCHANGED
    assert reg.children["C"] == before


def test_string_that_looks_like_a_number_is_never_coerced() -> None:
    """ "7" stays the string "7"; the converter never turns strings into ints or back."""
    view = view_subagent_update({"sessionId": "C", "title": "7", "cwd": "0"})
    assert view is not None
    assert view.title == "7"
    assert view.cwd == "0"
    with pytest.raises((cattrs.BaseValidationError, TypeError)):
        converter.structure("7", int)
    with pytest.raises((cattrs.BaseValidationError, TypeError)):
        converter.structure(7, str)
    with pytest.raises((cattrs.BaseValidationError, TypeError)):
        converter.structure(True, int)


def test_view_reads_every_field_and_null() -> None:
    """Well-formed fields are read as given; null is kept as null (clear)."""
    view = view_subagent_update(
        {
            "sessionId": "C",
            "title": None,
            "capabilities": {"cancel": {}},
            "state": {"state": "idle", "extra": 1},
            "additionalDirectories": [],
            "_meta": None,
            "unknownField": 1,
        }
    )
    assert view is not None
    assert view.title is None
    assert view.capabilities == {"cancel": {}}
    assert view.state == {"state": "idle", "extra": 1}
    assert view.additional_directories == []
    assert view.meta is None
    assert view.description is UNSET
    assert view.malformed == ()


@pytest.mark.parametrize("sid", [None, 7, ["C"], {"id": "C"}])
def test_view_needs_a_string_session_id(sid: Any) -> None:
    """Without a string sessionId the update cannot be attributed: no view."""
    upd: dict[str, Any] = {"title": "t"}
    if sid is not None:
        upd["sessionId"] = sid
    assert view_subagent_update(upd) is None


# ------------------------------------------------------------------ registry


def view(sid: str, **fields: Any) -> Any:
    upd = {"sessionId": sid}
    for k, v in fields.items():
        upd["_meta" if k == "meta" else k] = v
    v = view_subagent_update(upd)
    assert v is not None
    return v


def test_announce_then_patch_and_unchanged() -> None:
    """First update announces; a changing one updates; a repeat is UNCHANGED."""
    reg = Registry()
    assert reg.apply("P", view("C", title="a"), 1.0) is UpdateOutcome.ANNOUNCED
    assert reg.is_known("C")
    assert reg.children["C"].announced_at == 1.0
    assert reg.apply("P", view("C", title="b"), 2.0) is UpdateOutcome.UPDATED
    assert reg.apply("P", view("C", title="b"), 3.0) is UpdateOutcome.UNCHANGED
    assert reg.apply("P", view("C", state={"state": "idle"}), 3.0) is UpdateOutcome.UPDATED
    assert reg.apply("P", view("C", state={"state": "idle"}), 3.0) is UpdateOutcome.UNCHANGED
    assert reg.children["C"].title == "b"
    assert reg.children["C"].announced_at == 1.0


def test_parent_never_changes() -> None:
    """A later update for a child delivered on another session keeps the first parent."""
    reg = Registry()
    reg.mark_known("P")
    reg.mark_known("Q")
    reg.apply("P", view("C"), 0.0)
    assert reg.apply("Q", view("C", title="x"), 1.0) is UpdateOutcome.UPDATED
    assert reg.children["C"].parent_id == "P"
    assert reg.ancestors("C") == ["P"]


def test_self_parenting_is_invalid() -> None:
    """A session cannot be announced as its own child."""
    reg = Registry()
    assert reg.apply("C", view("C"), 0.0) is UpdateOutcome.INVALID
    assert reg.children == {}
    assert not reg.is_known("C")


def test_cycle_through_an_unknown_root_is_invalid() -> None:
    """Announcing an ancestor as a child of its own descendant is refused."""
    reg = Registry()
    reg.apply("R", view("A"), 0.0)
    reg.apply("A", view("B"), 0.0)
    assert reg.ancestors("B") == ["A", "R"]
    assert reg.apply("B", view("R"), 0.0) is UpdateOutcome.INVALID
    assert "R" not in reg.children
    assert reg.ancestors("B") == ["A", "R"]


def test_known_ordinary_session_announced_as_a_child_is_a_conflict() -> None:
    """A session the client knows as ordinary, announced as a child, becomes a child
    (enforced) and the outcome says it was a conflict."""
    reg = Registry()
    reg.mark_known("P")
    reg.mark_known("S")
    assert reg.apply("P", view("S"), 0.0) is UpdateOutcome.CONFLICT
    child = reg.child("S")
    assert child is not None
    assert child.parent_id == "P"
    assert not reg.is_ordinary("S")


def test_existing_child_under_its_descendant_is_a_patch_not_a_cycle() -> None:
    """An update for an existing child on its own descendant patches it; the tree stays acyclic."""
    reg = Registry()
    reg.mark_known("P")
    reg.apply("P", view("A"), 0.0)
    reg.apply("A", view("B"), 0.0)
    assert reg.apply("B", view("A", title="t"), 0.0) is UpdateOutcome.UPDATED
    assert reg.children["A"].parent_id == "P"
    assert reg.ancestors("B") == ["A", "P"]


def test_permits_needs_an_object_value() -> None:
    """Only an object capability value ({} included) permits; true/null/missing do not."""
    reg = Registry()
    reg.apply("P", view("C", capabilities={"cancel": {}, "prompt": True, "close": None}), 0.0)
    c = reg.children["C"]
    assert c.permits("cancel")
    assert not c.permits("prompt")
    assert not c.permits("close")
    assert not c.permits("delete")
    reg.apply("P", view("C", capabilities=None), 0.0)
    assert not c.permits("cancel")


# ------------------------------------------------------------------ state machine

FIELD_VALUES: dict[str, Any] = {
    "title": st.none() | st.sampled_from(["a", "b", "7"]),
    "description": st.none() | st.sampled_from(["d", ""]),
    "cwd": st.none() | st.sampled_from(["/a", "/b"]),
    "additionalDirectories": st.none() | st.lists(st.sampled_from(["/x", "/y"]), max_size=2),
    "capabilities": st.none() | st.dictionaries(st.sampled_from(["cancel", "prompt"]), st.just({})),
    "state": st.none() | st.sampled_from(["running", "idle"]).map(lambda s: {"state": s}),
    "_meta": metas,
}
field_patches = st.fixed_dictionaries({}, optional=FIELD_VALUES)
ATTR = {wire: attr for wire, (attr, _tp) in PATCH_FIELDS.items()}


class RegistryMachine(RuleBasedStateMachine):
    """Registry vs a plain dict model under announce / patch / nest."""

    sessions = Bundle("sessions")
    children = Bundle("children")

    def __init__(self) -> None:
        super().__init__()
        self.reg = Registry()
        self.model: dict[str, dict[str, Any]] = {}
        self.parents: dict[str, str] = {}
        self.counter = 0

    def _fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    @rule(target=sessions)
    def new_root(self) -> str:
        sid = self._fresh("root")
        self.reg.mark_known(sid)
        return sid

    @rule(target=children, parent=st.one_of(sessions, children), fields=field_patches)
    def announce(self, parent: str, fields: dict[str, Any]) -> str:
        cid = self._fresh("child")
        out = self.reg.apply(parent, view_subagent_update({"sessionId": cid, **fields}), 0.0)
        assert out is UpdateOutcome.ANNOUNCED
        rec = {attr: None for attr in ATTR.values()}
        self._patch_model(rec, fields)
        self.model[cid] = rec
        self.parents[cid] = parent
        return cid

    @rule(child=children, via=st.one_of(sessions, children), fields=field_patches)
    def patch(self, child: str, via: str, fields: dict[str, Any]) -> None:
        rec = self.model[child]
        before = dict(rec)
        self._patch_model(rec, fields)
        out = self.reg.apply(via, view_subagent_update({"sessionId": child, **fields}), 1.0)
        assert out is (UpdateOutcome.UNCHANGED if rec == before else UpdateOutcome.UPDATED)

    @rule(child=children, fields=field_patches)
    def patch_twice(self, child: str, fields: dict[str, Any]) -> None:
        self.patch(child, self.parents[child], fields)
        out = self.reg.apply(
            self.parents[child], view_subagent_update({"sessionId": child, **fields}), 2.0
        )
        assert out is UpdateOutcome.UNCHANGED

    @rule()
    def self_parent_rejected(self) -> None:
        fresh = self._fresh("x")
        assert self.reg.apply(fresh, view_subagent_update({"sessionId": fresh}), 0.0) is (
            UpdateOutcome.INVALID
        )

    @rule(target=children, root=consumes(sessions))
    def root_announced_is_a_conflict(self, root: str) -> str:
        out = self.reg.apply("elsewhere", view_subagent_update({"sessionId": root}), 0.0)
        assert out is UpdateOutcome.CONFLICT
        self.model[root] = {attr: None for attr in ATTR.values()}
        self.parents[root] = "elsewhere"
        return root

    @staticmethod
    def _patch_model(rec: dict[str, Any], fields: dict[str, Any]) -> None:
        for wire, value in fields.items():
            attr = ATTR[wire]
            rec[attr] = meta_model(rec[attr], value) if wire == "_meta" else value

    @invariant()
    def matches_model(self) -> None:
        assert set(self.reg.children) == set(self.model)
        for cid, rec in self.model.items():
            c = self.reg.children[cid]
            assert c.parent_id == self.parents[cid]
            for attr, value in rec.items():
                assert getattr(c, attr) == value, (cid, attr)
            assert self.reg.is_known(cid)

    @invariant()
    def tree_is_acyclic(self) -> None:
        for cid in self.model:
            chain = self.reg.ancestors(cid)
            assert cid not in chain
            assert len(chain) == len(set(chain))


RegistryMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=25)
TestRegistryMachine = RegistryMachine.TestCase


def test_unset_repr() -> None:
    """UNSET prints as UNSET and is the only Unset value."""
    assert repr(UNSET) == "UNSET"
    assert list(Unset) == [UNSET]


def test_announcements_beyond_max_children_are_refused() -> None:
    """The registry keeps at most max_children children; the next announcement is REFUSED."""
    reg = Registry(max_children=2)
    reg.mark_known("P")
    for cid, expected in (("A", "announced"), ("B", "announced"), ("C", "refused")):
        view = view_subagent_update({"sessionId": cid})
        assert view is not None
        assert reg.apply("P", view, 0.0).value == expected
    assert set(reg.children) == {"A", "B"}
    assert not reg.is_known("C")


def test_provisional_ids_are_bounded() -> None:
    """Provisional ids beyond max_children are forgotten oldest first (and become unknown)."""
    reg = Registry(max_children=2)
    for sid in "XYZ":
        reg.mark_known(sid, provisional=True)
    assert list(reg.provisional) == ["Y", "Z"]
    assert not reg.is_known("X")


def _view_through_converter(update: dict[str, Any]) -> Any:
    """The view as the cattrs converter reads it (the reference for the direct checks)."""
    sid = update.get("sessionId")
    if type(sid) is not str:
        return None
    fields: dict[str, Any] = {}
    malformed: list[str] = []
    for wire, (attr, tp) in PATCH_FIELDS.items():
        if wire not in update:
            continue
        value = update[wire]
        if value is None:
            fields[attr] = None
            continue
        try:
            fields[attr] = converter.structure(value, tp)
        except (cattrs.BaseValidationError, TypeError, ValueError):
            malformed.append(wire)
            continue
        if attr == "state" and type(fields[attr].get("state")) is not str:
            del fields[attr]
            malformed.append(wire)
    return (sid, tuple(malformed), fields)


_field_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(max_size=3),
    st.lists(st.text(max_size=2) | st.integers(), max_size=3),
    st.dictionaries(
        st.sampled_from(["state", "x"]), st.text(max_size=2) | st.integers(), max_size=2
    ),
)


@given(
    update=st.dictionaries(
        st.sampled_from([*PATCH_FIELDS, "sessionId", "other"]), _field_values, max_size=9
    )
)
def test_view_checks_agree_with_the_converter(update: dict[str, Any]) -> None:
    """view_subagent_update checks each field directly, exactly as the converter would."""
    view = view_subagent_update(update)
    expected = _view_through_converter(update)
    if expected is None:
        assert view is None
        return
    assert view is not None
    sid, malformed, fields = expected
    assert (view.session_id, view.malformed) == (sid, malformed)
    for wire, (attr, _tp) in PATCH_FIELDS.items():
        assert getattr(view, attr) == fields.get(attr, UNSET), wire
