"""Issue 15 end to end: the agent's process tree, signals, exit status and the ends of a stream.

Real proxy processes with small Python agents and wrappers written here.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
from pathlib import Path
from typing import Any

import trio
from support.e2ekit import (
    ProxyRun,
    agent_to_client,
    bridged_proxy,
    client_to_agent,
    enc,
    notif,
    ok,
    open_proxy,
    process_running,
    proxy_command,
    req,
    write_config,
)
from support.wskit import AGENT_CMD, connect

TIMEOUT = 30
FAST = "[process]\ngrace_seconds = 0.3\nkill_after_seconds = 0.3\n"


async def _gone(pid: int) -> None:
    """Waits until ``pid`` no longer exists (a process the test does not parent)."""
    while process_running(pid):  # noqa: ASYNC110 (another process's state)
        await trio.sleep(0.05)


async def _pids(proxy: ProxyRun, count: int) -> list[int]:
    """The ``child-pid N`` lines the test agents write to stderr when ready."""
    err = await proxy.wait_for_stderr("child-pid ", count)
    return [int(p) for p in re.findall(r"child-pid (\d+)", err)]


def _agent_cmd(cfg: Path | None, source: str, *proxy_args: str) -> list[str]:
    args = ["--config", str(cfg), *proxy_args] if cfg else list(proxy_args)
    return [*proxy_command(*args), sys.executable, "-c", source]


# A launcher that ignores stdin EOF and every catchable stop signal, with the real agent
# (which ignores them too) as its child: only a SIGKILL to the whole group ends both.
STUBBORN = (
    "import signal, subprocess, sys, time\n"
    "for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):\n"
    "    signal.signal(s, signal.SIG_IGN)\n"
    "child = subprocess.Popen([sys.executable, '-c', "
    "'import time; time.sleep(120)'])\n"  # inherits the ignored signals
    "sys.stderr.write('child' + '-pid %d\\n' % child.pid); sys.stderr.flush()\n"
    "time.sleep(120)\n"
)


async def test_launcher_ignoring_eof_and_signals_is_stopped_with_its_child(tmp_path: Path) -> None:
    """Client EOF: the wrapper and the real agent behind it are both gone after the stop."""
    cfg = write_config(tmp_path / "c.toml", FAST)
    with trio.fail_after(TIMEOUT):
        async with open_proxy(_agent_cmd(cfg, STUBBORN)) as proxy:
            (child,) = await _pids(proxy, 1)
            await proxy.close_stdin()
            assert await proxy.wait() == 128 + signal.SIGKILL
            await _gone(child)


async def test_sigterm_to_the_proxy_stops_the_whole_group(tmp_path: Path) -> None:
    """SIGTERM to the proxy: the group gets SIGTERM, then SIGKILL after kill_after."""
    cfg = write_config(tmp_path / "c.toml", FAST)
    with trio.fail_after(TIMEOUT):
        async with open_proxy(_agent_cmd(cfg, STUBBORN, "--log-level", "info")) as proxy:
            (child,) = await _pids(proxy, 1)
            proxy.process.send_signal(signal.SIGTERM)
            await proxy.wait()
            assert proxy.process.returncode == -signal.SIGKILL  # the agent's fate, re-raised
            await _gone(child)
            assert "sending SIGKILL" in proxy.stderr_text()


async def test_grandchild_holding_stdout_does_not_keep_the_prompt_unanswered(
    tmp_path: Path,
) -> None:
    """The agent exits while a grandchild writes to its stdout every 0.1 s: the prompt in
    flight is answered at once, the grandchild is stopped after the grace period and the
    proxy exits with the agent's status."""
    cfg = write_config(tmp_path / "c.toml", FAST)
    chatter = enc({"jsonrpc": "2.0", "method": "_x/tick"}).decode()
    grandchild = (
        "import sys, time\n"
        "while True:\n"
        f"    sys.stdout.write({chatter!r} + chr(10)); sys.stdout.flush(); time.sleep(0.1)\n"
    )
    agent = (
        "import json, subprocess, sys\n"
        f"child = subprocess.Popen([sys.executable, '-c', {grandchild!r}])\n"
        "sys.stderr.write('child' + '-pid %d\\n' % child.pid); sys.stderr.flush()\n"
        "init = json.loads(sys.stdin.readline())\n"
        "sys.stdout.write(json.dumps({'jsonrpc': '2.0', 'id': init['id'], "
        "'result': {'protocolVersion': 1}}) + '\\n'); sys.stdout.flush()\n"
        "sys.stdin.readline()\n"
        "sys.exit(5)\n"
    )
    with trio.fail_after(TIMEOUT):
        async with open_proxy(_agent_cmd(cfg, agent)) as proxy:
            (child,) = await _pids(proxy, 1)
            await proxy.send(req(0, "initialize", {"protocolVersion": 1}))
            await proxy.send(req(2, "session/prompt", {"sessionId": "S", "prompt": []}))
            while (msg := await proxy.out.recv_json()).get("id") != 2:
                assert msg.get("method") == "_x/tick" or msg.get("id") == 0, msg
            assert msg["error"]["code"] == -32603
            assert msg["error"]["data"]["reason"] == "agent exited with status 5"
            rest = await proxy.out.read_to_eof()
            assert all(json.loads(x)["method"] == "_x/tick" for x in rest.splitlines())
            assert await proxy.wait() == 5
            assert not process_running(child)


