"""Governed fields read as the Python SDK client reads them (issue 31, items 1 and 4).

The probe agent sends ``terminal/create`` requests whose ``args`` hold
non-string items (the Python SDK drops them and runs the rest:
``["-rf", null, "/x"]`` runs ``rm -rf /x``) and permission requests naming a
credential only in ``toolCall.locations`` or a ``diff``. Directly, the SDK
client's handlers run every one; through the proxy with ``config strict`` none
of them reaches a handler, and only the two harmless controls do.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import trio
from support.e2ekit import strict_wire_policy

from .observe import HERE, read_audit, run_client
from .test_sdk_permissions_hostile import _answers as answers

pytestmark = pytest.mark.interop
TIMEOUT = 90

PROBES = HERE / "probes" / "sdk_reading.json"
AGENT = [sys.executable, str(HERE.parent / "support" / "peers" / "probe_agent.py"), str(PROBES)]
CLIENT = [sys.executable, str(HERE / "peers" / "py_gov_client.py")]


async def test_sdk_reading_of_governed_fields_never_reaches_the_handler(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Non-string args and credential locations: refused or denied, the handler never runs."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    monkeypatch.chdir(workspace)
    audit = tmp_path / "audit.jsonl"
    strict = tmp_path / "strict.toml"  # strict's wire policy; the probe agent runs unconfined
    strict.write_text(strict_wire_policy())
    proxy = [sys.executable, "-m", "acp_proxy", "--config", str(strict)]
    proxy += ["--audit-log", str(audit), "--"]
    with trio.fail_after(TIMEOUT):
        direct = await run_client(CLIENT, AGENT)
        proxied = await run_client(CLIENT, [*proxy, *AGENT])
    # directly: the SDK hands its handlers what it salvaged, and they run
    argvs = [h["argv"] for h in direct["handled"] if h["method"] == "terminal/create"]
    assert ["rm", "-rf", f"{workspace}/x"] in argvs
    assert ["sudo", "id"] in argvs
    assert ["cat", "/root/.ssh/id_rsa"] in argvs
    assert len(direct["handled"]) == 9
    # through the proxy: only the two controls reach a handler
    assert proxied["stopReason"] == "end_turn"
    assert [h["method"] for h in proxied["handled"]] == [
        "terminal/create",
        "session/request_permission",
    ]
    assert proxied["handled"][0]["argv"] == ["echo", "hi"]
    got = answers(proxied["stderr"])
    rules = {
        "rm_null": "no-destructive-terminals",
        "sudo_int": "no-destructive-terminals",
        "curl_object": "no-network-terminals",
        "cat_key": "no-credential-terminals",
    }
    for probe, rule in rules.items():
        assert rule in got[probe]["error"]["message"], probe
    assert "SDK" in got["harmless_null"]["error"]["message"]
    for probe in ("key_in_locations", "key_in_diff"):
        assert got[probe]["result"]["outcome"] == {"outcome": "selected", "optionId": "no"}
    records = read_audit(audit)
    refused = [r for r in records if r["event"] == "request_refused"]
    assert len(refused) == 5
    decided = [r["rule"] for r in records if r["event"] == "permission_decided"]
    assert decided.count("no-credential-tool-locations") == 2
