"""Each start of the sandbox engine gets a TMPDIR of its own (SandboxedCommand.launch_env).

srt 0.0.83 names its mux socket after its pid (``TMPDIR/srt-mux-PID-N.sock``) and
every engine the proxy starts is pid 1 of its own pid namespace: two engines in one
TMPDIR replaced each other's socket, and an agent's requests met the other proxy
(407) or none (502). ``tests/e2e/test_sandbox.py`` runs two proxies at once.
"""

from __future__ import annotations

import os
from pathlib import Path

from acp_proxy.shell.spawn import _command_env
from acp_proxy.shell.transport.process import SandboxedCommand


def test_each_start_gets_a_new_tmpdir_under_the_engine_s_directory(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin", "TMPDIR": "/tmp", "KEEP": "1"}
    cmd = SandboxedCommand(["srt", "--", "agent"], ["agent"], env, str(tmp_path))
    first, second = cmd.launch_env(), cmd.launch_env()
    assert first is not None
    assert second is not None
    assert first["TMPDIR"] != second["TMPDIR"]
    for one in (first, second):
        assert Path(one["TMPDIR"]).parent == tmp_path
        assert Path(one["TMPDIR"]).is_dir()
        assert {k: v for k, v in one.items() if k != "TMPDIR"} == {"PATH": "/usr/bin", "KEEP": "1"}
    assert env["TMPDIR"] == "/tmp"  # the command's own environment is left as it is
    assert _command_env(cmd) is not None  # spawn and fork_exec start it with launch_env
    assert Path(_command_env(cmd)["TMPDIR"]).parent == tmp_path  # type: ignore[index]


def test_without_an_engine_directory_the_environment_is_the_command_s() -> None:
    env = {"PATH": "/usr/bin"}
    assert SandboxedCommand(["srt"], ["agent"], env).launch_env() is env
    assert SandboxedCommand(["srt"], ["agent"]).launch_env() is None
    assert _command_env(["plain", "agent"]) is None


def test_a_command_without_its_own_environment_starts_from_the_proxy_s(tmp_path: Path) -> None:
    launched = SandboxedCommand(["srt"], ["agent"], None, str(tmp_path)).launch_env()
    assert launched is not None
    assert launched["PATH"] == os.environ["PATH"]
    assert Path(launched["TMPDIR"]).parent == tmp_path
