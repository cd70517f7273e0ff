"""The configuration's field checks (``config/checked.py``, issue 29: start-up).

Each section names its checks in ``CHECKS`` instead of attrs validators (which
are compiled into ``__init__`` when the class is made); these tests hold the
table to what the validators did: every check names a field, in field order,
and runs on every construction, before the section's own cross-field checks.
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from acp_proxy.config import model
from acp_proxy.config.checked import CheckedRecord

#: the arguments a section with a mandatory field needs
REQUIRED: dict[type, dict[str, Any]] = {
    model.PermissionRule: {"action": "allow"},
    model.AdmissionRule: {"principal": ["*"]},
}

SECTIONS = sorted(
    (
        obj
        for obj in vars(model).values()
        if isinstance(obj, type) and attrs.has(obj) and obj.__module__ == model.__name__
    ),
    key=lambda cls: cls.__name__,
)
CHECKED = [cls for cls in SECTIONS if issubclass(cls, CheckedRecord)]


class Refused(Exception):
    pass


def test_no_section_compiles_a_validator_into_its_init() -> None:
    """A new ``validator=`` would be compiled again at import: it goes in ``CHECKS``."""
    assert len(CHECKED) >= 13
    for cls in SECTIONS:
        assert [a.name for a in attrs.fields(cls) if a.validator is not None] == [], cls


@pytest.mark.parametrize("cls", CHECKED, ids=lambda cls: cls.__name__)
def test_the_checks_name_fields_in_field_order(cls: type[CheckedRecord]) -> None:
    names = [a.name for a in attrs.fields(cls)]
    checked = list(cls.CHECKS)
    assert checked == [n for n in names if n in cls.CHECKS]


@pytest.mark.parametrize("cls", CHECKED, ids=lambda cls: cls.__name__)
def test_every_check_runs_on_construction_and_evolve(
    cls: type[CheckedRecord], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each check is called with the instance, the field's Attribute and its value,
    by ``__init__`` and by :func:`attrs.evolve`; a section with its own
    ``__attrs_post_init__`` still runs them."""
    kwargs = REQUIRED.get(cls, {})
    good = cls(**kwargs)
    for name in cls.CHECKS:
        seen: list[tuple[Any, Any, Any]] = []

        def refuse(
            inst: Any, attr: Any, value: Any, name: str = name, seen: list[Any] = seen
        ) -> None:
            seen.append((inst, attr, value))
            if attr.name == name:
                raise Refused(name)

        monkeypatch.setattr(cls, "CHECKS", dict.fromkeys(cls.CHECKS, refuse))
        with pytest.raises(Refused, match=f"^{name}$"):
            cls(**kwargs)
        with pytest.raises(Refused, match=f"^{name}$"):
            attrs.evolve(good)
        inst, attr, value = seen[-1]
        assert isinstance(inst, cls)
        assert attr is getattr(attrs.fields(cls), name)
        assert value == getattr(good, name)
        monkeypatch.undo()


def test_a_field_check_comes_before_the_cross_field_checks() -> None:
    """As with validators: a bad field is named before a rule that cannot match."""
    with pytest.raises(ValueError, match="method: must be one of"):
        model.PermissionRule(action="allow", method="nope", path=["/x"])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="child_read_only"):
        model.EnforcementConfig(child_read_only=[""], child_mutations={"a": "b"})


def test_an_optional_check_passes_none_and_checks_a_value() -> None:
    assert model.AdmissionRule(principal=["*"], mcp_stdio=None).mcp_stdio is None
    with pytest.raises(ValueError, match="mcp_stdio: must be one of 'refuse', 'allow'"):
        model.AdmissionRule(principal=["*"], mcp_stdio="maybe")  # type: ignore[arg-type]


def test_the_sections_are_made_without_a_slotted_copy() -> None:
    """A section is made once a run: ``slots=False`` spares attrs' second class
    (``config/records.py``); it stays frozen all the same."""
    for cls in SECTIONS:
        assert "__slots__" not in vars(cls), cls
    cfg = model.Config()
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        cfg.limits.max_children = 1  # type: ignore[misc]
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        cfg.limits.unknown = 1  # type: ignore[attr-defined]
