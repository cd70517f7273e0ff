"""Wire views of the few ACP shapes the proxy inspects.

Views are attrs classes built with a cattrs converter that is strict about
types (``"7"`` is not an integer, ``true`` is not a string) and lenient like
the schema's ``x-deserialize-default-on-error``: a malformed optional field
counts as not reported (:data:`~acp_proxy.core.session.patch.UNSET`) and the message
is still forwarded. Source: ``SubagentUpdate`` and ``StateUpdate`` in the
v2 unstable schema (docs/protocol.md section 4).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import attrs

from acp_proxy.config.records import FrozenRecord
from acp_proxy.core.session.patch import UNSET, Unset

if TYPE_CHECKING:
    import cattrs

__all__ = ["SubagentUpdate", "make_converter", "view_subagent_update"]


@functools.cache
def make_converter() -> cattrs.Converter:
    """The strict converter of the views, built on first use (cattrs costs start-up time
    a proxy whose agent sends no ``subagent_update`` never needs; issue 29)."""
    import cattrs

    conv = cattrs.Converter(forbid_extra_keys=False)
    for tp in (str, int, bool, float):
        conv.register_structure_hook(tp, _exact(tp))
    conv.register_structure_hook_func(lambda t: t == dict[str, Any], _object)
    conv.register_structure_hook_func(lambda t: t == list[str], _str_list)
    return conv


def __getattr__(name: str) -> Any:
    if name == "converter":  # the module attribute, built lazily
        return make_converter()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _exact(tp: type) -> Any:
    def hook(value: Any, _t: Any) -> Any:
        if type(value) is not tp:
            raise TypeError(f"expected {tp.__name__}, got {type(value).__name__}")
        return value

    return hook


def _object(value: Any, _t: Any) -> dict[str, Any]:
    if type(value) is not dict:
        raise TypeError("expected an object")
    return value


def _str_list(value: Any, _t: Any) -> list[str]:
    if type(value) is not list or any(type(v) is not str for v in value):
        raise TypeError("expected an array of strings")
    return value


@attrs.frozen(eq=False, repr=False)
class SubagentUpdate(FrozenRecord):
    """A ``subagent_update`` session update (patch fields: UNSET = omitted).

    Attributes:
        session_id: the child's session id (required).
        title, description, cwd: strings, ``None`` (clear) or UNSET.
        capabilities: ``SubagentSessionCapabilities`` object, ``None`` or UNSET.
        state: a ``StateUpdate`` snapshot object (with a string ``state``),
            ``None`` (activity unconfirmed) or UNSET.
        additional_directories: list of strings, ``None`` or UNSET.
        meta: ``_meta`` patch object, ``None`` or UNSET.
        malformed: names of fields present on the wire but malformed (they
            count as not reported).
    """

    session_id: str
    title: str | None | Unset = UNSET
    description: str | None | Unset = UNSET
    capabilities: dict[str, Any] | None | Unset = UNSET
    state: dict[str, Any] | None | Unset = UNSET
    cwd: str | None | Unset = UNSET
    additional_directories: list[str] | None | Unset = UNSET
    meta: dict[str, Any] | None | Unset = UNSET
    malformed: tuple[str, ...] = ()


#: wire key -> (attribute, type structured with ``converter``)
PATCH_FIELDS: dict[str, tuple[str, Any]] = {
    "title": ("title", str),
    "description": ("description", str),
    "capabilities": ("capabilities", dict[str, Any]),
    "state": ("state", dict[str, Any]),
    "cwd": ("cwd", str),
    "additionalDirectories": ("additional_directories", list[str]),
    "_meta": ("meta", dict[str, Any]),
}


def _valid_state(value: dict[str, Any]) -> bool:
    return type(value.get("state")) is str


#: wire key -> the check :func:`make_converter` would apply for its type (the
#: same hooks, called directly: the view is built once or twice per
#: ``subagent_update``, and cattrs' dispatch cost more than the checks; issue 29)
_CHECKS: dict[str, Any] = {
    "title": _exact(str),
    "description": _exact(str),
    "capabilities": _object,
    "state": _object,
    "cwd": _exact(str),
    "additionalDirectories": _str_list,
    "_meta": _object,
}


def view_subagent_update(update: dict[str, Any]) -> SubagentUpdate | None:
    """Reads a ``subagent_update`` object leniently.

    Args:
        update: the ``params.update`` object of a ``session/update``.

    Returns:
        The view, or ``None`` when the required ``sessionId`` is missing or
        not a string (then the update cannot be attributed to any child).
        Each field is checked as ``make_converter().structure(value, tp)``
        would check it (a test compares the two).
    """
    sid = update.get("sessionId")
    if type(sid) is not str:
        return None
    fields: dict[str, Any] = {}
    malformed: list[str] = []
    for wire, (attr, _tp) in PATCH_FIELDS.items():
        if wire not in update:
            continue
        value = update[wire]
        if value is None:
            fields[attr] = None
            continue
        try:
            fields[attr] = _CHECKS[wire](value, _tp)
        except TypeError:
            malformed.append(wire)
            continue
        if attr == "state" and not _valid_state(fields[attr]):
            del fields[attr]
            malformed.append(wire)
    return SubagentUpdate(session_id=sid, malformed=tuple(malformed), **fields)
