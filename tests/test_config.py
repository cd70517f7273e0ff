"""The TOML configuration: loading, strict errors, merge rule, dumping."""

from __future__ import annotations

import re
import tomllib
import typing
from pathlib import Path
from typing import Any

import attrs
import pytest

from acp_proxy.config import (
    DEFAULT_CHILD_MUTATIONS,
    AuditConfig,
    Config,
    ConfigError,
    EnforcementConfig,
    HoldConfig,
    LimitsConfig,
    ListenConfig,
    ProcessConfig,
)
from acp_proxy.config.files import BUNDLED, bundled_text
from acp_proxy.config.io import config_from_dict, dump_config, load_config
from acp_proxy.config.model import OnExpire

CONFIG_DIR = Path(__file__).resolve().parent.parent / "config"


def _keys(value: Any, prefix: str = "") -> set[str]:
    """Dotted paths of every leaf key in a nested dict."""
    keys: set[str] = set()
    for name, item in value.items():
        path = f"{prefix}{name}"
        if isinstance(item, dict) and name != "child_mutations":
            keys |= _keys(item, path + ".")
        else:
            keys.add(path)
    return keys


def _error(data: dict[str, Any]) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        config_from_dict(data, source="test.toml")
    return info.value


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "proxy.toml"
    path.write_text(text, encoding="utf-8")
    return path


NON_DEFAULT = Config(
    limits=LimitsConfig(max_message_bytes=1024, max_pending_requests=7, channel_messages=3),
    hold=HoldConfig(
        timeout_seconds=0.25, max_messages_per_session=5, max_bytes=999, on_expire="drop"
    ),
    enforcement=EnforcementConfig(
        reject_code=-32000,
        child_mutations={
            **{k: v for k, v in DEFAULT_CHILD_MUTATIONS.items() if k != "tool_call/cancel"},
            "session/cancel": "stop",
            "vendor.x/do it": 'cap "quoted"\\',
        },
    ),
    audit=AuditConfig(path='C:\\logs\\a "b".jsonl\n\t\x01é', include_content=True),
    process=ProcessConfig(grace_seconds=0.0, kill_after_seconds=1e-3),
    listen=ListenConfig(
        token_file="/run/token",
        allowed_origins=["https://a.example", "vscode-webview://x-y"],
        allowed_hosts=["acp.example", "[::1]"],
        max_connections=1,
        max_pending_handshakes=3,
        ping_interval_seconds=0.0,
        ping_timeout_seconds=1e20,
    ),
)


# --- default.toml and strict.toml ---------------------------------------------


def test_default_toml_equals_defaults() -> None:
    """config/default.toml loads and equals Config()."""
    assert load_config(CONFIG_DIR / "default.toml") == Config()


def test_default_toml_lists_every_key() -> None:
    """config/default.toml spells out every key of Config, no more and no less."""
    with open(CONFIG_DIR / "default.toml", "rb") as file:
        written = tomllib.load(file)
    assert _keys(written) == _keys(attrs.asdict(Config()))


def test_default_toml_lists_full_mutation_table() -> None:
    """config/default.toml shows the whole default child_mutations table."""
    with open(CONFIG_DIR / "default.toml", "rb") as file:
        written = tomllib.load(file)
    assert written["enforcement"]["child_mutations"] == DEFAULT_CHILD_MUTATIONS


def test_strict_toml_loads() -> None:
    """config/strict.toml loads with drop on expiry, shorter limits, no content."""
    cfg = load_config(CONFIG_DIR / "strict.toml")
    assert cfg.hold.on_expire == "drop"
    assert cfg.hold.timeout_seconds < Config().hold.timeout_seconds
    assert cfg.limits.max_message_bytes == 8 * 1024 * 1024
    assert cfg.audit.path
    assert cfg.audit.include_content is False


#: wording of the project's task tracker, not of a user's documentation
_TASK_TEXT = re.compile(r"(?i)\bissue \d+|acceptance check|your note|implement it as written")


def test_shipped_configurations_are_user_documentation() -> None:
    """The files a user reads or prints (`acp-proxy config NAME`, config/examples) say
    nothing of the project's issues or tasks."""
    texts = {f"acp-proxy config {name}": bundled_text(name) for name in BUNDLED}
    texts |= {str(p): p.read_text() for p in sorted((CONFIG_DIR / "examples").glob("*.toml"))}
    assert len(texts) >= 3
    found = {where: m.group(0) for where, text in texts.items() if (m := _TASK_TEXT.search(text))}
    assert found == {}


