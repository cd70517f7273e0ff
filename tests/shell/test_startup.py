"""Start-up (issue 29): what the command line imports before the agent starts, what a
mode never imports, and that a refusal still comes before any agent starts.

The import checks run the real command line in a fresh interpreter, with a
hook that records ``sys.modules`` at the agent's early spawn (``os.fork``)
or when the proxy exits; behaviour, not timing.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
import textwrap
from pathlib import Path

import attrs
import pytest

from acp_proxy import cli
from acp_proxy.config import Config
from acp_proxy.config.records import Record

ROOT = Path(__file__).resolve().parents[2]
INIT = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n'

#: runs ``python -m acp_proxy ARGV`` and prints the modules loaded at the moment named
#: by ``WHEN``: ``spawn`` (the agent's early start, ``os.fork``) or ``exit`` (the proxy done)
HOOK = textwrap.dedent(
    """
    import os, runpy, sys
    when, argv = sys.argv[1], sys.argv[2:]
    def dump():
        names = sorted(sys.modules)
        sys.stderr.write("\\nMODULES " + " ".join(names) + "\\n")
    if when == "spawn":
        real = os.fork
        def spy():
            dump()
            os.fork = real
            return real()
        os.fork = spy
    sys.argv = ["acp_proxy", *argv]
    try:
        runpy.run_module("acp_proxy", run_name="__main__", alter_sys=True)
    finally:
        if when == "exit":
            dump()
    """
)

#: what the drop-in form must not import before its agent starts
HEAVY_BEFORE_SPAWN = (
    "argparse",
    "shlex",
    "shutil",
    "subprocess",
    "threading",
    "typing",
    "attrs",
    "cattrs",
    "logging",
    "msgspec",
    "tomllib",
    "trio",
    "acp_proxy.config.model",
    "acp_proxy.core.engine",
    "acp_proxy.shell.audit",
)

#: what a plain stdio run (no --listen, --connect, --otel, --watch-config, --config)
#: never imports
OTHER_MODES = (
    "cattrs",
    "h11",
    "opentelemetry",
    "tomli_w",
    "trio_websocket",
    "watchfiles",
    "wsproto",
    "acp_proxy.config.io",
    "acp_proxy.demo.client",
    "acp_proxy.shell.topology.listen",
    "acp_proxy.shell.topology.connect",
    "acp_proxy.shell.otel",
)


#: the attrs classes a stdio run makes with attrs' own compiled ``==`` and ``repr``
#: (about 2 M instructions a class more than a :mod:`~acp_proxy.config.records`
#: record): the framing, pass-through and registry records of the hot path (left
#: as they are); the parts compared by identity (``EngineContext``,
#: ``observe.Connection``) share Record's ``repr`` (``Described``)
COMPILED_ON_THE_STDIO_PATH = {
    "acp_proxy.core.session.registry.Child",
    "acp_proxy.core.wire.framing.Lines",
    "acp_proxy.core.wire.framing.Oversize",
    "acp_proxy.core.wire.framing.Partial",
    "acp_proxy.core.wire.passthrough.UpdateRule",
}


def _modules(when: str, *argv: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", HOOK, when, *argv],
        input=INIT,
        capture_output=True,
        timeout=60,
        cwd=ROOT,
        check=False,
    )
    err = done.stderr.decode()
    assert done.returncode == 0, err
    assert b'"result"' in done.stdout, done.stdout
    line = next(x for x in err.splitlines() if x.startswith("MODULES "))
    return set(line.removeprefix("MODULES ").split())


def _loaded(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if m in names or m.split(".")[0] in names)


AGENT = ("--", sys.executable, "-m", "acp_proxy.demo.agent")


def test_the_drop_in_form_starts_its_agent_before_the_config_tree_trio_or_the_core() -> None:
    """Only argument parsing and the command's lookup come before the spawn."""
    assert _loaded(_modules("spawn", *AGENT), HEAVY_BEFORE_SPAWN) == []


def test_with_a_log_level_the_agent_still_starts_first() -> None:
    """``--log-level`` chooses the log, not the config: the early start applies."""
    assert _loaded(_modules("spawn", "--log-level", "info", *AGENT), HEAVY_BEFORE_SPAWN) == []


def test_with_a_log_file_the_agent_still_starts_first(tmp_path: Path) -> None:
    """``--log-file`` is opened (and could refuse) before the spawn, read by the fast lane."""
    log = str(tmp_path / "proxy.log")
    assert _loaded(_modules("spawn", f"--log-file={log}", *AGENT), HEAVY_BEFORE_SPAWN) == []


def test_a_stdio_run_never_imports_what_other_modes_use() -> None:
    """The WebSocket stack, OpenTelemetry, the file watcher and the TOML converter
    stay unimported for a whole stdio run that did not ask for them."""
    modules = _modules("exit", *AGENT)
    assert "acp_proxy.shell.topology.stdio" in modules  # the hook saw the run
    assert _loaded(modules, OTHER_MODES) == []


