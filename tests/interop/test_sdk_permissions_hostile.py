"""A hostile agent against the permission rules, with the official Python SDK client.

The agent (``tests/support/peers/hostile_perm_agent.py``) tries what a hostile
review found getting past the rules of issue 19: a write whose ``params._meta.path``
the Python SDK spreads over ``path``, a ``tool_call`` snake_case alias, a harmless
v2 ``subject`` beside a ``fetch`` v1 ``toolCall``, and a request naming only the id
of a ``fetch`` tool call announced earlier. Directly, the SDK client writes outside
the workspace and is asked everything; through the proxy nothing reaches it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from .observe import HERE, read_audit, run_client
from .test_sdk_permissions import POLICY  # no-network-tools, reads-allowed, writes

pytestmark = pytest.mark.interop
TIMEOUT = 60


AGENT = [sys.executable, str(HERE.parent / "support" / "peers" / "hostile_perm_agent.py")]
CLIENT = [sys.executable, str(HERE / "peers" / "py_perm_client.py")]
EVIL = "/etc/acp-proxy-hostile-test"


def _answers(stderr: str) -> dict[str, Any]:
    found = [
        json.loads(line.split(" OUTCOME ", 1)[1])
        for line in stderr.splitlines()
        if " OUTCOME " in line
    ]
    return {o["probe"]: o["answer"] for o in found}


async def test_hostile_probes_never_reach_the_python_sdk_client(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    monkeypatch.chdir(workspace)
    config = tmp_path / "policy.toml"
    config.write_text(POLICY)
    audit = tmp_path / "audit.jsonl"
    proxy = [
        sys.executable,
        "-m",
        "acp_proxy",
        "--config",
        str(config),
        "--audit-log",
        str(audit),
        "--",
    ]
    with trio.fail_after(TIMEOUT):
        direct = await run_client(CLIENT, AGENT)
        proxied = await run_client(CLIENT, [*proxy, *AGENT])
    # directly, the SDK reads _meta.path over path and is asked every probe
    assert direct["writes"] == [EVIL]
    assert len(direct["permissions"]) == 3

    assert proxied["stopReason"] == "end_turn"
    assert proxied["writes"] == []
    assert proxied["permissions"] == []
    assert proxied["methods"] == ["session/update"]  # only the tool_call announcement
    answers = _answers(proxied["stderr"])
    for probe in ("meta_path", "snake_tool_call"):
        assert answers[probe]["error"]["code"] == -32600
        assert "ambiguous" in answers[probe]["error"]["message"]
    rejected = {"outcome": "selected", "optionId": "no"}
    assert answers["both_shapes"]["result"]["outcome"] == rejected
    assert answers["kind_omitted"]["result"]["outcome"] == rejected
    records = read_audit(audit)
    refused = [r for r in records if r["event"] == "request_refused"]
    assert len(refused) == 2
    decided = [r.get("rule") for r in records if r["event"] == "permission_decided"]
    assert decided == ["no-network-tools", "no-network-tools"]
