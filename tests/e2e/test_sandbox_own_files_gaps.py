"""A hostile agent's own code against what the README promises of the sandbox (real srt).

README, "Sandbox and threat model": *the proxy's own files (the config file, audit
log, trace, log file and token files) are neither readable nor writable, even inside
the workspace*, and *environment: the proxy's, without the names matching env_deny*.
Each test here is an agent (or its plant) that broke one of these promises before
the fix its test came with:

- a ``--config`` that is a symbolic link in the workspace: the engine hides the link's
  target, not the link, so the agent could re-point what ``--config`` names: refused;
- (held) an own file in a subdirectory of the workspace: the agent cannot rename the
  directory around it to make its own file there;
- ``--listen`` with ``[listen] tokens_file``: the file holding every principal's bearer
  token was not among the files the engine hides;
- ``--listen`` with an agent command: the agent started with the proxy's whole
  environment (``GH_TOKEN``, ``AWS_SECRET_ACCESS_KEY``...), while the proxy logged
  that it stripped them;
- ``unshare`` and ``which``, found on ``PATH`` and run outside the sandbox at every
  start, were not checked against the writable paths as ``bwrap``, ``socat``, ``rg``
  and ``node`` are: one planted in a workspace directory on ``PATH`` ran unconfined;
- an audit log in the workspace rotated under a running proxy (``required = false``,
  the default) was started anew at the same path, after the sandbox hid the old
  file: the agent could write the new one; now none is started there.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from functools import partial
from pathlib import Path

import trio
from support.srt import srt_engine
from support.wskit import AcpClient, connect

TIMEOUT = 120
INIT = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n'

#: An agent that makes the attempts named in its argv (JSON), reports them on stderr as
#: ``RESULT {...}`` and in ``initialize``'s ``_meta.attempts``, then answers every request.
AGENT = r"""
import json, os, sys
plan = json.loads(sys.argv[1])
done = {}
def attempt(name, fn):
    try:
        out = fn()
        done[name] = "ok" if out is None else "ok: " + str(out)[:200]
    except OSError as exc:
        done[name] = type(exc).__name__
def read(path):
    with open(path, "rb") as f:
        return f.read(200)
def repoint(link, text):
    os.unlink(link)
    with open(link, "w") as f:
        f.write(text)
for path in plan.get("read", []):
    attempt("read " + path, lambda p=path: read(p))
for link, text in plan.get("repoint", {}).items():
    attempt("repoint " + link, lambda l=link, t=text: repoint(l, t))
for name in plan.get("env", []):
    attempt("env " + name, lambda n=name: os.environ[n] if n in os.environ else None)
    if name not in os.environ:
        done["env " + name] = "absent"
sys.stderr.write("RESULT " + json.dumps(done) + "\n")
sys.stderr.flush()
for line in sys.stdin:
    msg = json.loads(line)
    if "id" in msg and "method" in msg:
        result = {"protocolVersion": 1, "_meta": {"attempts": done}}
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}) + "\n")
        sys.stdout.flush()
