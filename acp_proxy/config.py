"""The configuration tree (DESIGN.md section 3, "Config") and its TOML form.

Every key has a default; the TOML loader (:func:`load_config`) is strict:
unknown keys, wrong types and bad values are :class:`ConfigError` naming the
key. :func:`dump_config` writes the effective configuration back as TOML.
This module is pure data plus loading; it never imports trio.
"""

from __future__ import annotations

import math
import os
import re
import tomllib
from collections.abc import Mapping
from typing import Any

import attrs
import cattrs
from cattrs.errors import AttributeValidationNote, ClassValidationError, ForbiddenExtraKeysError
from cattrs.gen import make_dict_structure_fn, override

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
    "config_from_dict",
    "dump_config",
    "load_config",
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

    ``str(error)`` is ``"SOURCE: KEY: MESSAGE"``, leaving out the parts that
    are empty (a file that cannot be read or parsed has no key).

    Attributes:
        key: dotted path of the offending key (``"hold.timeout_seconds"``,
            ``'enforcement.child_mutations."session/cancel"'``,
            ``"listen.allowed_origins[1]"``); ``""`` for the file as a whole.
        message: what is wrong with it, without the key.
        source: where the configuration came from (a file name), or ``""``.
    """

    def __init__(self, key: str, message: str, *, source: str = "") -> None:
        text = f"{key}: {message}" if key else message
        super().__init__(f"{source}: {text}" if source else text)
        self.key = key
        self.message = message
        self.source = source


class _Invalid(ValueError):
    """A value failed a type or range check.

    Raised by the validators below (so direct construction, e.g.
    ``HoldConfig(timeout_seconds=-1)``, raises a ValueError naming the
    attribute) and by the converter's hooks; :func:`config_from_dict`
    turns it into a :class:`ConfigError` with the full dotted key.

    Attributes:
        path: key parts below the attribute being structured (an ``int`` is
            a list index).
        detail: the message without the key.
    """

    def __init__(self, detail: str, path: tuple[str | int, ...] = ()) -> None:
        super().__init__(f"{_dotted(path)}: {detail}" if path else detail)
        self.detail = detail
        self.path = path


def _positive(_inst: Any, attr: attrs.Attribute[Any], value: float) -> None:
    if value <= 0:
        raise _Invalid(f"must be > 0, got {_describe(value)}", (attr.name,))


def _non_negative(_inst: Any, attr: attrs.Attribute[Any], value: float) -> None:
    if value < 0:
        raise _Invalid(f"must be >= 0, got {_describe(value)}", (attr.name,))


def _on_expire(_inst: Any, attr: attrs.Attribute[Any], value: str) -> None:
    if value not in ("release", "drop"):
        raise _Invalid(f"must be one of 'release', 'drop', got {_describe(value)}", (attr.name,))


def _mutation_table(_inst: Any, attr: attrs.Attribute[Any], value: dict[str, str]) -> None:
    for method, capability in value.items():
        if not method:
            raise _Invalid("a client method name must not be empty", (attr.name, method))
        if not capability:
            raise _Invalid("a capability key must not be empty", (attr.name, method))


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
    """

    max_message_bytes: int = attrs.field(default=32 * 1024 * 1024, validator=_positive)
    max_pending_requests: int = attrs.field(default=65536, validator=_positive)
    channel_messages: int = attrs.field(default=64, validator=_positive)
    max_children: int = attrs.field(default=10000, validator=_positive)


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
    on_expire: str = attrs.field(default="release", validator=_on_expire)


