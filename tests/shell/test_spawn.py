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


#: what an agent sees of how it was started: its open descriptors and ignored signals
#: (read by the shell the agent is, before Python ignores SIGPIPE), then, in the same
#: process: argv, one variable, blocked signals, session and group, parent-death signal
PROBE = textwrap.dedent(
    """
    import ctypes, os, sys
    death = ctypes.c_int(-1)
    ctypes.CDLL(None).prctl(2, ctypes.byref(death))  # PR_GET_PDEATHSIG
    blocked = [l.split()[1] for l in open("/proc/self/status") if l.startswith("SigBlk")]
    print(sys.argv[1:], os.environ.get("PROBE_VAR"), blocked,
          os.getsid(0) == os.getpid(), os.getpgid(0) == os.getpid(), death.value)
    """
)
SHELL = 'grep -E "^SigIgn" /proc/$$/status; ls /proc/$$/fd; exec "$0" -c "$1" one "two words"'


def test_the_early_start_starts_the_agent_as_popen_does() -> None:
    """``fork_exec`` (the early start) and ``subprocess.Popen`` (``spawn``) give the agent
    the same argv, environment, descriptors, signals, session and parent-death signal."""
    out = _run(
        f"""
        import os, sys
        from acp_proxy.shell import spawn
        stray = os.open("/dev/null", os.O_RDONLY)
        os.set_inheritable(stray, True)  # closed in the agent all the same
        class Sandboxed(list):
            env = {{**os.environ, "PROBE_VAR": "from-the-command"}}
        command = Sandboxed(["/bin/sh", "-c", {SHELL!r}, sys.executable, {PROBE!r}])
        spawn.hold_signals()
        for child in (spawn.fork_exec(command), spawn.spawn(command)):
            child.stdin.close()
            print(" ".join(child.stdout.read().decode().split()), child.wait())
        """
    )
    forked, popen = out.splitlines()
    assert forked == popen
    assert forked.startswith("SigIgn: 0000000000000000 0 1 2 ")
    assert forked.endswith(
        "['one', 'two words'] from-the-command ['0000000000000000'] True True 9 0"
    )


def test_the_early_start_reports_what_popen_reports() -> None:
    """A command that cannot run raises the same error (type, errno, file name) either way;
    the exit status and a death by signal read as ``Popen.returncode``."""
    out = _run(
        """
        import os, signal, sys, tempfile
        from acp_proxy.shell import spawn
        os.environ["PATH"] = "/nonexistent"
        plain = tempfile.NamedTemporaryFile("w", suffix=".sh")  # mode 0600: not executable
        for command in (["/nonexistent/agent"], ["no-such-agent"], [plain.name]):
            seen = []
            for start in (spawn.fork_exec, spawn.spawn):
                try:
                    start(command)
                except OSError as exc:
                    seen.append((type(exc).__name__, exc.errno, exc.filename, str(exc)))
            print(seen[0] == seen[1], seen[0][0])
        ends = []
        for code in ("raise SystemExit(3)", "import os; os.kill(os.getpid(), 15)"):
            child = spawn.fork_exec([sys.executable, "-c", code])
            ends.append(child.wait())
            child.send_signal(signal.SIGTERM)  # reaped: not sent to a reused pid
        sleeper = spawn.fork_exec([sys.executable, "-c", "import sys; sys.stdin.read()"])
        running = sleeper.poll()
        sleeper.send_signal(signal.SIGKILL)
        print(ends, running, sleeper.wait(), sleeper.poll())
        """
    )
    assert out.splitlines() == [
        "True FileNotFoundError",
        "True FileNotFoundError",
        "True PermissionError",
        "[3, -15] None -9 -9",
    ]


def test_the_early_start_works_with_a_standard_descriptor_closed() -> None:
    """A proxy started with stderr closed still gives the agent three pipes (a pipe end
    that took descriptor 2 is moved above it)."""
    out = _run(
        """
        import os, sys
        os.close(2)
        os.close(0)
        from acp_proxy.shell import spawn
        child = spawn.fork_exec(
            [sys.executable, "-c", "import sys; sys.stderr.write('err'); print(input())"]
        )
        child.stdin.write(b"in\\n")
        child.stdin.close()
        print(child.stdout.read().decode().strip(), child.stderr.read().decode(), child.wait())
        """
    )
    assert out.split() == ["in", "err", "0"]
