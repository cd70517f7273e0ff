"""Hostile spellings of client mutations on a child session, and how each SDK reads them.

The differential enforcement suite (``tests/core/wire/test_differential.py``,
``tests/interop/test_differential_sdk.py``) sends these lines to the proxy.
Every spelling is one client line (bytes, no newline) that tries to make an
agent run a mutation on ``CHILD``, a child announced on ``PARENT`` with no
``capabilities``: escapes in keys and values, duplicate keys at every level
(first-wins and last-wins readers), snake_case and other aliases, ``_meta``
carriers (the Python SDK 0.12.1 spreads ``params._meta`` into the handler's
keyword arguments, so ``{"sessionId": "PARENT", "_meta": {"session_id":
"CHILD"}}`` reaches the handler with ``session_id="CHILD"``), whitespace and
control characters, bytes that are not UTF-8, ids of every JSON type, and
batches.

Every spelling carries a tag, ``params._meta.case`` (an int), so a recording
agent can say which spelling it dispatched.

The readers:

- :func:`python_sdk_dispatch`: what the official Python SDK
  (``agent-client-protocol``, module ``acp``) would dispatch for a line: its
  transport (``bytes.strip``, ``json.loads``: ``surrogatepass`` for bytes,
  last key wins), its connection (any message with a ``method`` is a call;
  any ``id`` makes it a request) and its real router and pydantic models
  (``populate_by_name``, ``_meta`` spread), driven without an event loop.
- :func:`js_sdk_dispatch`: what the TypeScript SDK 2.4.0 would hand a
  handler: ``TextDecoder`` (invalid bytes -> U+FFFD), ``String.trim``,
  ``JSON.parse`` (last key wins), any record with a ``method`` key dispatched,
  routed by ``params.sessionId``. Over-approximates (a ``"*"`` fallback
  handler is assumed, as in ``tests/interop/ts/diff_agent.mjs``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import attrs

__all__ = [
    "CHILD",
    "GRANTED",
    "METHODS",
    "PARENT",
    "READ_ONLY",
    "VARIANTS",
    "Spelling",
    "controls",
    "js_sdk_dispatch",
    "python_sdk_dispatch",
    "spell",
    "spellings",
    "strict_utf8",
    "violations",
]

PARENT = "PARENT"
CHILD = "CHILD"
#: a second child, announced with ``capabilities: {"cancel": {}, "prompt": {}}``
GRANTED = "GRANTED"

#: mutation -> the other params its SDK models require (so a forwarded spelling
#: would really be dispatched); ``session/inject`` stands for a future method.
METHODS: dict[str, dict[str, Any]] = {
    "session/prompt": {"prompt": [{"type": "text", "text": "hi"}]},
    "session/cancel": {},
    "session/set_mode": {"modeId": "code"},
    "session/set_config_option": {"configId": "model", "value": "fast"},
    "session/close": {},
    "session/load": {"cwd": "/tmp", "mcpServers": []},
    "session/resume": {"cwd": "/tmp", "mcpServers": []},
    "session/fork": {"cwd": "/tmp", "mcpServers": []},
    "session/inject": {"text": "hi"},
}
#: methods a client may send to any child (read-only)
READ_ONLY = frozenset({"session/status"})
#: ACP notifications among :data:`METHODS` (the others are requests)
NOTIFICATIONS = frozenset({"session/cancel"})


@attrs.frozen
class Spelling:
    """One generated client line.

    Attributes:
        label: what the spelling tries, e.g. ``"session/prompt meta-session_id"``.
        method: the mutation it spells.
        line: the bytes sent, without the newline.
        case: its tag (``params._meta.case``).
    """

    label: str
    method: str
    line: bytes
    case: int


# ------------------------------------------------------------ JSON tokens


def _esc(c: str, upper: bool = False) -> bytes:
    return (b"\\u%04X" if upper else b"\\u%04x") % ord(c)


def s(text: str, style: str = "plain") -> bytes:
    """A JSON string literal for ``text`` (BMP only).

    ``style``: ``plain``; ``one`` (the middle character ``\\u``-escaped);
    ``first`` (the first one); ``all``; ``upper`` (all, upper-case hex).
    """
    if style == "plain":
        return json.dumps(text, ensure_ascii=False).encode("utf-8", "surrogatepass")
    if style == "all" or style == "upper":
        return b'"' + b"".join(_esc(c, style == "upper") for c in text) + b'"'
    i = 0 if style == "first" else len(text) // 2
    body = json.dumps(text[:i])[1:-1] + "\0" + json.dumps(text[i + 1 :])[1:-1]
    return b'"' + body.encode().replace(b"\0", _esc(text[i])) + b'"'


def v(value: Any) -> bytes:
    """Compact JSON of ``value``."""
    return json.dumps(value, separators=(",", ":")).encode()


Pairs = list[tuple[bytes, bytes]]


def obj(pairs: Pairs, ws: bytes = b"") -> bytes:
    """A JSON object from (key token, value token) pairs, ``ws`` around every token."""
    inner = (ws + b"," + ws).join(k + ws + b":" + ws + val for k, val in pairs)
    return b"{" + ws + inner + ws + b"}"


@attrs.frozen
class Ctx:
    """What a variant builds on.

    Attributes:
        method: the mutation.
        case: the tag.
        rid: the id token, or ``None`` for a notification.
        ws: whitespace put around every token.
    """

    method: str
    case: int
    rid: bytes | None
    ws: bytes = b""

    def meta(self, *extra: tuple[bytes, bytes]) -> bytes:
        return obj([(s("case"), v(self.case)), *extra], self.ws)

    def rest(self) -> Pairs:
        return [(s(k), v(x)) for k, x in METHODS.get(self.method, {}).items()]

    def params(self, sid: Pairs, meta: bytes | None = None, meta_key: bytes = b'"_meta"') -> bytes:
        """``params``: ``sid`` pairs, the method's other fields, then ``_meta``."""
        return obj([*sid, *self.rest(), (meta_key, meta or self.meta())], self.ws)

    def msg(
        self,
        params: bytes | None = None,
        *,
        method: bytes | None = None,
        top: Pairs | None = None,
        extra: Pairs = (),  # type: ignore[assignment]
    ) -> bytes:
        """The whole line: ``jsonrpc``, ``id`` (unless a notification), ``method``, ``params``."""
        if top is None:
            top = [(s("jsonrpc"), s("2.0"))]
            if self.rid is not None:
                top.append((s("id"), self.rid))
            top.append((s("method"), method or s(self.method)))
            top.append((s("params"), params or self.params([(s("sessionId"), s(CHILD))])))
        return obj([*top, *extra], self.ws)


