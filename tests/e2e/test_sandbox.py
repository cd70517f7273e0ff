"""Issue 24 end to end: the agent confined by srt, with real processes.

An agent that tries, with its own code, to read credentials under a fake
``HOME``, to write, append and delete outside the workspace, to read,
truncate and delete the proxy's audit log and config inside the workspace,
to reach a local server directly and through its proxy variables, and to
leave a double-forked daemon: without the sandbox every attempt succeeds
(so the attempts are real), with it every one fails, while the same agent
still reads and writes its workspace. A missing engine fails closed.
"""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio
from support.srt import srt_engine
from support.wskit import AcpClient, connect

ESCAPE_AGENT = Path(__file__).resolve().parents[1] / "support" / "peers" / "escape_agent.py"
PAIR_AGENT = ESCAPE_AGENT.with_name("pair_agent.py")
TIMEOUT = 120
#: what an error names a workspace root that is the proxy's working directory
CWD_WORKSPACE = "(the workspace: the proxy's working directory; [sandbox] workspace sets another)"
INIT = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n'

#: The attempts that must fail inside the sandbox (the daemon starts; it must not outlive it).
ESCAPES = (
    "read_ssh_key",
    "read_aws_credentials",
    "read_netrc",
    "write_outside",
    "append_outside",
    "delete_outside",
    "write_home_bashrc",
    "read_audit_log",
    "truncate_audit_log",
    "append_audit_log",
    "rename_audit_log",
    "delete_audit_log",
    "read_config",
    "write_config",
    "delete_config",
    "connect_direct",
    "connect_via_proxy_vars",
    "child_process_connect",
)


class _Server:
    """A loopback TCP server counting the connections it accepted."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.hits = 0
        self._stop = False
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.hits += 1
            with conn:
                conn.settimeout(2)
                try:
                    # the whole request head first: closing with bytes unread resets the
                    # connection, which srt's proxy answers 502 (seen under load)
                    head = b""
                    while b"\r\n\r\n" not in head and (chunk := conn.recv(4096)):
                        head += chunk
                    conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok")
                    conn.shutdown(socket.SHUT_WR)
                except OSError:
                    pass

    def close(self) -> None:
        self._stop = True
        self._thread.join()
        self.sock.close()


@pytest.fixture
def server() -> Iterator[_Server]:
    s = _Server()
    yield s
    s.close()


def _daemons(marker: str) -> list[int]:
    """Pids of processes whose command line carries ``marker``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline.split(b"\0"):
            found.append(int(entry))
    return found


