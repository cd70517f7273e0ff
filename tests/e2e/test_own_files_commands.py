"""The proxy's own files named by a command's words, end to end: a real proxy process,
a real audit log, a real symbolic link and a real hard link to it.

The agent asks the client to run terminals whose words name the audit log by a
spelling the line's text does not hold (its full path): ``./audit.jsonl`` in the
log's directory, a ``..`` or ``//`` spelling, a ``sh -c`` script, a ``>`` redirection,
a symbolic link to the log and a hard link to it. The proxy answers each with the
own-file refusal and the client never sees them; normal commands (one naming another
``audit.jsonl``, which exists, in the workspace) reach the client unchanged; the log
is still the proxy's alone.
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


async def test_terminals_naming_the_audit_log_by_a_word_are_refused(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    audit = logs / "audit.jsonl"
    ws = tmp_path / "ws"
    (ws / "deep").mkdir(parents=True)
    (ws / "logdir").symlink_to(logs)
    (ws / "main.py").write_text("print()\n")
    (ws / "audit.jsonl").write_text("the project's own\n")  # the same name, another file
    answers: list[tuple[str, Any]] = []
    with trio.fail_after(TIMEOUT):
        async with bridged_proxy(["--audit-log", str(audit)]) as (proxy, agent):
            await handshake_v1(proxy, agent)
            os.link(audit, ws / "hard")  # the proxy made the log at its start
            (ws / "alias").symlink_to(audit)
            terminals: dict[str, tuple[str, list[str], Path]] = {
                "./ in its directory": ("cat", ["./audit.jsonl"], logs),
                "a bare name there": ("tail", ["-n", "5", "audit.jsonl"], logs),
                "..": ("cat", [f"{ws}/../logs/audit.jsonl"], ws),
                "relative ..": ("cat", ["../../logs/audit.jsonl"], ws / "deep"),
                "//": ("cat", [f"{logs}//audit.jsonl"], ws),
                "sh -c": ("sh", ["-c", "wc -l ./audit.jsonl | cat"], logs),
                "redirection": ("bash", ["-c", "echo forged >>audit.jsonl"], logs),
                "symbolic link": ("cat", ["alias"], ws),
                "linked directory": ("cat", ["logdir/audit.jsonl"], ws),
                "hard link": ("cp", ["/dev/null", "./hard"], ws),
            }
            for rid, (name, (command, args, cwd)) in enumerate(terminals.items(), 100):
                line = " ".join([command, *args])
                assert str(audit) not in line  # the line's text alone misses every one
                params = {"sessionId": "S1", "command": command, "args": args, "cwd": str(cwd)}
                await agent.send(req(rid, "terminal/create", params))
                answer = await agent.recv_json()
                assert answer["id"] == rid
                answers.append((name, answer["error"]))
            await client_next_is_pong(proxy, agent)  # none of them reached the client
            normal = [
                ("cat", ["audit.jsonl", "./main.py"], ws),
                ("git", ["log", "-1", "--format=%H", "--", "../ws/main.py"], ws),
                ("sh", ["-c", "ls -la . > listing.txt && cat listing.txt"], ws),
                ("ls", ["-la", str(logs)], ws),
            ]
            for rid, (command, args, cwd) in enumerate(normal, 200):
                params = {"sessionId": "S1", "command": command, "args": args, "cwd": str(cwd)}
                await agent_to_client(proxy, agent, req(rid, "terminal/create", params))
            await proxy.close_stdin()
            assert await proxy.wait() == 0
    expected = f"acp-proxy: terminal/create refused: names the proxy's own file {audit}"
    assert [(name, error["message"]) for name, error in answers] == [
        (name, expected) for name in terminals
    ]
    assert len({repr(error) for _, error in answers}) == 1  # the same answer each time
    records = read_audit(audit)  # still a valid log, written only by the proxy
    refused = [r for r in records if r["event"] == "request_refused"]
    assert [r["reason"] for r in refused] == [f"names the proxy's own file {audit}"] * len(
        terminals
    )
    assert b"forged" not in audit.read_bytes()