def _child(ctx: Ctx) -> Pairs:
    return [(s("sessionId"), s(CHILD))]


def _parent(ctx: Ctx) -> Pairs:
    return [(s("sessionId"), s(PARENT))]


Variant = Callable[[Ctx], bytes]


def _sid(*pairs: tuple[str, str, str, str]) -> Variant:
    """params whose session pairs are ``(key, key style, value, value style)``."""

    def build(ctx: Ctx) -> bytes:
        return ctx.msg(ctx.params([(s(k, ks), s(x, xs)) for k, ks, x, xs in pairs]))

    return build


def _meta(*extra: tuple[bytes, bytes], sid: str | None = PARENT) -> Variant:
    """params ``{"sessionId": sid, ..., "_meta": {"case": N, <extra>}}``."""

    def build(ctx: Ctx) -> bytes:
        head = [] if sid is None else [(s("sessionId"), s(sid))]
        return ctx.msg(ctx.params(head, ctx.meta(*extra)))

    return build


def _raw_sid(value: bytes) -> Variant:
    return lambda ctx: ctx.msg(ctx.params([(s("sessionId"), value)]))


def _dup_meta(child_first: bool) -> Variant:
    def build(ctx: Ctx) -> bytes:
        metas = [ctx.meta(), ctx.meta((s("session_id"), s(CHILD)))]
        if child_first:
            metas.reverse()
        pairs = [*_parent(ctx), *ctx.rest(), *((s("_meta"), m) for m in metas)]
        return ctx.msg(obj(pairs, ctx.ws))

    return build


