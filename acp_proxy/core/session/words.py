"""The words of a command line that may name a place, as a POSIX shell reads them.

The reading the own-file check (:mod:`acp_proxy.core.session.places`) joins to a
command's cwd and compares with the proxy's files: a line split as a shell splits it
(quotes removed, control operators words of their own), a ``--opt=PATH`` /
``VAR=PATH`` value, a redirection's target, the values a short option may have
glued to it, and (:func:`inner_words`) the parts inside one word: a program's code,
a list, a brace expansion, a parameter's default. Pure: strings in, strings out.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence

__all__ = ["command_words", "inner_words"]

#: A redirection before its target (``>``, ``2>>``, ``&>``, ``<``, ``>|``).
_REDIRECT = re.compile(r"^[0-9]*[<>&]+\|?")
#: The shell's control operators, which :func:`_split` cuts as words of their own.
_OPERATORS = frozenset("();<>|&")
#: A run of operators, or of other characters up to whitespace (a line without quotes).
_WORD = re.compile(r"[();<>|&]+|[^\s();<>|&]+")
_QUOTES = frozenset("'\"\\")
#: Removes the quotes and backslashes of a line that does not split (:func:`_split`).
_UNQUOTE = str.maketrans("", "", "'\"\\")
# The three patterns below compile on first use (``re``'s cache), not at import.
#: The parts of a word between the characters that cut code and lists (:func:`inner_words`).
_INNER = r"[^\s'\"`(),:;\[\]{}]+"
#: The word a parameter expansion gives when its variable is unset (``${X:-word}``).
_DEFAULT = r"\$\{\w+:?[-=?+]([^{}]*)\}"
#: A brace expansion's innermost comma list (``{l,x}``).
_BRACE = r"\{([^{}]*,[^{}]*)\}"
#: The most words :func:`_braced` gives one word.
_MAX_BRACED = 64
#: The most values :func:`_glued_values` reads off one short-option word.
_MAX_GLUED = 32
#: The rests after the first option characters :func:`_glued_values` always gives.
_FIRST_GLUED = 4


@functools.lru_cache(maxsize=256)
def _split(line: str) -> tuple[str, ...]:
    """The words a POSIX shell reads in ``line``: quotes removed, control operators
    (``>``, ``|``, ``;``, ``&&``) words of their own, a ``#`` kept as text. A line
    that does not split (an open quote, which for a shell may open nothing: an
    apostrophe in a comment or a here-document, ``# don't``) gives the words read
    before it, then the line split at whitespace and, its quotes and backslashes
    removed, cut by :data:`_WORD` again (``"audit.jsonl"`` is ``audit.jsonl``). A
    line without quotes or backslashes is cut by :data:`_WORD` (the same words,
    without the lexer)."""
    if not _QUOTES.intersection(line):
        return tuple(_WORD.findall(line))
    import shlex  # on first use (issue 29: start-up)

    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = ""
    read: list[str] = []
    try:
        read.extend(lexer)
    except ValueError:
        unquoted = _WORD.findall(line.translate(_UNQUOTE))
        return tuple(dict.fromkeys((*read, *line.split(), *unquoted)))
    return tuple(read)


def command_words(lines: Iterable[str], argv: Sequence[str] = ()) -> tuple[str, ...]:
    """The words of a command that may name a place, each once, in order.

    Args:
        lines: the command's spellings (the line, its ``sh -c`` scripts and
            wrapped argv: :func:`~acp_proxy.core.session.spellings.command_variants`),
            each split as a shell would (:func:`_split`).
        argv: its words as given (``terminal/create``'s ``command`` and ``args``),
            read as they are.

    Returns:
        Every word, with a ``--opt=PATH`` / ``VAR=PATH`` word's value after it,
        a redirection's target (``>PATH``, ``2>>PATH``) and the values a short
        option may have glued to it (:func:`_glued_values`: ``-o../x`` gives
        ``../x``); without options themselves (``-n``; one holding a ``/`` is
        also a path, after ``--`` or as a redirection's target: ``-d/../x``),
        control operators and words holding a NUL.
    """
    out: dict[str, None] = {}
    for word in (*argv, *(w for line in lines for w in _split(line))):
        if not word or "\0" in word or set(word) <= _OPERATORS:
            continue
        if not word.startswith("-"):
            out[word] = None
            target = _REDIRECT.sub("", word)
            if target and target != word:
                out[target] = None
        elif not word.startswith("--"):
            out.update(dict.fromkeys(_glued_values(word)))
        if word.startswith("-") and "/" in word:
            out[word] = None  # also a path, through a directory named -d: ``-- -d/../x``
        _, eq, value = word.partition("=")
        if eq and value:
            out[value] = None
    return tuple(out)


def _glued_values(word: str) -> list[str]:
    """What a short-option word may carry as its value, glued to it (getopt's
    ``-oFILE``, also after a cluster of flags: ``-xzfFILE``): every rest of the word
    after at least one option character, up to the first character that is not a
    letter or digit (a value starts there at the latest), at most
    :data:`_MAX_GLUED` of them (the nearest that character) and the first
    :data:`_FIRST_GLUED` (a value longer than that: ``-o`` and 40 letters).

    Args:
        word: a word starting with one ``-``.

    Returns:
        The candidates, longest first (a flag-only word gives the rests of its
        letters, which name a place only if a file has that name).
    """
    end = 1
    while end < len(word) and word[end].isascii() and word[end].isalnum():
        end += 1
    last = min(end, len(word) - 1)
    first = max(2, end - _MAX_GLUED)
    leading = range(2, min(2 + _FIRST_GLUED, first))  # a long value glued to -o or -xzf
    return [word[i:] for i in (*leading, *range(first, last + 1))]


def inner_words(words: Sequence[str]) -> list[str]:
    """The places a word may hold inside it, compared by path only (no identity check):
    the parts between the quotes, commas, colons and brackets of a program's code or a
    list (``open('audit.jsonl','a')``, ``-Wl,-Map,./audit.jsonl``, ``./a.log:/x``) and
    a brace expansion's words (``audit.json{l,x}``, at most :data:`_MAX_BRACED` a word)
    and a parameter expansion's default (``${X:-audit.jsonl}``, ``${X=audit.jsonl}``).
    """
    out: dict[str, None] = {}
    for word in words:
        for whole in _braced(word):
            out[whole] = None
            out.update(dict.fromkeys(re.findall(_INNER, whole)))
            out.update(dict.fromkeys(re.findall(_DEFAULT, whole)))
    given = set(words)  # a set: a long command's words are not scanned once per part
    return [w for w in out if w not in given]


def _braced(word: str) -> list[str]:
    """``word`` brace-expanded as bash does a comma list (``{a,b}``, innermost first)."""
    todo: list[str] = [word]
    done: list[str] = []
    while todo:
        one = todo.pop()
        group = re.search(_BRACE, one)
        if group is None or len(done) + len(todo) >= _MAX_BRACED:
            done.append(one)
            continue
        head, tail = one[: group.start()], one[group.end() :]
        todo += [head + alt + tail for alt in reversed(group.group(1).split(","))]
    return done
