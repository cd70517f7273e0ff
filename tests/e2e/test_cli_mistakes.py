"""Mistakes end in one sentence on stderr, not a traceback (issue 20).

Each test runs ``python -m acp_proxy`` as an editor would and checks the exit
status (2 for usage and configuration errors), that stderr is one line
starting ``acp-proxy:`` naming the fix, and that no traceback is printed.
"""

from __future__ import annotations

import json
import os
import re
import socket
import stat
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest
import trio
from trio_websocket import WebSocketRequest, serve_websocket

from acp_proxy.config import Config
from acp_proxy.config.files import bundled_text
from acp_proxy.config.io import load_config

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable


def run(
    *args: str,
    stdin: bytes = b"",
    env: Mapping[str, str] | None = None,
    cwd: Path = ROOT,
    timeout: float = 30,
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [PY, "-m", "acp_proxy", *args],
        input=stdin,
        capture_output=True,
        timeout=timeout,
        cwd=cwd,
        env={**os.environ, **(env or {})},
    )


def one_sentence(r: subprocess.CompletedProcess[bytes], status: int, *words: str) -> str:
    """Asserts the status, one ``acp-proxy:`` line on stderr holding ``words``, no traceback."""
    err = r.stderr.decode()
    assert r.returncode == status, err
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("acp-proxy: ")
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


# --- files the options name -----------------------------------------------


def test_log_file_in_a_missing_directory(tmp_path: Path) -> None:
    r = run("--log-file", str(tmp_path / "no" / "proxy.log"), "--", PY, "-c", "pass")
    one_sentence(r, 2, "--log-file", "does not exist", "create it")
    r = run(f"--log-file={tmp_path / 'no' / 'proxy.log'}", "--", PY, "-c", "pass")
    one_sentence(r, 2, "--log-file", "does not exist", "create it")


def test_log_file_that_is_a_directory(tmp_path: Path) -> None:
    r = run("--log-file", str(tmp_path), "--", PY, "-c", "pass")
    one_sentence(r, 2, "--log-file", "is a directory")


def test_audit_log_in_a_missing_directory(tmp_path: Path) -> None:
    r = run("--audit-log", str(tmp_path / "no" / "audit.jsonl"), "--", PY, "-c", "pass")
    one_sentence(r, 2, "audit log", "does not exist")


def test_tilde_and_variables_are_expanded_in_path_options(tmp_path: Path) -> None:
    """Editors start the proxy without a shell: the proxy expands ``~`` and ``$VAR`` itself."""
    home, logs = tmp_path / "home", tmp_path / "logs"
    home.mkdir()
    logs.mkdir()
    r = run(
        "--audit-log",
        "~/audit.jsonl",
        "--log-file",
        "$ACP_TEST_LOGS/proxy.log",
        "--",
        PY,
        "-c",
        "pass",
        env={"HOME": str(home), "ACP_TEST_LOGS": str(logs)},
    )
    assert r.returncode == 0, r.stderr
    assert (home / "audit.jsonl").exists()
    assert (logs / "proxy.log").exists()


def test_variables_are_expanded_in_config_paths(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[audit]\npath = "${ACP_TEST_LOGS}/audit.jsonl"\n')
    env = {"ACP_TEST_LOGS": "/tmp", "ACP_TEST_CFG": str(cfg)}
    r = run("check-config", "$ACP_TEST_CFG", env=env)
    assert r.returncode == 0, r.stderr
    assert b'path = "/tmp/audit.jsonl"' in r.stdout


def test_an_unset_variable_is_named(tmp_path: Path) -> None:
    r = subprocess.run(
        [PY, "-m", "acp_proxy", "--audit-log", "$ACP_TEST_UNSET/a.jsonl", "--", PY, "-c", "pass"],
        capture_output=True,
        timeout=30,
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if k != "ACP_TEST_UNSET"},
    )
    one_sentence(r, 2, "--audit-log", "ACP_TEST_UNSET", "unset")
    assert not list(tmp_path.iterdir())


