"""Official ACP SDK clients drive the demo agent (``python -m acp_proxy.demo.agent``),
directly and through the proxy: each gets only what its protocol version and
capabilities allow, and its SDK parses every message (nothing logged and dropped).

- the Python SDK (``agent-client-protocol``, stable v1, no subagents:
  ``peers/py_demo_client.py``) and the TypeScript SDK's stable entrypoint
  (``ts/demo_client.mjs --version 1``): stable-v1 update kinds on the client's own
  session only, v1 ``initialize`` and ``session/request_permission`` shapes;
- the TypeScript SDK's unstable v1 entrypoint with ``clientCapabilities.subagents``
  (``--subagents``): child sessions too, never ``state_update``;
- the TypeScript SDK's draft-v2 entrypoint (``--version 2``): both, as ``acp-proxy
  demo`` shows.

Each SDK drops a message it cannot parse with a log line (Python: "Unhandled error
while handling notification", TypeScript: "Error handling notification"), which the
clients capture; a v2 ``state_update`` sent to a v1 client is such a message.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import trio
from support.demo_shapes import (
    V1_INITIALIZE_FIELDS,
    V1_STABLE_KINDS,
    V1_SUBAGENT_KINDS,
    V2_INITIALIZE_FIELDS,
    permission_requests,
    session_updates,
)

from acp_proxy.demo.agent import PARENT, REVIEW, SEARCH

from .observe import HERE, proxy, read_audit, run_client

pytestmark = pytest.mark.interop
TIMEOUT = 60
DEMO_AGENT = [sys.executable, "-m", "acp_proxy.demo.agent"]
PY_DEMO_CLIENT = [sys.executable, str(HERE / "peers" / "py_demo_client.py")]


def ts_demo_client(*flags: str) -> list[str]:
    return ["node", str(HERE / "ts" / "demo_client.mjs"), *flags]


async def _both(
    client: list[str], tmp_path: Path, ts_sdk_dir: Path | None = None
) -> list[tuple[str, dict[str, Any]]]:
    """The client's report against the demo agent directly, then through the proxy."""
    with trio.fail_after(TIMEOUT):
        direct = await run_client(client, DEMO_AGENT, ts_sdk_dir)
        proxied = await run_client(
            client, [*proxy(tmp_path / "audit.jsonl"), *DEMO_AGENT], ts_sdk_dir
        )
    return [("direct", direct), ("proxied", proxied)]


def _sdk_took_everything(report: dict[str, Any]) -> None:
    """Nothing logged by the SDK; every session/update and permission request received
    reached the client's handlers, in order."""
    assert report["sdkErrors"] == []
    handled = [(u["sessionId"], u["sessionUpdate"]) for u in report["handled"]["updates"]]
    assert handled == session_updates(report["received"])
    assert len(report["handled"]["permissions"]) == len(permission_requests(report["received"]))
    assert len(report["handled"]["permissions"]) == 2


def _v1_without_subagents(report: dict[str, Any]) -> None:
    updates = session_updates(report["received"])
    kinds = {kind for _, kind in updates}
    assert kinds <= V1_STABLE_KINDS
    assert {"agent_message_chunk", "tool_call", "tool_call_update"} <= kinds
    assert {sid for sid, _ in updates} == {PARENT}
    for params in permission_requests(report["received"]):
        assert set(params) == {"sessionId", "toolCall", "options"}
    assert report["stopReasons"] == ["end_turn", "end_turn", "end_turn"]


async def test_python_sdk_v1_client(tmp_path: Path) -> None:
    """The Python SDK (stable v1): parses every message, sees only stable-v1 kinds on its
    own session, and reads ``agentCapabilities`` / ``agentInfo`` from ``initialize``."""
    for how, report in await _both(PY_DEMO_CLIENT, tmp_path):
        _sdk_took_everything(report)
        _v1_without_subagents(report)
        assert report["initialize"] == {
            "protocolVersion": 1,
            "agentInfo": "acp-proxy-demo-agent",
            "resume": True,
        }, how
        assert report["handled"]["permissions"] == [
            {"sessionId": PARENT, "toolCallId": "call-fetch", "kind": "fetch"},
            {"sessionId": PARENT, "toolCallId": "call-edit", "kind": "edit"},
        ]


async def test_ts_sdk_v1_client(tmp_path: Path, ts_sdk_dir: Path) -> None:
    """The TypeScript SDK's stable entrypoint, v1 without subagents."""
    for how, report in await _both(ts_demo_client("--version", "1"), tmp_path, ts_sdk_dir):
        _sdk_took_everything(report)
        _v1_without_subagents(report)
        assert set(report["initialize"]) <= V1_INITIALIZE_FIELDS, how
        assert report["initialize"]["agentCapabilities"]["sessionCapabilities"] == {"resume": {}}
        assert "child" not in report


async def test_ts_sdk_v1_client_with_subagents(tmp_path: Path, ts_sdk_dir: Path) -> None:
    """The unstable v1 entrypoint with ``clientCapabilities.subagents: {}``: the children
    are announced and stream (through the proxy as well: it registers both), the
    client's cancel of the cancellable one is mirrored; no ``state_update``."""
    client = ts_demo_client("--version", "1", "--subagents")
    for how, report in await _both(client, tmp_path, ts_sdk_dir):
        _sdk_took_everything(report)
        updates = session_updates(report["received"])
        kinds = {kind for _, kind in updates}
        assert kinds <= V1_STABLE_KINDS | V1_SUBAGENT_KINDS, how
        assert "subagent_update" in kinds
        assert {sid for sid, _ in updates} == {PARENT, SEARCH, REVIEW}
        assert report["child"] == SEARCH
        assert set(report["initialize"]) <= V1_INITIALIZE_FIELDS
        assert report["stopReasons"] == ["end_turn", "end_turn", "end_turn"]
    audit = read_audit(tmp_path / "audit.jsonl")
    assert [r["sessionId"] for r in audit if r["event"] == "child_announced"] == [SEARCH, REVIEW]


async def test_ts_sdk_v2_client(tmp_path: Path, ts_sdk_dir: Path) -> None:
    """The draft-v2 entrypoint: v2 ``initialize``, state_update and subagent_update,
    permission requests with ``title`` and ``subject``."""
    for how, report in await _both(ts_demo_client("--version", "2"), tmp_path, ts_sdk_dir):
        _sdk_took_everything(report)
        kinds = {kind for _, kind in session_updates(report["received"])}
        assert {"state_update", "subagent_update"} <= kinds, how
        assert set(report["initialize"]) <= V2_INITIALIZE_FIELDS
        for params in permission_requests(report["received"]):
            assert {"title", "subject"} <= set(params)
            assert "toolCall" not in params
