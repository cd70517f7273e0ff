"""The wire trace: one record per message and the proxy's decision on it (docs/trace-format.md).

:class:`TracingCore` is a :class:`~acp_proxy.core.engine.ProxyCore` that, besides
its actions, hands one record (a ``dict``, the shape of docs/trace-format.md) per
message to ``emit``. It is only built when something observes the traffic (a
trace file, metrics, OpenTelemetry; not the ``info`` life-cycle log, which comes
from the plain core's reports): a proxy that observes nothing runs a plain
``ProxyCore`` and pays nothing for this module.

The decision on a message is read from what the engine did with it, never by
deciding again: the counters of the :class:`~acp_proxy.core.engine.ledger.Ledger`,
the hold buffer's contents before and after, and the ``Send`` and ``Audit``
actions. A line run is fed one frame at a time (the verdicts are the same on
every path: docs/design.md section 2), so each message gets its own record.

Pure: no I/O, the clock is the ``now`` argument; records are plain values.
"""

from __future__ import annotations

import functools
import json
import re
from collections import Counter, deque
from collections.abc import Callable, Sequence
from typing import Any

from acp_proxy.config import Config
from acp_proxy.core.actions import Action, Audit, Peer, Send, StoreCall, StoreReply
from acp_proxy.core.engine import ProxyCore
from acp_proxy.core.engine.negotiated import peer_info
from acp_proxy.core.hidden_secrets import AWS_SECRET, FORMAT_CHARACTERS, base64_secrets
from acp_proxy.core.wire.framing import Incoming, Lines, Oversize, Partial
from acp_proxy.core.wire.jsonrpc import Kind, Message, parse

__all__ = [
    "DECISIONS",
    "MAX_TRACE_CONTEXT_CHARS",
    "TRACE_CONTEXT_KEYS",
    "TRACE_FORMAT",
    "TRACE_VERSION",
    "Record",
    "TracingCore",
    "header",
    "redact",
]

#: the ``format`` of a trace file's header record
TRACE_FORMAT = "acp-proxy-trace"
#: the version of the record shapes (docs/trace-format.md); bumped on any incompatible change
TRACE_VERSION = 1

#: every decision a message record may carry
DECISIONS = ("forwarded", "held", "released", "refused", "dropped", "rewritten", "answered")

Record = dict[str, Any]

#: capability keys of a child written in a record's ``child`` (more are left out), and
#: their longest name (a longer one is left out): the agent chooses them
MAX_GRANTS = 16
MAX_GRANT_KEY_CHARS = 64

#: W3C trace context a client request may carry in ``params._meta``, copied to its record
TRACE_CONTEXT_KEYS = ("traceparent", "tracestate")
#: longer values are not copied (a W3C ``tracestate`` is at most 512 characters)
MAX_TRACE_CONTEXT_CHARS = 1024

_KIND_NAMES = {
    Kind.REQUEST: "request",
    Kind.NOTIFICATION: "notification",
    Kind.RESPONSE: "response",
    Kind.ERROR_RESPONSE: "error",
    Kind.BATCH: "batch",
    Kind.INVALID: "invalid",
}

_REDACTED = "[REDACTED]"

#: a JSON key (or ``NAME=value`` / query parameter name) whose value is a secret, matched
#: on the name lower-cased with ``_``, ``-`` and ``.`` removed; ``token`` not followed by
#: ``s`` so that usage counts (``inputTokens``) stay
_SECRET_NAME = re.compile(
    r"apikey|privatekey|accesskey|secretkey|passw(?:or)?d|passphrase|secret|credential"
    r"|authorization|cookie|token(?!s)|signature"
)
#: query parameters that carry a credential although their name says nothing of it
_SECRET_QUERY_NAMES = frozenset({"key", "sig", "code", "auth", "pass", "pwd"})
#: keys whose value lists ``{"name", "value"}`` objects (ACP's ``env`` of an MCP server
#: or ``terminal/create``, an HTTP MCP server's ``headers``): every value is redacted
_NAME_VALUE_KEYS = frozenset({"env", "headers"})


