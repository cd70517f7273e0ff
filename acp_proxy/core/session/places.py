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
- **Command words** (:func:`~acp_proxy.core.session.words.command_words`): a command
  line is matched as text (an own file's path in it), and each of its words as a
  place: the argv of a ``terminal/create`` and the words of every spelling deny rules
  read (its ``sh -c`` scripts too), split as a shell would (``>``, ``|``, ``;`` cut
  words), a ``--opt=PATH`` or ``VAR=PATH`` value and a ``>PATH`` redirection's target
  too. Each is joined to the command's cwd and normalised (``./audit.jsonl``, ``..``,
  ``//``), compared by path, then by identity (a symbolic or hard link), at most
  :data:`MAX_WORDS_EXAMINED` identity checks a request (one with more places to ask
  about is refused). Advisory, as every command rule: a shell can build any string
  (``$HOME``, ``cd`` first, a variable); only the trivial spellings are caught. A word
  names an own file, never the ``--watch-config`` directory itself (``ls ..`` in a
  project is not refused for it).
"""

from __future__ import annotations

import posixpath
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence

import attrs

from acp_proxy.config.records import FrozenRecord
from acp_proxy.core.session.words import command_words, inner_words

__all__ = [
    "MAX_WORDS_EXAMINED",
    "OwnFiles",
    "SameFile",
    "Unexamined",
    "command_words",  # re-exported: acp_proxy.core.session.words
    "normpath",
    "own_file_hit",
    "own_file_refusal",
    "word_places",
]

#: The most command word places a request's identity check asks about (each a
#: ``stat`` in the shell, a few microseconds); a request with more is refused (fail
#: closed: a symbolic link to an own file could be the next one).
MAX_WORDS_EXAMINED = 1024
#: The longest path, and file name, a word may be to name a file (Linux's
#: ``PATH_MAX`` and ``NAME_MAX``, in bytes): a longer one names none (the client's
#: open fails too), so a long ``-m`` message is never asked about.
_PATH_MAX, _NAME_MAX = 4095, 255


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


def normpath(path: str) -> str:
    """:func:`posixpath.normpath`, and a leading ``//`` read as ``/`` (as Linux does)."""
    path = posixpath.normpath(path)
    return "/" + path.lstrip("/") if path.startswith("//") else path


def word_places(words: Iterable[str], cwd: str | None) -> tuple[tuple[str, str], ...]:
    """Where each word points, joined to ``cwd``: ``(normalised, as joined)`` pairs.

    Args:
        words: :func:`command_words`.
        cwd: the command's absolute, normalised working directory, or ``None``
            (relative words are then left out).

    Returns:
        For each word: its join to ``cwd`` normalised (``..`` folded lexically,
        ``//`` read as ``/``), for the path comparison; and as joined, for the
        identity check (the kernel reads ``..`` after a link as the client's
        shell will). An absolute word is not joined.
    """
    out: list[tuple[str, str]] = []
    for word in words:
        if word.startswith("/"):
            joined = word
        elif cwd is not None:
            joined = posixpath.join(cwd, word)
        else:
            continue
        out.append((normpath(joined), joined))
    return tuple(out)


def _held(pointed: Sequence[tuple[str, str]], own: OwnFiles) -> list[tuple[str, str]]:
    """The places a command's words name as a directory and a name apart: each word
    place joined to the name of an own file that another word carries as its last
    part (``cp audit.jsonl /logs/``, ``mv -t /logs x/audit.jsonl``, ``find /logs
    -name audit.jsonl -delete``, ``cd /logs && rm audit.jsonl``), after the words.

    Args:
        pointed: the command words' places (:func:`word_places`).
        own: the proxy's own files (their names, case-folded).

    Returns:
        ``(normalised, as joined)`` pairs, none when no word carries an own
        file's name.
    """
    names = {
        posixpath.basename(p).casefold(): posixpath.basename(p)
        for p, below in own.places.items()
        if below
    }
    carried = {
        names[n] for n in {posixpath.basename(p).casefold() for p, _ in pointed} if n in names
    }
    return [
        (normpath(f"{n}/{name}"), f"{j}/{name}") for name in sorted(carried) for n, j in pointed
    ]


def _may_name_a_file(path: str) -> bool:
    """False when ``path`` is too long to name a file (:data:`_PATH_MAX`, :data:`_NAME_MAX`)."""
    data = path.encode("utf-8", "surrogatepass")
    return len(data) <= _PATH_MAX and all(len(part) <= _NAME_MAX for part in data.split(b"/"))


def own_file_hit(
    places: Iterable[str], lines: Iterable[str], own: OwnFiles, words: Iterable[str] = ()
) -> str | None:
    """The proxy's own file a request names, or ``None``.

    Args:
        places: the request's paths and cwds (normalised, and resolved).
        lines: its command lines (a command naming an own file is refused too:
            advisory, as every command rule).
        own: the proxy's own files.
        words: the places its command words name (absolute, normalised:
            :func:`word_places`): each is an own file, or below one, or not
            (never the ``--watch-config`` directory itself).

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
    for word in words:
        here = _fold(word)
        for key, (original, below) in folded.items():
            if below and (here == key or here.startswith(key.rstrip("/") + "/")):
                return original
    return None


def own_file_refusal(
    places: Iterable[str],
    lines: Iterable[str],
    own: OwnFiles,
    commands: Iterable[tuple[str | None, Sequence[str]]] = (),
) -> str | None:
    """Why a request naming ``places`` and ``lines`` is refused for the proxy's own files,
    or ``None`` (the request is decided by the rules).

    Args:
        places: the request's paths and cwds (normalised, and resolved).
        lines: its command lines (:func:`own_file_hit`).
        own: the proxy's own files.
        commands: each command's cwd (absolute, normalised; ``None``: unknown)
            and words (:func:`command_words`): each word is a place joined to
            that cwd (:func:`word_places`), and again joined to an own file's
            name another word carries (:func:`_held`: a directory and a name).

    Returns:
        ``"names the proxy's own file F"`` when a place, line or word names ``F``
        by path (:func:`own_file_hit`), or an absolute place or word is ``F`` by
        identity (:attr:`OwnFiles.same_file`: a hard link, the same file by
        another path, a symbolic link); ``"P cannot be examined (why): fail
        closed"`` when an absolute place or word ``P`` exists but its identity
        cannot be read; else ``None``. The identity check is asked only when no
        path names an own file, once per place, places first, then at most
        :data:`MAX_WORDS_EXAMINED` word places (a word too long to name a file
        is not asked about); ``"more than N words to examine: fail closed"``
        when more word places are left to ask about.
    """
    if not own:
        return None
    places = list(places)
    pointed = [p for cwd, words in commands for p in word_places(words, cwd)]
    pointed += _held(pointed, own)
    inner = [p for cwd, words in commands for p, _ in word_places(inner_words(words), cwd)]
    hit = own_file_hit(places, lines, own, [*(normal for normal, _ in pointed), *inner])
    same = own.same_file
    if hit is not None or same is None:
        return None if hit is None else f"names the proxy's own file {hit}"
    asked: set[str] = set()

    def examined(place: str, whole_files_only: bool) -> str | None:
        """The refusal the identity of ``place`` gives, or ``None``; a word names an
        own file, never the watched directory itself (``whole_files_only``)."""
        asked.add(place)
        found = same(place)
        if isinstance(found, Unexamined):
            return f"{place} cannot be examined ({found.why}): fail closed"
        if found is not None and (not whole_files_only or own.places.get(found, True)):
            return f"names the proxy's own file {found}"
        return None

    for place in places:
        if place in asked or not place.startswith("/") or "\0" in place:
            continue  # relative: refused before (not an absolute path), never examined
        if (why := examined(place, False)) is not None:
            return why
    budget = MAX_WORDS_EXAMINED
    for place in (p for pair in pointed for p in pair):
        if place in asked or not _may_name_a_file(place):
            continue
        if budget <= 0:  # one more to ask about: a link to an own file could hide there
            return f"more than {MAX_WORDS_EXAMINED} words to examine: fail closed"
        budget -= 1
        if (why := examined(place, True)) is not None:
            return why
    return None
