"""Hostile agents against the real proxy process: signals, exits, stalls."""

from __future__ import annotations

import signal
from pathlib import Path

import trio

from .e2ekit import bridged_proxy, client_to_agent, notif, req, write_config

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
