r"""The parser-differential guard (docs/design.md section 4; docs/protocol.md section 8).

A peer must never read a message the proxy decides on differently from the
proxy. This module finds what could make two JSON parsers disagree about a
decision key: a key repeated in the same object (first-wins and last-wins
parsers differ), a key hidden behind a ``\u`` escape, and a snake_case
spelling that pydantic peers (``populate_by_name``) read as the camelCase key.

- :func:`maybe_duplicated`: a cheap byte scan; ``False`` proves a frame holds
  no repeated or escaped decision key.
- :func:`strict_loads`: the standard library with duplicate detection
  (objects with a repeated key come back as a dict carrying ``dups``).
- :func:`ambiguous`, :func:`misread`: the verdicts per decision level
  (top-level object, ``params``, ``params._meta``, ``params.update``).

Each row below names the SDK reading it closes; a spelling no SDK reads as
something the proxy decides on is content and is forwarded.

Where the official SDKs read routing and decision keys, and how the proxy
closes each reading it does not share (non-extension methods; an extension
method's params are the peer's business and are forwarded untouched):

=========  ==========================================  ==========================================
SDK        What it reads                               How the proxy closes it
=========  ==========================================  ==========================================
Python     ``json.loads(bytes)``: last duplicate key   a duplicate decision key (top level,
0.12.1     wins; bytes decoded with ``surrogatepass``  ``params``, ``update``, ``capabilities``)
           (``\xed\xa0\x80`` is U+D800), UTF-16/32     is ambiguous; the proxy reads strict UTF-8
           detected, a BOM accepted                    only (else -32700 / dropped, audited)
Python     pydantic ``populate_by_name``:              a snake_case alias of a decision key in
           ``session_id`` is ``sessionId``, also       ``params`` or ``params.update`` is
           ``session_update``, ``sender_session_id``,  ambiguous (:data:`SNAKE_PARAMS_KEYS`,
           ``field_meta`` is ``_meta``                 :data:`SNAKE_UPDATE_KEYS`): a
                                                       ``params.field_meta`` is read as the
                                                       ``_meta`` the ``state_update`` dedup reads
Python     the router builds the handler's keyword     a ``params._meta`` key equal to a
           arguments from the model's Python field     parameter the proxy decides on is
           names, then ``kwargs.update(_meta)``:       ambiguous: ``session_id`` (every
           ``_meta.session_id`` routes to that         non-extension method) and ``update``
           session, ``_meta.update`` replaces the      (``session/update``):
           update of ``session/update``; any other     :func:`meta_misread`. ``sessionId``,
           key (``sessionId``, ``field_meta``,         ``SESSION_ID``, ``field_meta``,
           ``openhands.dev/metrics``) goes to the      ``session_update``, vendor keys and
           handler's ``**kwargs``                      metrics in ``_meta`` are content
Python     the same ``kwargs.update(_meta)`` on the    while rules are active, a ``_meta`` key
           governed agent requests: ``_meta.path``     equal to a field the rules read
           of ``fs/*``, ``_meta.tool_call`` /          (:data:`GOVERNED_META_PARAMS`), and a
           ``options`` of ``request_permission``,      snake_case alias (``tool_call``,
           ``_meta.command`` / ``args`` / ``cwd`` of   ``raw_input``, ...) in the params, tool
           ``terminal/create``; pydantic aliases       call, subject or an option are
           ``tool_call``, ``raw_input``                ambiguous: :func:`governed_misread`
TS 2.4.0   non-fatal ``TextDecoder`` (bad bytes and    strict UTF-8 as above; a lone surrogate
           encoded surrogates become U+FFFD), then     escape in a decision value (``method``,
           ``trim`` and ``JSON.parse`` (last           a session id, ``sessionUpdate``) is
           duplicate wins, ``"\ud800"`` kept as a      ambiguous (Python keeps U+D800, JS
           lone UTF-16 unit)                           encoders write U+FFFD)
TS 2.4.0   zod ``z.object`` strips unknown keys and    the proxy decides on the same camelCase
           routes by ``params.sessionId``,             keys; a non-string ``sessionUpdate`` is
           ``update.sessionUpdate`` (a non-string tag  never an inspected update for the proxy
           is deleted), ``update.sessionId``; no       either; vendor ``_meta`` keys stay
           ``_meta`` routing, no snake_case            content
Both       ``\u`` escapes in keys are decoded          keys are compared decoded; an escaped or
           (``"session\u0049d"`` is ``sessionId``)     repeated key makes a frame non-canonical,
                                                       so the fast paths hand it to the strict
                                                       decoder
=========  ==========================================  ==========================================
"""

