"""The configuration tree (docs/design.md section 3, "Config").

Every key has a default; the TOML loader
(:func:`acp_proxy.config.io.load_config`) is strict: unknown keys, wrong
types and bad values are :class:`ConfigError` naming the key.
:func:`acp_proxy.config.io.dump_config` writes the effective configuration
back as TOML. This module is pure data; it never imports trio.

Each section's value checks are its ``CHECKS`` table, run after ``__init__``
(:mod:`acp_proxy.config.checked`: attrs validators would be compiled into every
``__init__`` at import), and a section is made without slots
(:mod:`acp_proxy.config.records`); both for the start-up (issue 29).
"""

from __future__ import annotations

import fnmatch
import math
import re
from collections.abc import Mapping
from typing import Any, ClassVar, Literal, get_args

import attrs

from acp_proxy.config.checked import Check, CheckedRecord
from acp_proxy.config.credentials import SANDBOX_DENY_READ
from acp_proxy.config.records import FrozenRecord
from acp_proxy.config.toml_text import describe, dotted
from acp_proxy.errors import ConfigError

__all__ = [
    "DEFAULT_CHILD_MUTATIONS",
    "DEFAULT_CHILD_READ_ONLY",
    "DEFAULT_OPTIONS",
    "NEVER_ON_CHILD",
    "PERMISSION_METHODS",
    "RULE_MATCHERS",
    "AdmissionConfig",
    "AdmissionRule",
    "AuditConfig",
    "BudgetsConfig",
    "Config",
    "ConfigError",
    "DedupConfig",
    "ElicitationConfig",
    "EnforcementConfig",
    "HoldConfig",
    "LimitsConfig",
    "ListenConfig",
    "OnExpire",
    "OptionKind",
    "PermissionRule",
    "PermissionsConfig",
    "PolicyConfig",
    "ProcessConfig",
    "RuleAction",
    "RuleMethod",
    "SandboxConfig",
    "one_of",
]

#: Client method -> capability key that grants it on a child session (docs/protocol.md
#: section 4, an allowlist): only what the stabilized spec defines. ``cancel``
#: grants ``session/cancel``; ``tool_call/cancel`` and ``terminal/cancel`` also
#: need the child's ``cancel`` when they name a child (stricter than the spec).
DEFAULT_CHILD_MUTATIONS: dict[str, str] = {
    "session/cancel": "cancel",
    "tool_call/cancel": "cancel",
    "terminal/cancel": "cancel",
}

#: Client methods naming a child that always pass: read-only operations.
DEFAULT_CHILD_READ_ONLY: tuple[str, ...] = ("session/status",)

#: Methods that never reach a child, whatever the config says: the spec does not
#: allow a direct child load, resume or close.
NEVER_ON_CHILD: frozenset[str] = frozenset({"session/load", "session/resume", "session/close"})


class InvalidValue(ValueError):
    """A value failed a type or range check.

    Raised by the validators below (so direct construction, e.g.
    ``HoldConfig(timeout_seconds=-1)``, raises a ValueError naming the
    attribute) and by the converter's hooks;
    :func:`acp_proxy.config.io.config_from_dict` turns it into a
    :class:`ConfigError` with the full dotted key.

    Attributes:
        path: key parts below the attribute being structured (an ``int`` is
            a list index).
        detail: the message without the key.
    """

    def __init__(self, detail: str, path: tuple[str | int, ...] = ()) -> None:
        super().__init__(f"{dotted(path)}: {detail}" if path else detail)
        self.detail = detail
        self.path = path


def _positive(_inst: Any, attr: attrs.Attribute[Any], value: float) -> None:
    if value <= 0:
        raise InvalidValue(f"must be > 0, got {describe(value)}", (attr.name,))


#: Deepest nesting ``limits.max_nesting_depth`` may allow: the decoders count
#: nesting against the interpreter's recursion limit (1000) from the caller's
#: stack depth, so every message within the limit must decode at any depth the
#: proxy calls them from (a few hundred frames at most).
MAX_NESTING_DEPTH_CAP = 512


def _nesting_depth(_inst: Any, attr: attrs.Attribute[Any], value: int) -> None:
    if not 8 <= value <= MAX_NESTING_DEPTH_CAP:
        raise InvalidValue(
            f"must be between 8 and {MAX_NESTING_DEPTH_CAP}, got {describe(value)}", (attr.name,)
        )


def _non_negative(_inst: Any, attr: attrs.Attribute[Any], value: float) -> None:
    if value < 0:
        raise InvalidValue(f"must be >= 0, got {describe(value)}", (attr.name,))


def one_of(choices: tuple[str, ...], value: object) -> str | None:
    """Why ``value`` is not one of ``choices`` (a ``Literal``'s strings); ``None`` if it is."""
    if value in choices and isinstance(value, str):
        return None
    return f"must be one of {', '.join(map(repr, choices))}, got {describe(value)}"


def _member_of(literal: Any) -> Any:
    """A validator for a field typed ``literal`` (attrs itself does not check types)."""
    choices: tuple[str, ...] = get_args(literal)

    def check(_inst: Any, attr: attrs.Attribute[Any], value: object) -> None:
        problem = one_of(choices, value)
        if problem:
            raise InvalidValue(problem, (attr.name,))

    return check


def _mutation_table(_inst: Any, attr: attrs.Attribute[Any], value: dict[str, str]) -> None:
    for method, capability in value.items():
        if not method:
            raise InvalidValue("a client method name must not be empty", (attr.name, method))
        if not capability:
            raise InvalidValue("a capability key must not be empty", (attr.name, method))
        if capability == "_meta":
            raise InvalidValue("_meta never grants a mutation", (attr.name, method))
        if method in NEVER_ON_CHILD:
            raise InvalidValue(
                "the protocol does not allow this method on a child session", (attr.name, method)
            )


def _read_only_list(inst: Any, attr: attrs.Attribute[Any], value: list[str]) -> None:
    for index, method in enumerate(value):
        if not method:
            raise InvalidValue("a client method name must not be empty", (attr.name, index))
        if method in NEVER_ON_CHILD:
            raise InvalidValue(
                f"{method} is not read-only: the protocol does not allow it on a child session",
                (attr.name, index),
            )