COUNTING = (
    "import signal, sys\n"
    "signal.signal(signal.SIGINT, lambda *a: (sys.stderr.write('agent: SIGINT\\n'), "
    "sys.stderr.flush()))\n"
    "sys.stderr.write('child' + '-pid 0\\n'); sys.stderr.flush()\n"
    "sys.stdin.read()\n"
)


async def test_one_ctrl_c_from_the_terminal_reaches_the_agent_once() -> None:
    """SIGINT to the terminal's foreground process group (the proxy's) reaches the agent
    exactly once, through the proxy, which keeps running until the agent ends."""
    with trio.fail_after(TIMEOUT):
        async with open_proxy(_agent_cmd(None, COUNTING), own_group=True) as proxy:
            await _pids(proxy, 1)
            os.killpg(proxy.process.pid, signal.SIGINT)
            await proxy.wait_for_stderr("agent: SIGINT\n")
            assert proxy.process.returncode is None
            await proxy.close_stdin()
            assert await proxy.wait() == 0
            assert (await proxy.all_stderr()).count(b"agent: SIGINT\n") == 1


async def test_second_sigint_escalates_to_sigterm(tmp_path: Path) -> None:
    """An agent that shrugs SIGINT off: a second SIGINT sends SIGTERM to its group (logged at
    info), and the proxy then dies of the agent's SIGTERM."""
    cfg = write_config(tmp_path / "c.toml", "[process]\nkill_after_seconds = 20\n")
    with trio.fail_after(TIMEOUT):
        async with open_proxy(_agent_cmd(cfg, COUNTING, "--log-level", "info")) as proxy:
            await _pids(proxy, 1)
            proxy.process.send_signal(signal.SIGINT)
            await proxy.wait_for_stderr("agent: SIGINT\n")
            proxy.process.send_signal(signal.SIGINT)
            await proxy.wait()
            assert proxy.process.returncode == -signal.SIGTERM
            err = proxy.stderr_text()
            assert "INFO: passing SIGINT on to the agent's process group" in err
            assert "INFO: second SIGINT: sending SIGTERM to the agent's process group" in err
            assert err.count("agent: SIGINT\n") == 1


async def test_agent_killed_by_sigterm_kills_the_proxy_with_sigterm() -> None:
    """An agent that dies of SIGTERM: the client sees it killed by signal 15, not 143;
    --log-level info names the start (pid, command) and the signal."""
    agent = "import os, signal, sys\nsys.stdin.readline()\nos.kill(os.getpid(), signal.SIGTERM)\n"
    with trio.fail_after(TIMEOUT):
        async with open_proxy(_agent_cmd(None, agent, "--log-level", "info")) as proxy:
            await proxy.send(req(0, "initialize", {"protocolVersion": 1}))
            answer = await proxy.out.recv_json()
            reason = answer["error"]["data"]["reason"]
            assert reason.startswith("agent was killed by signal 15 (SIGTERM)")
            await proxy.wait()
            assert proxy.process.returncode == -signal.SIGTERM
            err = (await proxy.all_stderr()).decode()
            assert re.search(r"INFO: agent started: pid \d+: \S*python\S* -c 'import os", err)
            assert "was killed by signal 15 (SIGTERM)" in err


