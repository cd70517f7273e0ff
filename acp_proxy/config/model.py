"""The configuration tree (docs/design.md section 3, "Config").

Every key has a default; the TOML loader
(:func:`acp_proxy.config.io.load_config`) is strict: unknown keys, wrong
types and bad values are :class:`ConfigError` naming the key.
:func:`acp_proxy.config.io.dump_config` writes the effective configuration
back as TOML. This module is pure data; it never imports trio.
"""

from __future__ import annotations

import re
from typing import Any, Literal, get_args

import attrs

from acp_proxy.config.toml_text import describe, dotted
from acp_proxy.errors import ConfigError

__all__ = [
    "DEFAULT_CHILD_MUTATIONS",
    "DEFAULT_CHILD_READ_ONLY",
    "NEVER_ON_CHILD",
    "AuditConfig",
    "Config",
    "ConfigError",
    "DedupConfig",
    "EnforcementConfig",
    "HoldConfig",
    "LimitsConfig",
    "ListenConfig",
    "OnExpire",
    "ProcessConfig",
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


# scheme://host[:port], as a browser sends it in an Origin header (a trailing "/" is tolerated)
_ORIGIN = re.compile(
    r"[a-z][a-z0-9+.-]*://(\[[0-9a-f:.]+\]|[a-z0-9._~%-]+)(:[0-9]{1,5})?/?", re.IGNORECASE
)
# a host name, IPv4 address or bracketed IPv6 address, without a port
_HOST = re.compile(r"\[[0-9a-f:.]+\]|[a-z0-9._-]+", re.IGNORECASE)


def _origins(_inst: Any, attr: attrs.Attribute[Any], value: list[str]) -> None:
    for index, origin in enumerate(value):
        if origin in ("*", "null"):
            raise InvalidValue(
                f"{origin!r} is not allowed: list each browser origin allowed, "
                "e.g. 'https://app.example'",
                (attr.name, index),
            )
        if not _ORIGIN.fullmatch(origin):
            raise InvalidValue(
                f"expected an origin such as 'https://app.example:8443', got {describe(origin)}",
                (attr.name, index),
            )


def _hosts(_inst: Any, attr: attrs.Attribute[Any], value: list[str]) -> None:
    for index, host in enumerate(value):
        if not _HOST.fullmatch(host):
            raise InvalidValue(
                "expected a host name or address without a port, such as 'acp.example' or "
                f"'[2001:db8::1]', got {describe(host)}",
                (attr.name, index),
            )


@attrs.frozen
class LimitsConfig:
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
    """

    max_message_bytes: int = attrs.field(default=32 * 1024 * 1024, validator=_positive)
    max_pending_requests: int = attrs.field(default=65536, validator=_positive)
    channel_messages: int = attrs.field(default=64, validator=_positive)
    max_children: int = attrs.field(default=10000, validator=_positive)
    max_session_id_bytes: int = attrs.field(default=1024, validator=_positive)
    max_sessions: int = attrs.field(default=4096, validator=_positive)
    max_child_bytes: int = attrs.field(default=256 * 1024, validator=_positive)
    max_registry_bytes: int = attrs.field(default=16 * 1024 * 1024, validator=_positive)
    max_dedup_bytes: int = attrs.field(default=8 * 1024 * 1024, validator=_positive)
    max_pending_bytes: int = attrs.field(default=8 * 1024 * 1024, validator=_positive)
    dense_message_bytes: int = attrs.field(default=1024 * 1024, validator=_positive)
    min_bytes_per_value: int = attrs.field(default=48, validator=_positive)


#: What the hold buffer does with a session's traffic on timeout or overflow.
OnExpire = Literal["release", "drop"]


@attrs.frozen
class HoldConfig:
    """Hold buffer for agent traffic on sessions the client cannot know yet.

    Attributes:
        timeout_seconds: per held session, from its first held message.
        max_messages_per_session: held messages of one session.
        max_bytes: all held messages together, in bytes.
        max_sessions: sessions held at once; a new one beyond it expires the
            oldest held session (bounds per-session bookkeeping).
        on_expire: ``"release"`` or ``"drop"`` on timeout or overflow.
    """

    timeout_seconds: float = attrs.field(default=10.0, validator=_positive)
    max_messages_per_session: int = attrs.field(default=1000, validator=_positive)
    max_bytes: int = attrs.field(default=16 * 1024 * 1024, validator=_positive)
    max_sessions: int = attrs.field(default=1024, validator=_positive)
    on_expire: OnExpire = attrs.field(default="release", validator=_member_of(OnExpire))


@attrs.frozen
class EnforcementConfig:
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
    child_read_only: list[str] = attrs.field(
        factory=lambda: list(DEFAULT_CHILD_READ_ONLY), validator=_read_only_list
    )
    child_mutations: dict[str, str] = attrs.field(
        factory=lambda: dict(DEFAULT_CHILD_MUTATIONS), validator=_mutation_table
    )

    def __attrs_post_init__(self) -> None:
        for method in self.child_read_only:
            if method in self.child_mutations:
                raise InvalidValue(
                    f"{method} is also in child_mutations: a method is a read or a mutation",
                    ("child_read_only", self.child_read_only.index(method)),
                )


@attrs.frozen
class DedupConfig:
    """Duplicate state report removal.

    Attributes:
        state_reports: remove state reports that repeat the last one delivered.
    """

    state_reports: bool = True


@attrs.frozen
class AuditConfig:
    """Audit log.

    Attributes:
        path: JSON-lines audit log file; ``""`` = off.
        include_content: also log message content (off by default).
    """

    path: str = ""
    include_content: bool = False


@attrs.frozen
class ProcessConfig:
    """The agent subprocess.

    Attributes:
        grace_seconds: after the client's EOF the agent's stdin is closed;
            the agent is terminated if it has not exited within this time.
        kill_after_seconds: after terminate, killed if still alive.
    """

    grace_seconds: float = attrs.field(default=5.0, validator=_non_negative)
    kill_after_seconds: float = attrs.field(default=5.0, validator=_non_negative)


@attrs.frozen
class ListenConfig:
    """WebSocket listener (``--listen``).

    Attributes:
        token_file: file holding the bearer token; required for non-loopback binds.
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
    allowed_origins: list[str] = attrs.field(factory=list, validator=_origins)
    allowed_hosts: list[str] = attrs.field(factory=list, validator=_hosts)
    max_connections: int = attrs.field(default=16, validator=_positive)
    max_pending_handshakes: int = attrs.field(default=64, validator=_positive)
    ping_interval_seconds: float = attrs.field(default=20.0, validator=_non_negative)
    ping_timeout_seconds: float = attrs.field(default=20.0, validator=_positive)


@attrs.frozen
class Config:
    """The whole configuration (``config/default.toml`` documents every key)."""

    limits: LimitsConfig = attrs.field(factory=LimitsConfig)
    hold: HoldConfig = attrs.field(factory=HoldConfig)
    enforcement: EnforcementConfig = attrs.field(factory=EnforcementConfig)
    dedup: DedupConfig = attrs.field(factory=DedupConfig)
    audit: AuditConfig = attrs.field(factory=AuditConfig)
    process: ProcessConfig = attrs.field(factory=ProcessConfig)
    listen: ListenConfig = attrs.field(factory=ListenConfig)