def _cmdline(pid: int) -> list[bytes]:
    """The arguments of ``pid`` (none once it is gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return []


def _end(proxy: subprocess.Popen[bytes], marker: str) -> None:
    """A test's teardown: the proxy killed if it still runs, and every process carrying
    ``marker`` (the agent's daemons) killed."""
    if proxy.poll() is None:
        proxy.kill()
    for pid in _daemons(marker):
        os.kill(pid, 9)


def _scene(
    tmp_path: Path, port: int, *, sandbox: bool, engine: str, allowed: str = ""
) -> dict[str, Any]:
    """A fake home with credentials, a workspace holding the proxy's audit log and
    config, a directory outside; the plan for the escape agent."""
    home, ws, out = tmp_path / "home", tmp_path / "ws", tmp_path / "outside"
    for d in (home / ".ssh", home / ".aws", ws, out):
        d.mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY\n")
    (home / ".aws" / "credentials").write_text("[default]\naws_secret_access_key = x\n")
    (home / ".netrc").write_text("machine example.com password hunter2\n")
    (home / ".bashrc").write_text("# shell\n")
    (out / "existing.txt").write_text("before\n")
    (out / "victim.txt").write_text("keep me\n")
    audit, config = ws / "audit.jsonl", ws / "acp-proxy.toml"
    text = f'[audit]\npath = "{audit}"\n'
    if sandbox:
        text += f'[sandbox]\nenabled = true\nengine_command = "{engine}"\nwritable = []\n'
        text += f"allowed_domains = [{allowed!r}]\n" if allowed else ""
    config.write_text(text)
    marker = f"acp-proxy-test-daemon-{os.getpid()}-{time.monotonic_ns()}"
    plan = {
        "home": str(home),
        "workspace": str(ws),
        "outside": str(out),
        "audit": str(audit),
        "config": str(config),
        "port": port,
        "marker": marker,
    }
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    return plan


def _run_agent(tmp_path: Path, plan: dict[str, Any]) -> tuple[dict[str, str], int, str]:
    """Runs the proxy with the escape agent: initialize, then EOF. Returns the
    attempts, the proxy's exit status and its stderr."""
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env["HOME"] = plan["home"]
    argv = [sys.executable, "-m", "acp_proxy", "--config", plan["config"], "--"]
    argv += [sys.executable, str(ESCAPE_AGENT), str(tmp_path / "plan.json")]
    done = subprocess.run(
        argv, input=INIT, capture_output=True, cwd=plan["workspace"], env=env, timeout=TIMEOUT
    )
    stderr = done.stderr.decode(errors="replace")
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    assert lines, f"no answer (status {done.returncode}):\n{stderr[-3000:]}"
    attempts: dict[str, str] = lines[0]["result"]["_meta"]["attempts"]
    return attempts, done.returncode, stderr


def test_without_the_sandbox_every_escape_succeeds(tmp_path: Path, server: _Server) -> None:
    """The baseline: the same attempts, unconfined, all succeed (so they are real)."""
    plan = _scene(tmp_path, server.port, sandbox=False, engine="")
    try:
        attempts, status, stderr = _run_agent(tmp_path, plan)
        assert status == 0, stderr
        assert attempts == dict.fromkeys([*ESCAPES, "daemon", "workspace_read_write"], "ok")
        assert server.hits == 3  # direct, via proxy variables (none set), from a child
        assert _daemons(plan["marker"])  # the daemon outlived the proxy
    finally:
        for pid in _daemons(plan["marker"]):
            os.kill(pid, 9)


def test_inside_the_sandbox_every_escape_fails(tmp_path: Path, server: _Server) -> None:
    """Through srt: credentials, outside writes, the proxy's own files, the network and
    a daemon are all out of reach; the workspace is still read and written; the audit
    log holds the sandbox_started record, untouched by the agent."""
    plan = _scene(tmp_path, server.port, sandbox=True, engine=str(srt_engine()))
    try:
        attempts, status, stderr = _run_agent(tmp_path, plan)
        assert status == 0, stderr
        escaped = {name: attempts[name] for name in ESCAPES if attempts[name] == "ok"}
        assert escaped == {}, f"escaped the sandbox: {escaped}"
        assert attempts["workspace_read_write"] == "ok"
        assert attempts["daemon"] == "ok"
        assert server.hits == 0
        assert _daemons(plan["marker"]) == []  # killed with the sandbox's pid namespace
    finally:
        for pid in _daemons(plan["marker"]):
            os.kill(pid, 9)
    home, out, ws = Path(plan["home"]), Path(plan["outside"]), Path(plan["workspace"])
    assert (out / "existing.txt").read_text() == "before\n"
    assert (out / "victim.txt").exists()
    assert not (out / "new.txt").exists()
    assert (home / ".bashrc").read_text() == "# shell\n"
    assert (ws / "notes.txt").read_text() == "escaped\n"
    assert "sandbox" in Path(plan["config"]).read_text()
    records = [json.loads(line) for line in Path(plan["audit"]).read_text().splitlines()]
    records = [r for r in records if r["event"] not in ("run_started", "run_closed")]
    started = records[0]
    assert started["event"] == "sandbox_started"
    assert started["version"] == "0.0.83"
    assert started["digest"].startswith("sha256:")
    assert started["workspace"] == [plan["workspace"]]
    assert [r["event"] for r in records[1:]] == ["peer_closed", "peer_closed"]


def test_an_allowed_local_endpoint_is_reached_through_the_engine_proxy_only(
    tmp_path: Path, server: _Server
) -> None:
    """allowed_domains = ["127.0.0.1:PORT"] (a local model endpoint): the agent reaches
    it through srt's proxy (its proxy variables), never directly."""
    engine = str(srt_engine())
    plan = _scene(
        tmp_path, server.port, sandbox=True, engine=engine, allowed=f"127.0.0.1:{server.port}"
    )
    try:
        attempts, status, stderr = _run_agent(tmp_path, plan)
    finally:
        for pid in _daemons(plan["marker"]):
            os.kill(pid, 9)
    assert status == 0, stderr
    assert attempts["connect_via_proxy_vars"] == "ok"
    assert attempts["connect_direct"] != "ok"
    assert attempts["read_ssh_key"] != "ok"
    assert server.hits == 1


def test_two_sandboxed_proxies_at_once_each_reach_the_endpoint_through_their_own_engine(
    tmp_path: Path, server: _Server
) -> None:
    """Two proxies, each with its agent under srt and the endpoint allowed, at once: each
    agent's request through its proxy variables reaches it. srt named its mux socket
    after its pid (pid 1 in every engine's namespace), so in one TMPDIR the second
    engine replaced the first's, and one agent met the other's proxy (407) or none
    (502); each engine start now has a TMPDIR of its own."""
    engine = str(srt_engine())
    procs = []
    for name, other in (("a", "b"), ("b", "a")):
        ws = tmp_path / name
        ws.mkdir()
        cfg = ws / "c.toml"
        cfg.write_text(
            f'[sandbox]\nenabled = true\nengine_command = "{engine}"\nwritable = []\n'
            f'allowed_domains = ["127.0.0.1:{server.port}"]\n'
        )
        argv = [sys.executable, "-m", "acp_proxy", "--config", str(cfg), "--", sys.executable]
        argv += [str(PAIR_AGENT), str(server.port), str(ws / "up"), str(tmp_path / other / "up")]
        env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
        procs.append(
            subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                cwd=ws, env=env,
            )
        )  # fmt: skip
    for proc in procs:  # both agents start before either answers (each waits for the other)
        assert proc.stdin is not None
        proc.stdin.write(INIT)
        proc.stdin.flush()
    answers = []
    for proc in procs:
        assert proc.stdout is not None
        assert select.select([proc.stdout], [], [], TIMEOUT)[0], "no initialize answer"
        line = proc.stdout.readline()  # the answer: one line (the agent's wait is bounded)
        _out, err = proc.communicate(timeout=TIMEOUT)  # stdin closed: the proxy ends
        assert line, err.decode(errors="replace")[-3000:]
        answers.append(json.loads(line)["result"]["_meta"])
    assert answers == [{"status": "ok", "together": True}] * 2
    assert server.hits == 2