# The patterns below are compiled on first use (``re``'s own cache), not at import:
# a default configuration never reads them (issue 29: start-up).
# scheme://host[:port], as a browser sends it in an Origin header (a trailing "/" is tolerated)
_ORIGIN = r"[a-z][a-z0-9+.-]*://(\[[0-9a-f:.]+\]|[a-z0-9._~%-]+)(:[0-9]{1,5})?/?"
# a host name, IPv4 address or bracketed IPv6 address, without a port
_HOST = r"\[[0-9a-f:.]+\]|[a-z0-9._-]+"


def _origins(_inst: Any, attr: attrs.Attribute[Any], value: list[str]) -> None:
    for index, origin in enumerate(value):
        if origin in ("*", "null"):
            raise InvalidValue(
                f"{origin!r} is not allowed: list each browser origin allowed, "
                "e.g. 'https://app.example'",
                (attr.name, index),
            )
        if not re.fullmatch(_ORIGIN, origin, re.IGNORECASE):
            raise InvalidValue(
                f"expected an origin such as 'https://app.example:8443', got {describe(origin)}",
                (attr.name, index),
            )


def _hosts(_inst: Any, attr: attrs.Attribute[Any], value: list[str]) -> None:
    for index, host in enumerate(value):
        if not re.fullmatch(_HOST, host, re.IGNORECASE):
            raise InvalidValue(
                "expected a host name or address without a port, such as 'acp.example' or "
                f"'[2001:db8::1]', got {describe(host)}",
                (attr.name, index),
            )


@attrs.frozen(eq=False, repr=False, slots=False)
class LimitsConfig(CheckedRecord):
    """Size limits.

    Attributes:
        max_message_bytes: largest JSON-RPC message accepted, either direction,
            in bytes (default 32 MiB, as the official SDKs).
        max_pending_requests: requests in flight tracked per direction; a
            request beyond it is answered with an error by the proxy.
        channel_messages: capacity of each internal memory channel, in
            messages (backpressure bound).
        max_children: child sessions kept in the registry; an announcement
            beyond it is dropped (fail closed: the child's traffic is then held
            and expires, and client mutations on it are refused).
        max_session_id_bytes: longest session id (UTF-8 bytes) the proxy
            accepts in ``params.sessionId`` or ``params.update.sessionId``; a
            message naming a longer one is refused (answered or dropped).
        max_sessions: ordinary sessions remembered as known; beyond it the
            oldest is forgotten (its later traffic is held again).
        max_child_bytes: bytes of tracked fields kept per child (title,
            description, capabilities, state, cwd, additional directories,
            ``_meta``, as the memory they hold, estimated); an update beyond it keeps only the
            child's capabilities (and drops those too if they alone are
            larger: fail closed, no grant).
        max_registry_bytes: bytes of tracked fields over all children; an
            announcement beyond it is dropped (fail closed), an update beyond
            it is truncated as above.
        max_dedup_bytes: bytes (in memory, estimated) of state snapshots remembered for duplicate
            removal (oldest channel forgotten first; a forgotten one only
            means its next report is delivered).
        max_pending_bytes: bytes of ids, methods and session ids of requests
            in flight, per direction; a request beyond it is answered with an
            error by the proxy.
        dense_message_bytes: a message longer than this must average at
            least ``min_bytes_per_value`` bytes per JSON value, else it is
            refused before it is decoded (memory for one message stays near
            twice its size).
        min_bytes_per_value: see ``dense_message_bytes``.
        max_nesting_depth: a message whose objects and arrays nest deeper than
            this is refused when it is classified (a request answered ``-32600``
            with id ``null``, anything else dropped and audited), on every path
            and at any stack depth (docs/design.md section 2); at most 512.
        max_workspace_bytes: bytes (memory, estimated) of the workspaces
            clients give (``cwd``, ``additionalDirectories``) kept for the
            permission rules, over all sessions and the requests opening them;
            a request whose workspace would go beyond it is refused with an
            error under its id.
    """

    max_message_bytes: int = 32 * 1024 * 1024
    max_pending_requests: int = 65536
    channel_messages: int = 64
    max_children: int = 10000
    max_session_id_bytes: int = 1024
    max_sessions: int = 4096
    max_child_bytes: int = 256 * 1024
    max_registry_bytes: int = 16 * 1024 * 1024
    max_dedup_bytes: int = 8 * 1024 * 1024
    max_pending_bytes: int = 8 * 1024 * 1024
    dense_message_bytes: int = 1024 * 1024
    min_bytes_per_value: int = 48
    max_nesting_depth: int = MAX_NESTING_DEPTH_CAP
    max_workspace_bytes: int = 8 * 1024 * 1024

    CHECKS: ClassVar[Mapping[str, Check]] = {
        "max_message_bytes": _positive,
        "max_pending_requests": _positive,
        "channel_messages": _positive,
        "max_children": _positive,
        "max_session_id_bytes": _positive,
        "max_sessions": _positive,
        "max_child_bytes": _positive,
        "max_registry_bytes": _positive,
        "max_dedup_bytes": _positive,
        "max_pending_bytes": _positive,
        "dense_message_bytes": _positive,
        "min_bytes_per_value": _positive,
        "max_nesting_depth": _nesting_depth,
        "max_workspace_bytes": _positive,
    }


#: What the hold buffer does with a session's traffic on timeout or overflow.
OnExpire = Literal["release", "drop"]