async def test_agent_exit_status_is_logged_at_info() -> None:
    """--log-level info reports the agent's exit status in stdio mode."""
    with trio.fail_after(TIMEOUT):
        async with open_proxy(_agent_cmd(None, "raise SystemExit(7)", "--log-level", "info")) as p:
            assert await p.wait() == 7
            assert " exited with status 7" in (await p.all_stderr()).decode()


async def test_the_life_cycle_is_logged_at_info_without_a_trace() -> None:
    """--log-level info alone (no trace, no metrics, so the plain core): initialize with
    both names and the version, the session created and the end are in the log."""
    agent = (
        "import json, sys\n"
        "for line in sys.stdin:\n"
        "    m = json.loads(line)\n"
        "    r = {'protocolVersion': 1, 'agentInfo': {'name': 'stub'}} if m['id'] == 0 "
        "else {'sessionId': 'S9'}\n"
        "    print(json.dumps({'jsonrpc': '2.0', 'id': m['id'], 'result': r}), flush=True)\n"
    )
    init = {"protocolVersion": 1, "clientInfo": {"name": "tester"}}
    with trio.fail_after(TIMEOUT):
        async with open_proxy(_agent_cmd(None, agent, "--log-level", "info")) as proxy:
            await proxy.send(req(0, "initialize", init))
            assert (await proxy.out.recv_json())["result"]["protocolVersion"] == 1
            await proxy.send(req(1, "session/new", {"cwd": "/", "mcpServers": []}))
            assert (await proxy.out.recv_json())["result"]["sessionId"] == "S9"
            await proxy.close_stdin()
            assert await proxy.wait() == 0
            err = (await proxy.all_stderr()).decode()
    assert re.search(
        r"INFO: connection \d+: initialized, protocol version 1; client 'tester', agent 'stub'",
        err,
    ), err
    assert re.search(r"INFO: connection \d+: session 'S9' created", err), err
    assert re.search(r"INFO: connection \d+: the client's side ended", err), err


async def test_proxy_sigkill_ends_an_agent_that_ignores_sigterm(tmp_path: Path) -> None:
    """SIGKILL of the proxy: an agent ignoring SIGTERM is killed all the same (PDEATHSIG)."""
    agent = (
        "import os, signal, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "sys.stderr.write('child' + '-pid %d\\n' % os.getpid()); sys.stderr.flush()\n"
        "time.sleep(120)\n"
    )
    with trio.fail_after(TIMEOUT):
        async with open_proxy(_agent_cmd(None, agent)) as proxy:
            (pid,) = await _pids(proxy, 1)
            proxy.process.kill()
            await proxy.wait()
            await _gone(pid)


async def test_startup_failure_error_carries_status_and_stderr_tail() -> None:
    """An agent dying before answering initialize: the client's error names its status and
    its last stderr lines (at most 2 KiB); the whole stderr still reaches the proxy's."""
    agent = (
        "import sys\n"
        "sys.stdin.readline()\n"
        "for i in range(100):\n"
        "    sys.stderr.write(f'agent: line {i:03} ' + 'x' * 30 + '\\n')\n"
        "sys.stderr.write('agent: cannot find API key\\n')\n"
        "sys.exit(3)\n"
    )
    with trio.fail_after(TIMEOUT):
        async with open_proxy(_agent_cmd(None, agent)) as proxy:
            await proxy.send(req(0, "initialize", {"protocolVersion": 1}))
            error = (await proxy.out.recv_json())["error"]
            assert await proxy.wait() == 3
            reason = error["data"]["reason"]
            assert reason.startswith("agent exited with status 3; its stderr ended with: agent:")
            assert reason.endswith("agent: line 099 " + "x" * 30 + "\nagent: cannot find API key")
            assert "agent: line 000" not in reason
            assert len(reason.encode()) < 2048 + 100
            assert reason in error["message"]
            err = await proxy.all_stderr()
            assert err.count(b"agent: line ") == 100


