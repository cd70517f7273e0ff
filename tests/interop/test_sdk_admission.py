"""Interop (issue 26): an official SDK agent meets the elicitation rules.

(The TypeScript SDK client over WebSocket meeting the admission rules is
``tests/shell/test_ts_admission.py``, next to the fixture that finds a Node with
a WebSocket client.)

- The Python SDK's agent (``AgentSideConnection.create_elicitation``, supported
  by agent-client-protocol 0.12) gets the proxy's ``{"action": "decline"}`` for a
  URL outside ``elicitation.url_hosts`` and for a form asking for a password;
  the client (raw frames here) never sees those requests, and an allowed one
  reaches it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import trio
from support.e2ekit import open_proxy, proxy_command, read_audit

HERE = Path(__file__).resolve().parent
ELICIT_AGENT = [sys.executable, str(HERE / "peers" / "py_elicit_agent.py")]
TIMEOUT = 60


def _frame(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj).encode() + b"\n"


async def _prompt(proxy: Any, rid: int, sid: str, text: str) -> list[dict[str, Any]]:
    """Sends a prompt; returns every message up to its answer (answering none)."""
    params = {"sessionId": sid, "prompt": [{"type": "text", "text": text}]}
    await proxy.send(
        _frame({"jsonrpc": "2.0", "id": rid, "method": "session/prompt", "params": params})
    )
    seen = []
    while True:
        msg = await proxy.out.recv_json()
        seen.append(msg)
        if msg.get("id") == rid and "method" not in msg:
            return seen
        if msg.get("method") == "elicitation/create":
            answer = {"action": "accept", "content": {}}
            await proxy.send(_frame({"jsonrpc": "2.0", "id": msg["id"], "result": answer}))


async def test_a_python_sdk_agents_elicitation_gets_the_proxys_decline(tmp_path: Path) -> None:
    config = tmp_path / "acp.toml"
    config.write_text(
        '[elicitation]\nurl_hosts = ["docs.example.com"]\nsecret_fields = "decline"\n'
    )
    audit = tmp_path / "audit.jsonl"
    cmd = [*proxy_command("--config", str(config), "--audit-log", str(audit)), *ELICIT_AGENT]
    with trio.fail_after(TIMEOUT):
        async with open_proxy(cmd) as proxy:
            init = {
                "protocolVersion": 1,
                "clientCapabilities": {"elicitation": {"form": {}, "url": {}}},
            }
            await proxy.send(
                _frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
            )
            assert (await proxy.out.recv_json())["id"] == 1
            new = {"cwd": "/", "mcpServers": []}
            await proxy.send(
                _frame({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": new})
            )
            sid = (await proxy.out.recv_json())["result"]["sessionId"]
            outcomes = {}
            for rid, text in [
                (3, "url https://docs.example.com.evil.example/login"),
                (4, "form password"),
                (5, "url https://docs.example.com/login"),
            ]:
                seen = await _prompt(proxy, rid, sid, text)
                outcomes[text] = (
                    [m.get("method") for m in seen if "method" in m and "id" in m],
                    [
                        m["params"]["update"]["content"]["text"]
                        for m in seen
                        if m.get("method") == "session/update"
                    ],
                )
    assert outcomes == {
        "url https://docs.example.com.evil.example/login": ([], ["elicited decline"]),
        "form password": ([], ["elicited decline"]),
        "url https://docs.example.com/login": (["elicitation/create"], ["elicited accept"]),
    }
    declined = [r for r in read_audit(audit) if r["event"] == "elicitation_declined"]
    assert [r["rule"] for r in declined] == ["elicitation.url_hosts", "elicitation.secret_fields"]
