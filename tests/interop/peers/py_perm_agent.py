#!/usr/bin/env python3
"""An ACP v1 agent on the official Python SDK that asks the client for things.

Per ``session/prompt``: ``session/request_permission`` for three tool calls (kinds
``fetch``, ``read``, ``edit``, in that order, each offering ``yes`` allow_once and
``no`` reject_once), then ``fs/write_text_file`` of ``/etc/acp-proxy-test`` (outside
any workspace a test gives) and of ``CWD/inside.txt``; stopReason ``end_turn``.

Each outcome is printed to stderr as one line ``[py-perm-agent] OUTCOME {json}``:
``{"ask": KIND, "outcome": ...}`` or ``{"write": PATH, "error": {code, message} | null}``.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from acp import PROTOCOL_VERSION, RequestError, run_agent
from acp.schema import (
    AgentCapabilities,
    Implementation,
    InitializeResponse,
    NewSessionResponse,
    PermissionOption,
    PromptResponse,
    ToolCallUpdate,
)


def outcome(record: dict[str, Any]) -> None:
    print(f"[py-perm-agent] OUTCOME {json.dumps(record)}", file=sys.stderr, flush=True)


class AskingAgent:
    """Duck-typed ``acp.Agent``."""

    def __init__(self) -> None:
        self.conn: Any = None
        self.cwd: dict[str, str] = {}

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **_: Any) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=min(protocol_version, PROTOCOL_VERSION),
            agent_capabilities=AgentCapabilities(load_session=False),
            agent_info=Implementation(name="acp-proxy-py-perm-agent", version="0.1.0"),
            auth_methods=[],
        )

    async def new_session(self, cwd: str, **_: Any) -> NewSessionResponse:
        session_id = f"perm-session-{len(self.cwd) + 1}"
        self.cwd[session_id] = cwd
        return NewSessionResponse(session_id=session_id)

    async def prompt(self, prompt: list[Any], session_id: str, **_: Any) -> PromptResponse:
        for kind in ("fetch", "read", "edit"):
            answer = await self.conn.request_permission(
                session_id=session_id,
                tool_call=ToolCallUpdate(tool_call_id=f"call-{kind}", title=kind, kind=kind),
                options=[
                    PermissionOption(option_id="yes", name="Allow", kind="allow_once"),
                    PermissionOption(option_id="no", name="Reject", kind="reject_once"),
                ],
            )
            outcome(
                {
                    "ask": kind,
                    "outcome": answer.outcome.model_dump(by_alias=True, exclude_none=True),
                }
            )
        for path in ("/etc/acp-proxy-test", f"{self.cwd[session_id]}/inside.txt"):
            error = None
            try:
                await self.conn.write_text_file(session_id=session_id, path=path, content="x")
            except RequestError as exc:
                error = {"code": exc.code, "message": str(exc)}
            outcome({"write": path, "error": error})
        return PromptResponse(stop_reason="end_turn")


if __name__ == "__main__":
    asyncio.run(run_agent(AskingAgent()))