"""


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env["HOME"] = str(home)
    return env


def _sandbox_section() -> str:
    return f'[sandbox]\nenabled = true\nengine_command = "{srt_engine()}"\n'


def test_a_config_symlink_in_the_workspace_is_refused(tmp_path: Path) -> None:
    """``--config ws/acp.toml``, a link to a config kept outside the workspace: the engine
    hides the link's target, not the link, so the sandboxed agent could re-point it (its
    config, the sandbox off, read at the next start; at once under ``--watch-config``).
    The sandbox does not start: the agent never runs, the client's ``initialize`` is
    answered with the reason, naming the link; the link is unchanged."""
    home, ws, etc = tmp_path / "home", tmp_path / "ws", tmp_path / "etc"
    for d in (home, ws, etc):
        d.mkdir()
    real = etc / "acp.toml"
    real.write_text(f'[audit]\npath = "{tmp_path / "audit.jsonl"}"\n' + _sandbox_section())
    link = ws / "acp.toml"
    link.symlink_to(real)
    forged = "# the agent's config\n[sandbox]\nenabled = false\n"
    plan = {"read": [str(link)], "repoint": {str(link): forged}}
    argv = [sys.executable, "-m", "acp_proxy", "--config", str(link), "--"]
    argv += [sys.executable, "-c", AGENT, json.dumps(plan)]
    done = subprocess.run(
        argv, input=INIT, capture_output=True, cwd=ws, env=_env(home), timeout=TIMEOUT
    )
    stderr = done.stderr.decode(errors="replace")
    assert "RESULT " not in stderr  # the agent never ran
    [answer] = [json.loads(line) for line in done.stdout.splitlines()]
    message = answer["error"]["message"]
    assert f"reached through the symbolic link {link}" in message, message
    assert link.is_symlink()
    assert "[audit]" in link.read_text()


RENAME_AGENT = r"""
import json, os, sys
done = {}
for old, new in (("logs", "logs2"), ("deep", "deep2")):
    try:
        os.rename(old, new)
        done[old] = "renamed"
    except OSError as exc:
        done[old] = type(exc).__name__
for path in ("logs/audit.jsonl", "deep/er/trace.jsonl"):
    try:
        with open(path, "w") as f:
            f.write("forged")
        done[path] = "ok"
    except OSError as exc:
        done[path] = type(exc).__name__
sys.stderr.write("RESULT " + json.dumps(done) + "\n")
for line in sys.stdin:
    msg = json.loads(line)
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": {"protocolVersion": 1}}))
    sys.stdout.flush()
"""


def test_own_files_in_workspace_subdirectories_keep_their_directories(tmp_path: Path) -> None:
    """An audit log in ``ws/logs/`` and a trace in ``ws/deep/er/``: the engine hides each
    file, and the agent cannot rename a directory around one either (it would make
    its own file at the path the next start opens): the mount over the file keeps
    them busy. Held with srt 0.0.83; this test says so if an engine stops doing it."""
    home, ws = tmp_path / "home", tmp_path / "ws"
    (ws / "logs").mkdir(parents=True)
    (ws / "deep" / "er").mkdir(parents=True)
    home.mkdir()
    config = tmp_path / "c.toml"
    config.write_text(
        f'[audit]\npath = "{ws / "logs" / "audit.jsonl"}"\n'
        f'[trace]\npath = "{ws / "deep" / "er" / "trace.jsonl"}"\n' + _sandbox_section()
    )
    argv = [sys.executable, "-m", "acp_proxy", "--config", str(config), "--"]
    argv += [sys.executable, "-c", RENAME_AGENT]
    done = subprocess.run(
        argv, input=INIT, capture_output=True, cwd=ws, env=_env(home), timeout=TIMEOUT
    )
    stderr = done.stderr.decode(errors="replace")
    assert done.returncode == 0, stderr
    attempts = json.loads(stderr.split("RESULT ", 1)[1].splitlines()[0])
    assert attempts["logs"] == attempts["deep"] == "OSError", attempts  # EBUSY
    assert attempts["logs/audit.jsonl"] != "ok", attempts
    assert attempts["deep/er/trace.jsonl"] != "ok", attempts
    assert not (ws / "logs2").exists()
    assert "forged" not in (ws / "logs" / "audit.jsonl").read_text()


async def _listen_attempts(
    tmp_path: Path, config: Path, plan: dict[str, object], env: dict[str, str], token: str | None
) -> tuple[dict[str, str], str]:
    """Runs ``acp-proxy --listen`` sandboxed with the agent, connects once (with
    ``token`` as the bearer, or ``--no-token``), returns the agent's attempts and the
    proxy's stderr."""
    argv = [sys.executable, "-m", "acp_proxy", "--config", str(config)]
    argv += ["--listen", "ws://127.0.0.1:0/acp", *([] if token else ["--no-token"]), "--"]
    argv += [sys.executable, "-c", AGENT, json.dumps(plan)]
    headers = [(b"Authorization", f"Bearer {token}".encode())] if token else None
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            proc = await nursery.start(
                partial(trio.run_process, argv, stderr=subprocess.PIPE, cwd=tmp_path, env=env),
            )
            assert proc.stderr is not None
            seen = b""
            while b"listening on " not in seen or not seen.endswith(b"\n"):
                chunk = await proc.stderr.receive_some(4096)
                assert chunk, seen.decode(errors="replace")
                seen += chunk
            url = seen.decode().split("listening on ", 1)[1].split()[0]
            async with connect(url, headers) as ws:
                init = await AcpClient(ws).request("initialize", {"protocolVersion": 1})
            proc.send_signal(15)
    assert "result" in init, (init, seen.decode(errors="replace"))
    attempts: dict[str, str] = init["result"]["_meta"]["attempts"]
    return attempts, seen.decode(errors="replace")


