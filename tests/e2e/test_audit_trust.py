"""The audit log can be trusted, through the real proxy process (issue 25): a verified chain
over a real run, every decision (asks and the client's answers) on the record, files opened
only if regular, fail closed on a lost record, the off-host copy over OTLP."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import trio
from support import e2ekit
from support.e2ekit import (
    agent_to_client,
    bridged_proxy,
    client_to_agent,
    handshake_v1,
    ok,
    open_proxy,
    proxy_command,
    req,
    write_config,
)
from support.otlpkit import attributes, otlp_receiver
from support.srt import srt_engine

TIMEOUT = 60
PY = sys.executable

RULES = """
[[permissions.rules]]
name = "no-etc-writes"
action = "deny"
method = "fs/write_text_file"
path = "/etc/**"
"""

PERMISSION = {
    "sessionId": "S1",
    "toolCall": {"toolCallId": "t1", "title": "rm -rf build", "kind": "execute"},
    "options": [
        {"optionId": "allow-once", "name": "Allow", "kind": "allow_once"},
        {"optionId": "reject-once", "name": "Reject", "kind": "reject_once"},
    ],
}


def run_cli(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PY, "-m", "acp_proxy", *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
        cwd=cwd,
    )


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()]


async def test_a_real_run_is_chained_every_ask_and_answer_recorded_and_verifies(
    tmp_path: Path,
) -> None:
    """A request_permission no rule decides is on the record as action "ask", the client's
    choice as permission_answered; the whole run verifies, and an edit does not."""
    audit = tmp_path / "audit.jsonl"
    config = write_config(tmp_path / "c.toml", RULES)
    args = ["--config", str(config), "--audit-log", str(audit)]
    with trio.fail_after(TIMEOUT):
        async with bridged_proxy(args) as (proxy, agent):
            await handshake_v1(proxy, agent)
            await agent_to_client(proxy, agent, req(40, "session/request_permission", PERMISSION))
            answer = ok(40, {"outcome": {"outcome": "selected", "optionId": "reject-once"}})
            await client_to_agent(proxy, agent, answer)
            await proxy.close_stdin()
            assert await proxy.wait() == 0
    events = records(audit)
    assert [e["seq"] for e in events] == list(range(len(events)))
    assert events[0]["event"] == "run_started"
    assert events[-1]["event"] == "run_closed"
    decided = next(e for e in events if e["event"] == "permission_decided")
    assert (decided["action"], decided["method"], decided["id"]) == (
        "ask",
        "session/request_permission",
        40,
    )
    answered = next(e for e in events if e["event"] == "permission_answered")
    assert (answered["outcome"], answered["optionId"], answered["id"]) == (
        "selected",
        "reject-once",
        40,
    )
    verified = run_cli("audit", "verify", str(audit))
    assert verified.returncode == 0, verified.stdout
    assert f"1 run, {len(events)} records" in verified.stdout
    audit.write_text(audit.read_text().replace('"reject-once"', '"allow-once"'))
    tampered = run_cli("audit", "verify", str(audit))
    assert tampered.returncode == 1
    assert "changed" in tampered.stdout


def _not_regular(tmp_path: Path, kind: str) -> Path:
    """A path that is a symbolic link (to a shell rc file), a FIFO, a device or a directory."""
    if kind == "device":
        return Path("/dev/full")
    path = tmp_path / f"{kind}.jsonl"
    if kind == "symlink":
        target = tmp_path / "bashrc"
        target.write_text("# rc\n")
        path.symlink_to(target)
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
    return path


KINDS = ["symlink", "fifo", "device", "directory"]
WHERE = {"audit": ("--audit-log", "audit"), "trace": ("--trace", "trace")}


@pytest.mark.parametrize("where", sorted(WHERE))
@pytest.mark.parametrize("kind", KINDS)
def test_a_path_that_is_not_a_regular_file_is_refused_at_start_and_in_check_config(
    tmp_path: Path, kind: str, where: str
) -> None:
    """Exit 2 with one sentence, at start and in check-config, without blocking on a FIFO
    and without writing through a link."""
    path = _not_regular(tmp_path, kind)
    option, section = WHERE[where]
    started = run_cli(option, str(path), "--", PY, "-c", "pass")
    assert started.returncode == 2, started.stderr
    assert len(started.stderr.strip().splitlines()) == 1
    config = write_config(tmp_path / "c.toml", f'[{section}]\npath = "{path}"\n')
    checked = run_cli("check-config", str(config))
    assert checked.returncode == 2, checked.stdout
    assert len(checked.stderr.strip().splitlines()) == 1
    for result in (started, checked):
        assert "regular file" in result.stderr or "is a directory" in result.stderr
    if kind == "symlink":
        assert (tmp_path / "bashrc").read_text() == "# rc\n"


def test_a_symlinked_log_file_is_refused(tmp_path: Path) -> None:
    """--log-file through a symbolic link: exit 2, the target untouched."""
    path = _not_regular(tmp_path, "symlink")
    result = run_cli("--log-file", str(path), "--", PY, "-c", "pass")
    assert result.returncode == 2
    assert "regular file" in result.stderr
    assert (tmp_path / "bashrc").read_text() == "# rc\n"


#: run the command that follows under RLIMIT_FSIZE = argv[1] bytes (the proxy and its agent)
FSIZE = (
    "import os, resource, sys\n"
    "n = int(sys.argv[1])\n"
    "resource.setrlimit(resource.RLIMIT_FSIZE, (n, n))\n"
    "os.execv(sys.argv[2], sys.argv[2:])\n"
)


def _limited(monkeypatch: pytest.MonkeyPatch, limit: int) -> None:
    def command(*proxy_args: str) -> list[str]:
        return [PY, "-c", FSIZE, str(limit), *proxy_command(*proxy_args)]

    monkeypatch.setattr(e2ekit, "proxy_command", command)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


#: bytes the audit log may grow to: run_started fits, the next record does not
LIMIT = 300


@pytest.mark.parametrize("how", ["fsize", "unlink"])
async def test_required_fails_closed_when_a_record_is_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """audit.required: the record cannot be written (RLIMIT_FSIZE, or the file removed):
    the request in flight and a new one are answered with the audit error, nothing more
    reaches the agent, the exit status is 1 and stderr says why in one sentence."""
    audit = tmp_path / "audit.jsonl"
    config = write_config(tmp_path / "c.toml", f'[audit]\npath = "{audit}"\nrequired = true\n')
    if how == "fsize":
        _limited(monkeypatch, LIMIT)
    with trio.fail_after(TIMEOUT):
        async with bridged_proxy(["--config", str(config)]) as (proxy, agent):
            await handshake_v1(proxy, agent)
            prompt = req(2, "session/prompt", {"sessionId": "S1", "prompt": []})
            await client_to_agent(proxy, agent, prompt)
            if how == "unlink":
                audit.unlink()
            await agent.send(ok(999, {}))  # an answer to no request: audited, not forwarded
            first = await proxy.out.recv_json()
            assert (first["id"], first["error"]["code"]) == (2, -32603)
            assert "audit log could not be written" in first["error"]["message"]
            await proxy.send(req(3, "session/prompt", {"sessionId": "S1", "prompt": []}))
            second = await proxy.out.recv_json()
            assert second["id"] == 3
            assert "audit log could not be written" in second["error"]["message"]
            assert await agent.lines.read_to_eof() == b""  # nothing forwarded after the loss
            await proxy.close_stdin()
            assert await proxy.wait() == 1
        last = proxy.stderr_text().strip().splitlines()[-1]
    assert "could not be written" in last
    assert "audit.required" in last
    assert proxy.stderr_text().count("could not be written") == 1


async def test_not_required_keeps_relaying_and_counts_the_loss(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """audit.required = false: after a lost record the relay goes on, the loss is logged
    once at error level and counted in /status and /metrics."""
    audit = tmp_path / "audit.jsonl"
    port = _free_port()
    _limited(monkeypatch, LIMIT)
    args = ["--audit-log", str(audit), "--metrics", f"127.0.0.1:{port}"]
    with trio.fail_after(TIMEOUT):
        async with bridged_proxy(args) as (proxy, agent):
            await handshake_v1(proxy, agent)
            for rid in (997, 998, 999):
                await agent.send(ok(rid, {}))  # each one audited: lost
            prompt = req(2, "session/prompt", {"sessionId": "S1", "prompt": []})
            await client_to_agent(proxy, agent, prompt)
            await agent_to_client(proxy, agent, ok(2, {"stopReason": "end_turn"}))
            status = await trio.to_thread.run_sync(_get_json, f"http://127.0.0.1:{port}/status")
            metrics = await trio.to_thread.run_sync(
                lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics").read().decode()
            )
            await proxy.close_stdin()
            assert await proxy.wait() == 0
    assert status["audit"]["lost"] >= 3
    assert status["audit"]["failure"] is None
    assert f"acp_proxy_audit_records_lost_total {status['audit']['lost']}" in metrics
    assert proxy.stderr_text().count("could not be written") == 1


def test_strict_puts_the_audit_log_under_the_state_directory(tmp_path: Path) -> None:
    """config strict: check-config names $XDG_STATE_HOME/acp-proxy/audit.jsonl, and a run
    creates that directory with mode 0700 and writes the log there."""
    state = tmp_path / "state"
    strict = tmp_path / "strict.toml"
    strict.write_text(run_cli("config", "strict").stdout)
    path = f"{srt_engine().parent}{os.pathsep}{os.environ['PATH']}"  # strict confines the agent
    env = {"XDG_STATE_HOME": str(state), "PATH": path}
    work = tmp_path / "work"  # the agent's workspace: the engine lies outside it
    work.mkdir()
    checked = run_cli("check-config", str(strict), env=env, cwd=work)
    assert checked.returncode == 0, checked.stderr
    where = state / "acp-proxy" / "audit.jsonl"
    assert f"# audit log: {where}" in checked.stdout
    assert not (state / "acp-proxy").exists()  # check-config creates nothing
    ran = run_cli("--config", str(strict), "--", PY, "-c", "pass", env=env, cwd=work)
    assert ran.returncode == 0, ran.stderr
    assert stat.S_IMODE((state / "acp-proxy").stat().st_mode) == 0o700
    assert records(where)[0]["event"] == "run_started"


def test_a_relative_audit_path_is_taken_from_the_config_files_directory(tmp_path: Path) -> None:
    """path = "logs/a.jsonl" in /x/c.toml is /x/logs/a.jsonl, whatever the working
    directory; check-config prints where."""
    (tmp_path / "logs").mkdir()
    config = write_config(tmp_path / "c.toml", '[audit]\npath = "logs/a.jsonl"\n')
    elsewhere = tmp_path / "work"
    elsewhere.mkdir()
    checked = subprocess.run(
        [PY, "-m", "acp_proxy", "check-config", str(config)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        cwd=elsewhere,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert checked.returncode == 0, checked.stderr
    assert f"# audit log: {tmp_path / 'logs' / 'a.jsonl'}" in checked.stdout


async def test_otel_exports_every_audit_record_as_a_log_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--otel: the audit records reach an OTLP/HTTP receiver as log records, the event as
    the event name, the fields as attributes, no content."""
    audit = tmp_path / "audit.jsonl"
    with otlp_receiver() as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
        monkeypatch.setenv("OTEL_BLRP_SCHEDULE_DELAY", "100")
        cmd = [*proxy_command("--otel", "--audit-log", str(audit)), PY, "-c", "pass"]
        with trio.fail_after(TIMEOUT):
            async with open_proxy(cmd) as proxy:
                await proxy.close_stdin()
                assert await proxy.wait() == 0
        logs = receiver.log_records()
    names = [r.event_name for r in logs]
    written = [r["event"] for r in records(audit) if r["event"] not in e2ekit.RUN_RECORDS]
    assert written
    assert [n.removeprefix("acp_proxy.audit.") for n in names] == written
    closed = next(r for r in logs if r.event_name == "acp_proxy.audit.peer_closed")
    attrs = attributes(closed.attributes)
    assert attrs["acp.audit.event"] == "peer_closed"
    assert attrs["acp.audit.direction"] in ("client->agent", "agent->client")
    assert not any("content" in k for r in logs for k in attributes(r.attributes))