def _secret_name(name: str) -> bool:
    return _SECRET_NAME.search(re.sub(r"[_\-.]", "", name.lower())) is not None


#: a name in free text (``NAME=value``, ``NAME: value``, a header line) whose value is
#: a secret, matched like :data:`_SECRET_NAME` but wider: any ``pass``, ``pwd``,
#: ``secret``, ``token``, ``key``, ``auth``, ``credential``, ``cookie``
#: (not ``tokens``, ``keyword``, ``author``... so that counts and prose stay)
_TEXT_SECRET_NAME = re.compile(
    r"pass(?!age|ive|through)|pwd|secret|token(?!s|iz)|key(?!word|board|stroke|frame|s$)"
    r"|auth(?!or|method)|credential|cookie|signature"
)
#: header names whose whole value (``token x``, ``Basic x``) is a credential
_AUTH_HEADERS = frozenset({"authorization", "proxyauthorization", "cookie", "setcookie"})


@functools.lru_cache(maxsize=4096)
def _text_secret_name(name: str) -> bool:
    return _TEXT_SECRET_NAME.search(re.sub(r"[_\-.]", "", name.lower())) is not None


def _assignment_sub(m: re.Match[str]) -> str:
    name, value = m.group("name"), m.group("value")
    if not _text_secret_name(name) or value.startswith(_REDACTED):
        return m.group(0)
    if value[:1] in "\"'" and len(value) > 1 and value[-1] == value[0]:
        return m.group("pre") + value[0] + _REDACTED + value[0]
    return m.group("pre") + _REDACTED


def _header_sub(m: re.Match[str]) -> str:
    name = re.sub(r"[_\-.]", "", m.group(2).lower())
    if name in _AUTH_HEADERS or _text_secret_name(name):
        return m.group(1) + _REDACTED
    return m.group(0)


def _user_sub(m: re.Match[str]) -> str:
    if m.group(2).isdigit() and m.group(3).isdigit():  # docker -u 1000:1000
        return m.group(0)
    return m.group(1) + _REDACTED


def _query_sub(m: re.Match[str]) -> str:
    name = m.group(2)
    if _secret_name(name) or name.lower() in _SECRET_QUERY_NAMES:
        return m.group(1) + _REDACTED
    return m.group(0)


#: a ``NAME`` in free text: letters, digits, ``_ - .``, optionally led by ``_`` (npm's
#: ``_authToken``), not glued to a word before it
_NAME = r"(?<![\w.\-])(?P<name>-*_*[A-Za-z][\w.\-]*)"
#: MySQL / MariaDB clients take the password glued to ``-p`` (``psql -p`` is a port)
_MYSQL_NAMES = (
    r"(?:mysql(?:dump|admin|import|check|show|binlog|pump|sh)?|mariadb(?:-?dump|-?admin)?)"
)

