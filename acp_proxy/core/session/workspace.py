"""Is a directory a client names inside the workspace roots? (issue 24, "ACP agrees with the OS").

A pure function of strings, shared by every check that confines the
directories of ``session/new``, ``session/load``, ``session/resume`` and
``session/fork`` (the sandbox's workspace here; admission roots may reuse it).
Paths are compared lexically (``posixpath.normpath``; a leading ``//`` is
``/``, as Linux reads it): symbolic links are not followed, which the OS
sandbox makes harmless (a link out of the workspace leads nowhere it may write).
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["SESSION_DIRECTORY_METHODS", "directories_outside", "normalize_root"]

#: Client requests whose ``cwd`` / ``additionalDirectories`` name the agent's working roots.
SESSION_DIRECTORY_METHODS = frozenset(
    {"session/new", "session/load", "session/resume", "session/fork"}
)


#: The list keys read: the spec's, and the snake_case spelling the Python SDK also accepts.
_DIRECTORY_LISTS = ("additionalDirectories", "additional_directories")


def normalize_root(path: str) -> str:
    """``path`` normalised lexically (``/a/./b/../c`` -> ``/a/c``; ``//x`` -> ``/x``)."""
    path = posixpath.normpath(path)
    return "/" + path.lstrip("/") if path.startswith("//") else path


def _inside(path: str, roots: Sequence[str]) -> bool:
    if not path.startswith("/") or "\0" in path:
        return False  # not an absolute POSIX path: ACP requires one; it cannot be judged
    resolved = normalize_root(path)
    return any(resolved == root or resolved.startswith(root.rstrip("/") + "/") for root in roots)


def directories_outside(params: Mapping[str, Any] | None, roots: Sequence[str]) -> list[str]:
    """The directories a session request names that are not at or below one of ``roots``.

    Args:
        params: the request's params (``cwd``: a string; ``additionalDirectories``:
            a list of strings; the same in ``_meta``). A missing ``cwd`` names
            nothing; a ``cwd`` or an item that is not a string is reported (as
            its ``repr``), so a malformed request is refused, not guessed at.
        roots: absolute, normalised roots (:func:`normalize_root`).

    Returns:
        The offending entries in request order (empty: everything is inside).
    """
    if params is None:
        return []
    named: list[object] = []
    meta = params.get("_meta")
    # The Python SDK spreads params._meta into the handler's arguments: a cwd there
    # is a cwd the agent may use, so it is judged too.
    for source in (params, meta) if isinstance(meta, Mapping) else (params,):
        if source.get("cwd") is not None:
            named.append(source["cwd"])
        for key in _DIRECTORY_LISTS:
            extra = source.get(key)
            if isinstance(extra, list):
                named.extend(extra)
            elif extra is not None:
                named.append(extra)
    return [
        item if isinstance(item, str) else repr(item)
        for item in named
        if not (isinstance(item, str) and _inside(item, roots))
    ]