async def test_unterminated_complete_last_line_is_delivered() -> None:
    """A last agent line without a newline that is complete JSON reaches the client before
    the errors for requests in flight."""
    with trio.fail_after(TIMEOUT):
        async with bridged_proxy() as (proxy, agent):
            await client_to_agent(proxy, agent, req(0, "initialize", {"protocolVersion": 1}))
            await agent_to_client(proxy, agent, ok(0, {"protocolVersion": 1}))
            await client_to_agent(proxy, agent, req(1, "_x/slow", {}))
            last = notif("_x/last").rstrip(b"\n")
            await agent.send(last)
            await agent.close()
            assert await proxy.out.recv_line() == last + b"\n"
            assert (await proxy.out.recv_json())["id"] == 1
            await proxy.out.expect_eof()
            assert await proxy.wait() == 0


async def test_oversize_request_is_answered_with_its_own_id() -> None:
    """A request over limits.max_message_bytes gets -32600 with its id; the next one passes."""
    with trio.fail_after(TIMEOUT):
        async with bridged_proxy(["--max-message-bytes", "1000"]) as (proxy, agent):
            big = req(42, "session/prompt", {"sessionId": "S", "prompt": "x" * 5000})
            await proxy.send(big)
            answer = await proxy.out.recv_json()
            assert answer["id"] == 42
            assert answer["error"]["code"] == -32600
            await client_to_agent(proxy, agent, req(43, "_x/next", {}))


async def test_held_request_and_its_cancel_arrive_in_order() -> None:
    """The agent asks permission for a session the client does not know yet, then cancels
    that request: the client gets the session, the request, then the cancel."""
    with trio.fail_after(TIMEOUT):
        async with bridged_proxy() as (proxy, agent):
            await client_to_agent(
                proxy, agent, req(1, "session/new", {"cwd": "/", "mcpServers": []})
            )
            ask = req("p1", "session/request_permission", {"sessionId": "S", "options": []})
            cancel = notif("$/cancel_request", {"requestId": "p1"})
            await agent.send(ask + cancel)
            created = ok(1, {"sessionId": "S"})
            await agent.send(created)
            assert [await proxy.out.recv_line() for _ in range(3)] == [created, ask, cancel]


async def _send_json(ws: Any, obj: Any) -> Any:
    await ws.send_message(json.dumps(obj))
    return json.loads(await ws.get_message())


async def test_sighup_does_not_stop_a_listen_server() -> None:
    """SIGHUP to --listen: the open connection goes on being served, the log says once
    that there is nothing to reload (no --config); SIGTERM still stops it."""
    cmd = [*proxy_command("--listen", "ws://127.0.0.1:0/acp", "--no-token", "--log-level", "info"),
           *AGENT_CMD]  # fmt: skip
    with trio.fail_after(TIMEOUT):
        async with open_proxy(cmd) as proxy:
            err = await proxy.wait_for_stderr("listening on ")
            url = err.split("listening on ")[1].split()[0]
            async with connect(url) as ws:
                init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}
                assert (await _send_json(ws, init))["result"]["protocolVersion"] == 1
                proxy.process.send_signal(signal.SIGHUP)
                await proxy.wait_for_stderr("SIGHUP: no --config file, nothing to reload")
                # one line, not a "reloading" line for a reload that cannot happen
                assert "SIGHUP: reloading" not in proxy.stderr_text()
                new = {"jsonrpc": "2.0", "id": 1, "method": "session/new",
                       "params": {"cwd": "/", "mcpServers": []}}  # fmt: skip
                assert "sessionId" in (await _send_json(ws, new))["result"]
                assert proxy.process.returncode is None
            proxy.process.send_signal(signal.SIGTERM)
            assert await proxy.wait() == 0
