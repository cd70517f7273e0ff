"""An ACP agent on the official Python SDK that elicits (issue 26 interop).

A prompt whose text is ``url URL`` sends a URL-mode ``elicitation/create`` for
URL; ``form NAME`` a form-mode one asking for one string field NAME. The
answer comes back as one ``agent_message_chunk``: ``elicited ACTION``; then
``end_turn``.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from acp import run_agent, update_agent_message_text
from acp.schema import ElicitationFormSessionMode, ElicitationUrlSessionMode, PromptResponse
from py_sdk_agent import ScenarioAgent  # this directory is on sys.path when run as a script


class ElicitAgent(ScenarioAgent):
    """The Python SDK scenario agent (initialize, session/new) whose prompts elicit."""

    async def prompt(self, prompt: list[Any], session_id: str, **_: Any) -> PromptResponse:
        kind, _, arg = prompt[0].text.partition(" ")
        mode: Any
        if kind == "url":
            mode = ElicitationUrlSessionMode(session_id=session_id, elicitation_id="e1", url=arg)
        else:
            schema = {"type": "object", "properties": {arg: {"type": "string"}}}
            mode = ElicitationFormSessionMode(session_id=session_id, requested_schema=schema)
        answer = await self.conn.create_elicitation(message="please", mode=mode)
        print(f"[py-elicit-agent] answer {answer!r}", file=sys.stderr, flush=True)
        await self.conn.session_update(
            session_id=session_id,
            update=update_agent_message_text(f"elicited {answer.action}"),
        )
        return PromptResponse(stop_reason="end_turn")


if __name__ == "__main__":
    asyncio.run(run_agent(ElicitAgent()))