_SECRET_PATTERNS: tuple[tuple[re.Pattern[str], Any], ...] = (
    # Authorization: Bearer / Basic credentials
    (re.compile(r"(?i)\b(bearer|basic)(\s+)[A-Za-z0-9._~+/\-]+=*"), r"\1\2" + _REDACTED),
    # values of keys that name a secret in JSON text: "api_key": "...", "password": "..."
    (
        re.compile(
            r'(?i)("(?:[a-z0-9_\-]*(?:api[_\-]?key|token|secret|password|passwd|authorization'
            r'|credential|private[_\-]?key)[a-z0-9_\-]*)"\s*:\s*")((?:[^"\\]|\\.)*)(")'
        ),
        r"\1" + _REDACTED + r"\3",
    ),
    # credentials in a URL: scheme://user:password@host (the whole user information)
    (
        re.compile(r"(?i)(?<![a-z0-9+.\-])([a-z][a-z0-9+.\-]{0,31}://)[^/\s@?#\"']+@"),
        r"\1" + _REDACTED + "@",
    ),
    # secret query parameters: ?access_token=..., &api_key=..., &sig=...
    (re.compile(r"([?&;]([A-Za-z0-9_.\-]+)=)[^&#\s\"'<>]+"), _query_sub),
    # HTTP headers (a hyphenated name, or Authorization / Cookie), the whole value:
    # Authorization: token x, X-Api-Key: k, X-Auth-Token: t, Cookie: a=b
    (
        re.compile(
            r"(?i)((?<![\w\-])((?:proxy-)?authorization|(?:set-)?cookie"
            r"|[A-Za-z]\w*(?:-\w+)+)[ \t]*:(?!:)[ \t]*)"
            r"(?=\S)[^\r\n\"']+"
        ),
        _header_sub,
    ),
    # a secret-named key leading its line with ``:`` or a spaced ``=``, the rest of the
    # line: YAML, INI, ~/.pypirc, ~/.aws/credentials (password: x y, aws_secret_access_key = x)
    (
        re.compile(
            r"(?m)(?P<pre>^[ \t]*(?:export[ \t]+|-[ \t]+)?"
            + _NAME
            + r"(?:[ \t]*:(?!:)|[ \t]+=(?!=)|=(?=[ \t]))[ \t]*)(?P<value>\S[^\r\n]*?)[ \t]*$"
        ),
        _assignment_sub,
    ),
    # anywhere else, one word: DATABASE_PASSWORD=x, --api-key=x, _authToken=x, token: x
    (
        re.compile(
            r"(?P<pre>" + _NAME + r"[ \t]*(?::(?![:/])|=(?!=))[ \t]*)"
            r"(?P<value>\"[^\"\r\n]*\"|'[^'\r\n]*'|[^\s\"'&]+)"
        ),
        _assignment_sub,
    ),
    # ~/.netrc: machine h login u password x (on one line, or password on a line of its own)
    (re.compile(r"(?im)(^[ \t]*password[ \t]+)\S+(?=[ \t]*$)"), r"\1" + _REDACTED),
    (
        re.compile(r"(?i)(\b(?:machine|default)\b[^\r\n]{0,200}?\b(?:password|account)[ \t]+)\S+"),
        r"\1" + _REDACTED,
    ),
    # curl / wget credentials: -u user:pass, --user user:pass, --user=user:pass
    (
        re.compile(
            r"((?<![\w\-])(?:-u[ \t]*|--(?:proxy-)?user[ \t=][ \t]*)['\"]?([^\s:'\"]+):)"
            r"([^\s'\"]+)"
        ),
        _user_sub,
    ),
    # mysql -uroot -phunter2 (a password glued to -p, on the command's line)
    (
        re.compile(
            r"(\b" + _MYSQL_NAMES + r"\b[^\r\n|;&]{0,200}?[ \t]['\"]?-p['\"]?)(?=[^\s'\"])[^\s'\"]+"
        ),
        r"\1" + _REDACTED,
    ),
    # common API key shapes: OpenAI / Anthropic, GitHub, AWS access key ids, Slack, Google,
    # Stripe (and its webhook secrets), npm, PyPI, JSON Web Tokens
    (
        re.compile(
            r"\b(?:sk-(?:ant-|proj-)?[A-Za-z0-9_\-]{16,}"
            r"|(?:ghp|gho|ghu|ghs|ghr|github_pat)_[A-Za-z0-9_]{20,}"
            r"|(?:AKIA|ASIA)[0-9A-Z]{16}\b"
            r"|xox[abposr]-[A-Za-z0-9\-]{10,}"
            r"|AIza[0-9A-Za-z_\-]{35}\b"
            r"|(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,}"
            r"|whsec_[A-Za-z0-9]{16,}"
            r"|npm_[A-Za-z0-9]{30,}"
            r"|pypi-[A-Za-z0-9_\-]{16,}"
            r"|eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,})"
        ),
        _REDACTED,
    ),
    (
        re.compile(
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.DOTALL
        ),
        _REDACTED,
    ),
)


def _redact_plain(text: str) -> str:
    for pattern, repl in _SECRET_PATTERNS:
        text = pattern.sub(repl, text)
    text = AWS_SECRET.sub(_REDACTED, text)
    return base64_secrets(text, _holds_token, _REDACTED)


