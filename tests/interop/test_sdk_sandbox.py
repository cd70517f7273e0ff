"""Issue 24: a real TypeScript SDK agent completes a session inside the sandbox (srt).

The TypeScript SDK client talks to the TypeScript SDK agent through the proxy
with ``[sandbox]`` on: the session in the workspace (the client's cwd) runs
exactly as unconfined.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import trio
from support.srt import srt_engine

from .observe import PLAIN, proxy, read_audit, summarize, ts_agent, ts_client

pytestmark = pytest.mark.interop
TIMEOUT = 120


async def _client(argv: list[str], cwd: Path, ts_sdk_dir: Path) -> dict[str, Any]:
    env = dict(os.environ, ACP_TS_SDK_DIR=str(ts_sdk_dir))
    done = await trio.run_process(
        argv, capture_stdout=True, capture_stderr=True, env=env, cwd=cwd, check=False
    )
    stderr = done.stderr.decode(errors="replace")
    assert done.returncode == 0, f"client failed ({done.returncode}):\n{stderr[-3000:]}"
    report: dict[str, Any] = json.loads(done.stdout)
    report["stderr"] = stderr
    return report


async def test_ts_sdk_agent_completes_a_session_inside_the_sandbox(
    tmp_path: Path, ts_sdk_dir: Path
) -> None:
    """TS client <-> proxy --sandbox <-> TS agent under srt: the same session as direct,
    with the sandbox_started record before it."""
    engine = await trio.to_thread.run_sync(srt_engine)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    cfg = tmp_path / "sandbox.toml"
    cfg.write_text(f'[sandbox]\nengine_command = "{engine}"\n')
    audit = tmp_path / "audit.jsonl"
    argv = [*ts_client(), "--", *proxy(audit)[:-1], "--config", str(cfg), "--sandbox", "--"]
    with trio.fail_after(TIMEOUT):
        report = await _client([*argv, *ts_agent()], workspace, ts_sdk_dir)
    assert summarize(report) == PLAIN
    events = [r["event"] for r in read_audit(audit)]
    assert events == ["sandbox_started", "peer_closed", "peer_closed"]
    assert read_audit(audit)[0]["workspace"] == [str(workspace)]
