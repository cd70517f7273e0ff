"""Forking the agent, without trio (issue 29: the agent boots while the proxy imports).

:func:`spawn` is the one place an agent process is created: leader of a new
session (its own process group), ``PR_SET_PDEATHSIG = SIGKILL`` on Linux,
stdin/stdout/stderr piped. It needs only the standard library, so the
command line can start the agent (:func:`start_early`) before the relay,
trio and the shell are imported; :class:`~acp_proxy.shell.transport.process.AgentProcess`
then adopts the running process.

Between an early start and the moment the relay listens for signals, the
proxy holds SIGINT, SIGTERM and SIGHUP blocked (:func:`hold_signals`): one
arriving then stays pending and is passed on to the agent's group once the
relay's signal receiver is installed (:func:`release_signals`), as it would
have been had it come later. The agent itself starts with the proxy's
original signal mask.

It lives outside :mod:`acp_proxy.shell.transport`, whose package imports the
framer: importing it costs the standard library only. An early start
(:func:`start_early`, before any thread exists) forks and execs with
:func:`os.fork` and the ``os`` calls ``subprocess`` makes in its child
(:class:`Spawned`), so that ``subprocess`` and its imports (``threading``,
``selectors``) come after the agent's spawn; a late start (:func:`spawn`, from
the relay, where trio has imported ``subprocess`` already) uses
:class:`subprocess.Popen`. The agent's process is the same either way: the
same argv, environment and executable search, stdin/stdout/stderr piped, every
other descriptor closed, SIGPIPE/SIGXFSZ default, a new session,
``PR_SET_PDEATHSIG`` (tests pin both).
"""

from __future__ import annotations

import _thread
import ctypes
import errno
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # the agent starts before typing and subprocess are imported (issue 29)
    import signal
    import subprocess
    from collections.abc import Callable, Sequence
    from typing import NoReturn
else:  # the C module signal wraps: the same functions, without building its enum classes
    import _signal as signal

__all__ = ["EarlyStart", "Spawned", "hold_signals", "release_signals", "spawn", "start_early"]

#: the signals the relay passes on to the agent (held during an early start)
FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _load_prctl() -> Callable[[int, int], int] | None:
    if sys.platform != "linux":
        return None
    try:
        prctl: Callable[[int, int], int] = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return prctl


_PR_SET_PDEATHSIG = 1
# Resolved here, in the proxy: the child may only call it (no dlopen after fork).
_PRCTL = _load_prctl()

#: the proxy's signal mask before :func:`hold_signals` (``None``: not held)
_original_mask: set[int] | set[signal.Signals] | None = None


def hold_signals() -> None:
    """Blocks SIGINT, SIGTERM and SIGHUP in the proxy (see the module doc); the
    mask in force before is restored by :func:`release_signals` and is the agent's."""
    global _original_mask
    if _original_mask is None:
        _original_mask = signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED_SIGNALS)


def release_signals() -> None:
    """Restores the mask :func:`hold_signals` saved: a signal that came meanwhile is
    delivered now (to the handlers then installed). Does nothing when none is held."""
    global _original_mask
    if _original_mask is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, _original_mask)
        _original_mask = None


def _in_child() -> None:
    """In the agent, before exec: SIGKILL it when the proxy dies (Linux ``prctl``), and
    the proxy's original signal mask.

    So an agent is never orphaned, even when the proxy is SIGKILLed and the
    agent ignores SIGTERM. Elsewhere the ``prctl`` does nothing. The kernel
    sends the signal when the *thread* that forked the agent ends, so
    :func:`spawn` must run in the proxy's main thread, never in a worker
    thread (trio's idle workers exit after 10 s, which would end the agent
    with them).
    """
    if _original_mask is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, _original_mask)
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _command_env(command: Sequence[str]) -> dict[str, str] | None:
    """The environment ``command`` starts with: a sandboxed one's for this start
    (:meth:`~acp_proxy.shell.transport.process.SandboxedCommand.launch_env`), else
    ``None`` (the proxy's)."""
    launch = getattr(command, "launch_env", None)
    return launch() if launch is not None else getattr(command, "env", None)