@attrs.frozen
class EnforcementConfig:
    """Capability enforcement on child sessions.

    Attributes:
        reject_code: JSON-RPC error code of the proxy's rejection answer.
        child_mutations: client method -> capability key required on a child.
            In TOML the user's table is merged over
            :data:`DEFAULT_CHILD_MUTATIONS`; a method mapped to ``""`` is
            removed from the table (:func:`config_from_dict`).
    """

    reject_code: int = -32601
    child_mutations: dict[str, str] = attrs.field(
        factory=lambda: dict(DEFAULT_CHILD_MUTATIONS), validator=_mutation_table
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


# --- loading ----------------------------------------------------------------

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _toml_key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else _toml_string(key)


def _dotted(path: tuple[str | int, ...]) -> str:
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += ("." if text else "") + _toml_key(part)
    return text


def _describe(value: object) -> str:
    """Render a TOML value for an error message (``'abc'``, ``true``, ``a table``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping):
        return "a table"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str | int | float):
        text = repr(value)
        return text if len(text) <= 60 else text[:57] + "..."
    return f"a {type(value).__name__} ({value})"


def _structure_int(value: object, _type: object) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise _Invalid(f"expected an integer, got {_describe(value)}")


def _structure_float(value: object, _type: object) -> float:
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:
            raise _Invalid(f"number too large, got {_describe(value)}") from None
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _Invalid(f"expected a finite number, got {_describe(value)}")
        return value
    raise _Invalid(f"expected a number, got {_describe(value)}")


def _structure_str(value: object, _type: object) -> str:
    if isinstance(value, str):
        return value
    raise _Invalid(f"expected a string, got {_describe(value)}")


def _structure_bool(value: object, _type: object) -> bool:
    if isinstance(value, bool):
        return value
    raise _Invalid(f"expected true or false, got {_describe(value)}")


def _structure_str_list(value: object, _type: object) -> list[str]:
    if not isinstance(value, list):
        raise _Invalid(f"expected an array of strings, got {_describe(value)}")
    for index, item in enumerate(value):
        if not isinstance(item, str):
            raise _Invalid(f"expected a string, got {_describe(item)}", (index,))
    return list(value)


def _structure_child_mutations(value: object, _type: object) -> dict[str, str]:
    """The user's table merged over the defaults; ``""`` removes a method."""
    if not isinstance(value, Mapping):
        raise _Invalid(f"expected a table, got {_describe(value)}")
    merged = dict(DEFAULT_CHILD_MUTATIONS)
    for method, capability in value.items():
        if not isinstance(capability, str):
            raise _Invalid(f"expected a string, got {_describe(capability)}", (method,))
        if capability:
            merged[method] = capability
        elif method in merged:
            del merged[method]
        else:
            raise _Invalid('"" removes a default entry, but this method has none', (method,))
    return merged


def _make_converter() -> cattrs.Converter:
    """The one converter holding every TOML rule: exact types, no extra keys."""
    converter = cattrs.Converter(forbid_extra_keys=True)
    converter.register_structure_hook(int, _structure_int)
    converter.register_structure_hook(float, _structure_float)
    converter.register_structure_hook(str, _structure_str)
    converter.register_structure_hook(bool, _structure_bool)
    converter.register_structure_hook_func(lambda t: t == list[str], _structure_str_list)
    # Sections before Config: a generated hook captures the hooks of its fields.
    enforcement = make_dict_structure_fn(
        EnforcementConfig,
        converter,
        child_mutations=override(struct_hook=_structure_child_mutations),
    )
    converter.register_structure_hook(EnforcementConfig, _table_hook(enforcement))
    for cls in (LimitsConfig, HoldConfig, DedupConfig, AuditConfig, ProcessConfig, ListenConfig):
        converter.register_structure_hook(cls, _table_hook(make_dict_structure_fn(cls, converter)))
    config = make_dict_structure_fn(Config, converter)
    converter.register_structure_hook(Config, _table_hook(config))
    return converter


def _table_hook(structure: Any) -> Any:
    def hook(value: object, cls: type[Any]) -> Any:
        if not isinstance(value, Mapping):
            raise _Invalid(f"expected a table, got {_describe(value)}")
        return structure(value, cls)

    return hook


_CONVERTER = _make_converter()


def _first_problem(exc: BaseException, path: tuple[str | int, ...]) -> tuple[str, str]:
    """The dotted key and message of the first leaf error under ``exc``."""
    if isinstance(exc, ClassValidationError):
        for sub in exc.exceptions:
            notes = [
                n for n in getattr(sub, "__notes__", ()) if isinstance(n, AttributeValidationNote)
            ]
            if isinstance(sub, ForbiddenExtraKeysError):
                fields = ", ".join(a.name for a in attrs.fields(sub.cl))
                kind = "section" if sub.cl is Config else "key"
                extra = sorted(sub.extra_fields)
                return _dotted((*path, extra[0])), f"unknown {kind} (expected one of: {fields})"
            return _first_problem(sub, (*path, notes[0].name) if notes else path)
    if isinstance(exc, _Invalid):
        return _dotted(path + exc.path), exc.detail
    # A foreign error, e.g. from an attrs built-in validator: (msg, attribute, ...).
    if len(exc.args) >= 2 and isinstance(exc.args[1], attrs.Attribute):
        return _dotted((*path, exc.args[1].name)), str(exc.args[0])
    return _dotted(path), str(exc) or type(exc).__name__


def config_from_dict(data: dict[str, Any], source: str = "") -> Config:
    """Build a :class:`Config` from parsed TOML data, strictly.

    Types are exact: an integer key takes only an integer (not ``"7"``, not
    ``true``), a number key takes an integer or a finite float, a string key
    only a string, a boolean key only ``true``/``false``. Omitted keys keep
    their defaults. ``enforcement.child_mutations`` is merged over
    :data:`DEFAULT_CHILD_MUTATIONS`: a method mapped to a capability key adds
    or replaces that entry, a method mapped to ``""`` removes it.

    Args:
        data: the parsed TOML document (``{section: {key: value}}``).
        source: where ``data`` came from (a file name), used in error messages.

    Returns:
        The effective configuration.

    Raises:
        ConfigError: the first unknown section or key, value of the wrong
            type, or value out of range, with its dotted key.
    """
    try:
        return _CONVERTER.structure(data, Config)
    except Exception as exc:
        key, message = _first_problem(exc, ())
        raise ConfigError(key, message, source=source) from exc


def load_config(path: str | os.PathLike[str]) -> Config:
    """Read a TOML configuration file (see ``config/default.toml``).

    Args:
        path: the file; UTF-8 TOML.

    Returns:
        The effective configuration (:func:`config_from_dict` rules).

    Raises:
        ConfigError: the file cannot be read or is not valid TOML (``key`` is
            ``""`` and ``source`` is the file name), or its content is
            invalid (``key`` names the offending key).
    """
    name = os.fsdecode(path)
    try:
        with open(path, "rb") as file:
            data = tomllib.load(file)
    except OSError as exc:
        raise ConfigError(
            "", f"cannot read config file: {exc.strerror or exc}", source=name
        ) from exc
    except UnicodeDecodeError as exc:
        raise ConfigError("", f"not UTF-8 text: {exc.reason}", source=name) from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError("", f"invalid TOML: {exc}", source=name) from exc
    return config_from_dict(data, source=name)


# --- dumping ----------------------------------------------------------------

_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\t": "\\t",
    "\n": "\\n",
    "\f": "\\f",
    "\r": "\\r",
}