#: the token shapes looked for in decoded base64: API keys, private keys, AWS secrets
_TOKEN_PATTERNS = (_SECRET_PATTERNS[-2][0], _SECRET_PATTERNS[-1][0], AWS_SECRET)


def _holds_token(decoded: str) -> bool:
    """Whether a base64 run's decoded text holds a token shape."""
    return any(p.search(decoded) for p in _TOKEN_PATTERNS)


def _redact_text(text: str) -> str:
    """The string rules; again without format characters (U+200B ...) when the text
    holds any and that reading finds a secret (:mod:`acp_proxy.core.hidden_secrets`)."""
    out = _redact_plain(text)
    if FORMAT_CHARACTERS.search(text) is None:
        return out
    bare = FORMAT_CHARACTERS.sub("", text)
    redacted = _redact_plain(bare)
    return redacted if redacted != bare else out


class _Number(str):
    """A JSON number kept as its text (so that re-encoding does not change it)."""


class _Object(list[tuple[str, Any]]):
    """A JSON object as its members in order, duplicate keys kept."""


def _is_name_value_list(value: Any) -> bool:
    return type(value) is list and all(
        type(item) is _Object and any(k == "value" for k, _ in item) for item in value
    )


#: an argument of a MySQL client that carries a password (``-phunter2``)
_MYSQL_ARG = re.compile(r"\A(-p)(?=.)(.*)\Z", re.DOTALL)


def _is_mysql(command: Any) -> bool:
    """Whether ``command`` (a ``terminal/create`` command) is a MySQL / MariaDB client."""
    if type(command) is not str:
        return False
    return re.fullmatch(_MYSQL_NAMES + r"(?:\.exe)?", re.split(r"[/\\]", command)[-1]) is not None


def _redact_value(value: Any, secret: bool = False) -> Any:
    """``value`` (decoded with :class:`_Object` and :class:`_Number`) with secrets replaced."""
    if secret and value is not None:
        return _REDACTED
    if type(value) is str:
        return _redact_text(value)
    if type(value) is list:
        return [_redact_value(v) for v in value]
    if type(value) is _Object:
        out = _Object()
        mysql = any(k == "command" and _is_mysql(c) for k, c in value)
        for key, v in value:
            if mysql and key == "args" and type(v) is list:
                v = [_MYSQL_ARG.sub(r"\1" + _REDACTED, a) if type(a) is str else a for a in v]
            if key in _NAME_VALUE_KEYS and type(v) is _Object:
                v = _Object((k, _REDACTED if x is not None else None) for k, x in v)
            elif key in _NAME_VALUE_KEYS and _is_name_value_list(v):
                v = [
                    _Object(
                        (k, _REDACTED if k == "value" and x is not None else _redact_value(x))
                        for k, x in item
                    )
                    for item in v
                ]
            else:
                v = _redact_value(v, _secret_name(key))
            out.append((_redact_text(key), v))
        return out
    return value


def _encode(value: Any, ascii: bool) -> str:
    if type(value) is _Object:
        return "{" + ",".join(_encode(k, ascii) + ":" + _encode(v, ascii) for k, v in value) + "}"
    if type(value) is list:
        return "[" + ",".join(_encode(v, ascii) for v in value) + "]"
    if type(value) is _Number:
        return str.__str__(value)
    return json.dumps(value, ensure_ascii=ascii)


def redact(text: str) -> str:
    """``text`` with its secrets replaced by ``[REDACTED]`` (docs/trace-format.md section 4).

    A JSON text is redacted by structure, on its decoded value: every value of an
    ``env`` or ``headers`` list of ``{"name", "value"}`` objects (or object), any
    value under a secret-named key, and in every string bearer tokens, URL
    credentials, secret query parameters, secret ``NAME=value`` pairs and common
    API key shapes. It is then encoded again (compact, keys in the same order,
    numbers as written); a text with nothing to redact is returned unchanged.
    Text that is not JSON gets the string rules only. For the trace copy only:
    forwarded bytes are never touched.
    """
    try:
        value = json.loads(
            text,
            object_pairs_hook=_Object,
            parse_int=_Number,
            parse_float=_Number,
            parse_constant=_Number,
        )
        redacted = _redact_value(value)
        if redacted == value:
            return text
        out = _encode(redacted, ascii=False)
    except (ValueError, RecursionError):
        return _redact_text(text)
    try:
        out.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate from a \ud800 escape: write it escaped
        return _encode(redacted, ascii=True)
    return out