def spawn(command: Sequence[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """Forks and execs the agent, leader of a new session, from the calling thread
    (see :func:`_in_child`).

    Args:
        command: the argv; a sandboxed one
            (:class:`~acp_proxy.shell.transport.process.SandboxedCommand`) carries
            the environment it starts with (its ``env``), used when ``env`` is ``None``.
        env: the environment; ``None``: the command's, else the proxy's.

    Raises:
        OSError: the command cannot be executed.
    """
    import subprocess

    if env is None:
        env = _command_env(command)
    return subprocess.Popen(
        list(command),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        start_new_session=True,
        preexec_fn=_in_child,
    )


class EarlyStart:
    """An agent started by the command line before the relay exists.

    Attributes:
        command: the argv it was started with.
        popen: the running process, or ``None`` when it could not start.
        error: why it could not start (``OSError``), else ``None``.
    """

    def __init__(
        self,
        command: Sequence[str],
        popen: Spawned | subprocess.Popen[bytes] | None,
        error: OSError | None,
    ) -> None:
        self.command = command
        self.popen = popen
        self.error = error


def start_early(command: Sequence[str]) -> EarlyStart:
    """Starts the agent now, with the forwarded signals held (:func:`hold_signals`)
    until the relay takes them over. Never raises for a command that cannot run:
    the error is kept, to be reported where a late start would have reported it."""
    hold_signals()
    try:
        threading = sys.modules.get("threading")
        if threading is not None and threading.active_count() > 1:
            return EarlyStart(command, spawn(command), None)  # no os.fork with threads
        return EarlyStart(command, fork_exec(command), None)
    except OSError as exc:
        release_signals()
        return EarlyStart(command, None, exc)


class Spawned:
    """An agent process :func:`fork_exec` started: what the relay uses of a
    :class:`subprocess.Popen` (``pid``, the three pipes, ``returncode``,
    :meth:`poll`, :meth:`wait`, :meth:`send_signal`), with its semantics.

    Attributes:
        pid: the agent's process id (and its process group's, and session's).
        stdin: unbuffered binary file writing to the agent's stdin.
        stdout: unbuffered binary file reading the agent's stdout.
        stderr: unbuffered binary file reading the agent's stderr.
        returncode: ``None`` until reaped; then the exit status, or ``-N`` for signal N.
    """

    def __init__(self, pid: int, stdin: int, stdout: int, stderr: int) -> None:
        self.pid = pid
        self.stdin = open(stdin, "wb", buffering=0)  # noqa: SIM115 (the relay closes them)
        self.stdout = open(stdout, "rb", buffering=0)  # noqa: SIM115
        self.stderr = open(stderr, "rb", buffering=0)  # noqa: SIM115
        self.returncode: int | None = None
        self._waitpid_lock = _thread.allocate_lock()  # one waitpid at a time, as Popen

    def _reaped(self, flags: int) -> None:
        """One ``waitpid``; the caller holds the lock."""
        try:
            pid, status = os.waitpid(self.pid, flags)
        except ChildProcessError:  # reaped elsewhere: Popen's reading of ECHILD
            self.returncode = 0
            return
        if pid == self.pid:
            self.returncode = os.waitstatus_to_exitcode(status)

    def poll(self) -> int | None:
        """The exit status if the agent has exited (reaping it), else ``None``;
        ``None`` too while another thread waits for it."""
        if self.returncode is None and self._waitpid_lock.acquire(False):
            try:
                if self.returncode is None:
                    self._reaped(os.WNOHANG)
            finally:
                self._waitpid_lock.release()
        return self.returncode

    def wait(self) -> int:
        """Blocks until the agent exits; returns :attr:`returncode`."""
        while self.returncode is None:
            with self._waitpid_lock:
                if self.returncode is None:
                    self._reaped(0)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        """Sends ``sig`` to the agent unless it has been reaped (its pid may be reused)."""
        if self.poll() is not None:
            return
        try:
            os.kill(self.pid, sig)
        except ProcessLookupError:
            return  # it exited meanwhile (not yet reaped)


def _pipe() -> tuple[int, int]:
    """``os.pipe()`` (close-on-exec), each end above stderr: a proxy started with a
    standard descriptor closed would otherwise get it back and lose it to a ``dup2``."""
    ends = os.pipe()
    if min(ends) > 2:
        return ends
    import fcntl

    moved = tuple(fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3) for fd in ends)
    for fd in ends:
        os.close(fd)
    return moved[0], moved[1]


def _executables(program: str, env: dict[str, str] | None) -> list[str]:
    """Where ``program`` is looked for, in order: itself when it names a directory,
    else each directory of the ``PATH`` of ``env`` (or the proxy's), as ``subprocess``."""
    if os.path.dirname(program):
        return [program]
    return [os.path.join(directory, program) for directory in os.get_exec_path(env)]


#: the signals Python ignores and ``subprocess`` gives back their default in the child
_RESTORED = tuple(
    getattr(signal, name) for name in ("SIGPIPE", "SIGXFZ", "SIGXFSZ") if hasattr(signal, name)
)


def _exec_child(
    argv: list[str], executables: list[str], env: dict[str, str] | None, fds: tuple[int, ...]
) -> NoReturn:
    """In the forked child: the pipes as 0, 1 and 2, every other descriptor closed,
    the default SIGPIPE, a new session, :func:`_in_child`, then exec. Never returns:
    on failure the errno is written to the error pipe (``fds[3]``, close-on-exec)."""
    stdin, stdout, stderr, report = fds
    code = errno.EINVAL
    try:
        os.dup2(stdin, 0)
        os.dup2(stdout, 1)
        os.dup2(stderr, 2)
        os.closerange(3, report)
        os.closerange(report + 1, max(os.sysconf("SC_OPEN_MAX"), report + 2))
        for sig in _RESTORED:
            signal.signal(sig, signal.SIG_DFL)
        os.setsid()
        _in_child()
        first = 0
        for executable in executables:
            try:
                if env is None:
                    os.execv(executable, argv)
                else:
                    os.execve(executable, argv, env)
            except OSError as exc:  # the first error other than "not there" is reported
                code = exc.errno or errno.EINVAL
                if not first and code not in (errno.ENOENT, errno.ENOTDIR):
                    first = code
        code = first or code
    except BaseException as exc:  # the child must never return into the proxy
        code = getattr(exc, "errno", None) or errno.EINVAL
    finally:
        try:
            os.write(report, str(code).encode())
        finally:
            os._exit(255)


def fork_exec(command: Sequence[str]) -> Spawned:
    """Starts ``command`` as :func:`spawn` does, with ``os.fork`` (see the module doc).

    Only where no other thread runs (:func:`start_early` checks). Waits for the exec
    (the error pipe closes on it), as ``subprocess.Popen`` does.

    Args:
        command: the argv; a sandboxed one carries its environment (its ``env``).

    Raises:
        OSError: the command cannot be executed, with ``command[0]`` as the file name.
    """
    argv = list(command)
    env = _command_env(command)
    executables = _executables(argv[0], env)
    stdin_r, stdin_w = _pipe()
    stdout_r, stdout_w = _pipe()
    stderr_r, stderr_w = _pipe()
    report_r, report_w = _pipe()
    try:
        pid = os.fork()
        if pid == 0:
            _exec_child(argv, executables, env, (stdin_r, stdout_w, stderr_w, report_w))
    except BaseException:
        for fd in (stdin_w, stdout_r, stderr_r, report_r):
            os.close(fd)
        raise
    finally:
        for fd in (stdin_r, stdout_w, stderr_w, report_w):
            os.close(fd)
    try:
        failure = b""
        while chunk := os.read(report_r, 64):
            failure += chunk
    finally:
        os.close(report_r)
    if not failure:
        return Spawned(pid, stdin_w, stdout_r, stderr_r)
    for fd in (stdin_w, stdout_r, stderr_r):
        os.close(fd)
    os.waitpid(pid, 0)
    code = int(failure) if failure.isdigit() else errno.EINVAL
    raise OSError(code, os.strerror(code), argv[0])
