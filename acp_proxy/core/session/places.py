"""The places a governed request names, on the proxy's filesystem (issue 31, items 2 and 3).

Pure: the filesystem is read only through a :data:`~acp_proxy.core.session.sdk_reading.PathResolver`
the shell injects (:mod:`acp_proxy.shell.places`), so the core stays a function of
bytes, time and state, and tests pass a dictionary. Why injected rather than
resolved by the shell beforehand: the core decides synchronously as it reads
each governed request, and only it knows which members are paths (``path``,
``cwd``, a session's cwd, ``toolCall.locations``, diff paths); a shell that
resolved first would have to parse every request a second time.

- **Resolution.** A path rule matches the path as given (normalised) and its
  resolution (``..`` and the symbolic links of its longest existing prefix);
  the permission rules read both as two shapes, so the stricter decision wins.
  It cannot see a link created after the decision (the client opens the path
  later), nor what the agent opens itself (the sandbox covers that).
- **The proxy's own files** (:class:`OwnFiles`): a request naming one is
  refused whatever the rules say.
"""

from __future__ import annotations

import posixpath
import unicodedata
from collections.abc import Iterable, Mapping

import attrs

from acp_proxy.config.records import FrozenRecord

__all__ = ["OwnFiles", "own_file_hit"]


@attrs.frozen(eq=False, repr=False, slots=False)  # made rarely: see config/records.py
class OwnFiles(FrozenRecord):
    """The proxy's own files, out of reach of the requests it governs.

    Attributes:
        places: absolute normalised path -> ``True`` for the path and everything
            below it (a file, the audit log, a key), ``False`` for the path
            itself only (the directory ``--watch-config`` watches: a terminal
            there, or a request naming the directory, is refused; the other
            files of a project directory are not the proxy's). Both the path as
            given and its resolution are listed by the shell.
    """

    places: Mapping[str, bool] = attrs.field(factory=dict)

    def __bool__(self) -> bool:
        return bool(self.places)


def _fold(path: str) -> str:
    """``path`` case-folded, without format characters, backslashes as separators."""
    text = "".join(ch for ch in path.replace("\\", "/") if unicodedata.category(ch) != "Cf")
    return posixpath.normpath(text.casefold()) if text.startswith("/") else text.casefold()


def own_file_hit(places: Iterable[str], lines: Iterable[str], own: OwnFiles) -> str | None:
    """The proxy's own file a request names, or ``None``.

    Args:
        places: the request's paths and cwds (normalised, and resolved).
        lines: its command lines (a command naming an own file is refused too:
            advisory, as every command rule).
        own: the proxy's own files.

    Matching is case-folded, without format characters (as the deny rules
    read a path), so ``/etc/ACP-proxy.toml`` on a case-insensitive disk is caught.
    """
    if not own:
        return None
    folded = {_fold(p): (p, below) for p, below in own.places.items()}
    for place in places:
        here = _fold(place)
        for key, (original, below) in folded.items():
            if here == key or (below and here.startswith(key.rstrip("/") + "/")):
                return original
    for line in lines:
        low = line.casefold()
        for key, (original, below) in folded.items():
            if below and key in low:
                return original
    return None
