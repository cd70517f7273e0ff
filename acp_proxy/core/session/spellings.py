"""The spellings of a command line that deny rules read (advisory: see the README).

A deny rule's ``command`` (and ``raw_input`` values) match any spelling the
client's shell could run: the line as given, whitespace folded, and the argv
it splits into, through ``sh -c`` scripts and wrapper programs. Pure functions
of strings, used by :mod:`~acp_proxy.core.session.permissions`.
"""

from __future__ import annotations

import functools
import posixpath
from collections.abc import Callable, Sequence

__all__ = ["command_variants"]


#: Programs whose ``-c`` argument is a script (its command lines are matched too).
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "busybox"})
_MAX_DEPTH = 3
#: Programs that run the argv after their options (``VAR=value`` and a duration too).
_WRAPPERS = frozenset({"env", "exec", "nohup", "command", "builtin", "time", "nice", "timeout"})


def _unique(items: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


@functools.lru_cache(maxsize=256)
def command_variants(line: str) -> tuple[str, ...]:
    """The spellings of a command line deny rules read (advisory: see the README).

    The line as is; every whitespace run (tab, newline, CR) as one space; and,
    when it splits as a shell word list (:func:`shlex.split`), the variants of
    that argv (:func:`_argv_variants`); the same again without its line
    continuations (a backslash-newline, which a shell removes outside single
    quotes and :mod:`shlex` keeps as a newline: read everywhere, a superset).
    """
    return _unique(_line_variants(line, 0))


def _line_variants(line: str, depth: int) -> list[str]:
    out = [line, " ".join(line.split())]
    joined = line.replace("\\\n", "")
    if joined != line:  # a shell removes a backslash-newline: ``aud\<newline>it.jsonl``
        out += _line_variants(joined, depth)
    if depth < _MAX_DEPTH:
        import shlex  # on first use: a default run splits no command (issue 29: start-up)

        try:
            argv = shlex.split(line)
        except ValueError:
            argv = []
        if argv:
            out += _argv_variants(argv, depth + 1)
    return out


def _argv_variants(argv: Sequence[str], depth: int) -> list[str]:
    """An argv joined by single spaces (whitespace runs folded); again with the
    executable's directory stripped (``/usr/bin/sudo`` -> ``sudo``); and, for a
    program of :data:`_INNER`, the command lines it runs (read to ``_MAX_DEPTH``)."""
    words = [" ".join(a.split()) for a in argv]
    out = [" ".join(argv), " ".join(words)]
    name = posixpath.basename(words[0]) if words else ""
    if name and name != words[0]:
        out.append(" ".join([name, *words[1:]]))
    inner = _INNER.get(name)
    if inner is not None and depth < _MAX_DEPTH:
        out += inner(argv, depth)
    return out


def _script_variants(argv: Sequence[str], depth: int) -> list[str]:
    """A shell's ``-c`` scripts (any ``-...c...`` option): every argument, as a line."""
    flags = [a for a in argv[1:] if a.startswith("-") and not a.startswith("--")]
    if not any("c" in a[1:] for a in flags):
        return []
    out: list[str] = []
    for arg in argv[1:]:
        if not arg.startswith("-"):
            out += _line_variants(arg, depth + 1)
    return out


def _wrapped_variants(argv: Sequence[str], depth: int) -> list[str]:
    """A wrapper's argv after its options (``env FOO=1 sudo ls``, ``exec bash -c ...``,
    ``timeout 5 curl ...``)."""
    rest = list(argv[1:])
    while rest and (rest[0].startswith("-") or "=" in rest[0] or rest[0][:1].isdigit()):
        rest.pop(0)
    return _argv_variants(rest, depth + 1) if rest else []


#: Program name -> the command lines it runs of its argv (the shells' scripts, the
#: wrappers' argv).
_INNER: dict[str, Callable[[Sequence[str], int], list[str]]] = {
    **dict.fromkeys(_SHELLS, _script_variants),
    **dict.fromkeys(_WRAPPERS, _wrapped_variants),
}


def _raw_value(value: object) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return " ".join(value)
    return None


def _raw_variants(raw: object, line: str) -> tuple[str, ...]:
    """The spellings deny rules read of a ``rawInput`` value: an argv array (Codex:
    ``["/bin/bash", "-lc", "sudo ls"]``) as an argv, its ``-c`` script a command line
    of its own (never joined and re-split), then the joined line's spellings."""
    if isinstance(raw, list):
        return _unique((*_argv_variants(raw, 0), *command_variants(line)))
    return command_variants(line)