def _carrier_key(key: bytes) -> Variant:
    """``_meta``'s payload under another key (``field_meta``, an escaped ``_meta``)."""

    def build(ctx: Ctx) -> bytes:
        meta = ctx.meta((s("session_id"), s(CHILD)))
        return ctx.msg(ctx.params(_parent(ctx), meta, meta_key=key))

    return build


def _dup_params(child_first: bool) -> Variant:
    def build(ctx: Ctx) -> bytes:
        ps = [ctx.params(_parent(ctx)), ctx.params(_child(ctx))]
        if child_first:
            ps.reverse()
        top = [(s("jsonrpc"), s("2.0"))]
        if ctx.rid is not None:
            top.append((s("id"), ctx.rid))
        top += [(s("method"), s(ctx.method)), *((s("params"), p) for p in ps)]
        return ctx.msg(top=top)

    return build


def _dup_method(other: str, mutation_first: bool) -> Variant:
    def build(ctx: Ctx) -> bytes:
        ms = [s(ctx.method), s(other)]
        if not mutation_first:
            ms.reverse()
        top = [(s("jsonrpc"), s("2.0"))]
        if ctx.rid is not None:
            top.append((s("id"), ctx.rid))
        top += [*((s("method"), m) for m in ms), (s("params"), ctx.params(_child(ctx)))]
        return ctx.msg(top=top)

    return build


def _top_key(name: str, style: str) -> Variant:
    """One top-level key (``method``, ``params``, ``id``, ``jsonrpc``) spelled with escapes."""

    def build(ctx: Ctx) -> bytes:
        top = [(s("jsonrpc", style if name == "jsonrpc" else "plain"), s("2.0"))]
        if ctx.rid is not None:
            top.append((s("id", style if name == "id" else "plain"), ctx.rid))
        top.append((s("method", style if name == "method" else "plain"), s(ctx.method)))
        top.append((s("params", style if name == "params" else "plain"), ctx.params(_child(ctx))))
        return ctx.msg(top=top)

    return build


def _jsonrpc(value: bytes | None) -> Variant:
    def build(ctx: Ctx) -> bytes:
        top = [] if value is None else [(s("jsonrpc"), value)]
        if ctx.rid is not None:
            top.append((s("id"), ctx.rid))
        top += [(s("method"), s(ctx.method)), (s("params"), ctx.params(_child(ctx)))]
        return ctx.msg(top=top)

    return build


def _dup_jsonrpc(ctx: Ctx) -> bytes:
    return ctx.msg(extra=[(s("jsonrpc"), s("1.0"))])


def _dup_id(ctx: Ctx) -> bytes:
    return ctx.msg(extra=[(s("id"), ctx.rid if ctx.rid is not None else v(None))])


def _with_extra(key: str, value: bytes) -> Variant:
    return lambda ctx: ctx.msg(extra=[(s(key), value)])


def _extra_param(value: bytes) -> Variant:
    """sessionId CHILD plus a parameter ``x`` holding ``value`` (raw bytes)."""
    return lambda ctx: ctx.msg(ctx.params([*_child(ctx), (s("x"), value)]))


def _raw_key(key: bytes, value: str = CHILD) -> Variant:
    return lambda ctx: ctx.msg(ctx.params([(key, s(value))]))


def _method_token(token: bytes) -> Variant:
    return lambda ctx: ctx.msg(method=token)


def _padded(lead: bytes, trail: bytes = b"") -> Variant:
    return lambda ctx: lead + ctx.msg() + trail


