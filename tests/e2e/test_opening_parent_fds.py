"""The stdio form's opening through a real proxy process: the pipes the proxy shares with
its parent (the editor, or a shell's terminal) keep their blocking mode (issue 29).

The opening made fds 0 and 1 non-blocking and the relay's streams, which restore
the mode they find when they close, then kept them so: the parent was left with
non-blocking descriptors (a shell reading such a terminal gets EAGAIN).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from support.e2ekit import proxy_command, req

INIT = req(0, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
DEMO_AGENT = [sys.executable, "-m", "acp_proxy.demo.agent"]


def test_the_parent_s_pipes_are_blocking_again_after_a_run_with_an_opening() -> None:
    stdin_r, stdin_w = os.pipe()
    stdout_r, stdout_w = os.pipe()
    os.write(stdin_w, INIT)  # waiting before the proxy starts: the opening relays it
    proc = subprocess.Popen(
        [*proxy_command("--log-level", "debug"), *DEMO_AGENT],
        stdin=stdin_r,
        stdout=stdout_w,
        stderr=subprocess.PIPE,
    )
    try:
        answer = b""
        while not answer.endswith(b"\n"):
            chunk = os.read(stdout_r, 1 << 16)
            assert chunk, "the proxy closed its stdout"
            answer += chunk
        os.close(stdin_w)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        assert json.loads(answer)["id"] == 0
        assert b"opening:" in err  # the path under test ran
        assert os.get_blocking(stdin_r) is True
        assert os.get_blocking(stdout_w) is True
    finally:
        for fd in (stdin_r, stdout_r, stdout_w):
            os.close(fd)
        if proc.poll() is None:
            proc.kill()
