"""Hostile agents against the real proxy process: signals, exits, stalls."""

from __future__ import annotations

import signal
from pathlib import Path

import trio
from support.e2ekit import bridged_proxy, client_to_agent, notif, req, write_config

TIMEOUT = 30


async def test_sigterm_to_proxy_kills_an_agent_that_ignores_it(tmp_path: Path) -> None:
    """SIGTERM to the proxy is passed on; an agent ignoring it is killed after kill_after."""
    cfg = write_config(tmp_path / "c.toml", "[process]\nkill_after_seconds = 0.5\n")
    with trio.fail_after(TIMEOUT):
        async with bridged_proxy(["--config", str(cfg)], ["--ignore-sigterm"]) as (proxy, agent):
            await client_to_agent(proxy, agent, notif("_x/up"))
            await proxy.send(req(1, "session/status", {"sessionId": "S"}))
            assert await agent.recv_json() == {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "session/status",
                "params": {"sessionId": "S"},
            }
            start = trio.current_time()
            proxy.process.send_signal(signal.SIGTERM)
            answer = await proxy.out.recv_json()
            assert answer["id"] == 1
            assert answer["error"]["code"] == -32603
            assert await proxy.wait() == 128 + signal.SIGKILL
            assert 0.4 <= trio.current_time() - start < 10


async def test_agent_is_terminated_when_the_proxy_is_killed(tmp_path: Path) -> None:
    """SIGKILL of the proxy still ends its agent (the agent gets SIGTERM, never orphaned)."""
    import os
    import sys

    pidfile = tmp_path / "agent.pid"
    agent = (
        "import os, sys, time\n"
        f"open({str(pidfile)!r}, 'w').write(str(os.getpid()))\n"
        "time.sleep(60)\n"
    )
    with trio.fail_after(TIMEOUT):
        proc = await trio.lowlevel.open_process(
            [sys.executable, "-m", "acp_proxy", "--", sys.executable, "-c", agent],
            stdin=-1,
            stdout=-1,
        )
        while not pidfile.exists() or not pidfile.read_text():  # noqa: ASYNC110 (another process writes it)
            await trio.sleep(0.05)
        agent_pid = int(pidfile.read_text())
        proc.kill()
        await proc.wait()
        while True:
            try:
                os.kill(agent_pid, 0)
            except ProcessLookupError:
                break
            await trio.sleep(0.05)
