"""Differential enforcement through the real proxy to real SDK agents.

One agent process per SDK (``peers/py_diff_agent.py`` on the Python SDK,
``ts/diff_agent.mjs`` on the TypeScript SDK) runs behind ``python -m
acp_proxy``; it announces ``CHILD`` (no capabilities) and ``GRANTED``
(``cancel``, ``prompt``) on ``PARENT`` and records every handler call with
the session id the SDK dispatched it for and the spelling's tag. The test
client then writes every generated hostile spelling (``tests/support/mutations.py``)
in one go, then the controls, then a barrier prompt, and closes its side.

Asserted: no SDK handler ever ran a mutation for ``CHILD``; every control
(the same calls on ``PARENT``, cancel and prompt on ``GRANTED``) was
dispatched for its session, so the recording works and the agent was alive
to the end.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
from support.mutations import CHILD, READ_ONLY, Spelling, controls, spellings

HERE = Path(__file__).resolve().parent
CONFIG = """\
[enforcement.child_mutations]
"session/cancel" = "cancel"
"session/prompt" = "prompt"
"""

pytestmark = pytest.mark.interop


def _call(rid: str, method: str, params: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}).encode()


def _prompt(rid: str, text: str) -> bytes:
    return _call(
        rid, "session/prompt", {"sessionId": "PARENT", "prompt": [{"type": "text", "text": text}]}
    )


class _Client:
    """Reads the proxy's stdout into ``messages``; :meth:`answer` waits for one id."""

    def __init__(self, proc: trio.Process) -> None:
        self.proc = proc
        self.messages: list[Any] = []
        self._seen = trio.Condition()

    async def read(self) -> None:
        assert self.proc.stdout is not None
        buf = b""
        async for data in self.proc.stdout:
            buf += data
            *lines, buf = buf.split(b"\n")
            async with self._seen:
                for line in lines:
                    try:
                        self.messages.append(json.loads(line))
                    except ValueError:
                        self.messages.append({"unreadable": line.decode(errors="replace")})
                self._seen.notify_all()

    async def answer(self, rid: str) -> Any:
        async with self._seen:
            while True:
                for m in self.messages:
                    if isinstance(m, dict) and m.get("id") == rid and "method" not in m:
                        return m
                await self._seen.wait()

    async def send(self, *lines: bytes) -> None:
        assert self.proc.stdin is not None
        await self.proc.stdin.send_all(b"".join(line + b"\n" for line in lines))


async def _session(client: _Client, hostile: list[Spelling], checks: list[Spelling]) -> None:
    init = {"protocolVersion": 1, "clientCapabilities": {"subagents": {}}}
    await client.send(_call("init", "initialize", init))
    assert "result" in await client.answer("init")
    await client.send(_call("new", "session/new", {"cwd": "/tmp", "mcpServers": []}))
    assert (await client.answer("new"))["result"]["sessionId"] == "PARENT"
    await client.send(_prompt("announce", "announce"))
    assert "result" in await client.answer("announce")
    granted, parent = checks[:2], checks[2:]
    await client.send(*(sp.line for sp in granted))
    await client.send(*(sp.line for sp in hostile))
    await client.send(*(sp.line for sp in parent), _prompt("barrier", "barrier"))
    barrier = await client.answer("barrier")
    assert barrier.get("result") == {"stopReason": "end_turn"}, barrier


async def run_through_proxy(
    agent: list[str],
    tmp_path: Path,
    hostile: list[Spelling],
    checks: list[Spelling],
    env: dict[str, str],
) -> tuple[list[dict[str, Any]], list[Any]]:
    """Runs the session; returns (the agent's dispatch records, what the client received)."""
    record = tmp_path / "dispatched.jsonl"
    record.write_text("")
    config = tmp_path / "proxy.toml"
    config.write_text(CONFIG)
    argv = [sys.executable, "-m", "acp_proxy", "--config", str(config)]
    argv += ["--audit-log", str(tmp_path / "audit.jsonl"), "--", *agent, str(record)]
    with (tmp_path / "stderr.log").open("wb") as stderr, trio.fail_after(60):
        proc = await trio.lowlevel.open_process(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, env=env
        )
        client = _Client(proc)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(client.read)
                await _session(client, hostile, checks)
                assert proc.stdin is not None
                await proc.stdin.aclose()
                await proc.wait()
                nursery.cancel_scope.cancel()
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    records = [json.loads(line) for line in record.read_text().splitlines()]
    return records, client.messages


@pytest.mark.parametrize("sdk", ["python", "ts"])
async def test_no_sdk_agent_dispatches_a_mutation_for_a_child(
    sdk: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    env = dict(os.environ)
    if sdk == "ts":
        env["ACP_TS_SDK_DIR"] = str(request.getfixturevalue("ts_sdk_dir"))
        agent = ["node", str(HERE / "ts" / "diff_agent.mjs")]
    else:
        agent = [sys.executable, str(HERE / "peers" / "py_diff_agent.py")]
    hostile = spellings()
    checks = controls(len(hostile) + 1)
    records, _ = await run_through_proxy(agent, tmp_path, hostile, [c for c, _ in checks], env)
    labels = {sp.case: sp.label for sp in hostile}

    dispatched = {(r["case"], json.dumps(r["sessionId"])) for r in records}
    missing = [
        sp.label
        for sp, sid in checks
        if (sp.case, json.dumps(sid)) not in dispatched
        and not (sdk == "python" and sp.method == "session/inject")  # no such route
    ]
    on_child = [r for r in records if r["sessionId"] == CHILD and r["method"] not in READ_ONLY]
    reached = sorted({f"{labels.get(r['case'], r['case'])} -> {r['method']}" for r in on_child})
    assert (missing, reached) == ([], []), (
        f"controls not dispatched: {missing}; "
        f"{len(reached)} spellings reached a CHILD handler: " + "; ".join(reached)
    )