async def test_the_listen_tokens_file_is_hidden_from_the_sandboxed_agent(tmp_path: Path) -> None:
    """``[listen] tokens_file`` holds the bearer token of every principal: a proxy's own
    file (the wire policy already refuses it as an ``*_file`` key), so the sandboxed agent
    of a connection must not read it."""
    home = tmp_path / "home"
    home.mkdir()
    tokens = tmp_path / "tokens"
    tokens.write_text("alice secret-token-of-alice-0123456789abcdef\n")
    tokens.chmod(0o600)
    config = tmp_path / "c.toml"
    config.write_text(f'[listen]\ntokens_file = "{tokens}"\n' + _sandbox_section())
    plan = {"read": [str(tokens), str(config)]}
    token = "secret-token-of-alice-0123456789abcdef"
    attempts, stderr = await _listen_attempts(tmp_path, config, plan, _env(home), token)
    assert attempts[f"read {config}"] != "ok", stderr  # the config file is hidden
    assert attempts[f"read {tokens}"] == "PermissionError", attempts


async def test_the_listen_agent_gets_the_environment_without_env_deny(tmp_path: Path) -> None:
    """With ``--listen`` and an agent command, the sandboxed agent of each connection
    starts with the environment the README promises (``env_deny`` names stripped; the
    private caches set), as in the stdio form; the proxy says it stripped them."""
    home = tmp_path / "home"
    home.mkdir()
    config = tmp_path / "c.toml"
    config.write_text(_sandbox_section())
    env = {**_env(home), "GH_TOKEN": "gh-secret", "AWS_SECRET_ACCESS_KEY": "aws-secret"}
    plan = {"env": ["GH_TOKEN", "AWS_SECRET_ACCESS_KEY", "XDG_CACHE_HOME"]}
    attempts, stderr = await _listen_attempts(tmp_path, config, plan, env, None)
    assert "not passed to the agent (env_deny): AWS_SECRET_ACCESS_KEY GH_TOKEN" in stderr
    assert attempts["env GH_TOKEN"] == "absent", attempts
    assert attempts["env AWS_SECRET_ACCESS_KEY"] == "absent", attempts
    assert "acp-proxy-cache-" in attempts["env XDG_CACHE_HOME"], attempts


def test_no_program_on_a_writable_path_dir_runs_unconfined_at_start(tmp_path: Path) -> None:
    """The README refuses code the agent could rewrite that would run unconfined at the
    next start: the engine, its interpreter and the tools it runs (``bwrap``, ``socat``,
    ``rg``) are looked up on ``PATH`` and refused inside a writable root. The launcher
    ``unshare`` (run by the proxy) and ``which`` (run by srt to find its tools) are
    looked up on the same ``PATH``: an agent that writes ``ws/bin/unshare`` (``ws/bin``
    on ``PATH``, as direnv's ``PATH_add bin`` does) runs its code outside the sandbox
    the next time the proxy starts. Here the programs are planted as the agent would
    plant them; the proxy must refuse to start rather than run them."""
    ws = tmp_path / "ws"
    (ws / "bin").mkdir(parents=True)
    marker = tmp_path / "ran-unconfined"
    for name in ("unshare", "which"):
        real = shutil.which(name)
        assert real is not None, f"{name} is not installed"
        planted = ws / "bin" / name
        planted.write_text(f'#!/bin/sh\necho "{name} $*" >> {marker}\nexec {real} "$@"\n')
        planted.chmod(0o755)
    config = ws / "c.toml"
    config.write_text(_sandbox_section())
    env = {**os.environ, "PATH": f"{ws / 'bin'}:{os.environ['PATH']}"}
    check = subprocess.run(
        [sys.executable, "-m", "acp_proxy", "check-config", str(config)],
        capture_output=True,
        text=True,
        cwd=ws,
        env=env,
        timeout=TIMEOUT,
    )
    ran = marker.read_text() if marker.exists() else ""
    assert ran == "", f"planted programs ran outside the sandbox:\n{ran}"
    assert check.returncode == 2, check.stderr