#: every spelling idea, by label; each gives one line for a :class:`Ctx`
VARIANTS: dict[str, Variant] = {
    "plain": lambda ctx: ctx.msg(),
    # escapes in keys and values
    "key-escape-one": _sid(("sessionId", "one", CHILD, "plain")),
    "key-escape-first": _sid(("sessionId", "first", CHILD, "plain")),
    "key-escape-all": _sid(("sessionId", "all", CHILD, "plain")),
    "key-escape-upper": _sid(("sessionId", "upper", CHILD, "plain")),
    "value-escape-one": _sid(("sessionId", "plain", CHILD, "one")),
    "value-escape-all": _sid(("sessionId", "plain", CHILD, "all")),
    "value-escape-upper": _sid(("sessionId", "upper", CHILD, "upper")),
    "method-escape-first": lambda ctx: ctx.msg(method=s(ctx.method, "first")),
    "method-escape-all": lambda ctx: ctx.msg(method=s(ctx.method, "all")),
    "method-escape-solidus": lambda ctx: ctx.msg(method=s(ctx.method).replace(b"/", b"\\/")),
    "params-key-escaped": _top_key("params", "one"),
    "method-key-escaped": _top_key("method", "first"),
    "id-key-escaped": _top_key("id", "all"),
    "jsonrpc-key-escaped": _top_key("jsonrpc", "one"),
    # duplicate keys, both orders (first-wins vs last-wins readers)
    "dup-sid-child-first": _sid(
        ("sessionId", "plain", CHILD, "plain"), ("sessionId", "plain", PARENT, "plain")
    ),
    "dup-sid-child-last": _sid(
        ("sessionId", "plain", PARENT, "plain"), ("sessionId", "plain", CHILD, "plain")
    ),
    "dup-sid-escaped-child-last": _sid(
        ("sessionId", "plain", PARENT, "plain"), ("sessionId", "one", CHILD, "plain")
    ),
    "dup-sid-escaped-child-first": _sid(
        ("sessionId", "all", CHILD, "plain"), ("sessionId", "plain", PARENT, "plain")
    ),
    "dup-sid-three": _sid(
        ("sessionId", "plain", PARENT, "plain"),
        ("sessionId", "plain", CHILD, "plain"),
        ("sessionId", "plain", PARENT, "plain"),
    ),
    "dup-params-child-first": _dup_params(child_first=True),
    "dup-params-child-last": _dup_params(child_first=False),
    "dup-method-status-first": _dup_method("session/status", mutation_first=False),
    "dup-method-status-last": _dup_method("session/status", mutation_first=True),
    "dup-method-list-first": _dup_method("session/list", mutation_first=False),
    "dup-jsonrpc": _dup_jsonrpc,
    "dup-id": _dup_id,
    "dup-meta-child-first": _dup_meta(child_first=True),
    "dup-meta-child-last": _dup_meta(child_first=False),
    "meta-dup-session_id-child-last": _meta(
        (s("session_id"), s(PARENT)), (s("session_id"), s(CHILD))
    ),
    "meta-dup-session_id-child-first": _meta(
        (s("session_id"), s(CHILD)), (s("session_id"), s(PARENT))
    ),
    # aliases
    "alias-session_id": _sid(("session_id", "plain", CHILD, "plain")),
    "alias-session_id-escaped": _sid(("session_id", "one", CHILD, "plain")),
    "alias-session_id-after-parent": _sid(
        ("sessionId", "plain", PARENT, "plain"), ("session_id", "plain", CHILD, "plain")
    ),
    "alias-session_id-before-parent": _sid(
        ("session_id", "plain", CHILD, "plain"), ("sessionId", "plain", PARENT, "plain")
    ),
    "alias-sessionID": _sid(("sessionID", "plain", CHILD, "plain")),
    "alias-SessionId": _sid(("SessionId", "plain", CHILD, "plain")),
    "alias-sessionid": _sid(("sessionid", "plain", CHILD, "plain")),
    "alias-session-id": _sid(("session-id", "plain", CHILD, "plain")),
    # _meta carriers (Python SDK: params._meta is spread into the handler's kwargs)
    "meta-session_id": _meta((s("session_id"), s(CHILD))),
    "meta-session_id-escaped": _meta((s("session_id", "one"), s(CHILD))),
    "meta-session_id-all-escaped": _meta((s("session_id", "all"), s(CHILD))),
    "meta-sessionId": _meta((s("sessionId"), s(CHILD))),
    "meta-session_id-no-sessionId": _meta((s("session_id"), s(CHILD)), sid=None),
    "meta-session_id-parent-on-child": _meta((s("session_id"), s(PARENT)), sid=CHILD),
    "meta-nested": _meta((s("_meta"), obj([(s("session_id"), s(CHILD))]))),
    "meta-key-escaped": _carrier_key(s("_meta", "one")),
    "meta-key-field_meta": _carrier_key(s("field_meta")),
    "meta-key-field_meta-escaped": _carrier_key(s("field_meta", "first")),
    # whitespace and control characters
    "pad-spaces": _padded(b"  \t", b" \t "),
    "pad-cr": _padded(b"", b"\r"),
    "pad-nbsp": _padded(b"\xc2\xa0"),
    "pad-bom": _padded(b"\xef\xbb\xbf"),
    "pad-vt-ff": _padded(b"\x0b\x0c", b"\x0c"),
    "pad-u2028": _padded(b"\xe2\x80\xa8", b"\xe2\x80\xa9"),
    "pad-nul": _padded(b"\x00"),
    "raw-control-in-value": _raw_sid(b'"CHILD\x01"'),
    "raw-control-in-other": _extra_param(b'"a\x1fb"'),
    "raw-del-in-other": _extra_param(b'"a\x7fb"'),
    "escaped-nul-in-value": _raw_sid(b'"CHILD\\u0000"'),
    "escaped-control-in-key": _raw_key(b'"sessionId\\u0000"'),
    "value-padded": _raw_sid(b'" CHILD "'),
    # bytes that are not UTF-8
    "utf8-surrogate-in-value": _raw_sid(b'"CHILD\xed\xa0\x80"'),
    "utf8-surrogate-in-other": _extra_param(b'"\xed\xa0\x80"'),
    "utf8-cesu-pair-in-other": _extra_param(b'"\xed\xa0\xbd\xed\xb8\x80"'),
    "utf8-overlong-key": _raw_key(b'"session\xc1\x89d"'),
    "utf8-overlong-value": _raw_sid(b'"CHIL\xc1\x84"'),
    "utf8-overlong-method": lambda ctx: ctx.msg(method=s(ctx.method).replace(b"/", b"\xc0\xaf")),
    "utf8-continuation-in-other": _extra_param(b'"\x80"'),
    "utf8-ff-in-other": _extra_param(b'"\xff"'),
    "utf8-truncated-in-other": _extra_param(b'"\xe2\x82"'),
    "utf8-surrogate-on-parent": lambda ctx: ctx.msg(
        ctx.params([*_parent(ctx), (s("x"), b'"\xed\xa0\x80"')])
    ),
    "utf8-surrogate-in-meta-key": _meta((b'"session_id\xed\xa0\x80"', s(CHILD))),
    # shapes that are not JSON-RPC 2.0 but that the SDKs still dispatch
    "no-jsonrpc": _jsonrpc(None),
    "jsonrpc-1.0": _jsonrpc(s("1.0")),
    "jsonrpc-number": _jsonrpc(b"2.0"),
    "extra-result-null": _with_extra("result", b"null"),
    "extra-error": _with_extra("error", obj([(s("code"), b"1"), (s("message"), s("x"))])),
    "params-array": lambda ctx: ctx.msg(v([CHILD])),
    "sid-array": _raw_sid(v([CHILD])),
    "sid-object": _raw_sid(v({"sessionId": CHILD})),
    "method-case": _method_token(s("Session/Prompt")),
}