def test_empty_file_gives_defaults(tmp_path: Path) -> None:
    """An empty file is the default configuration."""
    assert load_config(_write(tmp_path, "")) == Config()


# --- dump_config --------------------------------------------------------------


@pytest.mark.parametrize("cfg", [Config(), NON_DEFAULT], ids=["default", "non-default"])
def test_dump_round_trip(tmp_path: Path, cfg: Config) -> None:
    """dump_config output loads back to an equal Config."""
    assert load_config(_write(tmp_path, dump_config(cfg))) == cfg


def test_dump_writes_every_key() -> None:
    """dump_config writes every key, including the full mutation table."""
    written = tomllib.loads(dump_config(Config()))
    assert _keys(written) == _keys(attrs.asdict(Config()))
    assert written["enforcement"]["child_mutations"] == DEFAULT_CHILD_MUTATIONS


def test_dump_marks_removed_default_mutation() -> None:
    """A default mutation missing from the config is dumped as "" so reload removes it."""
    written = tomllib.loads(dump_config(NON_DEFAULT))
    assert written["enforcement"]["child_mutations"]["tool_call/cancel"] == ""


def test_dump_is_one_commented_toml_document_in_section_order() -> None:
    """The dump names itself, explains a removed default only when there is one, and
    writes the sections in the tree's order, sub-tables after their section."""
    default = dump_config(Config())
    assert default.startswith("# acp-proxy effective configuration\n\n[limits]\n")
    assert "removes a default entry" not in default
    headers = [line for line in default.splitlines() if line.startswith("[")]
    assert headers == [
        "[limits]",
        "[hold]",
        "[enforcement]",
        "[enforcement.child_mutations]",
        "[dedup]",
        "[audit]",
        "[trace]",
        "[telemetry]",
        "[process]",
        "[listen]",
        "[permissions]",
        "[budgets]",
        "[policy]",
        "[sandbox]",
        "[admission]",
        "[elicitation]",
    ]
    assert '"" removes a default entry' in dump_config(NON_DEFAULT).split("[limits]")[0]


def test_dump_refuses_a_value_with_no_toml_form() -> None:
    """A hand-built config holding a value TOML cannot write raises TypeError."""
    with pytest.raises(TypeError):
        dump_config(Config(audit=AuditConfig(path=object())))  # type: ignore[arg-type]


def test_dump_integer_valued_float_stays_number() -> None:
    """A float field given an int in Python dumps as a number that reloads equal."""
    cfg = Config(hold=HoldConfig(timeout_seconds=3))
    assert config_from_dict(tomllib.loads(dump_config(cfg))) == cfg


# --- values accepted ----------------------------------------------------------


def test_int_accepted_for_float() -> None:
    """An integer is accepted where a number is expected and becomes a float."""
    cfg = config_from_dict({"hold": {"timeout_seconds": 3}})
    assert cfg.hold.timeout_seconds == 3.0
    assert type(cfg.hold.timeout_seconds) is float


def test_partial_section_keeps_other_defaults() -> None:
    """Keys left out of a section keep their defaults."""
    cfg = config_from_dict({"hold": {"on_expire": "drop"}})
    assert cfg == Config(hold=HoldConfig(on_expire="drop"))


# --- child_mutations merge ----------------------------------------------------


def test_child_mutations_merged_over_defaults() -> None:
    """A user child_mutations table adds and replaces entries; the rest stay."""
    cfg = config_from_dict(
        {"enforcement": {"child_mutations": {"session/cancel": "stop", "vendor/x": "x"}}}
    )
    assert cfg.enforcement.child_mutations == {
        **DEFAULT_CHILD_MUTATIONS,
        "session/cancel": "stop",
        "vendor/x": "x",
    }


def test_child_mutations_empty_string_removes() -> None:
    """A method mapped to "" is removed from the table."""
    cfg = config_from_dict({"enforcement": {"child_mutations": {"tool_call/cancel": ""}}})
    expected = dict(DEFAULT_CHILD_MUTATIONS)
    del expected["tool_call/cancel"]
    assert cfg.enforcement.child_mutations == expected


def test_child_mutations_empty_table_keeps_defaults() -> None:
    """An empty child_mutations table leaves the defaults in place."""
    cfg = config_from_dict({"enforcement": {"child_mutations": {}}})
    assert cfg.enforcement.child_mutations == DEFAULT_CHILD_MUTATIONS


def test_child_mutations_input_not_mutated() -> None:
    """Loading neither mutates the input nor the module default table."""
    data = {"enforcement": {"child_mutations": {"tool_call/cancel": ""}}}
    config_from_dict(data)
    assert data == {"enforcement": {"child_mutations": {"tool_call/cancel": ""}}}
    assert DEFAULT_CHILD_MUTATIONS["tool_call/cancel"] == "cancel"