def test_the_agent_exit_status_comes_through_the_engine(tmp_path: Path) -> None:
    """An agent's exit status is the proxy's, through srt (issue 15 kept)."""
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[sandbox]\nenabled = true\nengine_command = "{srt_engine()}"\n')
    argv = [sys.executable, "-m", "acp_proxy", "--config", str(cfg), "--"]
    argv += [sys.executable, "-c", "import sys; sys.stderr.write('bye\\n'); sys.exit(7)"]
    done = subprocess.run(argv, input=b"", capture_output=True, cwd=tmp_path, timeout=TIMEOUT)
    assert done.returncode == 7, done.stderr.decode(errors="replace")
    assert b"bye" in done.stderr


def test_a_missing_engine_fails_closed(tmp_path: Path) -> None:
    """No engine: the agent never starts, the first request is answered with the reason,
    the proxy exits 126, the failure is audited; check-config says so, exit 2."""
    audit, marker = tmp_path / "audit.jsonl", tmp_path / "agent-ran"
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        f'[audit]\npath = "{audit}"\n[sandbox]\nenabled = true\n'
        f'engine_command = "{tmp_path}/no-such-srt"\n'
    )
    argv = [sys.executable, "-m", "acp_proxy", "--config", str(cfg), "--"]
    argv += [sys.executable, "-c", f"open({str(marker)!r}, 'w')"]
    note = b'{"jsonrpc":"2.0","method":"x/ping"}\n'
    done = subprocess.run(argv, input=note + INIT, capture_output=True, timeout=TIMEOUT)
    assert done.returncode == 126
    answer = json.loads(done.stdout)
    assert answer["id"] == 1
    assert answer["error"]["code"] == -32603
    assert answer["error"]["message"].startswith(
        "acp-proxy: the sandbox could not start, so the agent was not started: "
        f"the sandbox engine '{tmp_path}/no-such-srt' is not found"
    )
    assert not marker.exists()
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    records = [r for r in records if r["event"] not in ("run_started", "run_closed")]
    assert [r["event"] for r in records] == ["sandbox_failed"]
    check = subprocess.run(
        [sys.executable, "-m", "acp_proxy", "check-config", str(cfg)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert check.returncode == 2
    assert check.stderr.startswith("acp-proxy: the sandbox cannot start: the sandbox engine ")
    assert check.stderr.count("\n") == 1


def test_check_config_prints_the_effective_sandbox(tmp_path: Path) -> None:
    """check-config runs the engine once and prints its settings and where it applies."""
    text = f'[sandbox]\nenabled = true\nengine_command = "{srt_engine()}"\n'
    check = _check_config(tmp_path, text)
    assert check.returncode == 0, check.stderr
    assert f'workspace = [\n    "{tmp_path}",\n]' in check.stdout
    assert "# sandbox: " in check.stdout
    assert " 0.0.83, settings sha256:" in check.stdout
    assert "does not apply with --upstream or --connect" in check.stdout
    assert f'#       "{tmp_path / "c.toml"}"' in check.stdout  # the config, denied to the agent


#: the program of TERM_AGENT's daemon (its command line tells it from the agent's)
DAEMON = "import time; time.sleep(60)"

#: An agent with a SIGTERM handler (status 3) and a double-forked daemon. It says
#: ``ready`` once the daemon runs its own program: the write end of the pipe is
#: close-on-exec, so the read sees its end when the daemon has exec'd and its parent
#: exited (until then a fork has the agent's command line).
TERM_AGENT = f"""
import os, signal, sys, time
def stop(signum, frame):
    sys.stderr.write("agent got signal %d\\n" % signum)
    sys.stderr.flush()
    sys.exit(3)
signal.signal(signal.SIGTERM, stop)
execd, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", {DAEMON!r}, sys.argv[1]])
    os._exit(0)
os.close(w)
os.read(execd, 1)
sys.stderr.write("ready\\n")
sys.stderr.flush()
time.sleep(60)
"""


def _start_sandboxed(
    tmp_path: Path,
    agent: str,
    *args: str,
    env: dict[str, str] | None = None,
    config: str = "",
) -> tuple[subprocess.Popen[bytes], bytes]:
    """Starts the proxy, sandboxed, with ``python -c agent *args`` (``config``: more of
    its config file); returns it and its stderr up to the agent's ``ready`` line."""
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[sandbox]\nenabled = true\nengine_command = "{srt_engine()}"\n{config}')
    argv = [sys.executable, "-m", "acp_proxy", "--config", str(cfg), "--"]
    argv += [sys.executable, "-c", agent, *args]
    proxy = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
        env=env,
    )
    assert proxy.stderr is not None
    # a proxy whose sandbox did not start waits for the client's first request (to
    # answer it with the reason): killed after TIMEOUT, so the test fails, never hangs
    watchdog = threading.Timer(TIMEOUT, proxy.kill)
    watchdog.start()
    seen = b""
    try:
        while b"ready\n" not in seen:
            line = proxy.stderr.readline()
            if not line:
                proxy.kill()
                proxy.communicate()
            assert line, f"the proxy ended early: {seen.decode(errors='replace')}"
            seen += line
    finally:
        watchdog.cancel()
    return proxy, seen


def test_sigterm_reaches_the_sandboxed_agent_and_nothing_outlives_it(tmp_path: Path) -> None:
    """SIGTERM to the proxy reaches the agent inside the sandbox (its handler runs, its
    status is the proxy's); its double-forked daemon dies with the sandbox.

    Only the forwarded SIGTERM can end the agent: the client's stdin stays open (its
    end would give the agent SIGTERM after ``grace_seconds``) and the proxy's SIGKILL
    ``kill_after_seconds`` after the SIGTERM is beyond the test's wait. A SIGTERM gone
    astray leaves the agent to exit 0 after its sleep."""
    marker = f"acp-proxy-test-daemon-{os.getpid()}-{time.monotonic_ns()}"
    config = f"[process]\nkill_after_seconds = {3 * TIMEOUT}\n"
    proxy, seen = _start_sandboxed(tmp_path, TERM_AGENT, marker, config=config)
    assert proxy.stderr is not None
    with proxy:  # closes the pipes, waits for the proxy
        try:
            daemons = [p for p in _daemons(marker) if DAEMON.encode() in _cmdline(p)]
            assert daemons, _daemons(marker)  # the daemon runs its program (in the sandbox)
            proxy.send_signal(15)
            watchdog = threading.Timer(TIMEOUT, proxy.kill)
            watchdog.start()
            try:
                rest = proxy.stderr.read()  # to the proxy's exit, its stdin open
            finally:
                watchdog.cancel()
            assert proxy.wait() == 3, (seen + rest).decode(errors="replace")
            assert b"agent got signal 15" in seen + rest
            assert _daemons(marker) == []
        finally:
            _end(proxy, marker)


async def test_listen_confines_the_agent_of_every_connection(
    tmp_path: Path, server: _Server
) -> None:
    """--listen starts one sandboxed agent per connection: each one's escapes fail."""
    plan = _scene(tmp_path, server.port, sandbox=True, engine=str(srt_engine()))
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env["HOME"] = plan["home"]
    argv = [sys.executable, "-m", "acp_proxy", "--config", plan["config"]]
    argv += ["--listen", "ws://127.0.0.1:0/acp", "--no-token", "--"]
    argv += [sys.executable, str(ESCAPE_AGENT), str(tmp_path / "plan.json")]
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            proc = await nursery.start(
                partial(
                    trio.run_process, argv, stderr=subprocess.PIPE, cwd=plan["workspace"], env=env
                ),
            )
            assert proc.stderr is not None
            seen = b""
            while b"listening on " not in seen or not seen.endswith(b"\n"):
                seen += await proc.stderr.receive_some(4096)
            url = seen.decode().split("listening on ", 1)[1].split()[0]
            for _ in range(2):
                async with connect(url) as ws:
                    init = await AcpClient(ws).request("initialize", {"protocolVersion": 1})
                attempts = init["result"]["_meta"]["attempts"]
                escaped = {name: attempts[name] for name in ESCAPES if attempts[name] == "ok"}
                assert escaped == {}
                assert attempts["workspace_read_write"] == "ok"
            proc.send_signal(15)
    assert server.hits == 0
    text = await trio.Path(plan["audit"]).read_text()
    records = [json.loads(line) for line in text.splitlines()]
    assert [r["event"] for r in records].count("sandbox_started") == 1
    assert [r["event"] for r in records].count("connection_opened") == 2


def test_an_engine_the_agent_could_rewrite_is_refused(tmp_path: Path) -> None:
    """An engine inside the workspace would run, changed by the agent, unconfined at the
    next start: check-config refuses it (exit 2) and names where it lies."""
    engine = tmp_path / "bin" / "srt"
    engine.parent.mkdir()
    engine.write_text("#!/bin/sh\necho 0.0.83\n")
    engine.chmod(0o755)
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[sandbox]\nenabled = true\nengine_command = "{engine}"\n')
    check = subprocess.run(
        [sys.executable, "-m", "acp_proxy", "check-config", str(cfg)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=TIMEOUT,
    )
    assert check.returncode == 2
    assert check.stderr == (
        f"acp-proxy: the sandbox cannot start: the sandbox engine {engine} lies inside "
        f"{tmp_path} {CWD_WORKSPACE}, which the agent may write: install it outside the "
        "workspace and writable paths\n"
    )


DEAF_AGENT = """
import os, signal, sys, time
for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
    signal.signal(s, signal.SIG_IGN)
os.close(0)
sys.stderr.write("ready\\n")
sys.stderr.flush()
while True:
    with open(sys.argv[2], "a") as f:
        f.write("still here\\n")
    time.sleep(0.05)
"""


def test_a_sigkilled_proxy_takes_the_whole_sandbox_with_it(tmp_path: Path) -> None:
    """kill -9 of the proxy: an agent that ignores TERM, HUP and INT and closes its stdin
    does not outlive it (the engine runs as init of a pid namespace that dies with the
    proxy), so no agent runs on without the proxy and its audit."""
    marker = f"acp-proxy-test-deaf-{os.getpid()}-{time.monotonic_ns()}"
    proxy, _ = _start_sandboxed(tmp_path, DEAF_AGENT, marker, str(tmp_path / "log.txt"))
    try:
        agents = _daemons(marker)
        assert agents  # the agent runs (inside the sandbox)
        pidfds = [os.pidfd_open(pid) for pid in agents]
        proxy.kill()
        proxy.wait(timeout=TIMEOUT)
        try:
            for fd in pidfds:  # readable once the process has exited (a bounded wait)
                ready, _, _ = select.select([fd], [], [], 20)
                assert ready, "the sandboxed agent outlived the SIGKILLed proxy"
        finally:
            for fd in pidfds:
                os.close(fd)
        assert _daemons(marker) == []
    finally:
        _end(proxy, marker)
        for pipe in (proxy.stdin, proxy.stdout, proxy.stderr):
            if pipe is not None:
                pipe.close()


def _check_config(
    tmp_path: Path, text: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> Any:
    """``check-config`` of the config ``text`` (written in ``tmp_path``), run in ``cwd``
    (``tmp_path`` when ``None``)."""
    cfg = tmp_path / "c.toml"
    cfg.write_text(text)
    return subprocess.run(
        [sys.executable, "-m", "acp_proxy", "check-config", str(cfg)],
        capture_output=True,
        text=True,
        cwd=tmp_path if cwd is None else cwd,
        env=env,
        timeout=TIMEOUT,
    )


def test_an_engine_interpreter_the_agent_could_rewrite_is_refused(tmp_path: Path) -> None:
    """srt is ``#!/usr/bin/env node``: a ``node`` found on PATH inside the workspace (the
    agent could replace it) would run unconfined at the next start: refused, named."""
    nodebin = tmp_path / "nodebin"
    nodebin.mkdir()
    node = nodebin / "node"
    real_node = subprocess.run(
        ["sh", "-c", "command -v node"], capture_output=True, text=True, check=True
    ).stdout.strip()
    node.write_text(f'#!/bin/sh\nexec {real_node} "$@"\n')
    node.chmod(0o755)
    env = {**os.environ, "PATH": f"{nodebin}:{os.environ['PATH']}"}
    check = _check_config(
        tmp_path, f'[sandbox]\nenabled = true\nengine_command = "{srt_engine()}"\n', env
    )
    assert check.returncode == 2, check.stdout
    assert check.stderr == (
        f"acp-proxy: the sandbox cannot start: the sandbox engine's interpreter {node} lies "
        f"inside {tmp_path} {CWD_WORKSPACE}, which the agent may write: install it outside "
        "the workspace and writable paths\n"
    )


def test_the_proxy_inside_a_writable_root_is_refused(tmp_path: Path) -> None:
    """The proxy's own code inside the workspace would run, changed by the agent,
    unconfined at the next start: refused, named."""
    repo = Path(__file__).resolve().parents[2]
    check = _check_config(
        tmp_path,
        f'[sandbox]\nenabled = true\nengine_command = "{srt_engine()}"\nworkspace = ["{repo}"]\n',
    )
    assert check.returncode == 2, check.stdout
    assert check.stderr == (
        f"acp-proxy: the sandbox cannot start: the proxy's own code {repo / 'acp_proxy'} "
        f"lies inside {repo} (the workspace, [sandbox] workspace), which the agent may "
        "write: install it outside the workspace and writable paths\n"
    )


PLANT_AGENT = """
import json, os, sys
home = os.environ["HOME"]
tries = {
    "npx_cache": home + "/.npm/_npx/poison/index.js",
    "user_cache": home + "/.cache/pip/poison.whl",
    "local_state": home + "/.local/state/poison",
    "claude_settings": home + "/.claude/settings.json",
    "claude_hook": home + "/.claude/hooks/poison.sh",
    "codex_config": home + "/.codex/config.toml",
    "gemini_settings": home + "/.gemini/settings.json",
    "claude_state": home + "/.claude/projects.json",
    "private_cache": os.environ.get("XDG_CACHE_HOME", home + "/.cache") + "/mine",
    "npm_cache": os.environ.get("npm_config_cache", home + "/.npm") + "/mine",
}
done = {}
for name, path in tries.items():
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write("planted")
        done[name] = "ok"
    except OSError as exc:
        done[name] = type(exc).__name__
done["cache_dir"] = os.environ.get("XDG_CACHE_HOME", "")
sys.stderr.write("RESULT " + json.dumps(done) + "\\n")
"""


def test_the_agent_cannot_plant_code_that_runs_unconfined_later(tmp_path: Path) -> None:
    """With the default writable paths the agent cannot write the user's caches (npx
    packages, pip wheels, ~/.local/state) nor the agents' executable configuration
    (Claude settings and hooks, Codex and Gemini MCP servers); it keeps its own state
    and gets a private cache."""
    home, ws = tmp_path / "home", tmp_path / "ws"
    for d in (".npm/_npx", ".cache", ".local/state", ".claude", ".codex", ".gemini"):
        (home / d).mkdir(parents=True)
    ws.mkdir()
    (home / ".claude" / "settings.json").write_text('{"hooks": {}}\n')
    (home / ".gemini" / "settings.json").write_text("{}\n")
    cfg = ws / "c.toml"
    cfg.write_text(f'[sandbox]\nenabled = true\nengine_command = "{srt_engine()}"\n')
    env = {**os.environ, "HOME": str(home)}
    argv = [sys.executable, "-m", "acp_proxy", "--config", str(cfg), "--"]
    argv += [sys.executable, "-c", PLANT_AGENT]
    done = subprocess.run(
        argv, input=b"", capture_output=True, cwd=ws, env=env, timeout=TIMEOUT, check=False
    )
    stderr = done.stderr.decode(errors="replace")
    assert done.returncode == 0, stderr
    result = json.loads(stderr.split("RESULT ", 1)[1].splitlines()[0])
    cache_dir = result.pop("cache_dir")
    kept = {"claude_state", "private_cache", "npm_cache"}
    assert {k for k, v in result.items() if v == "ok"} == kept, result
    assert (home / ".claude" / "settings.json").read_text() == '{"hooks": {}}\n'
    assert (home / ".codex" / "config.toml").read_text() == ""  # created empty, read-only
    assert not (home / ".npm" / "_npx" / "poison").exists()
    assert cache_dir.startswith(tempfile.gettempdir() + "/acp-proxy-cache-")
    assert not os.path.exists(cache_dir)  # removed when the proxy exited


def test_the_proxy_secrets_do_not_reach_the_sandboxed_agent(tmp_path: Path) -> None:
    """Secret-looking variables of the proxy's environment are stripped (env_deny); the
    model-API key the agent needs and ordinary variables still reach it."""
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[sandbox]\nenabled = true\nengine_command = "{srt_engine()}"\n')
    secrets = {
        "AWS_SECRET_ACCESS_KEY": "aws",
        "GH_TOKEN": "gh",
        "DB_PASSWORD": "pw",
        "npm_config__auth": "npm",
    }
    passed = {"ANTHROPIC_API_KEY": "model", "ACP_TEST_PLAIN": "plain"}
    env = {**os.environ, **secrets, **passed}
    argv = [sys.executable, "-m", "acp_proxy", "--config", str(cfg), "--", sys.executable]
    argv += ["-c", "import json, os, sys; sys.stderr.write('ENV ' + json.dumps(dict(os.environ)))"]
    done = subprocess.run(
        argv, input=b"", capture_output=True, cwd=tmp_path, env=env, timeout=TIMEOUT, check=False
    )
    stderr = done.stderr.decode(errors="replace")
    assert done.returncode == 0, stderr
    seen = json.loads(stderr.split("ENV ", 1)[1].splitlines()[0])
    assert {k: seen.get(k) for k in passed} == passed
    assert [k for k in secrets if k in seen] == []


READ_AGENT = """
import json, os, sys
home = os.environ["HOME"]
done = {}
for rel in sys.argv[1:]:
    try:
        with open(os.path.join(home, rel)) as f:
            f.read()
        done[rel] = "ok"
    except OSError as exc:
        done[rel] = type(exc).__name__
sys.stderr.write("RESULT " + json.dumps(done) + "\\n")
"""


def test_credential_stores_and_other_agents_logins_are_hidden(tmp_path: Path) -> None:
    """git, cargo and vault credentials and shell histories are hidden; a Claude agent
    reads its own login file but not Codex's or Gemini's."""
    home, ws = tmp_path / "home", tmp_path / "ws"
    hidden = [
        ".config/git/credentials",
        ".cargo/credentials.toml",
        ".vault-token",
        ".bash_history",
        ".zsh_history",
        ".codex/auth.json",
        ".gemini/oauth_creds.json",
    ]
    own = ".claude/.credentials.json"
    for rel in [*hidden, own]:
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_text("secret\n")
    ws.mkdir()
    cfg = ws / "c.toml"
    cfg.write_text(f'[sandbox]\nenabled = true\nengine_command = "{srt_engine()}"\n')
    argv = [sys.executable, "-m", "acp_proxy", "--config", str(cfg), "--"]
    agent = tmp_path / "bin" / "claude-code-acp"  # the command names Claude's agent
    agent.parent.mkdir()
    agent.write_text(READ_AGENT)
    argv += [sys.executable, str(agent), *hidden, own]
    done = subprocess.run(
        argv,
        input=b"",
        capture_output=True,
        cwd=ws,
        env={**os.environ, "HOME": str(home)},
        timeout=TIMEOUT,
        check=False,
    )
    stderr = done.stderr.decode(errors="replace")
    assert done.returncode == 0, stderr
    result = json.loads(stderr.split("RESULT ", 1)[1].splitlines()[0])
    assert {k for k, v in result.items() if v == "ok"} == {own}, result


def test_the_private_directories_are_removed_when_the_proxy_dies_of_a_signal(
    tmp_path: Path,
) -> None:
    """The engine killed by SIGKILL: the proxy dies of it too, and its private settings,
    cache and engine directories are removed first."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    agent = "import sys, time; sys.stderr.write('ready\\n'); sys.stderr.flush(); time.sleep(60)"
    engines_before = set(Path("/tmp").glob("acp-proxy-engine-*"))
    proxy, _ = _start_sandboxed(tmp_path, agent, env={**os.environ, "TMPDIR": str(tmp)})
    try:
        assert sorted(p.name.rsplit("-", 1)[0] for p in tmp.glob("acp-proxy-*")) == [
            "acp-proxy-cache",
            "acp-proxy-sandbox",
        ]
        # the engines' TMPDIRs are in /tmp (short paths for srt's sockets)
        engines = set(Path("/tmp").glob("acp-proxy-engine-*")) - engines_before
        assert len(engines) == 1
        children = Path(f"/proc/{proxy.pid}/task/{proxy.pid}/children").read_text().split()
        assert len(children) == 1  # the engine's launcher
        os.kill(int(children[0]), 9)
        proxy.communicate(timeout=TIMEOUT)
        assert proxy.returncode == -9
        assert list(tmp.glob("acp-proxy-*")) == []
        assert not any(e.exists() for e in engines)
    finally:
        if proxy.poll() is None:
            proxy.kill()
            proxy.communicate()


TMP_AGENT = """
import json, os, sys, tempfile
done = {"TMPDIR": os.environ.get("TMPDIR", "")}
try:
    with tempfile.NamedTemporaryFile(dir=done["TMPDIR"] or None) as f:
        f.write(b"scratch")
    done["write"] = "ok"
except OSError as exc:
    done["write"] = type(exc).__name__
sys.stderr.write("RESULT " + json.dumps(done) + "\\n")
"""


def test_the_sandboxed_agent_can_write_its_temporary_files(tmp_path: Path) -> None:
    """srt hands the agent TMPDIR=/tmp/claude, writable only when it exists outside
    (Claude's adapter then died with EROFS on mkdir '/tmp/claude'): the proxy gives it a
    private TMPDIR, inside its private cache directory."""
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[sandbox]\nenabled = true\nengine_command = "{srt_engine()}"\n')
    argv = [sys.executable, "-m", "acp_proxy", "--config", str(cfg), "--"]
    argv += [sys.executable, "-c", TMP_AGENT]
    done = subprocess.run(
        argv, input=b"", capture_output=True, cwd=tmp_path, timeout=TIMEOUT, check=False
    )
    stderr = done.stderr.decode(errors="replace")
    assert done.returncode == 0, stderr
    result = json.loads(stderr.split("RESULT ", 1)[1].splitlines()[0])
    assert result["write"] == "ok", result
    assert result["TMPDIR"].startswith(tempfile.gettempdir() + "/acp-proxy-cache-"), result
    assert result["TMPDIR"].endswith("/tmp"), result


def test_a_stripped_variable_is_named_at_the_default_level(tmp_path: Path) -> None:
    """The trial's Codex lost its provider key (MOCK_API_KEY matches *KEY*) and said only
    "Missing environment variable": the proxy names what it stripped at the default
    level, and how to pass it."""
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[sandbox]\nenabled = true\nengine_command = "{srt_engine()}"\n')
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/root")}
    env |= {"MOCK_API_KEY": "k", "GH_TOKEN": "t"}
    argv = [sys.executable, "-m", "acp_proxy", "--config", str(cfg), "--", sys.executable]
    argv += ["-c", "pass"]
    done = subprocess.run(
        argv, input=b"", capture_output=True, cwd=tmp_path, env=env, timeout=TIMEOUT, check=False
    )
    stderr = done.stderr.decode(errors="replace")
    assert done.returncode == 0, stderr
    assert stderr.splitlines() == [
        "acp-proxy: NOTICE: sandbox: not passed to the agent (env_deny): GH_TOKEN MOCK_API_KEY; "
        "name one in [sandbox] env_allow to pass it"
    ]


def test_the_engine_launcher_sees_its_own_pid_namespace_in_proc() -> None:
    """bubblewrap reads ``/proc/<its pid>/ns``: inside the launcher's pid namespace,
    ``/proc`` must be that namespace's, or the pid names another process or none
    (the sandbox did not start on a host with no process of that number, and read
    another process's namespaces where one had it)."""
    from acp_proxy.shell.sandbox import _launcher

    probe = "import os; print(os.getpid(), os.readlink('/proc/self'))"
    done = subprocess.run(
        [*_launcher(), sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=True,
    )
    pid, seen = done.stdout.split()
    assert pid == seen == "1"  # init of its namespace, and /proc says so


def test_a_refusal_says_the_workspace_is_the_working_directory(tmp_path: Path) -> None:
    """With ``[sandbox] workspace = []`` the workspace is the proxy's working directory:
    the proxy run from its own clone (the quick start's venv) is refused, and the error
    says why that directory is writable, so the reader knows what to move or set."""
    repo = Path(__file__).resolve().parents[2]
    text = f'[sandbox]\nenabled = true\nengine_command = "{srt_engine()}"\n'
    check = _check_config(tmp_path, text, cwd=repo)
    assert check.returncode == 2, check.stdout
    assert check.stderr == (
        f"acp-proxy: the sandbox cannot start: the proxy's own code {repo / 'acp_proxy'} "
        f"lies inside {repo} (the workspace: the proxy's working directory; [sandbox] "
        "workspace sets another), which the agent may write: install it outside the "
        "workspace and writable paths\n"
    )
