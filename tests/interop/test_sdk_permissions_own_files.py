"""The agent cannot turn the policy off through the client (issue 31, items 2 and 3).

A project policy (``config strict``) lives in the workspace and ``--watch-config``
watches it. The agent asks the Python SDK client (which really writes files) to
write ``# emptied`` over it, to run a terminal in the watched directory, then,
after the reload would have happened, to read a key through a link in the
workspace. Through the proxy the write and the terminal are refused (the
proxy's own files), the file is unchanged, no reload happens, and the read
through the link is still denied.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import trio
from support.e2ekit import strict_wire_policy

from .observe import HERE, read_audit, run_client
from .test_sdk_permissions_hostile import _answers as answers

pytestmark = pytest.mark.interop
TIMEOUT = 90

CLIENT = [sys.executable, str(HERE / "peers" / "py_gov_client.py")]
PROBES = [
    {
        "name": "empty_the_policy",
        "method": "fs/write_text_file",
        "params": {"sessionId": "{sid}", "path": "{cwd}/.acp-proxy.toml", "content": "# emptied"},
    },
    {
        "name": "terminal_in_watched_dir",
        "method": "terminal/create",
        "params": {"sessionId": "{sid}", "command": "mv", "args": ["x", ".acp-proxy.toml"]},
    },
    {
        "name": "key_through_link",
        "sleep": 1.5,
        "method": "fs/read_text_file",
        "params": {"sessionId": "{sid}", "path": "{cwd}/notes.txt"},
    },
    {
        "name": "control_read",
        "method": "fs/read_text_file",
        "params": {"sessionId": "{sid}", "path": "{cwd}/src/main.py"},
    },
]


async def test_the_agent_cannot_rewrite_the_watched_policy_through_the_client(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Write refused, file and policy unchanged, the link still denied 1.5 s later."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("KEY")
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "main.py").write_text("print()")
    (ws / "notes.txt").symlink_to(home / ".ssh" / "id_ed25519")
    policy = ws / ".acp-proxy.toml"
    policy.write_text(strict_wire_policy())  # the probe agent runs unconfined
    before = policy.read_bytes()
    probes = tmp_path / "probes.json"
    probes.write_text(json.dumps(PROBES))
    audit = tmp_path / "audit.jsonl"
    monkeypatch.chdir(ws)
    monkeypatch.setenv("GOV_CLIENT_WRITES", "1")
    agent = [sys.executable, str(HERE.parent / "support" / "peers" / "probe_agent.py"), str(probes)]
    proxy = [sys.executable, "-m", "acp_proxy", "--config", str(policy), "--watch-config"]
    proxy += ["--audit-log", str(audit), "--"]
    with trio.fail_after(TIMEOUT):
        report = await run_client(CLIENT, [*proxy, *agent])
    got = answers(report["stderr"])
    assert "own file" in got["empty_the_policy"]["error"]["message"]
    assert "own file" in got["terminal_in_watched_dir"]["error"]["message"]
    assert "no-credential-reads" in got["key_through_link"]["error"]["message"]
    assert got["control_read"]["result"] == {"content": "text"}
    assert [h["method"] for h in report["handled"]] == ["fs/read_text_file"]
    assert policy.read_bytes() == before
    records = read_audit(audit)
    events = [r["event"] for r in records]
    assert "config_reloaded" not in events
    refused = [r for r in records if r["event"] == "request_refused"]
    assert len(refused) == 3
    assert sum("own file" in r["reason"] for r in refused) == 2