def test_child_mutations_remove_unknown_method_is_error() -> None:
    """Mapping "" to a method with no default entry is an error naming it."""
    error = _error({"enforcement": {"child_mutations": {"sesion/prompt": ""}}})
    assert error.key == 'enforcement.child_mutations."sesion/prompt"'


# --- mistakes -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "key", "words"),
    [
        pytest.param({"holds": {}}, "holds", "unknown section", id="unknown-section"),
        pytest.param({"hold": {"foo": 1}}, "hold.foo", "unknown key", id="unknown-key"),
        pytest.param(
            {"hold": {"timeout_seconds": "abc"}},
            "hold.timeout_seconds",
            "expected a number, got 'abc'",
            id="str-for-float",
        ),
        pytest.param(
            {"hold": {"timeout_seconds": True}},
            "hold.timeout_seconds",
            "expected a number, got true",
            id="bool-for-float",
        ),
        pytest.param(
            {"limits": {"max_message_bytes": "7"}},
            "limits.max_message_bytes",
            "expected an integer, got '7'",
            id="quoted-int",
        ),
        pytest.param(
            {"limits": {"max_message_bytes": True}},
            "limits.max_message_bytes",
            "expected an integer, got true",
            id="bool-for-int",
        ),
        pytest.param(
            {"limits": {"max_message_bytes": 1.5}},
            "limits.max_message_bytes",
            "expected an integer, got 1.5",
            id="float-for-int",
        ),
        pytest.param(
            {"dedup": {"state_reports": 1}},
            "dedup.state_reports",
            "expected true or false, got 1",
            id="int-for-bool",
        ),
        pytest.param(
            {"dedup": {"state_reports": "true"}},
            "dedup.state_reports",
            "expected true or false, got 'true'",
            id="str-for-bool",
        ),
        pytest.param(
            {"audit": {"path": 1}}, "audit.path", "expected a string, got 1", id="int-for-str"
        ),
        pytest.param(
            {"listen": {"allowed_origins": "https://a.example"}},
            "listen.allowed_origins",
            "expected an array of strings",
            id="str-for-list",
        ),
        pytest.param(
            {"listen": {"allowed_origins": ["https://a.example", 3]}},
            "listen.allowed_origins[1]",
            "expected a string, got 3",
            id="list-item",
        ),
        pytest.param(
            {"listen": {"allowed_origins": ["https://a.example", "*"]}},
            "listen.allowed_origins[1]",
            "'*' is not allowed",
            id="origin-wildcard",
        ),
        pytest.param(
            {"listen": {"allowed_origins": ["https://a.example/app"]}},
            "listen.allowed_origins[0]",
            "expected an origin",
            id="origin-with-path",
        ),
        pytest.param(
            {"listen": {"allowed_hosts": ["acp.example:443"]}},
            "listen.allowed_hosts[0]",
            "without a port",
            id="host-with-port",
        ),
        pytest.param(
            {"listen": {"allowed_hosts": [1]}},
            "listen.allowed_hosts[0]",
            "expected a string, got 1",
            id="host-not-str",
        ),
        pytest.param(
            {"enforcement": {"child_mutations": ["session/cancel"]}},
            "enforcement.child_mutations",
            "expected a table, got an array",
            id="list-for-table",
        ),
        pytest.param(
            {"enforcement": {"child_mutations": {"session/cancel": True}}},
            'enforcement.child_mutations."session/cancel"',
            "expected a string, got true",
            id="table-value",
        ),
        pytest.param({"hold": 5}, "hold", "expected a table, got 5", id="value-for-section"),
        pytest.param(
            {"hold": {"timeout_seconds": -1}},
            "hold.timeout_seconds",
            "must be > 0",
            id="negative-timeout",
        ),
        pytest.param(
            {"hold": {"timeout_seconds": 0}},
            "hold.timeout_seconds",
            "must be > 0",
            id="zero-timeout",
        ),
        pytest.param(
            {"process": {"grace_seconds": -0.5}},
            "process.grace_seconds",
            "must be >= 0",
            id="negative-grace",
        ),
        pytest.param(
            {"hold": {"timeout_seconds": float("nan")}},
            "hold.timeout_seconds",
            "expected a finite number",
            id="nan",
        ),
        pytest.param(
            {"hold": {"on_expire": "discard"}},
            "hold.on_expire",
            "must be one of 'release', 'drop'",
            id="bad-on-expire",
        ),
    ],
)
def test_mistake_names_key(data: dict[str, Any], key: str, words: str) -> None:
    """Each kind of mistake is a ConfigError whose key and message name the key."""
    error = _error(data)
    assert error.key == key
    assert words in error.message
    assert str(error) == f"test.toml: {key}: {error.message}"


