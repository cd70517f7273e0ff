"""The parser-differential guard (DESIGN.md "Enforcement"; PROTOCOL.md section 6).

A peer must never read a message the proxy decides on differently from the
proxy. This module finds what could make two JSON parsers disagree about a
decision key: a key repeated in the same object (first-wins and last-wins
parsers differ), a key hidden behind a ``\\u`` escape, and a snake_case
spelling that pydantic peers (``populate_by_name``) read as the camelCase key.

- :func:`maybe_duplicated`: a cheap byte scan; ``False`` proves a frame holds
  no repeated or escaped decision key.
- :func:`strict_loads`: the standard library with duplicate detection
  (objects with a repeated key come back as a dict carrying ``dups``).
- :func:`ambiguous`, :func:`snake_case`: the verdicts per decision level
  (top-level object, ``params``, ``params.update``).
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = [
    "SNAKE_CASE_REASON",
    "SNAKE_PARAMS_KEY",
    "SNAKE_UPDATE_KEYS",
    "ambiguous",
    "exact_body",
    "has_any_dups",
    "maybe_duplicated",
    "nested_deeper_than",
    "snake_case",
    "strict_loads",
]


class _DupDict(dict[str, Any]):
    """A JSON object in which some key occurred more than once."""

    dups: set[str]


def _pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    d: dict[str, Any] = {}
    dups: set[str] | None = None
    for k, v in pairs:
        if k in d:
            if dups is None:
                dups = set()
            dups.add(k)
        d[k] = v
    if dups is None:
        return d
    dd = _DupDict(d)
    dd.dups = dups
    return dd


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def strict_loads(raw: bytes) -> Any:
    """Decodes ``raw`` with the standard library, recording repeated keys.

    An object in which a key occurred more than once comes back as a dict
    subclass whose ``dups`` names those keys (later values win).

    Raises:
        ValueError: not valid JSON (``NaN`` / ``Infinity`` included).
        RecursionError: nested too deeply for the current stack.
    """
    return json.loads(raw, object_pairs_hook=_pairs_hook, parse_constant=_reject_constant)


def exact_body(raw: bytes) -> Any:
    """Decodes ``raw`` with the exact (stdlib) decoder, keeping big integers.

    Args:
        raw: one JSON text, UTF-8.

    Returns:
        The decoded value (later duplicate keys win).

    Raises:
        ValueError: if ``raw`` is not valid JSON.
        RecursionError: if it nests too deeply.
    """
    return json.loads(raw, parse_constant=_reject_constant)


# Keys the proxy makes decisions on. A frame in which one of these literals
# occurs twice, or which contains a \u escape (a key could hide behind it),
# is re-parsed with duplicate detection.
_DECISION_LITERALS = (
    b'"method"',
    b'"id"',
    b'"params"',
    b'"jsonrpc"',
    b'"result"',
    b'"error"',
    b'"sessionId"',
    b'"update"',
    b'"sessionUpdate"',
    b'"state"',
    b'"capabilities"',
    b'"senderSessionId"',
    b'"recipientSessionId"',
)

# Decision keys per level: top-level object, ``params``, ``params.update``.
_DECISION_KEYS = (
    frozenset({"jsonrpc", "method", "id", "params", "result", "error"}),
    frozenset({"sessionId", "update"}),
    frozenset(
        {
            "sessionUpdate",
            "sessionId",
            "state",
            "capabilities",
            "senderSessionId",
            "recipientSessionId",
        }
    ),
)


# One pass finds every occurrence of every literal. In JSON that msgspec has
# accepted, an unescaped '"' always delimits a string, so each match is a whole
# string token and matches never overlap: the counts equal ``raw.count(lit)``.
_DECISION_RE = re.compile(
    b'"(?:' + b"|".join(re.escape(lit[1:-1]) for lit in _DECISION_LITERALS) + b')"'
)


def maybe_duplicated(raw: bytes) -> bool:
    """False proves ``raw`` (JSON msgspec accepted) repeats and escapes no decision key.

    One regex pass counts every decision-key literal; any ``\\u`` escape counts
    as a possible hidden key. True means "decode with :func:`strict_loads`".
    """
    if b"\\" in raw and b"\\u" in raw:  # memchr first: most frames have no escape
        return True
    found = _DECISION_RE.findall(raw)
    return len(found) != len(set(found))


def _has_dups(obj: Any, keys: frozenset[str]) -> bool:
    return isinstance(obj, _DupDict) and not obj.dups.isdisjoint(keys)


def ambiguous(body: dict[str, Any]) -> bool:
    """True when a decision key repeats at its level (from :func:`strict_loads` output)."""
    top, in_params, in_update = _DECISION_KEYS
    if _has_dups(body, top):
        return True
    params = body.get("params")
    if isinstance(params, dict):
        if _has_dups(params, in_params):
            return True
        update = params.get("update")
        if isinstance(update, dict) and _has_dups(update, in_update):
            return True
    return False


# snake_case spellings that pydantic peers (populate_by_name) read as decision
# keys: in ``params`` (only "session_id") and in ``params.update``.
SNAKE_PARAMS_KEY = "session_id"
SNAKE_UPDATE_KEYS = frozenset(
    {"session_update", "session_id", "sender_session_id", "recipient_session_id"}
)
SNAKE_CASE_REASON = "snake_case spelling of a decision key (session_id, session_update, ...)"


def snake_case(params: dict[str, Any]) -> bool:
    """True when ``params`` or ``params.update`` spells a decision key in snake_case."""
    if SNAKE_PARAMS_KEY in params:
        return True
    update = params.get("update")
    return isinstance(update, dict) and not SNAKE_UPDATE_KEYS.isdisjoint(update)


def nested_deeper_than(value: Any, limit: int) -> bool:
    """True when the decoded JSON ``value`` nests objects/arrays more than ``limit`` deep.

    Iterative (never exhausts the stack); stops as soon as the limit is passed.
    """
    stack = [(value, 0)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, dict):
            children: Any = v.values()
        elif isinstance(v, list):
            children = v
        else:
            continue
        if depth >= limit:
            return True
        stack.extend((c, depth + 1) for c in children)
    return False


def has_any_dups(value: Any) -> bool:
    """True when a ``_DupDict`` occurs anywhere in ``value`` (iterative walk)."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            if isinstance(v, _DupDict):
                return True
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return False
