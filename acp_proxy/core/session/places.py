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
  refused whatever the rules say. A path is first compared as given and
  resolved (no filesystem call: a direct hit costs nothing more); then, when
  the shell gave a :data:`SameFile` check, each place is compared by identity
  (``st_dev``, ``st_ino``), so a hard link to the audit log, or a path the
  resolution missed (a bind mount), is refused as the file itself. A place
  that does not exist (yet) is decided on its path alone; one that exists but
  cannot be examined is refused (fail closed). Why identity through an
  injected check rather than recorded identities alone: the core cannot stat
  the requested place, and an own file made or replaced after the start (the
  trace, a config saved by rename) has an identity only the shell can read
  when the request comes. The check runs only for governed requests
  (``fs/*``, ``terminal/create``, ``session/request_permission``) while there
  are own files; a link or file made after the decision is not seen (the
  client opens the path later).
"""

from __future__ import annotations

import posixpath
import unicodedata
from collections.abc import Callable, Iterable, Mapping

import attrs

from acp_proxy.config.records import FrozenRecord

__all__ = ["OwnFiles", "SameFile", "Unexamined", "own_file_hit", "own_file_refusal"]


@attrs.frozen(eq=False, repr=False, slots=False)  # made rarely: see config/records.py
class Unexamined(FrozenRecord):
    """What a :data:`SameFile` check says of a place that exists (or may) but whose
    identity cannot be read (permission denied, a loop of links, a name too long).

    Attributes:
        why: the error, in a few words (``strerror``).
    """

    why: str


#: The shell's identity check of an absolute place (:func:`acp_proxy.shell.places.same_file`):
#: the proxy's own file it is (same ``st_dev`` and ``st_ino``, links followed), ``None``
#: when it is not one or does not exist, or :class:`Unexamined`. Tests pass a dictionary's ``get``.
SameFile = Callable[[str], "str | Unexamined | None"]


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
        same_file: compares a place with the own files by identity (the
            shell's filesystem), or ``None``: by path only.
    """

    places: Mapping[str, bool] = attrs.field(factory=dict)
    same_file: SameFile | None = None

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


def own_file_refusal(places: Iterable[str], lines: Iterable[str], own: OwnFiles) -> str | None:
    """Why a request naming ``places`` and ``lines`` is refused for the proxy's own files,
    or ``None`` (the request is decided by the rules).

    Args:
        places: the request's paths and cwds (normalised, and resolved).
        lines: its command lines (:func:`own_file_hit`).
        own: the proxy's own files.

    Returns:
        ``"names the proxy's own file F"`` when a place or line names ``F`` by path
        (:func:`own_file_hit`), or an absolute place is ``F`` by identity
        (:attr:`OwnFiles.same_file`: a hard link, the same file by another path);
        ``"P cannot be examined (why): fail closed"`` when an absolute place
        ``P`` exists but its identity cannot be read; else ``None``. The identity
        check is asked only when no path names an own file, once per place.
    """
    if not own:
        return None
    places = list(places)
    hit = own_file_hit(places, lines, own)
    same = own.same_file
    if hit is None and same is not None:
        for place in dict.fromkeys(places):
            if not place.startswith("/") or "\0" in place:
                continue  # relative: refused before (not an absolute path), never examined
            found = same(place)
            if isinstance(found, Unexamined):
                return f"{place} cannot be examined ({found.why}): fail closed"
            if found is not None:
                hit = found
                break
    return None if hit is None else f"names the proxy's own file {hit}"