def test_mistake_in_file_names_file_and_key(tmp_path: Path) -> None:
    """A bad value in a file is reported with the file name and the dotted key."""
    path = _write(tmp_path, '[hold]\ntimeout_seconds = "abc"\n')
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.key == "hold.timeout_seconds"
    assert str(info.value) == f"{path}: hold.timeout_seconds: expected a number, got 'abc'"


def test_toml_syntax_error_names_file(tmp_path: Path) -> None:
    """A TOML syntax error is a ConfigError naming the file and the line."""
    path = _write(tmp_path, "[hold]\ntimeout_seconds = \n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.key == ""
    assert info.value.source == str(path)
    assert str(path) in str(info.value)
    assert "line 2" in str(info.value)


def test_missing_file_names_file(tmp_path: Path) -> None:
    """A missing file is a ConfigError naming the file."""
    path = tmp_path / "absent.toml"
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.key == ""
    assert str(path) in str(info.value)


def test_directory_is_unreadable(tmp_path: Path) -> None:
    """A directory given as the config file is a ConfigError naming it."""
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path)
    assert str(tmp_path) in str(info.value)


def test_non_utf8_file_names_file(tmp_path: Path) -> None:
    """A file that is not UTF-8 is a ConfigError naming the file."""
    path = tmp_path / "latin1.toml"
    path.write_bytes(b'[audit]\npath = "caf\xe9"\n')
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(path) in str(info.value)


def test_direct_construction_validator_names_attribute() -> None:
    """Building a section in Python with a bad value raises ValueError naming the field."""
    with pytest.raises(ValueError, match=r"^timeout_seconds: must be > 0"):
        HoldConfig(timeout_seconds=-1)


def _literal_fields() -> list[tuple[str, str, tuple[str, ...]]]:
    """``(section, key, choices)`` for every config key typed as a ``Literal`` of strings."""
    found = []
    for section in attrs.fields(Config):
        hints = typing.get_type_hints(section.type)
        for name, hint in hints.items():
            if typing.get_origin(hint) is typing.Literal:
                found.append((section.name, name, typing.get_args(hint)))
    return found


def test_closed_sets_of_strings_are_literals() -> None:
    """hold.on_expire is typed Literal["release", "drop"] (mypy checks every use), and so
    are budgets.store_fail, policy.mode, admission.applies_to / mcp_stdio and
    elicitation.secret_fields."""
    assert _literal_fields() == [
        ("hold", "on_expire", ("release", "drop")),
        ("budgets", "store_fail", ("closed", "open")),
        ("policy", "mode", ("enforce", "observe")),
        ("admission", "applies_to", ("remote", "all")),
        ("admission", "mcp_stdio", ("refuse", "allow")),
        ("elicitation", "secret_fields", ("pass", "decline")),
    ]
    assert typing.get_type_hints(HoldConfig)["on_expire"] == OnExpire


@pytest.mark.parametrize(("section", "key", "choices"), _literal_fields())
def test_a_literal_key_takes_its_strings_and_names_them_when_refusing(
    section: str, key: str, choices: tuple[str, ...]
) -> None:
    """Each choice loads; any other string, a different case or a non-string is a ConfigError
    naming the key and, for a string, every choice."""
    for choice in choices:
        cfg = config_from_dict({section: {key: choice}})
        assert getattr(getattr(cfg, section), key) == choice
    listed = ", ".join(map(repr, choices))
    for bad in ("nope", choices[0].upper(), ""):
        error = _error({section: {key: bad}})
        assert (error.key, error.message) == (
            f"{section}.{key}",
            f"must be one of {listed}, got {bad!r}",
        )
    error = _error({section: {key: 1}})
    assert (error.key, error.message) == (f"{section}.{key}", "expected a string, got 1")


