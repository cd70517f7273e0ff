"""The shared ``==``, ``repr`` and ``hash`` of :mod:`acp_proxy.config.records` behave as
attrs' compiled ones (issue 29: start-up): each pair below is one class made both ways."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from acp_proxy.config import Config
from acp_proxy.config.model import LimitsConfig
from acp_proxy.config.records import Described, FrozenRecord, Record


def _fields() -> dict[str, Any]:
    return {
        "x": attrs.field(),
        "y": attrs.field(factory=list),
        "secret": attrs.field(default="s", repr=False),
        "label": attrs.field(default="A", eq=str.lower, repr=lambda v: f"<{v}>"),
        "cache": attrs.field(default=0, eq=False),
    }


#: one record made by attrs' compiled methods and by the shared ones
CompiledPoint = attrs.make_class("CompiledPoint", _fields(), frozen=True, slots=True)
SharedPoint = attrs.make_class(
    "SharedPoint", _fields(), bases=(FrozenRecord,), frozen=True, slots=True, eq=False, repr=False
)


@attrs.frozen(eq=False, repr=False)
class SharedPair(FrozenRecord):
    x: int
    label: str = attrs.field(default="A", eq=str.lower)
    cache: int = attrs.field(default=0, eq=False)


@attrs.define
class CompiledBox:
    n: int


@attrs.define(eq=False, repr=False)
class SharedBox(Record):
    n: int


CASES = [
    ({"x": 1}, {"x": 1}),
    ({"x": 1}, {"x": 2}),
    ({"x": 1, "y": [1]}, {"x": 1, "y": [1]}),
    ({"x": 1, "y": [1]}, {"x": 1, "y": [2]}),
    ({"x": 1, "secret": "a"}, {"x": 1, "secret": "b"}),
    ({"x": 1, "label": "Q"}, {"x": 1, "label": "q"}),
    ({"x": 1, "label": "Q"}, {"x": 1, "label": "r"}),
    ({"x": 1, "cache": 1}, {"x": 1, "cache": 2}),
]


@pytest.mark.parametrize(("a", "b"), CASES)
def test_equality_and_repr_match_attrs(a: dict[str, object], b: dict[str, object]) -> None:
    """Same fields compared (``eq=False`` left out, ``eq`` keys applied), same text."""
    assert (SharedPoint(**a) == SharedPoint(**b)) is (CompiledPoint(**a) == CompiledPoint(**b))
    assert (SharedPoint(**a) != SharedPoint(**b)) is (CompiledPoint(**a) != CompiledPoint(**b))
    assert repr(SharedPoint(**a)).removeprefix("Shared") == repr(CompiledPoint(**a)).removeprefix(
        "Compiled"
    )


def test_hash_follows_equality_and_fails_as_attrs_does() -> None:
    """Equal frozen records hash alike; a list field makes both unhashable; mutable never."""
    assert hash(SharedPair(1, label="Q")) == hash(SharedPair(1, label="q", cache=5))
    assert hash(SharedPair(1)) != hash(SharedPair(2))
    with pytest.raises(TypeError):
        hash(CompiledPoint(1, [1]))
    with pytest.raises(TypeError):
        hash(SharedPoint(1, [1]))
    with pytest.raises(TypeError):
        hash(CompiledBox(1))
    with pytest.raises(TypeError):
        hash(SharedBox(1))
    assert SharedBox(1) == SharedBox(1)
    assert SharedBox(1) != SharedBox(2)
    assert repr(SharedBox(3)) == "SharedBox(n=3)"


def test_another_class_is_never_equal() -> None:
    """A record equals only a record of its own class, as attrs' ``__eq__``."""
    assert SharedPoint(1) != CompiledPoint(1)
    assert SharedPoint(1).__eq__(CompiledPoint(1)) is NotImplemented
    assert SharedPoint(1) != (1, [], "A")


def test_the_config_keeps_value_semantics() -> None:
    """The model's sections compare, print and hash by value (a reload compares them)."""
    assert Config() == Config()
    assert Config(limits=LimitsConfig(max_sessions=3)) != Config()
    assert hash(LimitsConfig()) == hash(LimitsConfig())
    assert repr(LimitsConfig()).startswith("LimitsConfig(max_message_bytes=33554432, ")
    assert "max_sessions=3" in repr(Config(limits=LimitsConfig(max_sessions=3)))


def test_a_described_part_keeps_identity_equality_and_attrs_repr() -> None:
    """:class:`Described` (a connection's parts): attrs' ``repr``, identity ``==`` and hash."""
    compiled = attrs.make_class("Part", _fields(), eq=False)
    shared = attrs.make_class("Part", _fields(), bases=(Described,), eq=False, repr=False)
    assert shared.__repr__ is Record.__repr__
    for kwargs, _ in CASES:
        a, b = shared(**kwargs), shared(**kwargs)
        assert repr(a) == repr(compiled(**kwargs))
        assert a == a
        assert a != b
        assert hash(a) != hash(b)