@attrs.frozen(eq=False, repr=False, slots=False)
class HoldConfig(CheckedRecord):
    """Hold buffer for agent traffic on sessions the client cannot know yet.

    Attributes:
        timeout_seconds: per held session, from its first held message.
        max_messages_per_session: held messages of one session.
        max_bytes: all held messages together, in bytes.
        max_sessions: sessions held at once; a new one beyond it expires the
            oldest held session (bounds per-session bookkeeping).
        on_expire: ``"release"`` or ``"drop"`` on timeout or overflow.
    """

    timeout_seconds: float = 10.0
    max_messages_per_session: int = 1000
    max_bytes: int = 16 * 1024 * 1024
    max_sessions: int = 1024
    on_expire: OnExpire = "release"

    CHECKS: ClassVar[Mapping[str, Check]] = {
        "timeout_seconds": _positive,
        "max_messages_per_session": _positive,
        "max_bytes": _positive,
        "max_sessions": _positive,
        "on_expire": _member_of(OnExpire),
    }


@attrs.frozen(eq=False, repr=False, slots=False)
class EnforcementConfig(CheckedRecord):
    """Capability enforcement on child sessions (docs/protocol.md section 4: an allowlist).

    A client message whose ``params.sessionId`` names a child reaches the
    agent only if its method is in ``child_read_only`` or maps, in
    ``child_mutations``, to a capability key the child's current
    ``capabilities`` grant. Everything else naming a child is refused.

    Attributes:
        reject_code: JSON-RPC error code of the proxy's rejection answer.
        child_read_only: client methods that always pass on a child (reads).
        child_mutations: client method -> capability key that grants it on a
            child. In TOML the user's table is merged over
            :data:`DEFAULT_CHILD_MUTATIONS`; a method mapped to ``""`` is
            removed from the table
            (:func:`acp_proxy.config.io.config_from_dict`). Methods in
            :data:`NEVER_ON_CHILD` and the key ``_meta`` are refused.

    Raises:
        InvalidValue: an empty name, a method in both lists, a method of
            :data:`NEVER_ON_CHILD`, or the capability key ``_meta``.
    """

    reject_code: int = -32601
    child_read_only: list[str] = attrs.field(factory=lambda: list(DEFAULT_CHILD_READ_ONLY))
    child_mutations: dict[str, str] = attrs.field(factory=lambda: dict(DEFAULT_CHILD_MUTATIONS))

    CHECKS: ClassVar[Mapping[str, Check]] = {
        "child_read_only": _read_only_list,
        "child_mutations": _mutation_table,
    }

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()  # each field's own check first
        for method in self.child_read_only:
            if method in self.child_mutations:
                raise InvalidValue(
                    f"{method} is also in child_mutations: a method is a read or a mutation",
                    ("child_read_only", self.child_read_only.index(method)),
                )


@attrs.frozen(eq=False, repr=False, slots=False)
class DedupConfig(FrozenRecord):
    """Duplicate state report removal.

    Attributes:
        state_reports: remove state reports that repeat the last one delivered.
    """

    state_reports: bool = True


@attrs.frozen(eq=False, repr=False, slots=False)
class AuditConfig(FrozenRecord):
    """Audit log.

    Attributes:
        path: JSON-lines audit log file; ``""`` = off. Relative in a config
            file: from that file's directory.
        include_content: also log message content (off by default).
        required: a record that cannot be written stops the proxy (fail
            closed: nothing more is forwarded, requests are answered with an
            error, the exit status is 1); ``False``: the loss is logged once
            and counted, and the relay goes on.
        hmac_key_file: a file whose bytes key the chain (HMAC-SHA256 instead
            of SHA-256); ``""`` = a plain chain. ``audit verify`` then needs it.
    """

    path: str = ""
    include_content: bool = False
    required: bool = False
    hmac_key_file: str = ""


@attrs.frozen(eq=False, repr=False, slots=False)
class TraceConfig(FrozenRecord):
    """Wire trace (docs/trace-format.md).

    Attributes:
        path: JSON-lines trace file, one record per message; ``""`` = off.
        include_content: also record each message's text, secrets redacted
            (needed by ``acp-proxy replay``).
    """

    path: str = ""
    include_content: bool = False


@attrs.frozen(eq=False, repr=False, slots=False)
class TelemetryConfig(FrozenRecord):
    """Metrics and status; OpenTelemetry.

    Attributes:
        metrics: ``HOST:PORT`` serving ``/metrics``, ``/healthz``, ``/readyz``
            and ``/status``; ``""`` = off.
        enabled: export spans and metrics over OTLP/HTTP (the ``otel`` extra;
            where to is the ``OTEL_*`` environment's business).
    """

    metrics: str = ""
    enabled: bool = False


@attrs.frozen(eq=False, repr=False, slots=False)
class ProcessConfig(CheckedRecord):
    """The agent subprocess.

    Attributes:
        grace_seconds: after the client's EOF the agent's stdin is closed;
            the agent is terminated if it has not exited within this time.
        kill_after_seconds: after terminate, killed if still alive.
    """

    grace_seconds: float = 5.0
    kill_after_seconds: float = 5.0

    CHECKS: ClassVar[Mapping[str, Check]] = {
        "grace_seconds": _non_negative,
        "kill_after_seconds": _non_negative,
    }


@attrs.frozen(eq=False, repr=False, slots=False)
class ListenConfig(CheckedRecord):
    """WebSocket listener (``--listen``).

    Attributes:
        token_file: file holding the bearer token; required for non-loopback binds.
        tokens_file: file of named principals, one ``NAME TOKEN`` or
            ``NAME sha256:HEX`` per line (``--tokens-file``); mode 0600 or
            stricter. A client presenting one is that principal.
        allowed_origins: browser origins (``scheme://host[:port]``, compared
            without case) whose upgrade requests are accepted; an upgrade with
            an ``Origin`` header not listed is refused (403). Empty (the
            default): no browser origin. Requests without ``Origin`` (native
            clients) are not subject to it.
        allowed_hosts: host names or addresses (no port; IPv6 in brackets)
            accepted in the ``Host`` header besides the bound address (and,
            on a loopback bind, ``localhost``, ``127.0.0.1``, ``[::1]``);
            any other ``Host`` is refused (421), against DNS rebinding. A
            non-loopback bind (which requires a token) with an empty list
            does not check ``Host``.
        max_connections: concurrent connections, each with its own agent.
        max_pending_handshakes: TCP connections beyond ``max_connections`` held
            open at once (upgrade handshakes in progress); one more is closed at once.
        ping_interval_seconds: keepalive ping period; 0 = off.
        ping_timeout_seconds: a peer not answering a ping within this is closed.
    """

    token_file: str = ""
    tokens_file: str = ""
    allowed_origins: list[str] = attrs.field(factory=list)
    allowed_hosts: list[str] = attrs.field(factory=list)
    max_connections: int = 16
    max_pending_handshakes: int = 64
    ping_interval_seconds: float = 20.0
    ping_timeout_seconds: float = 20.0

    CHECKS: ClassVar[Mapping[str, Check]] = {
        "allowed_origins": _origins,
        "allowed_hosts": _hosts,
        "max_connections": _positive,
        "max_pending_handshakes": _positive,
        "ping_interval_seconds": _non_negative,
        "ping_timeout_seconds": _positive,
    }