def header(include_content: bool, **extra: Any) -> Record:
    """The first record of a trace file."""
    return {
        "type": "header",
        "format": TRACE_FORMAT,
        "version": TRACE_VERSION,
        "content": include_content,
        **extra,
    }


#: the audit fields an event of a message record keeps (``rule``, ``action``,
#: ``optionId``: what a permission decision was, for ``replay --diff``)
_EVENT_KEYS = ("sessionId", "parentSessionId", "rule", "action", "optionId", "reason")


def _events(actions: list[Action]) -> list[dict[str, Any]]:
    out = []
    for a in actions:
        if type(a) is Audit:
            ev: dict[str, Any] = {"event": str(a.event)}
            for key in _EVENT_KEYS:
                value = a.fields.get(key)
                if value is not None:
                    ev[key] = value
            out.append(ev)
    return out


def _later_record(
    of: int | None, now: float, source: Peer, m: Message, size: int, decision: str
) -> Record:
    """The later record (``seq`` null, ``of`` its first) of a message that waited."""
    sid = m.session_id
    return {
        "type": "message",
        "seq": None,
        "of": of,
        "t": now,
        "dir": source.direction,
        "kind": _KIND_NAMES[m.kind],
        "id": m.id,
        "method": m.method,
        "session": sid if type(sid) is str else None,
        "size": size,
        "decision": decision,
    }


def _answer_is_error(data: bytes) -> bool:
    m = parse(data)
    return m.kind is not Kind.RESPONSE


