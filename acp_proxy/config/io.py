"""Loading and dumping the configuration as TOML (docs/design.md section 3, "Config").

The loader (:func:`load_config`, :func:`config_from_dict`) is strict:
unknown keys, wrong types and bad values are
:class:`~acp_proxy.config.ConfigError` naming the key. :func:`dump_config`
writes the effective configuration back as TOML. One cattrs converter holds
every TOML rule; the tree itself (:mod:`acp_proxy.config.model`) knows nothing of
TOML. This module never imports trio.
"""

from __future__ import annotations

import math
import os
import stat
import tomllib
from collections.abc import Mapping
from typing import Any, Literal, get_args, get_origin

import attrs
import cattrs
import tomli_w
from cattrs.errors import AttributeValidationNote, ClassValidationError, ForbiddenExtraKeysError
from cattrs.gen import make_dict_structure_fn, override

from acp_proxy.config.model import (
    DEFAULT_CHILD_MUTATIONS,
    AdmissionConfig,
    AdmissionRule,
    AuditConfig,
    Config,
    ConfigError,
    DedupConfig,
    ElicitationConfig,
    EnforcementConfig,
    HoldConfig,
    InvalidValue,
    LimitsConfig,
    ListenConfig,
    McpStdio,
    OptionKind,
    PermissionRule,
    PermissionsConfig,
    ProcessConfig,
    TelemetryConfig,
    TraceConfig,
    one_of,
)
from acp_proxy.config.toml_text import describe, dotted

__all__ = ["config_from_dict", "dump_config", "load_config"]


# --- loading ----------------------------------------------------------------


def _structure_int(value: object, _type: object) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise InvalidValue(f"expected an integer, got {describe(value)}")


def _structure_float(value: object, _type: object) -> float:
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:
            raise InvalidValue(f"number too large, got {describe(value)}") from None
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidValue(f"expected a finite number, got {describe(value)}")
        return value
    raise InvalidValue(f"expected a number, got {describe(value)}")


def _structure_str(value: object, _type: object) -> str:
    if isinstance(value, str):
        return value
    raise InvalidValue(f"expected a string, got {describe(value)}")


def _structure_bool(value: object, _type: object) -> bool:
    if isinstance(value, bool):
        return value
    raise InvalidValue(f"expected true or false, got {describe(value)}")


def _is_literal(type_: Any) -> bool:
    origin: object = get_origin(type_)
    return origin is Literal


def _structure_literal(value: object, type_: Any) -> str:
    """One of a ``Literal``'s strings (``hold.on_expire``)."""
    if not isinstance(value, str):
        raise InvalidValue(f"expected a string, got {describe(value)}")
    problem = one_of(get_args(type_), value)
    if problem:
        raise InvalidValue(problem)
    return value


def _structure_str_list(value: object, _type: object) -> list[str]:
    if not isinstance(value, list):
        raise InvalidValue(f"expected an array of strings, got {describe(value)}")
    for index, item in enumerate(value):
        if not isinstance(item, str):
            raise InvalidValue(f"expected a string, got {describe(item)}", (index,))
    return list(value)


def _structure_child_mutations(value: object, _type: object) -> dict[str, str]:
    """The user's table merged over the defaults; ``""`` removes a method."""
    if not isinstance(value, Mapping):
        raise InvalidValue(f"expected a table, got {describe(value)}")
    merged = dict(DEFAULT_CHILD_MUTATIONS)
    for method, capability in value.items():
        if not isinstance(capability, str):
            raise InvalidValue(f"expected a string, got {describe(capability)}", (method,))
        if capability:
            merged[method] = capability
        elif method in merged:
            del merged[method]
        else:
            raise InvalidValue('"" removes a default entry, but this method has none', (method,))
    return merged


_GLOB_FIELDS = (
    "session",
    "parent",
    "tool_name",
    "tool_kind",
    "tool_title",
    "command",
    "cwd",
    "path",
)


def _structure_globs(value: object, _type: object) -> list[str]:
    """A glob or an array of globs (any one matches)."""
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list):
        raise InvalidValue(f"expected a string or an array of strings, got {describe(value)}")
    return _structure_str_list(value, _type)