def test_direct_construction_checks_a_literal_field() -> None:
    """attrs does not check types: the field's validator refuses a string outside its Literal."""
    with pytest.raises(ValueError, match=r"^on_expire: must be one of 'release', 'drop', got 'x'$"):
        HoldConfig(on_expire="x")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("data", "key", "words"),
    [
        ({"child_read_only": ["session/cancel"]}, "enforcement.child_read_only[0]", "also in"),
        ({"child_read_only": ["session/load"]}, "enforcement.child_read_only[0]", "not read-only"),
        (
            {"child_mutations": {"session/resume": "resume"}},
            'enforcement.child_mutations."session/resume"',
            "does not allow",
        ),
        (
            {"child_mutations": {"session/close": "close"}},
            'enforcement.child_mutations."session/close"',
            "does not allow",
        ),
        (
            {"child_mutations": {"session/prompt": "_meta"}},
            'enforcement.child_mutations."session/prompt"',
            "_meta never grants",
        ),
    ],
)
def test_enforcement_tables_refuse_what_the_spec_forbids(
    data: dict[str, Any], key: str, words: str
) -> None:
    """child_read_only and child_mutations refuse child load/resume/close, _meta grants and a
    method that would be both a read and a mutation, naming the key."""
    with pytest.raises(ConfigError) as info:
        config_from_dict({"enforcement": data})
    assert info.value.key == key
    assert words in info.value.message


def test_vendor_grant_and_read_only_merge_over_the_defaults() -> None:
    """A user grant for a vendor key is added to the default table; child_read_only replaces
    the default list."""
    cfg = config_from_dict(
        {
            "enforcement": {
                "child_mutations": {"session/prompt": "prompt"},
                "child_read_only": ["session/status", "_x/peek"],
            }
        }
    )
    assert cfg.enforcement.child_mutations == {
        **DEFAULT_CHILD_MUTATIONS,
        "session/prompt": "prompt",
    }
    assert cfg.enforcement.child_read_only == ["session/status", "_x/peek"]


@pytest.mark.parametrize("depth", [7, 513, 10_000])
def test_max_nesting_depth_out_of_range_is_refused_naming_the_bound(depth: int) -> None:
    """The nesting limit must leave the decoders room at any stack depth: 8 to 512."""
    with pytest.raises(ConfigError, match=r"limits.max_nesting_depth: must be between 8 and 512"):
        config_from_dict({"limits": {"max_nesting_depth": depth}})


def test_max_nesting_depth_within_range_is_kept() -> None:
    assert config_from_dict({"limits": {"max_nesting_depth": 8}}).limits.max_nesting_depth == 8
    assert Config().limits.max_nesting_depth == 512


def test_a_config_path_that_is_not_a_regular_small_file_is_refused_without_blocking(
    tmp_path: Path,
) -> None:
    """/dev/zero, a FIFO or a huge file: a ConfigError at once (a hostile review swapped the
    config for a symlink to /dev/zero and the reload grew memory without bound)."""
    import os

    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    big = tmp_path / "big.toml"
    big.write_bytes(b"# " + b"x" * (1024 * 1024) + b"\n")
    zero = tmp_path / "zero.toml"
    zero.symlink_to("/dev/zero")
    for path, why in ((fifo, "not a regular file"), (zero, "not a regular file"), (big, "larger")):
        with pytest.raises(ConfigError, match=why):
            load_config(path)


# --- the audit log's place (issue 25) ------------------------------------------


@pytest.mark.parametrize(
    ("env", "expected"), [({"XDG_STATE_HOME": "/st"}, "/st"), ({}, "~/.local/state")]
)
def test_xdg_state_home_has_its_default_in_paths(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], expected: str
) -> None:
    """$XDG_STATE_HOME in a path: its value, or ~/.local/state when unset (XDG spec)."""
    from acp_proxy.config.files import expand_path

    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    want = str(Path(expected).expanduser()) + "/acp-proxy/audit.jsonl"
    assert expand_path("$XDG_STATE_HOME/acp-proxy/audit.jsonl", "audit.path") == want
    assert expand_path("${XDG_STATE_HOME}/acp-proxy/audit.jsonl", "audit.path") == want


def test_strict_is_required_and_out_of_the_working_directory() -> None:
    """config strict: audit.required, the log under $XDG_STATE_HOME/acp-proxy/."""
    cfg = load_config(CONFIG_DIR / "strict.toml")
    assert cfg.audit.required is True
    assert cfg.audit.path == "$XDG_STATE_HOME/acp-proxy/audit.jsonl"
    assert Config().audit.required is False


def test_relative_audit_paths_are_taken_from_the_config_files_directory(tmp_path: Path) -> None:
    """audit.path and hmac_key_file relative in /x/c.toml are /x/...; absolute ones stay."""
    from acp_proxy.config.files import resolve_audit_paths

    cfg = config_from_dict({"audit": {"path": "logs/a.jsonl", "hmac_key_file": "/k"}})
    resolved = resolve_audit_paths(cfg, str(tmp_path / "c.toml"))
    assert resolved.audit.path == str(tmp_path / "logs" / "a.jsonl")
    assert resolved.audit.hmac_key_file == "/k"