# --- permission rules (issue 19) ----------------------------------------------

#: What a rule does with a request it matches.
RuleAction = Literal["allow", "deny", "ask"]
#: The agent->client requests a rule can govern.
RuleMethod = Literal[
    "session/request_permission", "fs/read_text_file", "fs/write_text_file", "terminal/create"
]
#: ``PermissionOption.kind`` values a rule may answer with.
OptionKind = Literal["allow_once", "allow_always", "reject_once", "reject_always"]

PERMISSION_METHODS: tuple[str, ...] = (
    "session/request_permission",
    "fs/read_text_file",
    "fs/write_text_file",
    "terminal/create",
)
_ACTIONS = ("allow", "deny", "ask")
_OPTION_KINDS = ("allow_once", "allow_always", "reject_once", "reject_always")
#: The option kinds an allow / deny rule answers with when it names none.
DEFAULT_OPTIONS: dict[str, tuple[str, ...]] = {
    "allow": ("allow_once",),
    "deny": ("reject_once", "reject_always"),
}

# Matchers that read the requester (any method), a tool_call subject, a command.
_WHO = ("session", "child", "parent")
_TOOL = ("tool_name", "tool_kind", "tool_title", "raw_input")
_COMMAND = ("command", "cwd")
#: Matchers each method's request can satisfy; any other can never match.
RULE_MATCHERS: dict[str, tuple[str, ...]] = {
    # path on a request_permission reads the tool call's locations and diff paths
    "session/request_permission": (*_WHO, *_TOOL, "path", *_COMMAND, "inside_workspace"),
    "fs/read_text_file": (*_WHO, "path", "inside_workspace"),
    "fs/write_text_file": (*_WHO, "path", "inside_workspace"),
    "terminal/create": (*_WHO, *_COMMAND, "inside_workspace"),
}
# Glob fields matched against an absolute path (a pattern that cannot match one is an error).
_PATH_GLOBS = frozenset({"path", "cwd"})


def glob_problem(pattern: str, *, path: bool = False) -> str | None:
    """Why ``pattern`` is not a usable glob (:func:`fnmatch.fnmatchcase` syntax), or ``None``.

    Refused: an empty pattern, a ``[`` without its ``]`` (fnmatch would read
    it as a literal ``[``: write ``[[]``), a set that compiles to no valid
    expression; with ``path``, a pattern that cannot match an absolute path
    (it must start with ``/`` or a wildcard; ``~`` is not expanded).
    """
    if not pattern:
        return "an empty pattern matches nothing"
    i, n = 0, len(pattern)
    while i < n:
        if pattern[i] == "[":
            j = i + 1
            if j < n and pattern[j] == "!":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            close = pattern.find("]", j)
            if close < 0:
                return f"{describe(pattern)}: '[' without ']' (write [[] for a literal '[')"
            i = close
        i += 1
    # Only a set can compile to an invalid expression: the rest of a pattern is escaped
    # or '*' and '?' (every Config() checks its default globs: no compile for those).
    try:
        if "[" in pattern:
            re.compile(fnmatch.translate(pattern))
    except re.error as exc:
        return f"{describe(pattern)}: invalid pattern ({exc})"
    if path and pattern[0] == "~":
        return (
            f"{describe(pattern)}: '~' is not expanded; paths are absolute "
            "(write e.g. '**/.ssh/**' or '/home/me/.ssh/**')"
        )
    if path and pattern[0] not in "/*?[":
        return f"{describe(pattern)}: paths are absolute: start with '/' or a wildcard"
    return None


def _check_globs(patterns: list[str], key: tuple[str, ...], *, path: bool = False) -> None:
    """Raises :class:`InvalidValue` at ``key`` for an empty list or an unusable pattern."""
    if not patterns:
        raise InvalidValue("an empty list never matches", key)
    for index, pattern in enumerate(patterns):
        problem = glob_problem(pattern, path=path)
        if problem is not None:
            raise InvalidValue(problem, (*key, index))


def _globs(_inst: Any, attr: attrs.Attribute[Any], value: list[str] | None) -> None:
    if value is not None:
        _check_globs(value, (attr.name,), path=attr.name in _PATH_GLOBS)


def _raw_input(_inst: Any, attr: attrs.Attribute[Any], value: dict[str, list[str]] | None) -> None:
    if value is None:
        return
    if not value:
        raise InvalidValue("an empty table: name at least one rawInput key", (attr.name,))
    for key, patterns in value.items():
        if not key:
            raise InvalidValue("a rawInput key must not be empty", (attr.name, key))
        _check_globs(patterns, (attr.name, key))


def _one_of(choices: tuple[str, ...]) -> Any:
    def check(_inst: Any, attr: attrs.Attribute[Any], value: str) -> None:
        if value not in choices:
            expected = ", ".join(repr(c) for c in choices)
            raise InvalidValue(f"must be one of {expected}, got {describe(value)}", (attr.name,))

    return check


def _optional(check: Check) -> Check:
    """``check`` for a value that is not ``None`` (``attrs.validators.optional``)."""

    def optional(inst: Any, attr: attrs.Attribute[Any], value: object) -> None:
        if value is not None:
            check(inst, attr, value)

    return optional


