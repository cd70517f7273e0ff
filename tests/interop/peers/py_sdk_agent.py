#!/usr/bin/env python3
"""An ACP agent on the official Python SDK (``agent-client-protocol``, module ``acp``).

Speaks ACP v1 over stdio through ``acp.run_agent``. Per ``session/prompt``:

* text without "slow": three ``agent_message_chunk`` updates, a ``tool_call``,
  ``session/request_permission`` (allow / reject), ``tool_call_update``
  in_progress then completed (or failed when rejected), a closing chunk,
  stopReason ``end_turn``;
* text with "slow": a chunk every 20 ms (at most 500) until ``session/cancel``
  arrives, then stopReason ``cancelled``.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from typing import Any

from acp import (
    PROTOCOL_VERSION,
    RequestError,
    run_agent,
    start_tool_call,
    text_block,
    tool_content,
    update_agent_message_text,
    update_tool_call,
)
from acp.schema import (
    AgentCapabilities,
    Implementation,
    InitializeResponse,
    NewSessionResponse,
    PermissionOption,
    PromptResponse,
    ToolCallUpdate,
)


def log(text: str) -> None:
    print(f"[py-sdk-agent] {text}", file=sys.stderr, flush=True)


class ScenarioAgent:
    """Duck-typed ``acp.Agent``; methods it lacks answer "method not found"."""

    def __init__(self) -> None:
        self.conn: Any = None
        self.turns: dict[str, asyncio.Event | None] = {}  # session -> cancel flag of its turn

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **_: Any) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=min(protocol_version, PROTOCOL_VERSION),
            agent_capabilities=AgentCapabilities(load_session=False),
            agent_info=Implementation(name="acp-proxy-py-sdk-agent", version="0.1.0"),
            auth_methods=[],
        )

    async def new_session(self, cwd: str, **_: Any) -> NewSessionResponse:
        session_id = f"py-session-{len(self.turns) + 1}"
        self.turns[session_id] = None
        return NewSessionResponse(session_id=session_id)

    async def cancel(self, session_id: str, **_: Any) -> None:
        log(f"cancel {session_id}")
        flag = self.turns.get(session_id)
        if flag is not None:
            flag.set()

    async def prompt(self, prompt: list[Any], session_id: str, **_: Any) -> PromptResponse:
        if session_id not in self.turns:
            raise RequestError.resource_not_found(session_id)
        cancelled = asyncio.Event()
        self.turns[session_id] = cancelled
        text = " ".join(getattr(block, "text", "") for block in prompt)
        try:
            if "slow" in text:
                return PromptResponse(stop_reason=await self._ticks(session_id, cancelled))
            return PromptResponse(stop_reason=await self._tool_turn(session_id, text))
        finally:
            self.turns[session_id] = None

    async def _say(self, session_id: str, text: str) -> None:
        await self.conn.session_update(
            session_id=session_id, update=update_agent_message_text(text)
        )

    async def _ticks(self, session_id: str, cancelled: asyncio.Event) -> str:
        for i in range(500):
            if cancelled.is_set():
                return "cancelled"
            await self._say(session_id, f"tick {i} ")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(cancelled.wait(), 0.02)
        return "end_turn"

    async def _tool_turn(self, session_id: str, text: str) -> str:
        for piece in ("You said: ", text, ". "):
            await self._say(session_id, piece)
        call = "call-1"
        await self.conn.session_update(
            session_id=session_id,
            update=start_tool_call(call, "Echo", kind="other", status="pending"),
        )
        answer = await self.conn.request_permission(
            session_id=session_id,
            tool_call=ToolCallUpdate(tool_call_id=call, title="Echo", status="pending"),
            options=[
                PermissionOption(option_id="yes", name="Allow", kind="allow_once"),
                PermissionOption(option_id="no", name="Reject", kind="reject_once"),
            ],
        )
        allowed = answer.outcome.outcome == "selected" and answer.outcome.option_id == "yes"
        await self.conn.session_update(
            session_id=session_id, update=update_tool_call(call, status="in_progress")
        )
        await self.conn.session_update(
            session_id=session_id,
            update=update_tool_call(
                call,
                status="completed" if allowed else "failed",
                content=[tool_content(text_block(text if allowed else "rejected"))],
            ),
        )
        await self._say(session_id, "Done." if allowed else "Rejected.")
        return "end_turn"


if __name__ == "__main__":
    asyncio.run(run_agent(ScenarioAgent()))