class TracingCore(ProxyCore):
    """A :class:`~acp_proxy.core.engine.ProxyCore` that reports every message's decision.

    Args:
        config: the effective configuration.
        emit: called with each record, in the order the proxy saw the messages.
        include_content: put each message's text (secrets redacted) in its record.
        max_tracked: requests in flight remembered for durations (beyond it,
            responses get no ``duration``).
        label: as :class:`~acp_proxy.core.engine.ProxyCore`'s.
    """

    def __init__(
        self,
        config: Config | None = None,
        *,
        emit: Callable[[Record], None],
        include_content: bool = False,
        max_tracked: int = 65536,
        label: str = "",
    ) -> None:
        super().__init__(config, label=label)
        self.emit = emit
        self.include_content = include_content
        self.seq = 0
        self._max_tracked = max_tracked
        # (requester, id) -> (method, session, time, seq) of forwarded requests
        self._requests: dict[tuple[Peer, Any], tuple[str | None, str | None, float, int]] = {}
        # held frame -> seqs of its records still held, oldest first
        self._held_seqs: dict[bytes, list[int]] = {}
        self.ledger.originated = []  # the proxy's own messages (a budget's session/cancel)
        # seqs of client messages waiting for the budget store: the prompt, then those behind it
        self._store_seqs: deque[int] = deque()

    # ----------------------------------------------------------------- API

    def receive(
        self, source: Peer, incoming: Incoming | Sequence[Incoming], now: float
    ) -> list[Action]:
        """As :meth:`ProxyCore.receive`, one record per message."""
        items: Sequence[Incoming] = incoming if type(incoming) is list else [incoming]  # type: ignore[list-item]
        out: list[Action] = []
        for item in items:
            if type(item) is Lines:
                for raw in item.frames():
                    out.extend(self._one(source, raw, now))
            else:
                out.extend(self._one(source, item, now))  # type: ignore[arg-type]
        return out

    def handle_timer(self, now: float) -> list[Action]:
        """As :meth:`ProxyCore.handle_timer`, with records of what left the hold buffer."""
        before = self.hold.held_frames() if self.hold.total_messages else []
        actions = super().handle_timer(now)
        if before:
            gone = self._gone(before)
            if gone:
                self.emit({"type": "timer", "t": now, "events": _events(actions)})
                self._settle_gone(gone, self._sends(actions), now)
        self._emit_originated(now)
        return actions

    def _waits_for_store(self, raw: bytes) -> bool:
        """True when client frame ``raw`` was kept for the budget store's answer."""
        waiting = self.budgets.waiting
        if waiting is None:
            return False
        return waiting[1].raw == raw or (bool(self._queued) and self._queued[-1] == raw)

    def store_result(self, call: StoreCall, reply: StoreReply, now: float) -> list[Action]:
        """As :meth:`ProxyCore.store_result`, with a later record (``of``) for each client
        message that waited for the store."""
        waiting = self.budgets.waiting
        if call.op != "reserve" or waiting is None or waiting[0].ticket != call.ticket:
            actions = super().store_result(call, reply, now)
            self._emit_originated(now)
            return actions
        out: list[Action] = []
        answered0 = self.n.answered
        m = self.budgets.store_result(call, reply, now, out)
        if m is not None:
            self.client.handle(m, now, out, budgeted=True)
        self._resumed(waiting[1].raw, out, answered0, now)
        while self._queued and self.budgets.waiting is None:
            item = self._queued.popleft()
            answered0 = self.n.answered
            actions = self._receive(Peer.CLIENT, item, now)
            if type(item) is bytes:
                self._resumed(item, actions, answered0, now)
            out.extend(actions)
        self._emit_originated(now)
        return out

    def _resumed(self, raw: bytes, actions: list[Action], answered0: int, now: float) -> None:
        """The later record of a client message that waited for the budget store."""
        of = self._store_seqs.popleft() if self._store_seqs else None
        m = parse(raw, self._dense_bytes, self._min_value_bytes, self._max_depth)
        if self.budgets.waiting is not None and self.budgets.waiting[1].raw == raw:
            if of is not None:
                self._store_seqs.appendleft(of)
            return  # waits again (a prompt behind a prompt): decided later
        decision = "dropped"
        for to, data in self._sends(actions):
            if to is Peer.AGENT and data == raw:
                decision = "forwarded"
                break
            if to is Peer.CLIENT and self.n.answered > answered0:
                decision = "refused" if _answer_is_error(data) else "answered"
        rec = _later_record(of, now, Peer.CLIENT, m, len(raw), decision)
        events = _events(actions)
        if events:
            rec["events"] = events
        if decision != "forwarded":
            self._requests.pop((Peer.CLIENT, m.id), None)  # remembered when it was held
        self.emit(rec)

    def _emit_originated(self, now: float) -> None:
        """A ``proxy`` record (decision ``"originated"``) per message the proxy sent of its own."""
        sent = self.ledger.originated
        if not sent:
            return
        for to, data, why in sent:
            m = parse(data)
            sid = m.session_id
            self.emit(
                {
                    "type": "proxy",
                    "t": now,
                    "to": to.value,
                    "kind": _KIND_NAMES[m.kind],
                    "id": m.id,
                    "method": m.method,
                    "session": sid if type(sid) is str else None,
                    "for_method": None,
                    "size": len(data),
                    "decision": "originated",
                    "reason": why,
                }
            )
        sent.clear()

    def peer_closed(self, peer: Peer, now: float, detail: str = "") -> list[Action]:
        """As :meth:`ProxyCore.peer_closed`, with a ``closed`` record and its consequences."""
        before = self.hold.held_frames() if self.hold.total_messages else []
        actions = super().peer_closed(peer, now, detail)
        closed: Record = {"type": "closed", "t": now, "peer": peer.value, "detail": detail}
        events = _events(actions)
        if events:
            closed["events"] = events
        self.emit(closed)
        sends = self._sends(actions)
        if before:
            self._settle_gone(self._gone(before), sends, now)
        for to, data in sends:
            if to is None:
                continue
            m = parse(data)
            entry = self._requests.pop((to, m.id), None)
            self.emit(
                {
                    "type": "proxy",
                    "t": now,
                    "to": to.value,
                    "kind": _KIND_NAMES[m.kind],
                    "id": m.id,
                    "for_method": entry[0] if entry else None,
                    "size": len(data),
                    "decision": "answered",
                }
            )
        return actions

    # ------------------------------------------------------------ internals

    def _sends(self, actions: list[Action]) -> list[tuple[Peer | None, bytes]]:
        """The messages the actions send, one per message (a forwarded run is split)."""
        out: list[tuple[Peer | None, bytes]] = []
        for a in actions:
            if type(a) is Send:
                if b"\n" in a.data:
                    out.extend((a.to, part) for part in a.data.split(b"\n"))
                else:
                    out.append((a.to, a.data))
        return out

    def _gone(self, before: list[bytes]) -> list[bytes]:
        """The held frames of ``before`` that are no longer held (in order)."""
        left = Counter(self.hold.held_frames())
        gone = []
        for raw in before:
            if left[raw]:
                left[raw] -= 1
            else:
                gone.append(raw)
        return gone

    def _record(self, source: Peer, item: bytes | Oversize | Partial, now: float) -> Record:
        self.seq += 1
        rec: Record = {"type": "message", "seq": self.seq, "t": now, "dir": source.direction}
        if isinstance(item, bytes):
            m = parse(item, self._dense_bytes, self._min_value_bytes, self._max_depth)
            rec.update(kind=_KIND_NAMES[m.kind], id=m.id, method=m.method)
            sid = m.session_id if m.kind is not Kind.BATCH else None
            rec["session"] = sid if type(sid) is str else None
            rec["size"] = len(item)
            if self.include_content:
                try:
                    rec["content"] = redact(item.decode("utf-8"))
                except UnicodeDecodeError:
                    rec["content_hex"] = item.hex()
            self._annotate(source, m, rec)
        else:
            rec.update(
                kind="oversize" if type(item) is Oversize else "partial",
                id=None,
                method=None,
                session=None,
                size=item.size_bytes,
            )
            if type(item) is Oversize:
                rec["complete"] = item.complete
        return rec

    def _annotate(self, source: Peer, m: Message, rec: Record) -> None:
        """Life-cycle facts a reader wants: peers' names, negotiated version, sessions made,
        a client request's W3C trace context."""
        body = m.body if type(m.body) is dict else None
        if body is None:
            return
        if m.kind is Kind.REQUEST and m.params is not None:
            meta = m.params.get("_meta")
            if type(meta) is dict and source is Peer.CLIENT:
                for key in TRACE_CONTEXT_KEYS:
                    value = meta.get(key)
                    if type(value) is str and len(value) <= MAX_TRACE_CONTEXT_CHARS:
                        rec[key] = value
            if m.method == "initialize":
                info = peer_info(m.params, "clientInfo")
                if type(info) is dict and type(info.get("name")) is str:
                    rec["peer"] = info["name"]
        elif m.kind is Kind.RESPONSE:
            entry = self._requests.get((source.other, m.id))
            result = body.get("result")
            if entry is None or type(result) is not dict:
                return
            if entry[0] == "initialize":
                info = peer_info(result, "agentInfo")
                if type(info) is dict and type(info.get("name")) is str:
                    rec["peer"] = info["name"]
                if type(result.get("protocolVersion")) is int:
                    rec["protocolVersion"] = result["protocolVersion"]
            elif (
                entry[0] in ("session/new", "session/fork") and type(result.get("sessionId")) is str
            ):
                rec["created"] = result["sessionId"]

    def _one(self, source: Peer, item: bytes | Oversize | Partial, now: float) -> list[Action]:
        held = self.hold
        before = held.held_frames() if held.total_messages else []
        n = self.n
        answered0 = n.answered
        rec = self._record(source, item, now)
        actions = super().receive(source, item, now)
        sends = self._sends(actions)
        events = _events(actions)
        if events:
            rec["events"] = events
        raw = item if type(item) is bytes else None
        decision: str | None = None
        other = source.other
        unmatched: list[tuple[Peer | None, bytes]] = []
        for to, data in sends:
            if decision is None and to is other and data == raw:
                decision = "forwarded"
            else:
                unmatched.append((to, data))
        gone = self._gone(before) if before else []
        if raw is not None and decision is None and held.total_messages:
            now_held = Counter(held.held_frames())
            was = Counter(before)
            if now_held[raw] > was[raw] - gone.count(raw):
                decision = "held"
        rest: list[tuple[Peer | None, bytes]] = []
        for to, data in unmatched:
            if decision is None and to is other and not (gone and data in gone):
                decision = "rewritten"
            elif decision is None and to is source and n.answered > answered0:
                decision = "refused" if _answer_is_error(data) else "answered"
            else:
                rest.append((to, data))
        if decision is None:
            decision = "dropped"
            if source is Peer.CLIENT and raw is not None and self._waits_for_store(raw):
                decision = "held"  # behind the budget store's answer (store_result)
                self._store_seqs.append(rec["seq"])
        rec["decision"] = decision
        if events:
            self._child_grants(rec, events)
        self._requests_seen(source, rec, now)
        if decision == "held" and raw is not None:
            self._held_seqs.setdefault(raw, []).append(rec["seq"])
        self.emit(rec)
        if gone:
            self._settle_gone(gone, rest, now)
        self._emit_originated(now)
        return actions

    def _child_grants(self, rec: Record, events: list[dict[str, Any]]) -> None:
        """A child announced or updated: what it grants now, and whether that is fresh."""
        for ev in events:
            if ev["event"] in ("child_announced", "child_updated"):
                child = self.registry.child(ev.get("sessionId"))  # type: ignore[arg-type]
                if child is None:
                    return
                caps = child.capabilities or {}
                keys = sorted(
                    k
                    for k, v in caps.items()
                    if k != "_meta" and type(v) is dict and len(k) <= MAX_GRANT_KEY_CHARS
                )
                rec["child"] = {
                    "sessionId": child.session_id,
                    "grants": keys[:MAX_GRANTS],
                    "fresh": child.fresh,
                }
                return

    def _requests_seen(self, source: Peer, rec: Record, now: float) -> None:
        """Remembers forwarded requests; gives a response its request's method and duration."""
        kind = rec["kind"]
        if kind == "request" and rec["decision"] in ("forwarded", "held", "rewritten"):
            if len(self._requests) < self._max_tracked:
                self._requests[(source, rec["id"])] = (
                    rec["method"],
                    rec["session"],
                    now,
                    rec["seq"],
                )
        elif kind in ("response", "error"):
            entry = self._requests.pop((source.other, rec["id"]), None)
            if entry is not None:
                rec["for_method"] = entry[0]
                rec["for_session"] = entry[1]
                rec["for_seq"] = entry[3]
                rec["duration"] = max(0.0, now - entry[2])

    def _settle_gone(
        self, gone: list[bytes], sends: list[tuple[Peer | None, bytes]], now: float
    ) -> None:
        """A record for each held message that left the hold buffer (released, dropped, ...)."""
        remaining = list(sends)
        for raw in gone:
            seqs = self._held_seqs.get(raw)
            of = seqs.pop(0) if seqs else None
            if seqs == []:
                del self._held_seqs[raw]
            m = parse(raw, self._dense_bytes, self._min_value_bytes, self._max_depth)
            decision = "dropped"
            for i, (to, data) in enumerate(remaining):
                if to is Peer.CLIENT and data == raw:
                    decision = "released"
                elif to is Peer.AGENT and m.kind is Kind.REQUEST and parse(data).id == m.id:
                    decision = "refused" if _answer_is_error(data) else "answered"
                else:
                    continue
                del remaining[i]
                break
            else:
                # a released message the engine rewrote (duplicate state cut out)
                for i, (to, _data) in enumerate(remaining):
                    if to is Peer.CLIENT:
                        decision = "released"
                        del remaining[i]
                        break
            self.emit(_later_record(of, now, Peer.AGENT, m, len(raw), decision))