def _option_kinds(_inst: Any, attr: attrs.Attribute[Any], value: list[OptionKind] | None) -> None:
    if value is None:
        return
    if not value:
        raise InvalidValue("an empty list: name at least one option kind", (attr.name,))
    for index, kind in enumerate(value):
        _one_of(_OPTION_KINDS)(_inst, attr, kind)
        if kind in value[:index]:
            raise InvalidValue(f"{kind!r} is listed twice", (attr.name, index))


def _rule_name(_inst: Any, attr: attrs.Attribute[Any], value: str | None) -> None:
    if value is not None and not value.strip():
        raise InvalidValue("a rule name must not be empty", (attr.name,))


def _timeout(_inst: Any, attr: attrs.Attribute[Any], value: float | None) -> None:
    if value is not None and not (math.isfinite(value) and value > 0):
        raise InvalidValue(f"must be a finite number > 0, got {describe(value)}", (attr.name,))


@attrs.frozen(eq=False, repr=False, slots=False)
class PermissionRule(CheckedRecord):
    """One ``[[permissions.rules]]`` entry (``config/examples/permissions.toml``).

    A rule applies to one agent->client ``method`` and matches a request when
    every matcher it gives matches (AND); a matcher left out (``None``) is
    not checked. String matchers are lists of :func:`fnmatch.fnmatchcase`
    globs (``*`` also crosses ``/``), matching when any one does. The
    semantics are in :mod:`acp_proxy.core.session.permissions`.

    Attributes:
        action: ``"allow"``, ``"deny"`` or ``"ask"``.
        name: names the rule in audit records, refusals and errors (unique).
        method: the request it governs (:data:`PERMISSION_METHODS`).
        session: globs on ``params.sessionId``.
        child: the session is (True) / is not (False) an announced child.
        parent: globs on a child's parent session id (implies a child).
        tool_name, tool_kind, tool_title: globs on the tool call's ``name``,
            ``kind``, ``title`` (v2 ``subject.toolCall``, v1 ``toolCall``).
        raw_input: ``rawInput`` top-level key -> globs on its value.
        command: globs on the command line (v2 command subject;
            ``terminal/create`` command and args joined by spaces).
        cwd: globs on the command's working directory (normalised).
        path: globs on an ``fs/*`` request's path (normalised); on a
            request_permission, on every path of the tool call's ``locations``
            and ``diff`` content (a deny matches any, an allow needs all).
        inside_workspace: the path or cwd is (True) / is not (False) inside
            the session's cwd or additional directories.
        option: option kinds to answer with, in order of preference
            (``None``: :data:`DEFAULT_OPTIONS` of the action).
        ask_timeout_seconds: ``ask`` rules on ``session/request_permission``
            only: answer ``cancelled`` when the client has not answered by then.

    Raises:
        InvalidValue: a bad value, or a rule that can never match or whose
            keys contradict its action or method.
    """

    action: RuleAction
    name: str | None = None
    method: RuleMethod = "session/request_permission"
    session: list[str] | None = None
    child: bool | None = None
    parent: list[str] | None = None
    tool_name: list[str] | None = None
    tool_kind: list[str] | None = None
    tool_title: list[str] | None = None
    raw_input: dict[str, list[str]] | None = None
    command: list[str] | None = None
    cwd: list[str] | None = None
    path: list[str] | None = None
    inside_workspace: bool | None = None
    option: list[OptionKind] | None = None
    ask_timeout_seconds: float | None = None

    CHECKS: ClassVar[Mapping[str, Check]] = {
        "action": _one_of(_ACTIONS),
        "name": _rule_name,
        "method": _one_of(PERMISSION_METHODS),
        "session": _globs,
        "parent": _globs,
        "tool_name": _globs,
        "tool_kind": _globs,
        "tool_title": _globs,
        "raw_input": _raw_input,
        "command": _globs,
        "cwd": _globs,
        "path": _globs,
        "option": _option_kinds,
        "ask_timeout_seconds": _timeout,
    }

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()  # each field's own check first
        usable = RULE_MATCHERS[self.method]
        given = [f.name for f in attrs.fields(PermissionRule) if f.name in _MATCHER_NAMES]
        given = [name for name in given if getattr(self, name) is not None]
        for name in given:
            if name not in usable:
                raise InvalidValue(
                    f"can never match: a {self.method} request has no {_SUBJECT[name]}", (name,)
                )
        tool = [name for name in given if name in (*_TOOL, "path")]
        command = [name for name in given if name in (*_COMMAND, "inside_workspace")]
        if self.method == "session/request_permission" and tool and command:
            raise InvalidValue(
                f"can never match: {tool[0]} reads a tool_call subject and {command[0]} a "
                "command subject, and a request has one subject",
                (command[0],),
            )
        if self.child is False and self.parent is not None:
            raise InvalidValue("can never match: parent implies child = true", ("parent",))
        if self.option is not None:
            if self.method != "session/request_permission":
                raise InvalidValue(
                    f"only session/request_permission is answered with an option, not "
                    f"{self.method}",
                    ("option",),
                )
            if self.action == "ask":
                raise InvalidValue(
                    "an ask rule forwards the request: option is for allow and deny", ("option",)
                )
            prefix = "allow_" if self.action == "allow" else "reject_"
            for index, kind in enumerate(self.option):
                if not kind.startswith(prefix):
                    raise InvalidValue(
                        f"a {self.action} rule answers with {prefix}once or {prefix}always, "
                        f"not {kind!r}",
                        ("option", index),
                    )
        if self.ask_timeout_seconds is not None:
            if self.action != "ask":
                raise InvalidValue(
                    f"only an ask rule waits for the client, not {self.action!r}",
                    ("ask_timeout_seconds",),
                )
            if self.method != "session/request_permission":
                raise InvalidValue(
                    f"only session/request_permission can time out (answered cancelled), "
                    f"not {self.method}",
                    ("ask_timeout_seconds",),
                )

    @property
    def options(self) -> tuple[str, ...]:
        """The option kinds to answer with, in order of preference (empty for ``ask``)."""
        if self.option is not None:
            return tuple(self.option)
        return DEFAULT_OPTIONS.get(self.action, ())