def test_audit_log_is_created_readable_by_its_owner_only(tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    r = run("--audit-log", str(audit), "--", PY, "-c", "pass")
    assert r.returncode == 0, r.stderr
    assert stat.S_IMODE(audit.stat().st_mode) == 0o600


# --- the command line itself ----------------------------------------------


def test_agent_command_without_the_separator_names_the_fix() -> None:
    r = run("--log-level", "info", "my-agent", "--acp")
    one_sentence(r, 2, "put -- before the agent command", "-- my-agent --acp")


def test_unknown_option_is_one_line() -> None:
    one_sentence(run("--no-such-flag", "--", "true"), 2, "--no-such-flag")


def test_bad_option_value_is_one_line() -> None:
    one_sentence(run("--log-level", "loud", "--", "true"), 2, "--log-level", "loud")


def test_log_levels_are_read_in_any_case() -> None:
    """``--log-level INFO`` is ``info`` (it was refused in argparse's words)."""
    r = run("--log-level", "INFO", "--", PY, "-c", "pass")
    assert r.returncode == 0, r.stderr
    assert b"acp-proxy: INFO: agent started" in r.stderr


def test_an_empty_agent_command_says_what_to_do() -> None:
    one_sentence(run("--", ""), 2, "the agent command after -- is empty", "AGENT_CMD")


def test_no_arguments_on_a_pipe_is_not_chain_mode() -> None:
    """Chain mode needs --chain: a pipe without an agent command is a usage error."""
    init = {"jsonrpc": "2.0", "id": 0, "method": "proxy/initialize", "params": {}}
    r = run(stdin=json.dumps(init).encode() + b"\n")
    one_sentence(r, 2, "no agent command", "--chain")
    assert r.stdout == b""


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--max-connections", "4", "--", "true"], ["--max-connections", "--listen only"]),
        (["--token-file", "t", "--", "true"], ["--token-file", "--listen and --connect"]),
        (["--chain", "--token-file", "t"], ["--token-file", "--chain"]),
        (["--connect", "ws://127.0.0.1:1/", "--max-connections", "2"], ["--max-connections"]),
        (["--connect", "ws://127.0.0.1:1/", "--", "agent"], ["--connect takes no agent command"]),
        (["--chain", "--", "agent"], ["--chain takes no agent command"]),
    ],
)
def test_options_that_do_not_apply_to_the_mode_are_refused(
    args: list[str], words: list[str]
) -> None:
    one_sentence(run(*args), 2, *words)


# --- check-config checks what the config names ----------------------------


