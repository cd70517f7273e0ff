"""The stdio form's opening through a real proxy process: the client's first message,
already waiting when the proxy starts, is relayed by the opening (before trio runs),
and the relay goes on with the same core (issue 29)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

from support.e2ekit import proxy_command, req

INIT = req(0, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
NEW = req(1, "session/new", {"cwd": "/", "mcpServers": []})
DEMO_AGENT = [sys.executable, "-m", "acp_proxy.demo.agent"]


def run_proxy(proxy_args: list[str], first: bytes, then: bytes) -> tuple[list[bytes], str]:
    """Starts the proxy with ``first`` already in its stdin, reads one answer, sends
    ``then``, reads one more, closes stdin; returns the lines and the proxy's stderr."""
    r, w = os.pipe()
    os.write(w, first)
    proc = subprocess.Popen(
        [*proxy_command(*proxy_args), *DEMO_AGENT],
        stdin=r,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    os.close(r)
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline()]
        os.write(w, then)
        lines.append(proc.stdout.readline())
    finally:
        os.close(w)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    return lines, err.decode()


def test_the_first_request_is_relayed_by_the_opening_and_the_relay_goes_on() -> None:
    lines, err = run_proxy(["--log-level", "debug"], INIT, NEW)
    init, new = (json.loads(line) for line in lines)
    assert init["id"] == 0
    assert init["result"]["protocolVersion"] == 1
    assert new["id"] == 1
    assert "sessionId" in new["result"]
    relayed = re.search(r"opening: (\d+) bytes from the client", err)
    assert relayed is not None, err
    assert int(relayed.group(1)) >= len(INIT)  # at least initialize went through the opening
    # the agent's start is logged before what the opening relayed, once
    assert err.count("agent started: pid") == 1
    assert err.index("agent started: pid") < err.index("initialized, protocol version 1")


def test_a_form_with_an_audit_log_has_no_opening(tmp_path: os.PathLike[str]) -> None:
    """With an audit log (records to write) the relay does everything, as before."""
    config = os.path.join(tmp_path, "c.toml")
    with open(config, "w") as f:
        f.write(f'[audit]\npath = "{os.path.join(tmp_path, "audit.jsonl")}"\n')
    lines, err = run_proxy(["--config", config, "--log-level", "debug"], INIT, NEW)
    assert [json.loads(line)["id"] for line in lines] == [0, 1]
    assert "opening:" not in err
