"""The spellings of a command line that deny rules read (advisory: see the README).

A deny rule's ``command`` (and ``raw_input`` values) match any spelling the
client's shell could run: the line as given, whitespace folded, and the argv
it splits into, through ``sh -c`` scripts and wrapper programs. Pure functions
of strings, used by :mod:`~acp_proxy.core.session.permissions`.
"""

from __future__ import annotations

import functools
import posixpath
import re
from collections.abc import Callable, Sequence

__all__ = ["command_variants"]


# Patterns compiled on first use (``re``'s cache), not at import (issue 29: start-up).
#: An ANSI-C string ``$'...'`` (bash, zsh, ksh, mksh, busybox ash; not dash), its
#: text in group 1, or the ``$"`` opening a locale string (bash): a shell reads the
#: text, :mod:`shlex` a ``$`` before it (``$audit.jsonl``).
_DOLLAR_QUOTE = r"""(?s)\$'((?:[^'\\]|\\.)*)'|\$(?=")"""
#: An escape of an ANSI-C string: ``\xHH``, ``\uHHHH``, ``\UHHHHHHHH``, ``\NNN``,
#: ``\cX`` or one character.
_ESCAPE = r"(?s)\\(x[0-9A-Fa-f]{1,2}|u[0-9A-Fa-f]{1,4}|U[0-9A-Fa-f]{1,8}|[0-7]{1,3}|c.|.)"
_ESCAPES = {
    **{"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n"},
    **{"r": "\r", "t": "\t", "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?"},
}
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
    that argv (:func:`_argv_variants`); the same again as a shell reads what
    :mod:`shlex` reads otherwise (:func:`_as_a_shell_reads`: a backslash-newline
    removed, ``$'...'`` decoded; read everywhere, even in single quotes, a superset).
    """
    return _unique(_line_variants(line, 0))


def _line_variants(line: str, depth: int) -> list[str]:
    out = _lexed_variants(line, depth)
    read = _as_a_shell_reads(line)
    if read != line:
        out += _lexed_variants(read, depth)
    return out


def _as_a_shell_reads(line: str) -> str:
    """``line`` without what a shell reads otherwise than :mod:`shlex`: its line
    continuations (a backslash-newline: ``aud\\<newline>it``) removed, its ANSI-C
    strings (``$'\\x61udit'``) single-quoted as decoded, ``$"..."`` as ``"..."``."""
    return re.sub(_DOLLAR_QUOTE, _requoted, line.replace("\\\n", ""))


def _requoted(match: re.Match[str]) -> str:
    if match.group(1) is None:
        return ""  # the $ of $"...": a locale string, its text as is without a catalogue
    text = re.sub(_ESCAPE, _escaped, match.group(1)).split("\0", 1)[0]  # a NUL ends it
    return "'" + text.replace("'", "'\\''") + "'"


def _escaped(match: re.Match[str]) -> str:
    code = match.group(1)
    if code[0] in "xuU" and len(code) > 1:
        value = int(code[1:], 16)
    elif code[0] in "01234567":
        value = int(code, 8) & 0xFF
    elif code[0] == "c" and len(code) == 2:
        value = ord(code[1]) & 0x1F
    else:
        return _ESCAPES.get(code, "\\" + code)
    return chr(value) if value <= 0x10FFFF else "\\" + code


def _lexed_variants(line: str, depth: int) -> list[str]:
    out = [line, " ".join(line.split())]
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
