"""A WebSocket ACP agent that asks the client to write two files after ``session/new``:
the proxy's own file first (``w-1``), another file second (``w-2``); it keeps the
answers it gets (issue 31: the proxy's own files are out of the agent's reach)."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import trio
from trio_websocket import ConnectionClosed, WebSocketRequest


class OwnFileAgent:
    """``handler`` serves one connection; ``answers`` fills with the client's (or the
    proxy's) answers to ``w-1`` and ``w-2``; ``both_answered`` is set after both."""

    def __init__(self, own: Path, other: Path) -> None:
        self.paths = {"w-1": own, "w-2": other}
        self.answers: dict[str, dict[str, Any]] = {}
        self.both_answered = trio.Event()

    async def handler(self, request: WebSocketRequest) -> None:
        ws = await request.accept()
        with contextlib.suppress(ConnectionClosed):
            while True:
                m = json.loads(await ws.get_message())
                method = m.get("method")
                if method in ("initialize", "session/new"):
                    result = (
                        {"protocolVersion": 1} if method == "initialize" else {"sessionId": "S"}
                    )
                    await ws.send_message(
                        json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": result})
                    )
                if method == "session/new":
                    for rid, path in self.paths.items():
                        params = {"sessionId": "S", "path": str(path), "content": "x"}
                        ask = {"jsonrpc": "2.0", "id": rid, "method": "fs/write_text_file"}
                        await ws.send_message(json.dumps({**ask, "params": params}))
                elif method is None:
                    self.answers[m["id"]] = m
                    if len(self.answers) == 2:
                        self.both_answered.set()


def client_messages(cwd: Path) -> list[dict[str, Any]]:
    """The client's initialize (fs capabilities) and session/new in ``cwd``."""
    caps = {"fs": {"readTextFile": True, "writeTextFile": True}}
    return [
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {"protocolVersion": 1, "clientCapabilities": caps},
        },
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "session/new",
            "params": {"cwd": str(cwd), "mcpServers": []},
        },
    ]


def assert_own_file_refused(agent: OwnFileAgent) -> None:
    """``w-1`` (the proxy's own file) was refused by the proxy; ``w-2`` answered by the client."""
    refused = agent.answers["w-1"]["error"]
    assert "own file" in refused["message"], refused
    assert agent.answers["w-2"] == {"jsonrpc": "2.0", "id": "w-2", "result": {}}