_MATCHER_NAMES = frozenset((*_WHO, *_TOOL, *_COMMAND, "path", "inside_workspace"))
#: What a matcher reads, for "can never match" messages.
_SUBJECT = {
    "session": "session",
    "child": "session",
    "parent": "session",
    "tool_name": "tool call (tool_name reads session/request_permission)",
    "tool_kind": "tool call (tool_kind reads session/request_permission)",
    "tool_title": "tool call (tool_title reads session/request_permission)",
    "raw_input": "tool call (raw_input reads session/request_permission)",
    "command": "command line (command reads terminal/create or session/request_permission)",
    "cwd": "command cwd (cwd reads terminal/create or session/request_permission)",
    "path": "path (path reads fs/read_text_file, fs/write_text_file and the tool call "
    "locations of session/request_permission)",
    "inside_workspace": "path or cwd",
}


def _unique_names(_inst: Any, attr: attrs.Attribute[Any], value: list[PermissionRule]) -> None:
    seen: dict[str, int] = {}
    for index, rule in enumerate(value):
        if rule.name is None:
            continue
        if rule.name in seen:
            raise InvalidValue(
                f"rule name {rule.name!r} is already used by rules[{seen[rule.name]}]",
                (attr.name, index, "name"),
            )
        seen[rule.name] = index


@attrs.frozen(eq=False, repr=False, slots=False)
class PermissionsConfig(CheckedRecord):
    """What an agent may ask of the client (issue 19; ``[[permissions.rules]]``).

    Attributes:
        rules: evaluated in order; if any matching rule denies, the first
            matching deny decides, else the first matching rule; none = ask.
        refuse_code: JSON-RPC error code of the proxy's answer to a refused
            ``fs/*`` or ``terminal/create`` request.
    """

    rules: list[PermissionRule] = attrs.field(factory=list)
    refuse_code: int = -32600

    CHECKS: ClassVar[Mapping[str, Check]] = {
        "rules": _unique_names,
    }


# --- budgets and the policy mode (issue 28) -------------------------------------

#: What a store that cannot be reached means (``budgets.store_fail``).
StoreFail = Literal["closed", "open"]
#: ``policy.mode``: ``"enforce"`` applies the user's rules; ``"observe"`` only audits them.
PolicyMode = Literal["enforce", "observe"]

_STORE_URL = r"redis://(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9._-]+):([0-9]{1,5})(?:/([0-9]{1,2}))?"


def _store_url(_inst: Any, attr: attrs.Attribute[Any], value: str) -> None:
    if value and not re.fullmatch(_STORE_URL, value):
        raise InvalidValue(
            f'expected "" (count in this proxy) or redis://HOST:PORT/DB, got {describe(value)}',
            (attr.name,),
        )


@attrs.frozen(eq=False, repr=False, slots=False)
class BudgetsConfig(CheckedRecord):
    """Runaway control (issue 28; README "Budgets"): limits counted per root session
    (a child's traffic counts toward the session at the top of its tree). ``0`` turns
    a limit off.

    Attributes:
        prompts_per_window: client ``session/prompt`` requests allowed per
            ``window_s``; beyond it the proxy answers an error naming the budget
            and when it resets.
        window_s: the prompt (and shared token) window, seconds.
        max_tool_calls_per_turn: ``tool_call`` updates allowed in one prompt turn
            (the root session's and its children's); one more and the proxy sends
            ``session/cancel`` for the root and refuses the turn's permission requests.
        max_turn_s: a prompt turn not answered after this many seconds is cancelled
            the same way.
        max_tokens: once ``usage_update`` reports more tokens used than this, the
            next prompt is refused.
        repeat_limit: the same tool call (kind, title, raw input) asked for
            permission more than this many times in a session is answered by the
            proxy with a reject option (or ``cancelled``), never shown to the client.
        store: ``""`` counts in this proxy; ``redis://HOST:PORT/DB`` keeps the prompt
            and token counters in Redis, shared by every proxy using the same ``key``.
        key: the shared counters' name in the store; ``""``: the connection's
            principal, else ``"anonymous"``.
        key_prefix: prefix of every Redis key the proxy writes.
        store_fail: ``"closed"`` refuses what needs the store while it cannot be
            reached; ``"open"`` counts in this proxy meanwhile (logged once).
        store_timeout_s: one store call's connect and reply timeout, seconds.
    """

    prompts_per_window: int = 0
    window_s: float = 3600.0
    max_tool_calls_per_turn: int = 0
    max_turn_s: float = 0.0
    max_tokens: int = 0
    repeat_limit: int = 0
    store: str = ""
    key: str = ""
    key_prefix: str = "acp-proxy:budget:"
    store_fail: StoreFail = "closed"
    store_timeout_s: float = 2.0

    CHECKS: ClassVar[Mapping[str, Check]] = {
        "prompts_per_window": _non_negative,
        "window_s": _positive,
        "max_tool_calls_per_turn": _non_negative,
        "max_turn_s": _non_negative,
        "max_tokens": _non_negative,
        "repeat_limit": _non_negative,
        "store": _store_url,
        "store_fail": _member_of(StoreFail),
        "store_timeout_s": _positive,
    }


@attrs.frozen(eq=False, repr=False, slots=False)
class PolicyConfig(CheckedRecord):
    """How the user's rules apply (issue 28).

    Attributes:
        mode: ``"enforce"``; or ``"observe"``: permission rules and budgets decide
            and audit as usual (``would_block``, the rule's name) but every message
            is forwarded as if no rule matched. The protocol's own rules (the child
            allowlist, the hold buffer, batches) are never relaxed.
    """

    mode: PolicyMode = "enforce"

    CHECKS: ClassVar[Mapping[str, Check]] = {
        "mode": _member_of(PolicyMode),
    }


