#!/usr/bin/env python3
"""A recording ACP agent on the official Python SDK, for the differential suite.

``py_diff_agent.py RECORD_FILE``: speaks ACP v1 over stdio (``acp.run_agent``,
unstable methods enabled). Every handler the SDK calls appends one JSON line
to ``RECORD_FILE`` (flushed), *before* doing anything else::

    {"sdk": "python", "method": "session/prompt", "sessionId": <session_id as
     the handler received it>, "case": <params._meta.case, or null>}

``session/new`` answers ``PARENT``. A ``session/prompt`` on ``PARENT`` whose
text is ``announce`` first announces two children on it: ``CHILD`` (no
capabilities) and ``GRANTED`` (``{"cancel": {}, "prompt": {}}``); ``barrier``
waits 100 ms (so that every call received before it has been dispatched).
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from acp import PROTOCOL_VERSION, run_agent
from acp.schema import (
    AgentCapabilities,
    Implementation,
    InitializeResponse,
    NewSessionResponse,
    PromptResponse,
)


class DiffAgent:
    """Duck-typed ``acp.Agent`` recording every dispatch."""

    def __init__(self, record: Any) -> None:
        self.conn: Any = None
        self.record = record

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    def _rec(self, method: str, kw: dict[str, Any]) -> None:
        meta = kw.get("field_meta")
        case = kw.get("case", meta.get("case") if isinstance(meta, dict) else None)
        line = {"sdk": "python", "method": method, "sessionId": kw.get("session_id"), "case": case}
        self.record.write(json.dumps(line, default=repr) + "\n")
        self.record.flush()

    async def initialize(self, protocol_version: int, **_: Any) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=min(protocol_version, PROTOCOL_VERSION),
            agent_capabilities=AgentCapabilities(load_session=True),
            agent_info=Implementation(name="acp-proxy-py-diff-agent", version="0.1.0"),
            auth_methods=[],
        )

    async def new_session(self, **_: Any) -> NewSessionResponse:
        return NewSessionResponse(session_id="PARENT")

    async def _announce(self, child: str, capabilities: Any) -> None:
        update: dict[str, Any] = {"sessionUpdate": "subagent_update", "sessionId": child}
        update["title"] = child.lower()
        if capabilities is not None:
            update["capabilities"] = capabilities
        params = {"sessionId": "PARENT", "update": update}
        await self.conn._conn.send_notification("session/update", params)

    async def prompt(self, **kw: Any) -> PromptResponse:
        self._rec("session/prompt", kw)
        text = " ".join(getattr(b, "text", "") for b in kw.get("prompt") or [])
        if kw.get("session_id") == "PARENT" and text == "announce":
            await self._announce("CHILD", None)
            await self._announce("GRANTED", {"cancel": {}, "prompt": {}})
        if text == "barrier":
            await asyncio.sleep(0.1)
        return PromptResponse(stop_reason="end_turn")

    async def cancel(self, **kw: Any) -> None:
        self._rec("session/cancel", kw)

    async def set_session_mode(self, **kw: Any) -> None:
        self._rec("session/set_mode", kw)

    async def set_config_option(self, **kw: Any) -> None:
        self._rec("session/set_config_option", kw)

    async def close_session(self, **kw: Any) -> None:
        self._rec("session/close", kw)

    async def load_session(self, **kw: Any) -> None:
        self._rec("session/load", kw)

    async def resume_session(self, **kw: Any) -> dict[str, Any]:
        self._rec("session/resume", kw)
        return {}

    async def fork_session(self, **kw: Any) -> dict[str, Any]:
        self._rec("session/fork", kw)
        return {"sessionId": "FORK"}

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self._rec(f"_{method}", {"session_id": params.get("sessionId")})
        return {}

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        self._rec(f"_{method}", {"session_id": params.get("sessionId")})


def main() -> None:
    with open(sys.argv[1], "a", encoding="utf-8") as record:
        asyncio.run(run_agent(DiffAgent(record), use_unstable_protocol=True))


if __name__ == "__main__":
    main()