def _toml_string(text: str) -> str:
    out = []
    for char in text:
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif char < " " or char == "\x7f":
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    raise TypeError(f"no TOML form for {type(value).__name__}")


def dump_config(cfg: Config) -> str:
    """Write the effective configuration as TOML text.

    Every key is written, one ``[section]`` per section; tables such as
    ``[enforcement.child_mutations]`` follow their section's plain keys. A
    default child mutation missing from ``cfg`` is written as ``"method" =
    ""`` so that loading the text back removes it again:
    ``load_config`` of the output equals ``cfg``.

    Args:
        cfg: the configuration to write.

    Returns:
        TOML text (``str``, ends with a newline).

    Raises:
        TypeError: a value has no TOML form (only if ``cfg`` was built by
            hand with values of the wrong type).
    """
    lines = ["# acp-proxy effective configuration"]
    for section_field in attrs.fields(Config):
        section = getattr(cfg, section_field.name)
        tables: list[tuple[str, dict[str, str]]] = []
        lines += ["", f"[{section_field.name}]"]
        for field in attrs.fields(type(section)):
            value = getattr(section, field.name)
            if isinstance(value, dict):
                tables.append((field.name, value))
            else:
                lines.append(f"{field.name} = {_toml_value(value)}")
        for name, table in tables:
            lines += ["", f"[{section_field.name}.{name}]"]
            lines += [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in table.items()]
            if section is cfg.enforcement and name == "child_mutations":
                removed = [k for k in DEFAULT_CHILD_MUTATIONS if k not in table]
                lines += [f'{_toml_key(k)} = ""  # default entry removed' for k in removed]
    return "\n".join(lines) + "\n"