ROTATED_AGENT = r"""
import json, os, sys, time
line = sys.stdin.readline()
answer = {"jsonrpc": "2.0", "id": json.loads(line)["id"], "result": {"protocolVersion": 1}}
print(json.dumps(answer), flush=True)
while not os.path.exists("audit.jsonl.1"):
    time.sleep(0.05)
print(json.dumps({"jsonrpc": "2.0", "id": 999, "result": {}}), flush=True)  # a record
result = "not reopened"
for _ in range(200):
    time.sleep(0.05)
    if not os.path.exists("audit.jsonl"):
        continue
    try:
        with open("audit.jsonl", "ab") as f:
            f.write(b'{"event": "forged by the agent"}\n')
        result = "ok"
        break
    except OSError as exc:
        result = type(exc).__name__
sys.stderr.write("ROTATED " + result + "\n")
sys.stderr.flush()
sys.stdin.read()
"""


def test_a_rotated_audit_log_in_the_workspace_is_not_started_anew(tmp_path: Path) -> None:
    """README: with ``required = false`` a log removed or replaced under a running proxy
    (rotated) is noticed and a new file is started; the proxy's own files are neither
    readable nor writable by the agent. A new file made after the sandbox hid the old
    one, at a path inside the workspace, would be writable by the agent: with the
    sandbox on, the proxy starts none there (the records are lost, counted)."""
    home, ws = tmp_path / "home", tmp_path / "ws"
    home.mkdir()
    ws.mkdir()
    config = tmp_path / "c.toml"
    config.write_text(_sandbox_section())  # [audit] required = false: the default
    argv = [sys.executable, "-m", "acp_proxy", "--config", str(config)]
    argv += ["--audit-log", str(ws / "audit.jsonl"), "--", sys.executable, "-c", ROTATED_AGENT]
    proxy = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ws,
        env=_env(home),
    )
    assert proxy.stdin is not None
    assert proxy.stdout is not None
    assert proxy.stderr is not None
    try:
        proxy.stdin.write(INIT)
        proxy.stdin.flush()
        assert b'"id": 1' in proxy.stdout.readline()
        os.rename(ws / "audit.jsonl", ws / "audit.jsonl.1")  # logrotate's "create" mode
        seen = b""
        while b"ROTATED " not in seen:
            line = proxy.stderr.readline()
            assert line, seen.decode(errors="replace")
            seen += line
        proxy.stdin.close()
        proxy.wait(timeout=TIMEOUT)
        seen += proxy.stderr.read()
    finally:
        if proxy.poll() is None:
            proxy.kill()
            proxy.wait()
        proxy.stdout.close()
        proxy.stderr.close()
    result = seen.decode(errors="replace").split("ROTATED ", 1)[1].splitlines()[0]
    stderr = seen.decode(errors="replace")
    # no new file inside the agent's reach: the records after the rotation are lost
    # (counted, said once), never written where the agent could have forged them
    assert "not starting a new file there: it lies inside" in stderr, stderr
    assert result == "not reopened", result
    assert not (ws / "audit.jsonl").exists() or "forged" not in (ws / "audit.jsonl").read_text()
    rotated = (ws / "audit.jsonl.1").read_text()
    assert '"reopened"' not in rotated
    assert "forged by the agent" not in rotated
