"""The early start of the agent (issue 29): the agent boots while the proxy imports.

Each check runs in a fresh interpreter: the signal mask and ``sys.modules``
are process-wide.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap


def _run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_command_line_starts_the_agent_before_importing_trio_or_the_core() -> None:
    out = _run(
        """
        import sys
        import acp_proxy.cli
        import acp_proxy.shell.spawn
        heavy = [m for m in ("trio", "cattrs", "msgspec", "acp_proxy.core.engine")
                 if m in sys.modules]
        print(heavy)
        """
    )
    assert out.strip() == "[]"


def test_a_signal_held_during_the_early_start_reaches_the_relay_not_the_agent_mask() -> None:
    out = _run(
        """
        import os, signal, sys
        from acp_proxy.shell import spawn
        early = spawn.start_early([sys.executable, "-c", "import sys; sys.stdin.read()"])
        os.kill(os.getpid(), signal.SIGTERM)  # held: the proxy does not die of it
        with open(f"/proc/{early.popen.pid}/status") as f:
            blocked = [l.split()[1] for l in f if l.startswith("SigBlk:")][0]
        own_group = os.getpgid(early.popen.pid) == early.popen.pid
        got = []
        signal.signal(signal.SIGTERM, lambda n, f: got.append(n))  # the relay's receiver
        spawn.release_signals()
        early.popen.stdin.close()
        early.popen.wait()
        print(int(blocked, 16), got == [signal.SIGTERM], own_group)
        """
    )
    assert out.split() == ["0", "True", "True"]


def test_an_agent_that_cannot_start_is_reported_later_and_releases_the_signals() -> None:
    out = _run(
        """
        import signal
        from acp_proxy.shell import spawn
        early = spawn.start_early(["/nonexistent/agent"])
        print(early.popen is None, type(early.error).__name__,
              signal.SIGTERM in signal.pthread_sigmask(signal.SIG_BLOCK, []))
        """
    )
    assert out.split() == ["True", "FileNotFoundError", "False"]