#: id tokens of every JSON type (``None``: a notification)
ID_KINDS: dict[str, Callable[[int], bytes | None]] = {
    "str": lambda n: s(f"r{n}"),
    "int": lambda n: v(n),
    "none": lambda n: None,
    "zero": lambda n: b"0",
    "negative": lambda n: v(-n - 1),
    "bigint": lambda n: v(2**64 + n),
    "huge": lambda n: b"1" + b"0" * 40,
    "float": lambda n: v(n + 0.5),
    "float-integral": lambda n: v(float(n)),
    "exponent": lambda n: b"1e2",
    "neg-zero": lambda n: b"-0",
    "null": lambda n: b"null",
    "true": lambda n: b"true",
    "false": lambda n: b"false",
    "object": lambda n: v({"id": n}),
    "array": lambda n: v([n]),
    "empty-str": lambda n: b'""',
    "escaped-str": lambda n: s(f"r{n}", "all"),
}

WRAPS = ("none", "batch", "batch-after-parent", "nested-batch")


def spell(
    method: str,
    variant: str,
    case: int,
    *,
    id_kind: str | None = None,
    wrap: str = "none",
    ws: bytes = b"",
) -> bytes:
    """One line: ``variant`` of ``method``.

    Args:
        method: a key of :data:`METHODS` (or any method name).
        variant: a key of :data:`VARIANTS`.
        case: the tag written in ``params._meta.case`` (and used in string ids).
        id_kind: a key of :data:`ID_KINDS`; default: ``int`` for requests,
            ``none`` (a notification) for ``session/cancel``.
        wrap: ``none``, ``batch`` (``[msg]``), ``batch-after-parent``
            (``[a plain PARENT call, msg]``), ``nested-batch`` (``[[msg]]``).
        ws: JSON whitespace written around every token.
    """
    if id_kind is None:
        id_kind = "none" if method in NOTIFICATIONS else "int"
    ctx = Ctx(method, case, ID_KINDS[id_kind](case), ws)
    line = VARIANTS[variant](ctx)
    if wrap == "batch":
        return b"[" + line + b"]"
    if wrap == "nested-batch":
        return b"[[" + line + b"]]"
    if wrap == "batch-after-parent":
        other = Ctx(method, case + 1_000_000, ctx.rid and s(f"p{case}"), ws)
        return b"[" + other.msg(other.params(_parent(other))) + b"," + line + b"]"
    return line