def _structure_options(value: object, _type: object) -> list[str]:
    """An option kind or an array of them, each checked against the closed set."""
    kinds = _structure_globs(value, _type)
    for index, kind in enumerate(kinds):
        try:
            _structure_literal(kind, OptionKind)
        except InvalidValue as exc:
            raise InvalidValue(exc.detail, (index,)) from None
    return kinds


def _structure_raw_input(value: object, _type: object) -> dict[str, list[str]]:
    if not isinstance(value, Mapping):
        raise InvalidValue(f"expected a table (rawInput key -> glob), got {describe(value)}")
    table: dict[str, list[str]] = {}
    for key, patterns in value.items():
        try:
            table[key] = _structure_globs(patterns, list[str])
        except InvalidValue as exc:
            raise InvalidValue(exc.detail, (key, *exc.path)) from None
    return table


def _rules_hook(structure_rule: Any, cls: type[Any] = PermissionRule) -> Any:
    """Structures ``permissions.rules`` (or ``admission.rules``, ``cls``): each error
    names the rule (``name`` if it has one)."""

    def hook(value: object, _type: object) -> list[Any]:
        if not isinstance(value, list):
            raise InvalidValue(f"expected an array of tables, got {describe(value)}")
        rules: list[Any] = []
        for index, table in enumerate(value):
            name = table.get("name") if isinstance(table, Mapping) else None
            try:
                if not isinstance(table, Mapping):
                    raise InvalidValue(f"expected a table, got {describe(table)}")
                rules.append(structure_rule(table, cls))
            except Exception as exc:
                path, message = _problem(exc, ())
                label = f"rule {name!r}" if isinstance(name, str) and name else f"rules[{index}]"
                raise InvalidValue(f"{label}: {message}", (index, *path)) from exc
        return rules

    return hook


def _make_converter() -> cattrs.Converter:
    """The one converter holding every TOML rule: exact types, no extra keys."""
    converter = cattrs.Converter(forbid_extra_keys=True)
    converter.register_structure_hook(int, _structure_int)
    converter.register_structure_hook(float, _structure_float)
    converter.register_structure_hook(str, _structure_str)
    converter.register_structure_hook(bool, _structure_bool)
    converter.register_structure_hook_func(lambda t: t == list[str], _structure_str_list)
    converter.register_structure_hook_func(_is_literal, _structure_literal)
    overrides: dict[str, Any] = {
        name: override(struct_hook=_structure_globs) for name in _GLOB_FIELDS
    }
    overrides["raw_input"] = override(struct_hook=_structure_raw_input)
    overrides["option"] = override(struct_hook=_structure_options)
    rule = make_dict_structure_fn(PermissionRule, converter, **overrides)
    permissions = make_dict_structure_fn(
        PermissionsConfig, converter, rules=override(struct_hook=_rules_hook(_table_hook(rule)))
    )
    converter.register_structure_hook(PermissionsConfig, _table_hook(permissions))
    admission_rule = make_dict_structure_fn(
        AdmissionRule,
        converter,
        principal=override(struct_hook=_structure_str_list),
        mcp_stdio=override(struct_hook=lambda v, _t: _structure_literal(v, McpStdio)),
        mcp_http_allow=override(struct_hook=_structure_str_list),
        roots=override(struct_hook=_structure_str_list),
    )
    admission = make_dict_structure_fn(
        AdmissionConfig,
        converter,
        rules=override(struct_hook=_rules_hook(_table_hook(admission_rule), AdmissionRule)),
    )
    converter.register_structure_hook(AdmissionConfig, _table_hook(admission))
    # Sections before Config: a generated hook captures the hooks of its fields.
    enforcement = make_dict_structure_fn(
        EnforcementConfig,
        converter,
        child_mutations=override(struct_hook=_structure_child_mutations),
    )
    converter.register_structure_hook(EnforcementConfig, _table_hook(enforcement))
    for cls in (
        LimitsConfig,
        HoldConfig,
        DedupConfig,
        AuditConfig,
        TraceConfig,
        TelemetryConfig,
        ProcessConfig,
        ListenConfig,
        ElicitationConfig,
    ):
        converter.register_structure_hook(cls, _table_hook(make_dict_structure_fn(cls, converter)))
    config = make_dict_structure_fn(Config, converter)
    converter.register_structure_hook(Config, _table_hook(config))
    return converter