#: ``[sandbox] writable`` default: the state directories of the common agents
#: (Claude Code, Codex, Gemini CLI), outside which they fail to start. Not the user's
#: caches (``~/.cache``, ``~/.npm``, ``~/.local/state``): what the agent planted there
#: (an ``npx`` package, a pip wheel) would run unconfined later; the agent gets a
#: private cache instead. A writable agent directory still lets the agent change what
#: that agent runs next time (README, threat model).
DEFAULT_SANDBOX_WRITABLE: tuple[str, ...] = (
    "~/.claude",
    "~/.claude.json",
    "~/.codex",
    "~/.gemini",
)

_DOMAIN = (
    r"^(\*\.)?[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*(:[0-9]{1,5})?$|^\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?$"
)


def _sandbox_paths(_inst: Any, attr: attrs.Attribute[Any], value: list[str]) -> None:
    for index, path in enumerate(value):
        if not isinstance(path, str) or not path or "\0" in path:
            raise InvalidValue(f"expected a path, got {describe(path)}", (attr.name, index))
        if attr.name != "workspace" and not path.startswith(("/", "~/")):
            raise InvalidValue(
                f"must be absolute or start with ~/, got {describe(path)}", (attr.name, index)
            )


def _domains(_inst: Any, attr: attrs.Attribute[Any], value: list[str]) -> None:
    for index, domain in enumerate(value):
        if not isinstance(domain, str) or not re.match(_DOMAIN, domain):
            raise InvalidValue(
                f"expected a domain (example.com, *.example.com, host:port), got "
                f"{describe(domain)}",
                (attr.name, index),
            )


#: ``[sandbox] env_deny`` default: environment variable names that look like secrets
#: (globs, compared case-insensitively), stripped from the agent's environment.
DEFAULT_SANDBOX_ENV_DENY: tuple[str, ...] = (
    "*TOKEN*",
    "*SECRET*",
    "*PASSWORD*",
    "*PASSWD*",
    "*KEY*",
    "*CREDENTIAL*",
    "*_AUTH",
    "*_AUTH_*",
    "*COOKIE*",
    "*_PAT",  # personal access tokens (GITHUB_PAT)
    "*_PAT_*",
    "OTEL_EXPORTER_OTLP*HEADERS",  # the collector's credentials (the proxy's own)
    "*DATABASE_URL*",  # connection strings with a password in them
    "REDIS_URL",
    "*_DSN",  # SENTRY_DSN and the like carry a key
)

#: ``[sandbox] env_allow`` default: the model-API credentials the common agents need
#: (Claude Code, Codex, Gemini CLI), passed even though they match ``env_deny``.
DEFAULT_SANDBOX_ENV_ALLOW: tuple[str, ...] = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "OPENAI_API_KEY",
    "CODEX_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
)


def _name_globs(_inst: Any, attr: attrs.Attribute[Any], value: list[str]) -> None:
    for index, pattern in enumerate(value):
        problem = (
            glob_problem(pattern)
            if isinstance(pattern, str)
            else f"expected a name glob, got {describe(pattern)}"
        )
        if problem is not None:
            raise InvalidValue(problem, (attr.name, index))


def _engine(_inst: Any, attr: attrs.Attribute[Any], value: str) -> None:
    if not value.strip():
        raise InvalidValue('must name the engine (e.g. "srt")', (attr.name,))


@attrs.frozen(eq=False, repr=False, slots=False)
class SandboxConfig(CheckedRecord):
    """The OS sandbox the agent runs in (issue 24; docs/threat-model in the README).

    Attributes:
        enabled: launch the agent through the engine (``--sandbox`` turns it on).
        engine_command: the engine executable (Anthropic Sandbox Runtime ``srt``),
            a name looked up on ``PATH`` or a path.
        workspace: the agent's read-write roots; relative ones are taken from
            the proxy's working directory; empty = that directory. With the
            sandbox on, ``session/new|load|resume|fork`` outside them is refused.
        writable: more read-write paths for the agent's own state (``~/``
            allowed).
        deny_read: paths the agent may not read anywhere (credentials;
            ``~/`` allowed); the proxy's own files are always added.
        allowed_domains: hosts the agent may reach through the engine's
            proxies (``example.com``, ``*.example.com``, ``host:port``); empty =
            no network at all.
        required: fail closed: an engine that is missing or cannot start means
            the agent never starts (false: it starts unconfined, with a warning).
        env_deny: environment variable names (globs, case-insensitive) stripped
            from the environment the engine and the agent start with.
        env_allow: names passed even though they match ``env_deny`` (the
            agents' model-API keys).
    """

    enabled: bool = False
    engine_command: str = "srt"
    workspace: list[str] = attrs.field(factory=list)
    writable: list[str] = attrs.field(factory=lambda: list(DEFAULT_SANDBOX_WRITABLE))
    deny_read: list[str] = attrs.field(factory=lambda: list(SANDBOX_DENY_READ))
    allowed_domains: list[str] = attrs.field(factory=list)
    required: bool = True
    env_deny: list[str] = attrs.field(factory=lambda: list(DEFAULT_SANDBOX_ENV_DENY))
    env_allow: list[str] = attrs.field(factory=lambda: list(DEFAULT_SANDBOX_ENV_ALLOW))

    CHECKS: ClassVar[Mapping[str, Check]] = {
        "engine_command": _engine,
        "workspace": _sandbox_paths,
        "writable": _sandbox_paths,
        "deny_read": _sandbox_paths,
        "allowed_domains": _domains,
        "env_deny": _name_globs,
        "env_allow": _name_globs,
    }


# --- admission and elicitation (issue 26) -------------------------------------

McpStdio = Literal["refuse", "allow"]
AppliesTo = Literal["remote", "all"]
SecretFields = Literal["pass", "decline"]


