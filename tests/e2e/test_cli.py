"""The command-line contract (docs/design.md section 3): modes, usage errors, check-config."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str, stdin: bytes = b"", timeout: float = 30) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "acp_proxy", *args],
        input=stdin,
        capture_output=True,
        timeout=timeout,
        cwd=ROOT,
    )


def test_conflicting_modes_are_a_usage_error() -> None:
    """--listen with --connect exits 2 with a message naming the choice."""
    r = run("--listen", "ws://127.0.0.1:0/", "--connect", "ws://127.0.0.1:1/")
    assert r.returncode == 2
    assert b"choose one of" in r.stderr


def test_unknown_option_is_a_usage_error() -> None:
    """An unknown flag exits 2."""
    r = run("--no-such-flag", "--", "true")
    assert r.returncode == 2


def test_bad_config_file_exits_2_naming_the_key(tmp_path: Path) -> None:
    """A config file with a wrong type stops the proxy with status 2 and names the key."""
    cfg = tmp_path / "bad.toml"
    cfg.write_text('[hold]\ntimeout_seconds = "soon"\n')
    r = run("--config", str(cfg), "--", sys.executable, "-c", "pass")
    assert r.returncode == 2
    assert b"hold.timeout_seconds" in r.stderr


def test_check_config_prints_the_effective_config(tmp_path: Path) -> None:
    """check-config validates a file and prints the effective config, which loads again."""
    cfg = tmp_path / "c.toml"
    cfg.write_text('[hold]\non_expire = "drop"\n')
    r = run("check-config", str(cfg))
    assert r.returncode == 0, r.stderr
    assert b'on_expire = "drop"' in r.stdout
    again = tmp_path / "again.toml"
    again.write_bytes(r.stdout)
    assert run("check-config", str(again)).stdout == r.stdout


def test_check_config_rejects_unknown_key(tmp_path: Path) -> None:
    """check-config exits 2 on an unknown key."""
    cfg = tmp_path / "c.toml"
    cfg.write_text("[hold]\nfoo = 1\n")
    r = run("check-config", str(cfg))
    assert r.returncode == 2
    assert b"hold.foo" in r.stderr


def test_missing_agent_command_exits_2_with_the_helpful_sentence() -> None:
    """The stdio form says what --listen and check-config say about a missing agent."""
    r = run("--", "no-such-agent-cmd", "--acp")
    assert r.returncode == 2, r.stderr
    assert (
        b"agent command 'no-such-agent-cmd' was not found on PATH; give its absolute path "
        b"(editors often start the proxy with a shorter PATH" in r.stderr
    )
    assert b"Errno" not in r.stderr
    r = run("--", "/nonexistent/agent-binary")
    assert r.returncode == 2, r.stderr
    assert b"agent command '/nonexistent/agent-binary' does not exist" in r.stderr


def test_agent_that_exists_but_cannot_start_exits_127(tmp_path: Path) -> None:
    """An agent executable the system cannot run (here: no known executable format)
    gives exit status 127 and a message on stderr. (A missing #! interpreter is a
    usage error: tests/e2e/test_newuser_messages.py.)"""
    agent = tmp_path / "agent"
    agent.write_bytes(b"\x00\x01 not an executable format\n")
    agent.chmod(0o755)
    r = run("--", str(agent))
    assert r.returncode == 127, r.stderr
    assert b"cannot start agent" in r.stderr


def test_chain_mode_wraps_for_the_successor() -> None:
    """--chain: a proxy/initialize on stdin is wrapped for the successor."""
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "proxy/initialize",
        "params": {"protocolVersion": 1},
    }
    r = run("--chain", stdin=json.dumps(init).encode() + b"\n")
    assert r.returncode == 0, r.stderr
    first = json.loads(r.stdout.splitlines()[0])
    assert first["method"] == "proxy/successor"
    assert first["params"] == {"method": "initialize", "params": {"protocolVersion": 1}}


def test_plain_initialize_in_chain_mode_explains_itself() -> None:
    """A plain initialize in chain mode is refused with a message saying how to wrap."""
    init = {"jsonrpc": "2.0", "id": 5, "method": "initialize", "params": {"protocolVersion": 1}}
    r = run("--chain", stdin=json.dumps(init).encode() + b"\n")
    answer = json.loads(r.stdout.splitlines()[0])
    assert answer["id"] == 5
    assert answer["error"]["code"] == -32600
    assert "acp-proxy -- AGENT_CMD" in answer["error"]["message"]


def _run_with_closed_stdout(*args: str) -> subprocess.CompletedProcess[bytes]:
    """Runs acp-proxy with its stdout a pipe whose reader is already gone (``... | head``)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [sys.executable, "-m", "acp_proxy", *args],
            stdin=subprocess.DEVNULL,
            stdout=write_end,
            stderr=subprocess.PIPE,
            timeout=90,
            cwd=ROOT,
        )
    finally:
        os.close(write_end)


def test_a_closed_stdout_ends_quietly_with_status_141() -> None:
    """`acp-proxy demo | head -1`, `demo --json | head -1`, `config strict | head -1`: no
    traceback, status 128 + SIGPIPE as a shell reports for a tool that SIGPIPE ended."""
    for args in (("demo",), ("demo", "--json"), ("config", "strict")):
        r = _run_with_closed_stdout(*args)
        assert r.returncode == 141, (args, r.stderr)
        assert b"Traceback" not in r.stderr, r.stderr
        assert b"BrokenPipe" not in r.stderr, r.stderr


def test_help_opens_with_a_usage_line_naming_the_drop_in_form() -> None:
    """``--help`` and ``-h``: the first line is ``usage: acp-proxy ...`` (it was a bare
    ``usage:``), each other form lined up under it, its description below it."""
    for flag in ("--help", "-h"):
        r = run(flag)
        assert r.returncode == 0, r.stderr
        lines = r.stdout.decode().splitlines()
        assert lines[0] == "usage: acp-proxy [options] -- AGENT_CMD [ARGS...]"
        assert lines[1] == "           stdio client <-> agent subprocess (the drop-in form)"
        forms = [line for line in lines if line.startswith("       acp-proxy ")]
        assert "       acp-proxy --chain [options]" in forms
        assert len(forms) == 10
