"""Field checks of the configuration's sections, run after ``__init__`` (issue 29: start-up).

An attrs validator is compiled into its class's ``__init__``: about 165 K
instructions a field when the class is made, and the model has 73 of them, all
made before a run's first forward. A section that inherits :class:`CheckedRecord`
names its checks in one class table instead, ``CHECKS`` (field name -> check,
in field order), and its ``__init__`` calls ``__attrs_post_init__``, which runs
them as attrs runs validators:

- every field is set first, then each check is called as
  ``check(instance, attribute, value)`` (the field's :class:`attrs.Attribute`,
  as a validator gets it) in field order, so the first bad field raises;
- a section's own cross-field checks come after, in its own
  ``__attrs_post_init__``, which calls this one first;
- they run on every construction: the TOML loader's, a direct one, and
  :func:`attrs.evolve` (a reload, a command-line option).

Unlike attrs validators, ``attrs.validators.set_disabled`` does not turn them
off (nothing here does that) and :func:`attrs.validate` does not run them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from acp_proxy.config.records import FrozenRecord

__all__ = ["Check", "CheckedRecord"]

#: ``check(instance, attribute, value)``: raises (``InvalidValue``) for a bad value
Check = Callable[[Any, Any, Any], None]


class CheckedRecord(FrozenRecord):
    """A :class:`~acp_proxy.config.records.FrozenRecord` whose fields ``CHECKS`` checks."""

    __slots__ = ()

    #: field name -> its check, in field order (see the module doc)
    CHECKS: ClassVar[Mapping[str, Check]] = {}

    def __attrs_post_init__(self) -> None:
        checks = self.CHECKS
        if not checks:
            return
        fields = self.__attrs_attrs__  # type: ignore[attr-defined]  # by name, as attrs.fields
        for name, check in checks.items():
            check(self, getattr(fields, name), getattr(self, name))
