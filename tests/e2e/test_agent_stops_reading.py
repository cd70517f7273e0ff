"""An agent that closes its stdin but keeps running (issue 31, item 6): a process test.

Before, the client's ``session/new`` got no answer, no audit record, no log
line, for as long as the agent lived. Now the write that fails marks the agent
gone for requests: that request and every later one are answered ``-32603``
saying so (audited ``peer_closed``), and the agent's output still reaches the
client until it exits.
"""

from __future__ import annotations

import sys
from pathlib import Path

import trio
from support.e2ekit import open_proxy, proxy_command, read_audit, req

TIMEOUT = 30
AGENT = Path(__file__).resolve().parents[1] / "support" / "peers" / "deaf_agent.py"
WHY = "agent stopped reading its input (its stdin is closed)"


async def test_requests_to_an_agent_that_stopped_reading_are_answered(tmp_path: Path) -> None:
    """session/new and a later request: -32603 naming the cause; agent output still flows."""
    audit = tmp_path / "audit.jsonl"
    release = tmp_path / "release"
    command = [*proxy_command("--audit-log", str(audit)), sys.executable, str(AGENT), str(release)]
    with trio.fail_after(TIMEOUT):
        async with open_proxy(command) as proxy:
            await proxy.send(req(0, "initialize", {"protocolVersion": 1}))
            assert (await proxy.out.recv_json())["result"] == {"protocolVersion": 1}
            assert (await proxy.out.recv_json())["method"] == "_deaf/ready"
            await proxy.send(req(1, "session/new", {"cwd": "/ws", "mcpServers": []}))
            first = await proxy.out.recv_json()
            assert first["id"] == 1
            assert first["error"]["code"] == -32603
            assert WHY in first["error"]["message"]
            await proxy.send(req(2, "session/prompt", {"sessionId": "S", "prompt": []}))
            later = await proxy.out.recv_json()
            assert later["id"] == 2
            assert WHY in later["error"]["message"]
            release.write_text("")
            assert (await proxy.out.recv_json())["method"] == "_deaf/still_here"
            await proxy.out.expect_eof()
            assert await proxy.wait() == 0
    records = read_audit(audit)
    closed = [r for r in records if r["event"] == "peer_closed"]
    assert closed[0]["reason"] == WHY
    assert "stopped reading" in proxy.stderr_text()


async def test_an_agent_that_crashes_before_reading_is_named_with_its_exit() -> None:
    """An agent that exits before it reads (a crash at import): the write of initialize
    fails, and the client's error names the exit and the agent's stderr, not only a
    closed stdin (found in a fresh-clone trial)."""
    command = [*proxy_command(), sys.executable, "-c", "import no_such_module_for_acp"]
    with trio.fail_after(TIMEOUT):
        async with open_proxy(command) as proxy:
            await proxy.send(req(0, "initialize", {"protocolVersion": 1}))
            answer = await proxy.out.recv_json()
            assert answer["id"] == 0
            message = answer["error"]["message"]
            assert "agent exited with status 1" in message
            assert "ModuleNotFoundError" in message
            assert WHY not in message
            assert await proxy.wait() == 1
