"""The configuration tree (DESIGN.md section 3, "Config").

Every key has a default; the TOML loader (:func:`load_config`) is strict:
unknown keys, wrong types and bad values are :class:`ConfigError` naming the
key. This module is pure data plus loading; it never imports trio.
"""

from __future__ import annotations

from typing import Any

import attrs

__all__ = [
    "DEFAULT_CHILD_MUTATIONS",
    "AuditConfig",
    "Config",
    "ConfigError",
    "DedupConfig",
    "EnforcementConfig",
    "HoldConfig",
    "LimitsConfig",
    "ListenConfig",
    "ProcessConfig",
]

#: Client method -> capability key required on a child session (PROTOCOL.md section 4).
DEFAULT_CHILD_MUTATIONS: dict[str, str] = {
    "session/cancel": "cancel",
    "session/prompt": "prompt",
    "session/close": "close",
    "session/delete": "delete",
    "session/set_config_option": "setConfigOption",
    "session/set_mode": "setMode",
    "session/set_model": "setModel",
    "session/set_title": "setTitle",
    "session/archive": "archive",
    "session/unarchive": "archive",
    "tool_call/cancel": "cancel",
    "terminal/cancel": "cancel",
}


class ConfigError(ValueError):
    """A configuration value is unknown, of the wrong type, or out of range.

    Attributes:
        key: dotted path of the offending key (``"hold.timeout_seconds"``).
    """

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}" if key else message)
        self.key = key


def _positive(_inst: Any, attr: attrs.Attribute[Any], value: float) -> None:
    if value <= 0:
        raise ValueError(f"{attr.name} must be > 0, got {value!r}")


def _non_negative(_inst: Any, attr: attrs.Attribute[Any], value: float) -> None:
    if value < 0:
        raise ValueError(f"{attr.name} must be >= 0, got {value!r}")


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
    """

    max_message_bytes: int = attrs.field(default=32 * 1024 * 1024, validator=_positive)
    max_pending_requests: int = attrs.field(default=65536, validator=_positive)
    channel_messages: int = attrs.field(default=64, validator=_positive)


@attrs.frozen
class HoldConfig:
    """Hold buffer for agent traffic on sessions the client cannot know yet.

    Attributes:
        timeout_seconds: per held session, from its first held message.
        max_messages_per_session: held messages of one session.
        max_bytes: all held messages together, in bytes.
        on_expire: ``"release"`` or ``"drop"`` on timeout or overflow.
    """

    timeout_seconds: float = attrs.field(default=10.0, validator=_positive)
    max_messages_per_session: int = attrs.field(default=1000, validator=_positive)
    max_bytes: int = attrs.field(default=16 * 1024 * 1024, validator=_positive)
    on_expire: str = attrs.field(
        default="release", validator=attrs.validators.in_(("release", "drop"))
    )


@attrs.frozen
class EnforcementConfig:
    """Capability enforcement on child sessions.

    Attributes:
        reject_code: JSON-RPC error code of the proxy's rejection answer.
        child_mutations: client method -> capability key required on a child.
    """

    reject_code: int = -32601
    child_mutations: dict[str, str] = attrs.field(factory=lambda: dict(DEFAULT_CHILD_MUTATIONS))


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
        allowed_origins: Origin header allow-list; empty = any origin.
        max_connections: concurrent connections, each with its own agent.
        ping_interval_seconds: keepalive ping period; 0 = off.
        ping_timeout_seconds: a peer not answering a ping within this is closed.
    """

    token_file: str = ""
    allowed_origins: list[str] = attrs.field(factory=list)
    max_connections: int = attrs.field(default=16, validator=_positive)
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
