"""Official ACP SDK peers (Python ``agent-client-protocol``, TypeScript
``@agentclientprotocol/sdk``) through the proxy as a subprocess: each client
must observe exactly what it observes without the proxy."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import trio

from .observe import (
    PLAIN,
    PY_AGENT,
    PY_CLIENT,
    SUBAGENTS,
    proxy,
    read_audit,
    run_client,
    summarize,
    ts_agent,
    ts_client,
)

pytestmark = pytest.mark.interop
TIMEOUT = 60


async def _direct_and_proxied(
    client: Sequence[str], agent: Sequence[str], audit: Path, ts_sdk_dir: Path | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    direct = await run_client(client, agent, ts_sdk_dir)
    proxied = await run_client(client, [*proxy(audit), *agent], ts_sdk_dir)
    return direct, proxied


def _audit_events(audit: Path) -> list[str]:
    return [r["event"] for r in read_audit(audit)]


async def test_python_client_and_python_agent(tmp_path: Path) -> None:
    """Python SDK client <-> Python SDK agent: a turn with updates and a permission request,
    then a cancelled turn, observed the same with and without the proxy."""
    audit = tmp_path / "audit.jsonl"
    with trio.fail_after(TIMEOUT):
        direct, proxied = await _direct_and_proxied(PY_CLIENT, PY_AGENT, audit)
    assert summarize(direct) == PLAIN
    assert summarize(proxied) == PLAIN
    assert "[py-sdk-agent] cancel" in proxied["stderr"]  # the agent's stderr came through
    assert _audit_events(audit) == ["peer_closed", "peer_closed"]


async def test_ts_agent_and_python_client(tmp_path: Path, ts_sdk_dir: Path) -> None:
    """TypeScript SDK agent <-> Python SDK client through the proxy, as observed directly."""
    audit = tmp_path / "audit.jsonl"
    with trio.fail_after(TIMEOUT):
        direct, proxied = await _direct_and_proxied(PY_CLIENT, ts_agent(), audit, ts_sdk_dir)
    assert summarize(direct) == PLAIN
    assert summarize(proxied) == PLAIN
    assert _audit_events(audit) == ["peer_closed", "peer_closed"]


async def test_python_agent_and_ts_client(tmp_path: Path, ts_sdk_dir: Path) -> None:
    """Python SDK agent <-> TypeScript SDK client through the proxy, as observed directly."""
    audit = tmp_path / "audit.jsonl"
    with trio.fail_after(TIMEOUT):
        direct, proxied = await _direct_and_proxied(ts_client(), PY_AGENT, audit, ts_sdk_dir)
    assert summarize(direct) == PLAIN
    assert summarize(proxied) == PLAIN
    assert _audit_events(audit) == ["peer_closed", "peer_closed"]


async def test_ts_subagents_child_cancel_permitted(tmp_path: Path, ts_sdk_dir: Path) -> None:
    """TypeScript SDK unstable peers: a child announced with {"cancel": {}} streams, asks for
    permission and is cancelled by the client through the proxy exactly as directly; a
    session/prompt on the child is refused by the proxy (-32601), not by the agent."""
    audit = tmp_path / "audit.jsonl"
    client, agent = ts_client("--subagents"), ts_agent("--subagents")
    with trio.fail_after(TIMEOUT):
        direct, proxied = await _direct_and_proxied(client, agent, audit, ts_sdk_dir)
    assert summarize(direct) == SUBAGENTS
    assert summarize(proxied) == SUBAGENTS
    child = proxied["child"]
    assert f"[ts-subagent-agent] cancel {child}" in proxied["stderr"]

    assert direct["childPrompt"]["code"] == -32002  # the agent's own answer
    assert proxied["childPrompt"] == {
        "code": -32601,
        "message": f"acp-proxy: session/prompt refused on child session {child!r}: "
        "no child capability grants this method",
        "data": {"sessionId": child, "method": "session/prompt", "capability": None},
    }
    records = read_audit(audit)
    assert [(r["event"], r.get("sessionId")) for r in records if r["event"] != "child_updated"] == [
        ("child_announced", child),
        ("mutation_rejected", child),
        ("peer_closed", None),
        ("peer_closed", None),
    ]


async def test_ts_client_and_ts_agent(tmp_path: Path, ts_sdk_dir: Path) -> None:
    """TypeScript SDK client <-> TypeScript SDK agent (stable entrypoint) through the proxy."""
    audit = tmp_path / "audit.jsonl"
    with trio.fail_after(TIMEOUT):
        direct, proxied = await _direct_and_proxied(ts_client(), ts_agent(), audit, ts_sdk_dir)
    assert summarize(direct) == PLAIN
    assert summarize(proxied) == PLAIN