def _url_globs(_inst: Any, attr: attrs.Attribute[Any], value: list[str] | None) -> None:
    """Each entry an ``http(s)://HOST[:PORT]/PATH`` glob (host globbed by labels)."""
    if value is None:
        return
    for index, pattern in enumerate(value):
        problem = glob_problem(pattern) if pattern else "an empty pattern never matches"
        if problem is None:
            scheme, sep, rest = pattern.partition("://")
            if not sep or scheme.lower() not in ("http", "https") or not rest:
                problem = f"{describe(pattern)}: write http://HOST/PATH or https://HOST/PATH"
            elif "@" in rest.split("/", 1)[0]:
                problem = f"{describe(pattern)}: no user name before the host"
        if problem is not None:
            raise InvalidValue(problem, (attr.name, index))


def _host_globs(_inst: Any, attr: attrs.Attribute[Any], value: list[str]) -> None:
    for index, pattern in enumerate(value):
        problem = glob_problem(pattern) if pattern else "an empty pattern never matches"
        if problem is None and any(c in pattern for c in "/:@ "):
            problem = f"{describe(pattern)}: a host name only (no scheme, port, path or user)"
        if problem is not None:
            raise InvalidValue(problem, (attr.name, index))


def _roots(_inst: Any, attr: attrs.Attribute[Any], value: list[str] | None) -> None:
    for index, root in enumerate(value or ()):
        if not root.startswith("/"):
            raise InvalidValue(
                f"{describe(root)}: a root is an absolute directory", (attr.name, index)
            )


def _principals(_inst: Any, attr: attrs.Attribute[Any], value: list[str]) -> None:
    _check_globs(value, (attr.name,))


@attrs.frozen(eq=False, repr=False, slots=False)
class AdmissionRule(CheckedRecord):
    """One ``[[admission.rules]]`` entry: the defaults refined for some principals.

    Attributes:
        principal: globs on the connection's principal name (``--tokens-file``);
            a connection without one matches no rule.
        name: names the rule in refusals and audit records (default ``rules[N]``).
        mcp_stdio, mcp_http_allow, roots: as in :class:`AdmissionConfig`; a key
            left out keeps the section's value.
    """

    principal: list[str]
    name: str | None = None
    mcp_stdio: McpStdio | None = None
    mcp_http_allow: list[str] | None = None
    roots: list[str] | None = None

    CHECKS: ClassVar[Mapping[str, Check]] = {
        "principal": _principals,
        "name": _rule_name,
        "mcp_stdio": _optional(_one_of(("refuse", "allow"))),
        "mcp_http_allow": _url_globs,
        "roots": _roots,
    }


@attrs.frozen(eq=False, repr=False, slots=False)
class AdmissionConfig(CheckedRecord):
    """What a client may open a session with (issue 26; docs/protocol.md section 8).

    Applies to ``session/new``, ``session/load``, ``session/resume`` and
    ``session/fork``; a refused request is answered with an error naming the
    rule and never reaches the agent.

    Attributes:
        applies_to: ``"remote"`` (connections of ``--listen``; the stdio
            drop-in's editor is trusted) or ``"all"``.
        mcp_stdio: ``"refuse"`` or ``"allow"`` MCP servers given as a command.
        mcp_http_allow: URL globs an ``http`` / ``sse`` MCP server must match
            (the host compared by labels, like :attr:`ElicitationConfig.url_hosts`).
        roots: absolute directories ``cwd`` and every ``additionalDirectories``
            entry must lie in (after ``..`` and symlinks); ``[]`` = anywhere.
        refuse_code: JSON-RPC error code of the refusal.
        rules: per-principal refinements, first match wins.
    """

    applies_to: AppliesTo = "remote"
    mcp_stdio: McpStdio = "refuse"
    mcp_http_allow: list[str] = attrs.field(factory=list)
    roots: list[str] = attrs.field(factory=list)
    refuse_code: int = -32602
    rules: list[AdmissionRule] = attrs.field(factory=list)

    CHECKS: ClassVar[Mapping[str, Check]] = {
        "applies_to": _one_of(("remote", "all")),
        "mcp_stdio": _one_of(("refuse", "allow")),
        "mcp_http_allow": _url_globs,
        "roots": _roots,
        "rules": _unique_names,
    }


@attrs.frozen(eq=False, repr=False, slots=False)
class ElicitationConfig(CheckedRecord):
    """What an agent may elicit from the user (issue 26; docs/protocol.md section 8).

    Attributes:
        url_hosts: host globs a URL-mode ``elicitation/create`` may point to
            (the parsed host; ``*.example.com`` is any name under it);
            ``["*"]`` (default) any host, ``[]`` none.
        secret_fields: ``"decline"`` a form-mode request asking for a field
            that names or describes a secret; ``"pass"`` (default) forwards it.
    """

    url_hosts: list[str] = attrs.field(factory=lambda: ["*"])
    secret_fields: SecretFields = "pass"

    CHECKS: ClassVar[Mapping[str, Check]] = {
        "url_hosts": _host_globs,
        "secret_fields": _one_of(("pass", "decline")),
    }


@attrs.frozen(eq=False, repr=False, slots=False)
class Config(FrozenRecord):
    """The whole configuration (``config/default.toml`` documents every key)."""

    limits: LimitsConfig = attrs.field(factory=LimitsConfig)
    hold: HoldConfig = attrs.field(factory=HoldConfig)
    enforcement: EnforcementConfig = attrs.field(factory=EnforcementConfig)
    dedup: DedupConfig = attrs.field(factory=DedupConfig)
    audit: AuditConfig = attrs.field(factory=AuditConfig)
    trace: TraceConfig = attrs.field(factory=TraceConfig)
    telemetry: TelemetryConfig = attrs.field(factory=TelemetryConfig)
    process: ProcessConfig = attrs.field(factory=ProcessConfig)
    listen: ListenConfig = attrs.field(factory=ListenConfig)
    permissions: PermissionsConfig = attrs.field(factory=PermissionsConfig)
    budgets: BudgetsConfig = attrs.field(factory=BudgetsConfig)
    policy: PolicyConfig = attrs.field(factory=PolicyConfig)
    sandbox: SandboxConfig = attrs.field(factory=SandboxConfig)
    admission: AdmissionConfig = attrs.field(factory=AdmissionConfig)
    elicitation: ElicitationConfig = attrs.field(factory=ElicitationConfig)