from __future__ import annotations

import json
import re
from typing import Any

from acp_proxy.core.wire.keys import CAPABILITY_KEYS as _CAPABILITY_KEYS
from acp_proxy.core.wire.keys import DECISION_KEYS as _DECISION_KEYS
from acp_proxy.core.wire.keys import DECISION_LITERALS as _DECISION_LITERALS
from acp_proxy.core.wire.keys import (
    GOVERNED_META_PARAMS,
    META_SESSION_PARAMS,
    META_UPDATE_PARAMS,
    SNAKE_PARAMS_KEY,
    SNAKE_PARAMS_KEYS,
    SNAKE_UPDATE_KEYS,
)
from acp_proxy.core.wire.keys import GOVERNED_SNAKE as _GOVERNED_SNAKE
from acp_proxy.core.wire.keys import PARAMS_VALUES as _PARAMS_VALUES
from acp_proxy.core.wire.keys import TOP_VALUES as _TOP_VALUES
from acp_proxy.core.wire.keys import UPDATE_VALUES as _UPDATE_VALUES
from acp_proxy.core.wire.reasons import (
    GOVERNED_META_REASON,
    GOVERNED_SNAKE_REASON,
    META_REASON,
    SNAKE_CASE_REASON,
    SURROGATE_REASON,
)
from acp_proxy.core.wire.utf8 import strict_text

