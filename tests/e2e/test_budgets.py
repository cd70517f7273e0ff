"""Budgets through the real proxy process (issue 28): the loop breaker cancels the root
session at the agent, refuses the turn's permission requests, and the audit log and the
trace say it was the proxy's doing."""

from __future__ import annotations

import sys
from pathlib import Path

import trio

from acp_proxy.shell.replay import read_trace
from tests.support.e2ekit import (
    bridged_proxy,
    client_to_agent,
    handshake_v1,
    read_audit,
    req,
    update,
    write_config,
)

TIMEOUT = 30


async def test_too_many_tool_calls_cancel_the_root_session(tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "b.toml", "[budgets]\nmax_tool_calls_per_turn = 1\n")
    audit = tmp_path / "audit.jsonl"
    trace = tmp_path / "t.jsonl"
    args = ["--config", str(cfg), "--audit-log", str(audit), "--trace", str(trace)]
    with trio.fail_after(TIMEOUT):
        async with bridged_proxy(args) as (proxy, agent):
            await handshake_v1(proxy, agent)
            await client_to_agent(proxy, agent, req(2, "session/prompt", {"sessionId": "S1"}))
            for tcid in ("a", "b"):
                call = update("S1", sessionUpdate="tool_call", toolCallId=tcid, title="loop")
                await agent.send(call)
                assert await proxy.out.recv_line() == call  # the client still sees it
            cancel = await agent.recv_json()
            assert cancel == {
                "jsonrpc": "2.0",
                "method": "session/cancel",
                "params": {"sessionId": "S1"},
            }
            ask = {
                "sessionId": "S1",
                "toolCall": {"toolCallId": "b"},
                "options": [{"optionId": "ok", "name": "OK", "kind": "allow_once"}],
            }
            await agent.send(req(9, "session/request_permission", ask))
            answer = await agent.recv_json()
            assert answer == {
                "jsonrpc": "2.0",
                "id": 9,
                "result": {"outcome": {"outcome": "cancelled"}},
            }
            await proxy.close_stdin()
            await proxy.wait()
    records = read_audit(audit)
    exceeded = [r for r in records if r["event"] == "budget_exceeded"]
    assert exceeded[0]["budget"] == "max_tool_calls_per_turn"
    assert (exceeded[0]["count"], exceeded[0]["limit"]) == (2, 1)
    _head, traced = read_trace(trace.read_text().splitlines())
    mine = [r for r in traced if r["type"] == "proxy" and r["decision"] == "originated"]
    assert [(r["method"], r["session"], r["to"]) for r in mine] == [
        ("session/cancel", "S1", "agent")
    ]
    assert mine[0]["reason"] == "budget max_tool_calls_per_turn"


async def test_a_store_with_chain_is_a_usage_error(tmp_path: Path) -> None:
    """--chain cannot carry out store calls: a config with a store exits 2 naming it."""
    cfg = write_config(tmp_path / "s.toml", '[budgets]\nstore = "redis://127.0.0.1:1/0"\n')
    with trio.fail_after(TIMEOUT):
        result = await trio.run_process(
            [sys.executable, "-m", "acp_proxy", "--config", str(cfg), "--chain"],
            stdin=b"",
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert result.returncode == 2
    assert b"budgets.store is not supported with --chain" in result.stderr