def spellings(start: int = 1) -> list[Spelling]:
    """Every variant of every method, in its natural form (request, or notification
    for ``session/cancel``), plus the other form, every id kind and the batch
    wraps for the plain spelling. Tags count up from ``start``.
    """
    out: list[Spelling] = []

    def add(label: str, method: str, **kw: Any) -> None:
        if any(sp.label == label for sp in out[-80:]):
            return
        case = start + len(out)
        out.append(Spelling(label, method, spell(method, case=case, **kw), case))

    for method in METHODS:
        for variant in VARIANTS:
            add(f"{method} {variant}", method, variant=variant)
        for id_kind in ID_KINDS:
            add(f"{method} plain id={id_kind}", method, variant="plain", id_kind=id_kind)
        other = "int" if method in NOTIFICATIONS else "none"
        for variant in ("meta-session_id", "dup-sid-child-last", "alias-session_id"):
            add(f"{method} {variant} id={other}", method, variant=variant, id_kind=other)
        for wrap in WRAPS[1:]:
            add(f"{method} plain {wrap}", method, variant="plain", wrap=wrap)
        add(f"{method} meta-session_id batch", method, variant="meta-session_id", wrap="batch")
        add(f"{method} plain ws", method, variant="plain", ws=b" \t\r ")
    return out


def controls(start: int) -> list[tuple[Spelling, str]]:
    """Calls that must be dispatched, with the session they name.

    Plain calls of every method on ``PARENT``, and ``session/cancel`` /
    ``session/prompt`` on ``GRANTED`` (whose capabilities permit them).
    """
    out: list[tuple[Spelling, str]] = []
    for sid, methods in ((GRANTED, ("session/cancel", "session/prompt")), (PARENT, METHODS)):
        for method in methods:
            case = start + len(out)
            kind = "none" if method in NOTIFICATIONS else "int"
            ctx = Ctx(method, case, ID_KINDS[kind](case))
            line = ctx.msg(ctx.params([(s("sessionId"), s(sid))]))
            out.append((Spelling(f"control {method} on {sid}", method, line, case), sid))
    return out


# ------------------------------------------------------------ the readers


def strict_utf8(line: bytes) -> bool:
    """True when ``line`` is valid UTF-8 (no encoded surrogates, no overlongs)."""
    try:
        line.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


Dispatch = tuple[str, Any, Any]  # (method, session id, case tag)


