"""How the official SDKs read the fields the permission rules govern (issue 31).

Pure. The schemas annotate fields with ``x-deserialize-default-on-error`` (a
malformed value becomes its default), ``x-deserialize-default-on-null`` and
``x-deserialize-skip-invalid-items`` (array items that fail validation are
dropped, the rest is kept); the Python SDK 0.12.x applies them (with a few more
than the published JSON schema: ``terminal/create`` ``args`` is read with
skip-invalid-items, ``cwd`` with default-on-error), the TypeScript SDK 2.4.0
applies the published ones and refuses the rest. The rules must match what the
client's handler is handed, so the permission rules read these fields through
the functions here; docs/protocol.md section 9 lists every annotation on a
governed field and how it is handled.

Where the SDKs disagree (``args`` holding a non-string: the Python SDK drops
it and runs the rest, the TypeScript SDK refuses the request), deny rules match
the Python reading, and a request no deny rule refuses is refused anyway (the
strictest of the two readings). Paths are read as a superset of what either
SDK keeps (an item with a string ``path`` counts even when another of its
fields is malformed): more paths can only make a deny match or an allow fail.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from acp_proxy.config.records import FrozenRecord
from acp_proxy.core.wire.views import OPAQUE

__all__ = [
    "TOOL_KINDS",
    "PathResolver",
    "ToolPaths",
    "read_args",
    "tool_paths",
]

#: The ``ToolKind`` values of the v1 and v2 schemas: any other value (a typo, another
#: case, a non-string) the Python SDK reads as no kind (``default-on-error``).
TOOL_KINDS = frozenset(
    {
        "read",
        "edit",
        "delete",
        "move",
        "search",
        "execute",
        "think",
        "fetch",
        "switch_mode",
        "other",
    }
)

#: Resolves an absolute, normalised path on the proxy's filesystem (``..`` and the
#: symbolic links of its longest existing prefix), injected by the shell; returns the
#: path unchanged when nothing resolves. ``None`` where the proxy does not share the
#: client's filesystem.
PathResolver = Callable[[str], str]


def read_args(args: object) -> tuple[list[str] | None, str | None]:
    """``terminal/create`` ``args`` as the Python SDK hands them to its handler.

    Args:
        args: the request's ``args`` (any JSON value, or ``OPAQUE``).

    Returns:
        ``(argv, disagreement)``: the string items (``None`` for an omitted or
        null ``args``, ``default-on-null``), and why the SDKs read it
        differently (non-string items: the Python SDK drops them, the
        TypeScript SDK refuses the request), or ``None`` when they agree. A
        value that is not a list is refused by both SDKs (``argv`` ``None``,
        the reason given); ``OPAQUE`` items are left to the caller.
    """
    if args is None:
        return None, None
    if not isinstance(args, list):
        return None, "args is not an array (both SDKs refuse the request)"
    kept = [a for a in args if isinstance(a, str)]
    dropped = sum(1 for a in args if not isinstance(a, str) and a is not OPAQUE)
    if dropped:
        return kept, (
            f"args holds {dropped} item(s) that are not strings (the Python SDK drops "
            "them and runs the rest, the TypeScript SDK refuses the request)"
        )
    return kept, None


@attrs.frozen(eq=False, repr=False, slots=False)  # made rarely: see config/records.py
class ToolPaths(FrozenRecord):
    """The paths a tool call names (``locations`` and ``diff`` content).

    Attributes:
        paths: every string ``path`` (and v2 ``oldPath``) of ``locations`` items
            and of ``diff`` content (v1 ``content[].path``, v2
            ``content[].changes[].path`` / ``oldPath``), in order.
        incomplete: a part too large to read (``OPAQUE``): the request fails closed.
    """

    paths: tuple[str, ...] = ()
    incomplete: bool = False


def tool_paths(tool: Mapping[str, Any]) -> ToolPaths:
    """The paths of a tool call's ``locations`` and ``diff`` content.

    Both fields are ``skip-invalid-items`` in both SDKs: a malformed item is
    dropped, the others are read. Non-string paths are skipped; a non-list
    field is read as empty (``default-on-error``).
    """
    paths: list[str] = []
    incomplete = False
    for field in ("locations", "content"):
        items = tool.get(field)
        if items is OPAQUE:
            incomplete = True
            continue
        if not isinstance(items, list):
            continue
        for item in items:
            if item is OPAQUE:
                incomplete = True
            elif isinstance(item, dict) and (field == "locations" or item.get("type") == "diff"):
                incomplete |= _collect(item, paths)
                changes = item.get("changes") if field == "content" else None
                if changes is OPAQUE:
                    incomplete = True
                elif isinstance(changes, list):
                    for change in changes:
                        if change is OPAQUE:
                            incomplete = True
                        elif isinstance(change, dict):
                            incomplete |= _collect(change, paths)
    return ToolPaths(tuple(paths), incomplete)


def _collect(item: Mapping[str, Any], paths: list[str]) -> bool:
    """Appends ``item``'s string ``path`` / ``oldPath``; True when one is ``OPAQUE``."""
    opaque = False
    for key in ("path", "oldPath"):
        value = item.get(key)
        if isinstance(value, str):
            paths.append(value)
        opaque |= value is OPAQUE
    return opaque