__all__ = [
    "META_REASON",
    "SNAKE_CASE_REASON",
    "SNAKE_PARAMS_KEY",
    "SNAKE_PARAMS_KEYS",
    "SNAKE_UPDATE_KEYS",
    "SURROGATE_REASON",
    "ambiguous",
    "exact_body",
    "governed_misread",
    "has_any_dups",
    "lone_surrogate_at_decision_level",
    "maybe_duplicated",
    "meta_decision_key",
    "misread",
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
    """Decodes ``raw`` (strict UTF-8) with the standard library, recording repeated keys.

    An object in which a key occurred more than once comes back as a dict
    subclass whose ``dups`` names those keys (later values win).

    Raises:
        ValueError: not strict UTF-8, or not valid JSON (``NaN`` / ``Infinity`` included).
        RecursionError: nested too deeply for the current stack.
    """
    return json.loads(
        strict_text(raw), object_pairs_hook=_pairs_hook, parse_constant=_reject_constant
    )


def exact_body(raw: bytes) -> Any:
    """Decodes ``raw`` with the exact (stdlib) decoder, keeping big integers.

    Args:
        raw: one JSON text, UTF-8.

    Returns:
        The decoded value (later duplicate keys win).

    Raises:
        ValueError: if ``raw`` is not strict UTF-8 or not valid JSON.
        RecursionError: if it nests too deeply.
    """
    return json.loads(strict_text(raw), parse_constant=_reject_constant)


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
        if isinstance(update, dict):
            if _has_dups(update, in_update):
                return True
            caps = update.get("capabilities")
            if isinstance(caps, dict) and _has_dups(caps, _CAPABILITY_KEYS):
                return True
    return False


def meta_decision_key(method: str, key: str) -> bool:
    """True when the decoded ``params._meta`` key ``key`` of ``method`` is a decision key.

    Exact Python parameter names only (:data:`META_SESSION_PARAMS`,
    :data:`META_UPDATE_PARAMS` for ``session/update``): ``session_id`` is one,
    ``sessionId``, ``SESSION_ID`` and ``field_meta`` are not.
    """
    if method == "session/update":
        return key in META_UPDATE_PARAMS
    return key in META_SESSION_PARAMS


def meta_misread(method: str, meta: dict[str, Any]) -> bool:
    """True when the ``params._meta`` object ``meta`` of ``method`` names a decision key.

    One set operation (``meta``'s keys against :data:`META_SESSION_PARAMS` or
    :data:`META_UPDATE_PARAMS`).
    """
    keys = META_UPDATE_PARAMS if method == "session/update" else META_SESSION_PARAMS
    return not keys.isdisjoint(meta)


def misread(method: str, params: dict[str, Any]) -> str | None:
    """Why an SDK could read ``params`` of the non-extension ``method`` otherwise, or ``None``.

    A snake_case alias of a decision key in ``params`` or ``params.update``
    (:data:`SNAKE_CASE_REASON`), or a ``params._meta`` key that the Python SDK
    hands the handler as a parameter the proxy decides on
    (:func:`meta_misread`, :data:`META_REASON`). One dict lookup for the
    common shapes.
    """
    if not SNAKE_PARAMS_KEYS.isdisjoint(params):
        return SNAKE_CASE_REASON
    update = params.get("update")
    if type(update) is dict and not SNAKE_UPDATE_KEYS.isdisjoint(update):
        return SNAKE_CASE_REASON
    meta = params.get("_meta")
    if type(meta) is dict and meta_misread(method, meta):
        return META_REASON
    return None


# --- governed agent->client requests (the permission rules read them) -------------


def _snake_alias(obj: object) -> bool:
    if type(obj) is not dict:
        return False
    for key in obj:
        if type(key) is str and "_" in key[1:] and key.replace("_", "").lower() in _GOVERNED_SNAKE:
            return True
    return False


def governed_misread(method: str, params: dict[str, Any]) -> str | None:
    """Why an SDK could read a governed request's fields otherwise than the rules, or ``None``.

    For ``session/request_permission``, ``fs/read_text_file``,
    ``fs/write_text_file`` and ``terminal/create``: a ``params._meta`` key
    equal to the Python name of a field the rules read
    (:data:`GOVERNED_META_PARAMS`, :data:`GOVERNED_META_REASON`), or a snake_case alias of a
    multi-word field in ``params``, the tool call, the subject, the subject's
    tool call or an option (:data:`GOVERNED_SNAKE_REASON`). Called only for
    governed requests while rules are active (never on the hot path).
    """
    fields = GOVERNED_META_PARAMS.get(method)
    if fields is None:
        return None
    meta = params.get("_meta")
    if type(meta) is dict and not fields.isdisjoint(meta):
        return GOVERNED_META_REASON
    if _snake_alias(params):
        return GOVERNED_SNAKE_REASON
    subject = params.get("subject")
    for obj in (params.get("toolCall"), subject):
        if _snake_alias(obj):
            return GOVERNED_SNAKE_REASON
    if type(subject) is dict and _snake_alias(subject.get("toolCall")):
        return GOVERNED_SNAKE_REASON
    options = params.get("options")
    if type(options) is list and any(_snake_alias(o) for o in options):
        return GOVERNED_SNAKE_REASON
    return None


def snake_case(params: dict[str, Any]) -> bool:
    """True when ``params`` or ``params.update`` spells a decision key in snake_case."""
    if not SNAKE_PARAMS_KEYS.isdisjoint(params):
        return True
    update = params.get("update")
    return isinstance(update, dict) and not SNAKE_UPDATE_KEYS.isdisjoint(update)


def _lone_surrogate(s: str) -> bool:
    if s.isascii():
        return False
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _surrogate_in(obj: Any, keys: tuple[str, ...]) -> bool:
    if type(obj) is not dict:
        return False
    for key in keys:
        v = obj.get(key)
        if type(v) is str and _lone_surrogate(v):
            return True
    return False


def lone_surrogate_at_decision_level(body: Any) -> bool:
    """True when a decision value holds a lone surrogate (from a ``\\ud800`` escape).

    Decision values: ``method``; ``params.sessionId``; ``sessionUpdate``,
    ``sessionId``, ``senderSessionId`` and ``recipientSessionId`` of
    ``params.update``; ``result.sessionId``. Such an escape is valid JSON,
    but peers disagree on what it is (Python keeps U+D800, JavaScript
    encoders write U+FFFD): a session id or method spelled with one is
    refused; content with one, and a key with one (it can equal no decision
    key in any reader), is forwarded.
    """
    if type(body) is not dict:
        return False
    if _surrogate_in(body, _TOP_VALUES) or _surrogate_in(body.get("result"), _PARAMS_VALUES):
        return True
    params = body.get("params")
    if type(params) is not dict:
        return False
    return _surrogate_in(params, _PARAMS_VALUES) or _surrogate_in(
        params.get("update"), _UPDATE_VALUES
    )


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