class _Recorder:
    """A duck-typed ``acp.Agent`` whose handlers record ``(method, session_id, case)``."""

    def __init__(self) -> None:
        self.calls: list[Dispatch] = []

    def _rec(self, method: str, kw: dict[str, Any]) -> None:
        meta = kw.get("field_meta")
        case = kw.get("case", meta.get("case") if isinstance(meta, dict) else None)
        self.calls.append((method, kw.get("session_id"), case))

    async def prompt(self, **kw: Any) -> None:
        self._rec("session/prompt", kw)

    async def cancel(self, **kw: Any) -> None:
        self._rec("session/cancel", kw)

    async def set_session_mode(self, **kw: Any) -> None:
        self._rec("session/set_mode", kw)

    async def set_config_option(self, **kw: Any) -> None:
        self._rec("session/set_config_option", kw)

    async def close_session(self, **kw: Any) -> None:
        self._rec("session/close", kw)

    async def load_session(self, **kw: Any) -> None:
        self._rec("session/load", kw)

    async def resume_session(self, **kw: Any) -> None:
        self._rec("session/resume", kw)

    async def fork_session(self, **kw: Any) -> None:
        self._rec("session/fork", kw)


_RECORDER: _Recorder | None = None
_ROUTER: Any = None


def _router() -> tuple[_Recorder, Any]:
    global _RECORDER, _ROUTER
    if _RECORDER is None:
        from acp.agent.router import build_agent_router

        _RECORDER = _Recorder()
        _ROUTER = build_agent_router(_RECORDER, use_unstable_protocol=True)  # type: ignore[arg-type]
    return _RECORDER, _ROUTER


def _py_messages(line: bytes) -> Iterator[Any]:
    line = line.strip()
    if not line:
        return
    try:
        yield json.loads(line)
    except Exception:  # the SDK logs and skips the line
        return


def python_sdk_dispatch(line: bytes) -> list[Dispatch]:
    """The handler calls the Python SDK 0.12.1 makes for one received line.

    Returns:
        ``[(method, session_id, case)]``: ``session_id`` as the handler
        receives it (after the ``_meta`` spread), ``case`` the tag.
    """
    recorder, router = _router()
    out: list[Dispatch] = []
    for message in _py_messages(line):
        if not isinstance(message, dict):
            continue  # the SDK's receive loop fails on it
        method = message.get("method")
        if method is None:
            continue
        before = len(recorder.calls)
        coro = router(method, message.get("params"), "id" not in message)
        try:
            coro.send(None)
        except StopIteration:
            pass
        except Exception:  # method not found, invalid params
            pass
        else:  # pragma: no cover - the recorder never awaits
            coro.close()
        out.extend(recorder.calls[before:])
        del recorder.calls[before:]
    return out


# String.prototype.trim: WhiteSpace and LineTerminator code points
_JS_WS = (
    "\t\n\v\f\r \u00a0\u1680"
    + "".join(map(chr, range(0x2000, 0x200B)))
    + ("\u2028\u2029\u202f\u205f\u3000\ufeff")
)


def _reject_constant(name: str) -> Any:
    raise ValueError(name)


def js_sdk_dispatch(line: bytes) -> list[Dispatch]:
    """The handler calls the TypeScript SDK 2.4.0 makes for one received line.

    ``TextDecoder`` (U+FFFD for invalid bytes), ``trim``, ``JSON.parse`` (last
    key wins; ``NaN`` is not JSON); every record with a ``method`` key is
    dispatched (the test agent has a ``"*"`` fallback), routed by
    ``params.sessionId`` when it is a string.
    """
    text = line.decode("utf-8", "replace").strip(_JS_WS)
    try:
        message = json.loads(text, parse_constant=_reject_constant)
    except ValueError:
        return []
    if not isinstance(message, dict) or "method" not in message:
        return []
    params = message.get("params")
    if not isinstance(params, dict) or type(params.get("sessionId")) is not str:
        return []
    meta = params.get("_meta")
    case = meta.get("case") if isinstance(meta, dict) else None
    return [(str(message["method"]), params["sessionId"], case)]


def violations(line: bytes) -> list[str]:
    """Why a line an agent received would run a mutation on ``CHILD``, per SDK (empty: safe)."""
    out: list[str] = []
    for sdk, reader in (("python", python_sdk_dispatch), ("ts", js_sdk_dispatch)):
        for method, sid, case in reader(line):
            if sid == CHILD and method not in READ_ONLY:
                out.append(f"{sdk} SDK dispatches {method} for CHILD (case {case})")
    return out
