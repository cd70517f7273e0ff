"""The proxy's own files by identity, end to end (issue 31, item 3): a real proxy
process, a real audit log, a real hard link to it and a real link to its directory.

The agent asks the client to read and write the audit log by its own path, by a hard
link (another path, the same inode) and through a linked directory: the proxy answers
each with the same refusal and the client never sees them; a normal file reaches the
client; the audit log is not changed by any of them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import trio
from support.e2ekit import (
    agent_to_client,
    bridged_proxy,
    client_next_is_pong,
    handshake_v1,
    read_audit,
    req,
)

TIMEOUT = 20


async def test_a_hard_link_to_the_audit_log_is_refused_as_the_log_itself(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    audit = logs / "audit.jsonl"
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "logdir").symlink_to(logs)
    (ws / "main.py").write_text("print()\n")
    refusals: dict[str, list[Any]] = {}
    with trio.fail_after(TIMEOUT):
        async with bridged_proxy(["--audit-log", str(audit)]) as (proxy, agent):
            await handshake_v1(proxy, agent)
            os.link(audit, ws / "hard")  # the proxy made the log at its start
            places = {
                "direct": audit,
                "hard link": ws / "hard",
                "linked directory": ws / "logdir" / "audit.jsonl",
            }
            rid = 100
            for name, place in places.items():
                for method, extra in (
                    ("fs/read_text_file", {}),
                    ("fs/write_text_file", {"content": "forged\n"}),
                ):
                    rid += 1
                    params = {"sessionId": "S1", "path": str(place), **extra}
                    await agent.send(req(rid, method, params))
                    answer = await agent.recv_json()
                    assert answer["id"] == rid
                    refusals.setdefault(method, []).append((name, answer["error"]))
            await client_next_is_pong(proxy, agent)  # none of them reached the client
            normal = req(200, "fs/read_text_file", {"sessionId": "S1", "path": str(ws / "main.py")})
            await agent_to_client(proxy, agent, normal)
            await proxy.close_stdin()
            assert await proxy.wait() == 0
    for method, answers in refusals.items():
        errors = [error for _, error in answers]
        assert errors == [errors[0]] * 3, answers
        assert errors[0]["message"] == (
            f"acp-proxy: {method} refused: names the proxy's own file {audit}"
        )
    records = read_audit(audit)  # still a valid log, written only by the proxy
    refused = [r for r in records if r["event"] == "request_refused"]
    assert len(refused) == 6
    assert {r["reason"] for r in refused} == {f"names the proxy's own file {audit}"}
    assert b"forged" not in audit.read_bytes()
