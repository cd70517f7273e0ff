"""attrs records whose ``==``, ``repr`` and ``hash`` are shared functions (issue 29: start-up).

attrs writes each class's ``__init__``, ``__repr__``, ``__eq__`` and ``__hash__`` as
source and compiles it when the class is made: about 4 M instructions a class,
``__repr__`` and ``__eq__`` with ``__hash__`` nearly half of it. A class made with
``@attrs.frozen(eq=False, repr=False)`` that inherits :class:`FrozenRecord` compiles
only its ``__init__`` and gets the same three methods from here, read off
``__attrs_attrs__`` when called:

- ``a == b``: ``NotImplemented`` unless both are of the same class, else the
  fields with ``eq`` set compared in order (a field's ``eq_key`` applied), as attrs;
- ``repr``: ``Name(field=value, ...)``, the fields with ``repr`` set, a field's
  own repr callable applied, as attrs;
- ``hash``: of the class and the compared fields (:class:`FrozenRecord` only;
  a :class:`Record`, mutable, is unhashable, as attrs makes it: a class that
  defines ``__eq__`` alone gets ``__hash__ = None``).

They are slower to call than attrs' compiled ones, so they suit records that
are compared or printed rarely (the configuration, a reload's comparison).

A record made rarely (a configuration section, a gate's decision or refusal, the
proxy's own files) is also made with ``slots=False``: for ``__slots__`` attrs
builds each class twice (the class, then a copy with slots), about 0.24 M
instructions a class more at import. A record made for every message or kept in
numbers (per session, per child) keeps its slots, for its memory.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Described", "FrozenRecord", "Record"]


def _values(obj: Any) -> tuple[Any, ...]:
    return tuple(
        (a.eq_key(getattr(obj, a.name)) if a.eq_key is not None else getattr(obj, a.name))
        for a in obj.__attrs_attrs__
        if a.eq
    )


class Record:
    """Base of a mutable attrs class made with ``eq=False, repr=False`` (see the module doc)."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return _values(self) == _values(other)

    def __repr__(self) -> str:
        parts = []
        for a in self.__attrs_attrs__:  # type: ignore[attr-defined]
            if a.repr is False:
                continue
            value = getattr(self, a.name, None)
            text = repr(value) if a.repr is True else a.repr(value)
            parts.append(f"{a.name}={text}")
        name = self.__class__.__qualname__.rsplit(">.", 1)[-1]
        return f"{name}({', '.join(parts)})"


class FrozenRecord(Record):
    """Base of a frozen attrs class made with ``eq=False, repr=False`` (see the module doc)."""

    __slots__ = ()

    def __hash__(self) -> int:
        return hash((self.__class__, *_values(self)))


class Described:
    """Base of an attrs class made with ``eq=False, repr=False`` whose instances are
    compared by identity (a connection's parts): :class:`Record`'s ``repr`` only.

    Its fields must not lead back to the instance (this ``repr``, unlike attrs',
    does not guard against a cycle).
    """

    __slots__ = ()

    __repr__ = Record.__repr__
