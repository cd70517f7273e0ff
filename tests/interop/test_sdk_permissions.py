"""Permission rules (issue 19) between official SDK peers, through the proxy as a subprocess.

A Python SDK v1 agent and a TypeScript SDK draft-v2 agent each ask permission for a
``fetch`` tool call (a deny rule: the proxy answers reject_once), a ``read`` one (an
allow rule: the proxy answers allow_once) and an ``edit`` one (no rule: the SDK client
is asked and answers allow_once). The v1 agent then writes a file outside the
workspace (a deny rule: refused with a JSON-RPC error, the SDK client receives
nothing) and one inside it (forwarded). Directly, the client is asked everything.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from .observe import HERE, read_jsonl, run_client

pytestmark = pytest.mark.interop
TIMEOUT = 60

POLICY = """\
[[permissions.rules]]
name = "no-network-tools"
action = "deny"
tool_kind = "fetch"

[[permissions.rules]]
name = "reads-allowed"
action = "allow"
tool_kind = "read"

[[permissions.rules]]
name = "writes-in-workspace-only"
action = "deny"
method = "fs/write_text_file"
inside_workspace = false
"""

PY_AGENT = [sys.executable, str(HERE / "peers" / "py_perm_agent.py")]
PY_CLIENT = [sys.executable, str(HERE / "peers" / "py_perm_client.py")]
TS_AGENT = ["node", str(HERE / "ts" / "perm_agent_v2.mjs")]
TS_CLIENT = ["node", str(HERE / "ts" / "perm_client_v2.mjs")]


def _proxy(tmp_path: Path) -> list[str]:
    config = tmp_path / "policy.toml"
    config.write_text(POLICY)
    audit = tmp_path / "audit.jsonl"
    argv = [sys.executable, "-m", "acp_proxy", "--config", str(config)]
    return [*argv, "--audit-log", str(audit), "--"]


def _outcomes(stderr: str) -> list[dict[str, Any]]:
    """The agent's ``OUTCOME`` lines (it prints them to the stderr the client inherits)."""
    return [
        json.loads(line.split(" OUTCOME ", 1)[1])
        for line in stderr.splitlines()
        if " OUTCOME " in line
    ]


def _asks(outcomes: list[dict[str, Any]]) -> dict[str, Any]:
    return {o["ask"]: o["outcome"] for o in outcomes if "ask" in o}


SELECTED_YES = {"outcome": "selected", "optionId": "yes"}
SELECTED_NO = {"outcome": "selected", "optionId": "no"}


async def test_python_v1_agent_asks_through_the_proxy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    monkeypatch.chdir(workspace)  # the client's session/new cwd
    with trio.fail_after(TIMEOUT):
        direct = await run_client(PY_CLIENT, PY_AGENT)
        proxied = await run_client(PY_CLIENT, [*_proxy(tmp_path), *PY_AGENT])
    inside = f"{workspace}/inside.txt"
    assert direct["permissions"] == ["fetch", "read", "edit"]
    assert direct["writes"] == ["/etc/acp-proxy-test", inside]
    assert _asks(_outcomes(direct["stderr"])) == dict.fromkeys(
        ("fetch", "read", "edit"), SELECTED_YES
    )

    assert proxied["stopReason"] == "end_turn"
    assert proxied["permissions"] == ["edit"]  # only the forwarded one reached the client
    assert proxied["writes"] == [inside]  # the refused write never reached it
    assert proxied["methods"] == ["session/request_permission", "fs/write_text_file"]
    outcomes = _outcomes(proxied["stderr"])
    assert _asks(outcomes) == {"fetch": SELECTED_NO, "read": SELECTED_YES, "edit": SELECTED_YES}
    writes = {o["write"]: o["error"] for o in outcomes if "write" in o}
    assert writes[inside] is None
    refused = writes["/etc/acp-proxy-test"]
    assert refused["code"] == -32600
    assert "writes-in-workspace-only" in refused["message"]

    records = read_jsonl(tmp_path / "audit.jsonl")
    decided = [(r["event"], r.get("rule"), r.get("method")) for r in records if "rule" in r]
    assert decided == [
        ("permission_decided", "no-network-tools", "session/request_permission"),
        ("permission_decided", "reads-allowed", "session/request_permission"),
        ("request_refused", "writes-in-workspace-only", "fs/write_text_file"),
    ]
    assert all("content" not in r for r in records)


async def test_ts_v2_agent_asks_through_the_proxy(tmp_path: Path, ts_sdk_dir: Path) -> None:
    with trio.fail_after(TIMEOUT):
        direct = await run_client(TS_CLIENT, TS_AGENT, ts_sdk_dir)
        proxied = await run_client(TS_CLIENT, [*_proxy(tmp_path), *TS_AGENT], ts_sdk_dir)
    assert direct["protocolVersion"] == proxied["protocolVersion"] == 2
    assert direct["permissions"] == ["fetch", "read", "edit"]
    assert _asks(_outcomes(direct["stderr"])) == dict.fromkeys(
        ("fetch", "read", "edit"), SELECTED_YES
    )

    assert proxied["permissions"] == ["edit"]
    assert proxied["methods"] == ["session/request_permission", "session/update"]
    outcomes = _asks(_outcomes(proxied["stderr"]))
    assert outcomes == {"fetch": SELECTED_NO, "read": SELECTED_YES, "edit": SELECTED_YES}
    audit = read_jsonl(tmp_path / "audit.jsonl")
    decided = [(r.get("rule"), r["action"]) for r in audit if r["event"] == "permission_decided"]
    # the edit no rule decides is on the record too: asked, and the client's answer
    assert decided == [("no-network-tools", "deny"), ("reads-allowed", "allow"), (None, "ask")]
    answered = [r for r in audit if r["event"] == "permission_answered"]
    assert [(r["outcome"], r["optionId"]) for r in answered] == [("selected", "yes")]
