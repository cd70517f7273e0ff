"""Three-state patch fields (docs/protocol.md section 4, "Subagents").

A patch field is omitted (:data:`UNSET`: unchanged), ``None`` (clear), or a
value (replace). ``_meta`` patches by top-level key (:func:`merge_meta`).
"""

from __future__ import annotations

import enum
from typing import Any, Final, TypeVar

__all__ = ["UNSET", "Unset", "apply_patch", "merge_meta", "meta_patch_is_noop"]

T = TypeVar("T")


class Unset(enum.Enum):
    """Type of :data:`UNSET`, the "field omitted" marker."""

    UNSET = "UNSET"

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Final = Unset.UNSET


def apply_patch(current: T | None, patch: T | None | Unset) -> T | None:
    """Applies one whole-value patch field.

    Args:
        current: the stored value (``None`` = unset).
        patch: :data:`UNSET` keeps ``current``; ``None`` clears; a value replaces.

    Returns:
        The new stored value.
    """
    if patch is UNSET:
        return current
    return patch


def merge_meta(
    current: dict[str, Any] | None, patch: dict[str, Any] | None | Unset
) -> dict[str, Any] | None:
    """Applies a ``_meta`` patch by top-level key.

    Args:
        current: stored metadata, or ``None``.
        patch: :data:`UNSET` keeps it; ``None`` clears the whole map; an
            object sets each of its keys, removing those whose value is ``None``
            (no deep merge).

    Returns:
        The new metadata; ``None`` when empty after the patch.
    """
    if patch is UNSET:
        return current
    if patch is None:
        return None
    merged = dict(current) if current else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    return merged or None


def meta_patch_is_noop(
    current: dict[str, Any] | None, patch: dict[str, Any] | None | Unset
) -> bool:
    """True when applying ``patch`` with :func:`merge_meta` changes nothing."""
    return merge_meta(current, patch) == (current or None)
