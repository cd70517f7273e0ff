"""What each protocol version lets an agent send, for the demo agent's tests
(``tests/test_demo_agent.py``, ``tests/interop/test_sdk_demo_agent.py``).

The sets are copied from the schemas published with the TypeScript SDK 2.4.0
(``npm pack @agentclientprotocol/sdk``, ``schema/``; docs/protocol.md follows the
same version): ``$defs.SessionUpdate`` and ``$defs.InitializeResponse.properties``
of ``v1/schema.json``, ``v1/schema.unstable.json`` and ``v2/schema.json``.
"""

from __future__ import annotations

from typing import Any

#: ``sessionUpdate`` kinds of the stable v1 schema (no subagent_update, no state_update).
V1_STABLE_KINDS = frozenset(
    {
        "user_message_chunk",
        "agent_message_chunk",
        "agent_thought_chunk",
        "tool_call",
        "tool_call_update",
        "plan",
        "available_commands_update",
        "current_mode_update",
        "config_option_update",
        "session_info_update",
        "usage_update",
        "notice",
        "compaction_update",
        "compaction_summary_chunk",
    }
)
#: What v1 adds for a client that advertised ``clientCapabilities.subagents``.
V1_SUBAGENT_KINDS = frozenset({"subagent_update", "session_message", "session_message_chunk"})
#: Fields of a v1 ``initialize`` result; v2 has ``info`` and ``capabilities`` instead.
V1_INITIALIZE_FIELDS = frozenset(
    {"protocolVersion", "agentCapabilities", "authMethods", "agentInfo", "_meta"}
)
V2_INITIALIZE_FIELDS = frozenset(
    {"protocolVersion", "info", "capabilities", "authMethods", "_meta"}
)


def session_updates(messages: list[Any]) -> list[tuple[str, str]]:
    """``(params.sessionId, update.sessionUpdate)`` of each ``session/update`` in
    ``messages`` (raw JSON-RPC objects), in order."""
    return [
        (m["params"]["sessionId"], m["params"]["update"]["sessionUpdate"])
        for m in messages
        if isinstance(m, dict) and m.get("method") == "session/update"
    ]


def permission_requests(messages: list[Any]) -> list[dict[str, Any]]:
    """The ``params`` of each ``session/request_permission`` request in ``messages``."""
    return [
        m["params"]
        for m in messages
        if isinstance(m, dict) and m.get("method") == "session/request_permission"
    ]