def test_a_stdio_run_makes_its_records_without_compiled_comparisons() -> None:
    """The config sections and the core's records a stdio run imports share
    ``==``/``repr``/``hash`` (``config/records.py``); a new attrs class on the path
    with compiled ones fails here until it does too or is listed."""
    modules = _modules("exit", *AGENT)
    compiled = set()
    for name in sorted(m for m in modules if m.startswith("acp_proxy.")):
        if name == "acp_proxy.__main__":
            continue
        for obj in vars(importlib.import_module(name)).values():
            made_here = isinstance(obj, type) and attrs.has(obj) and obj.__module__ == name
            if made_here and obj.__repr__ is not Record.__repr__:
                compiled.add(f"{name}.{obj.__qualname__}")
    assert "acp_proxy.config.model" in modules
    assert compiled == COMPILED_ON_THE_STDIO_PATH


def test_the_default_config_is_what_the_early_start_assumes() -> None:
    """With no option set, the effective config is ``Config()`` and none of it
    (audit log, sandbox, trace, telemetry, budget store) delays or refuses the start."""
    args, extra = cli._parser().parse_known_args([])
    assert extra == []
    assert cli._default_config("stdio", args)
    cfg = cli.effective_config(args)
    assert cfg == Config()
    assert not cli._starts_late(cfg)
    assert cfg.audit.path == ""
    assert not cfg.sandbox.enabled


@pytest.mark.parametrize(
    "option",
    [
        ["--config", "x.toml"],
        ["--audit-log", "a.jsonl"],
        ["--max-message-bytes", "7"],
        ["--trace", "t.jsonl"],
        ["--trace-content"],
        ["--metrics", "127.0.0.1:0"],
        ["--sandbox"],
        ["--otel"],
    ],
)
def test_an_option_that_sets_a_key_takes_the_config_path(option: list[str]) -> None:
    """Any option that changes the config makes the command line build and check it
    before the agent starts."""
    args, _ = cli._parser().parse_known_args(option)
    assert not cli._default_config("stdio", args)


def test_every_option_either_sets_a_key_or_is_named_as_not_setting_one() -> None:
    """A new option is on the config path unless it is listed as mode or log only:
    setting each option away from its default ends the default-config start."""
    parser = cli._parser()
    for action in parser._actions:
        dest = action.dest
        if dest in ("help", "version") or dest in cli._NOT_CONFIG_OPTIONS:
            continue
        args = parser.parse_args([])
        setattr(args, dest, "x")
        assert not cli._default_config("stdio", args), dest


@pytest.mark.parametrize(
    ("options", "config"),
    [
        (["--max-message-bytes", "0"], None),
        (["--config", "{config}"], "[limits]\nmax_message_bytes = -1\n"),
        (["--config", "{config}"], "[nope]\n"),
        (["--log-file", "/nonexistent/dir/log"], None),
        # the fast lane's forms (shell.fast_lane), and one it leaves to argparse
        (["--log-level=info", "--log-file=/nonexistent/dir/log"], None),
        (["--log-level", "info", "--config", "{config}"], "[nope]\n"),
        (["--config={config}"], "[limits]\nmax_message_bytes = -1\n"),
        (["--log-level", "bogus"], None),
        (["--log-level"], None),
    ],
)
def test_a_refused_command_line_starts_no_agent(
    tmp_path: Path, options: list[str], config: str | None
) -> None:
    """A config or command-line error exits 2 and the agent never ran."""
    marker = tmp_path / "agent-ran"
    cfg = tmp_path / "c.toml"
    if config is not None:
        cfg.write_text(config)
    argv = [o.replace("{config}", str(cfg)) for o in options]
    agent = [sys.executable, "-c", f"open({str(marker)!r}, 'w')"]
    done = subprocess.run(
        [sys.executable, "-m", "acp_proxy", *argv, "--", *agent],
        input=INIT,
        capture_output=True,
        timeout=60,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.decode().startswith("acp-proxy: ")
    assert not marker.exists()


@pytest.mark.parametrize("options", [[], ["--log-level", "debug"]])
@pytest.mark.parametrize("command", ["{tmp}/no-such-agent", "no-such-agent-on-path"])
def test_a_missing_agent_command_is_refused_before_anything_starts(
    tmp_path: Path, options: list[str], command: str
) -> None:
    """The default-config start still looks the command up first: exit 2, one line."""
    done = subprocess.run(
        [sys.executable, "-m", "acp_proxy", *options, "--", command.format(tmp=tmp_path)],
        input=INIT,
        capture_output=True,
        timeout=60,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 2
    assert len(done.stderr.decode().splitlines()) == 1


def test_a_refused_run_leaves_the_garbage_collector_on() -> None:
    """The collector held off while a run starts is on again when ``main`` returns early."""
    import gc

    assert gc.isenabled()
    assert cli.main(["--max-message-bytes", "0", "--", sys.executable, "-c", "pass"]) == 2
    assert gc.isenabled()