def test_check_config_checks_the_audit_directory(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[audit]\npath = "{tmp_path}/missing/audit.jsonl"\n')
    one_sentence(run("check-config", str(cfg)), 2, "audit.path", "does not exist")


def test_check_config_checks_the_token_file(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[listen]\ntoken_file = "{tmp_path}/token"\n')
    one_sentence(run("check-config", str(cfg)), 2, "token file", "No such file")
    (tmp_path / "token").write_text("s3cret\n")
    assert run("check-config", str(cfg)).returncode == 0


def test_check_config_checks_the_agent_command(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text("")
    r = run("check-config", str(cfg), "--", "no-such-agent-acp-test", "--acp")
    one_sentence(r, 2, "'no-such-agent-acp-test'", "not found on PATH")
    r = run("check-config", str(cfg), "--", "/nonexistent/agent")
    one_sentence(r, 2, "'/nonexistent/agent'", "does not exist")
    assert run("check-config", str(cfg), "--", PY, "-c", "pass").returncode == 0


def test_an_agent_path_that_cannot_run_says_what_to_do(tmp_path: Path) -> None:
    """A directory or a file without the executable bit, given as the agent: one
    sentence saying what to do, exit 2, and the agent never started."""
    script = tmp_path / "agent.sh"
    marker = tmp_path / "started"
    script.write_text(f"#!/bin/sh\ntouch {marker}\n")
    line = one_sentence(run("--", str(script)), 2, repr(str(script)), "chmod +x")
    assert "interpreter" in line
    line = one_sentence(run("--", str(tmp_path)), 2, repr(str(tmp_path)), "is a directory")
    assert "executable" in line
    assert not marker.exists()


def test_an_empty_config_or_log_file_is_refused_before_the_agent_starts(tmp_path: Path) -> None:
    """``--config ''`` (a wrapper's unset variable) is not read as "no file": the run
    would go on without the policy the user meant. Exit 2, and no agent started."""
    marker = tmp_path / "started"
    agent = [PY, "-c", f"open({str(marker)!r}, 'w')"]
    for args in (["--config", ""], ["--config="], ["--log-file", ""], ["--log-file="]):
        option = args[0].split("=")[0]
        one_sentence(run(*args, "--", *agent), 2, f"{option} is empty", "give the path")
    assert not marker.exists()


def test_a_missing_config_file_says_what_to_do(tmp_path: Path) -> None:
    marker = tmp_path / "started"
    agent = [PY, "-c", f"open({str(marker)!r}, 'w')"]
    missing = tmp_path / "nope.toml"
    for args in (["--config", str(missing)], ["--config", str(tmp_path)]):
        one_sentence(run(*args, "--", *agent), 2, "cannot read config file", "config default")
    assert not marker.exists()


# --- the WebSocket modes ---------------------------------------------------


def test_listen_checks_the_agent_command_before_listening() -> None:
    r = run("--listen", "ws://127.0.0.1:0/acp", "--", "no-such-agent-acp-test")
    one_sentence(r, 2, "'no-such-agent-acp-test'", "not found on PATH")


def test_listen_on_an_address_in_use_is_a_usage_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        r = run("--listen", f"ws://127.0.0.1:{port}/acp", "--", PY, "-c", "pass")
    one_sentence(r, 2, "cannot listen on", "in use")


@pytest.mark.parametrize(
    ("status", "words"),
    [
        (401, ["HTTP 401", "--token-file"]),
        (403, ["HTTP 403", "listen.allowed_origins"]),
        (404, ["HTTP 404", "'/acp'", "path"]),
    ],
)
async def test_connect_explains_a_refused_upgrade(status: int, words: list[str]) -> None:
    async def refuse(request: WebSocketRequest) -> None:
        await request.reject(status)

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            server = await nursery.start(serve_websocket, refuse, "127.0.0.1", 0, None)
            url = f"ws://127.0.0.1:{server.port}/acp"
            r = await trio.run_process(
                [PY, "-m", "acp_proxy", "--connect", url],
                stdin=b"",
                capture_stdout=True,
                capture_stderr=True,
                check=False,
                cwd=ROOT,
            )
            nursery.cancel_scope.cancel()
    one_sentence(r, 2, *words)


# --- held traffic dropped is reported as released traffic is ----------------

#: an agent that sends an update for a session it never established, then waits
_EARLY_AGENT = (
    "import sys, time\n"
    'sys.stdout.write(\'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":'
    '"sess_ghost","update":{"sessionUpdate":"agent_message_chunk","content":'
    '{"type":"text","text":"boo"}}}}\\n\')\n'
    "sys.stdout.flush()\n"
    "time.sleep(1.5)\n"
)


@pytest.mark.parametrize("policy", ["drop", "release"])
def test_held_traffic_expiring_is_reported_at_the_default_level(
    tmp_path: Path, policy: str
) -> None:
    """``on_expire = "drop"`` (strict) says so on stderr, as ``"release"`` always did."""
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[hold]\ntimeout_seconds = 0.2\non_expire = "{policy}"\n')
    proc = subprocess.Popen(
        [PY, "-m", "acp_proxy", "--config", str(cfg), "--", PY, "-c", _EARLY_AGENT],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )
    out, err = proc.communicate(timeout=30)  # stdin stays open until the agent has exited
    assert proc.returncode == 0, err
    lines = [line for line in err.decode().splitlines() if "sess_ghost" in line]
    assert len(lines) == 1, err
    verb = "dropped" if policy == "drop" else "released"
    assert verb in lines[0]
    assert "timeout" in lines[0]
    assert (b"sess_ghost" in out) == (policy == "release")


# --- shipped configurations -------------------------------------------------


@pytest.mark.parametrize("name", ["default", "strict"])
def test_config_prints_the_shipped_file_with_comments(name: str, tmp_path: Path) -> None:
    r = run("config", name, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    text = r.stdout.decode()
    assert text == bundled_text(name)
    assert text.startswith("# acp-proxy configuration")
    assert text == (ROOT / "config" / f"{name}.toml").read_text()  # the repository's copy
    (tmp_path / "c.toml").write_text(text)
    loaded = load_config(tmp_path / "c.toml")
    assert (loaded == Config()) == (name == "default")


def test_config_with_an_unknown_name_is_one_line() -> None:
    one_sentence(run("config", "loose"), 2, "default,strict,budgets,permissions", "loose")


@pytest.mark.parametrize("name", ["budgets", "permissions"])
def test_config_prints_a_shipped_example(name: str, tmp_path: Path) -> None:
    """The examples are reachable from an install: ``acp-proxy config NAME`` prints the
    package's copy, the clone's config/examples/NAME.toml, and it is a valid config."""
    r = run("config", name, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    text = r.stdout.decode()
    assert text == (ROOT / "config" / "examples" / f"{name}.toml").read_text()
    assert f"acp-proxy config {name} > {name}.toml" in text
    (tmp_path / "c.toml").write_text(text)
    assert load_config(tmp_path / "c.toml") != Config()


def test_config_alone_lists_the_shipped_files() -> None:
    """``acp-proxy config`` with no name lists what it can print (exit 0)."""
    r = run("config")
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().splitlines() == [
        "usage: acp-proxy config {default,strict,budgets,permissions}",
        "",
        "Prints a configuration file shipped with acp-proxy, with its comments:",
        "  default      every key with its default value",
        "  strict       a starting point for untrusted agents",
        "  budgets      example: budgets on prompts, tool calls, turn time and tokens, "
        "observed first",
        "  permissions  example: the [[permissions.rules]] reference, with a policy",
        "Start from one: acp-proxy config strict > ~/.config/acp-proxy/strict.toml",
    ]


def test_a_log_file_s_lines_begin_with_the_time(tmp_path: Path) -> None:
    """--log-file lines carry an ISO 8601 UTC time (stderr's do not: editors time them)."""
    log = tmp_path / "proxy.log"
    r = run("--log-file", str(log), "--log-level", "info", "--", PY, "-c", "pass")
    assert r.returncode == 0, r.stderr
    lines = log.read_text().splitlines()
    assert lines
    stamp = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z acp-proxy: INFO: "
    assert all(re.match(stamp, line) for line in lines), lines
    assert re.match(stamp + "agent started: pid", lines[0])


def test_a_risky_setting_is_warned_at_start_as_check_config_warns() -> None:
    """--max-message-bytes 10 is valid but no initialize fits: the run says so (once)."""
    r = run("--max-message-bytes", "10", "--", PY, "-c", "pass")
    assert r.returncode == 0
    warned = [line for line in r.stderr.decode().splitlines() if "risky setting" in line]
    assert len(warned) == 1, r.stderr
    assert "limits.max_message_bytes = 10" in warned[0]
    assert warned[0].startswith("acp-proxy: WARNING: ")
    assert b"risky setting" not in run("--", PY, "-c", "pass").stderr


@pytest.mark.parametrize(
    ("redirect", "name"), [("<&-", "standard input"), (">&-", "standard output")]
)
def test_a_closed_stdin_or_stdout_is_refused_before_the_agent_starts(
    tmp_path: Path, redirect: str, name: str
) -> None:
    """fd 0 or 1 closed at start: the agent's pipes would take its number (and stdout
    was a crash at exit). Exit 2, one sentence, no agent started."""
    marker = tmp_path / "started"
    agent = f'{PY} -c \'open("{marker}", "w")\''
    r = subprocess.run(
        ["/bin/sh", "-c", f"exec {PY} -m acp_proxy -- {agent} {redirect}"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        timeout=30,
        cwd=ROOT,
    )
    one_sentence(r, 2, f"{name} is closed", "--listen")
    assert not marker.exists()


def test_trace_content_without_a_trace_is_refused(tmp_path: Path) -> None:
    """``--trace-content`` alone asks for content in a trace that is not written: refused,
    before any agent starts; with ``--trace`` or a config's ``[trace] path`` it is taken."""
    marker = tmp_path / "started"
    agent = [PY, "-c", f"open({str(marker)!r}, 'w')"]
    one_sentence(run("--trace-content", "--", *agent), 2, "--trace-content", "--trace FILE")
    assert not marker.exists()
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[trace]\npath = "{tmp_path / "t.jsonl"}"\n')
    r = run("--config", str(cfg), "--trace-content", "--", *agent)
    assert r.returncode == 0, r.stderr.decode()
    assert marker.exists()