def _table_hook(structure: Any) -> Any:
    def hook(value: object, cls: type[Any]) -> Any:
        if not isinstance(value, Mapping):
            raise InvalidValue(f"expected a table, got {describe(value)}")
        return structure(value, cls)

    return hook


_CONVERTER = _make_converter()


def _first_problem(exc: BaseException, path: tuple[str | int, ...]) -> tuple[str, str]:
    """The dotted key and message of the first leaf error under ``exc``."""
    key_path, message = _problem(exc, path)
    return dotted(key_path), message


def _problem(exc: BaseException, path: tuple[str | int, ...]) -> tuple[tuple[str | int, ...], str]:
    """The key path and message of the first leaf error under ``exc``."""
    if isinstance(exc, ClassValidationError):
        for sub in exc.exceptions:
            notes = [
                n for n in getattr(sub, "__notes__", ()) if isinstance(n, AttributeValidationNote)
            ]
            if isinstance(sub, ForbiddenExtraKeysError):
                fields = ", ".join(a.name for a in attrs.fields(sub.cl))
                kind = "section" if sub.cl is Config else "key"
                extra = sorted(sub.extra_fields)
                return (*path, extra[0]), f"unknown {kind} (expected one of: {fields})"
            return _problem(sub, (*path, notes[0].name) if notes else path)
    if isinstance(exc, InvalidValue):
        return path + exc.path, exc.detail
    if isinstance(exc, KeyError):  # a required key (a rule's action) is missing
        return path, "required key is missing"
    # A foreign error, e.g. from an attrs built-in validator: (msg, attribute, ...).
    if len(exc.args) >= 2 and isinstance(exc.args[1], attrs.Attribute):
        return (*path, exc.args[1].name), str(exc.args[0])
    return path, str(exc) or type(exc).__name__


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
        data = tomllib.loads(read_config_bytes(path).decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError("", f"not UTF-8 text: {exc.reason}", source=name) from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError("", f"invalid TOML: {exc}", source=name) from exc
    return config_from_dict(data, source=name)


#: Largest config file read (bytes): a config is a few KiB; a path that points at
#: ``/dev/zero`` or a huge file must not hold the proxy.
MAX_CONFIG_BYTES = 1024 * 1024


def read_config_bytes(path: str | os.PathLike[str]) -> bytes:
    """The bytes of the config file at ``path`` (symlinks followed), at most
    :data:`MAX_CONFIG_BYTES`.

    Raises:
        ConfigError: it cannot be opened, is not a regular file (a FIFO or a
            device is refused without blocking), or is larger than the bound.
    """
    name = os.fsdecode(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # opening a FIFO never blocks
        with os.fdopen(fd, "rb") as file:
            if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
                raise ConfigError("", "not a regular file", source=name)
            data = file.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigError(
            "",
            f"cannot read config file: {exc.strerror or exc}; give the path of a TOML file "
            "(acp-proxy config default > FILE writes one)",
            source=name,
        ) from exc
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError("", f"larger than {MAX_CONFIG_BYTES} bytes", source=name)
    return data


# --- dumping ----------------------------------------------------------------


def dump_config(cfg: Config) -> str:
    """Write the effective configuration as TOML text (with ``tomli_w``).

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
    document: dict[str, Any] = attrs.asdict(cfg)
    mutations: dict[str, str] = document["enforcement"]["child_mutations"]
    removed = [method for method in DEFAULT_CHILD_MUTATIONS if method not in mutations]
    mutations.update(dict.fromkeys(removed, ""))
    permissions = document["permissions"]
    # a rule's unset matchers (None) are left out; its name comes first
    permissions["rules"] = [
        {k: v for k, v in sorted(rule.items(), key=lambda kv: kv[0] != "name") if v is not None}
        for rule in permissions["rules"]
    ]
    admission = document["admission"]
    admission["rules"] = [
        {k: v for k, v in sorted(rule.items(), key=lambda kv: kv[0] != "name") if v is not None}
        for rule in admission["rules"]
    ]
    header = "# acp-proxy effective configuration\n"
    if removed:
        header += '# [enforcement.child_mutations]: "" removes a default entry\n'
    return header + "\n" + tomli_w.dumps(document)
