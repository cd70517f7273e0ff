"""The agent subprocess and its process group (docs/design.md section 3, "Command line").

The agent's stdin/stdout carry ACP frames. Its stderr is read by the proxy
and written to the proxy's stderr byte for byte (in a worker thread, so a
slow stderr never stalls the relay); the last :data:`STDERR_TAIL_BYTES` are
kept for the error that tells the client why the agent stopped.

The agent is the leader of a new session (``setsid``), so a terminal's
Ctrl-C reaches it once, through the proxy, and everything it starts
(the real agent behind ``npx`` / ``uvx`` / ``sh -c``) is in its process
group: every stop signals the whole group (:meth:`AgentProcess.stop`,
:meth:`AgentProcess.stop_group`). A process that leaves the group
(``setsid``, a daemon) is out of reach.

When the proxy itself is SIGKILLed it cannot stop anything: on Linux the
agent is started with ``PR_SET_PDEATHSIG = SIGKILL``, so the kernel kills the
agent process (even one ignoring SIGTERM) when the proxy dies. Its own
children are not killed that way: they get EOF on stdin and EPIPE on stdout
from then on. Elsewhere nothing ends the agent when the proxy is SIGKILLed.
"""

from __future__ import annotations

import array
import contextlib
import fcntl
import logging
import math
import os
import signal
import subprocess
import sys
import termios
from collections.abc import Callable, Sequence

import trio

from acp_proxy.errors import AgentSignalled
from acp_proxy.shell.opening import log_started
from acp_proxy.shell.spawn import EarlyStart, Spawned, spawn
from acp_proxy.shell.transport.ndjson import NdjsonTransport
from acp_proxy.shell.transport.pipes import widen_pipe

__all__ = [
    "STDERR_TAIL_BYTES",
    "AgentProcess",
    "AgentSignalled",
    "SandboxedCommand",
    "describe_exit",
    "engine_start_env",
    "exit_status",
    "first_started_match",
]

log = logging.getLogger("acp_proxy")

#: bytes of the agent's stderr kept for the client's error after a failed start
STDERR_TAIL_BYTES = 2048

#: how often the process group is checked for members while waiting for it to empty
GROUP_POLL_SECONDS = 0.05


def _bytes_available(stream: trio.lowlevel.FdStream) -> int:
    """Bytes waiting in the pipe behind ``stream`` (``FIONREAD``; 0 if unknown)."""
    buf = array.array("i", [0])
    try:
        fcntl.ioctl(stream.fileno(), termios.FIONREAD, buf)
    except (OSError, ValueError):  # closed already
        return 0
    return buf[0]


class _AgentOutput(trio.abc.ReceiveStream):
    """A pipe from the agent, ending once the agent has exited and what it wrote is read.

    A background child that inherited the pipe can hold it open (and write
    on) long after the agent exited. :meth:`agent_exited` counts the bytes
    waiting in the pipe at that moment: the agent's last words (and whatever
    was written before it), delivered however slowly they are consumed;
    then the stream ends, whatever comes later.
    """

    def __init__(self, stream: trio.lowlevel.FdStream) -> None:
        self._stream = stream
        self._left: int | None = None  # after exit: bytes still to deliver
        self._scope: trio.CancelScope | None = None

    def agent_exited(self) -> None:
        """From now on, only the bytes already in the pipe are delivered."""
        self._left = _bytes_available(self._stream)
        if self._scope is not None:
            self._scope.cancel()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        while self._left is None:
            with trio.CancelScope() as scope:
                self._scope = scope
                try:
                    return await self._stream.receive_some(max_bytes)
                finally:
                    self._scope = None
            # Cancelled by agent_exited (no data was consumed): read what is left.
        if self._left <= 0:
            return b""
        data = await self._stream.receive_some(min(self._left, max_bytes or self._left))
        self._left -= len(data)
        return data

    async def aclose(self) -> None:
        await self._stream.aclose()


#: how long a line the agent's stderr has begun waits for its newline before it is
#: copied anyway (seconds)
PARTIAL_LINE_SECONDS = 0.2
#: the longest line held back for its newline (bytes); a longer one is copied as it comes
PARTIAL_LINE_BYTES = 64 * 1024


class _StderrRelay:
    """Copies the agent's stderr to the proxy's (fd 2), keeping its last bytes.

    It copies whole lines: the proxy's own log lines go to the same fd 2, and
    a line of the agent's cut in two by a read would otherwise be interleaved
    with one of them (the agent's text, a proxy line, then the agent's
    newline). A begun line is held until its newline, at most
    :data:`PARTIAL_LINE_SECONDS` and :data:`PARTIAL_LINE_BYTES`, and what is
    left at the end of the stream is copied as it is.
    """

    def __init__(self, stream: trio.lowlevel.FdStream) -> None:
        self.output = _AgentOutput(stream)
        self.tail = bytearray()
        self.done = trio.Event()
        self._broken = False
        self._begun = bytearray()  # a line without its newline yet

    async def run(self) -> None:
        try:
            while True:
                data: bytes | bytearray | None = None
                with trio.move_on_after(PARTIAL_LINE_SECONDS if self._begun else math.inf):
                    data = await self.output.receive_some(64 * 1024)
                if data is None:  # the begun line's newline is late: copy it as it is
                    await self._copy(self._take(len(self._begun)))
                    continue
                if not data:
                    break
                self.tail += data
                del self.tail[:-STDERR_TAIL_BYTES]
                self._begun += data
                end = self._begun.rfind(b"\n") + 1
                if len(self._begun) >= PARTIAL_LINE_BYTES:
                    end = len(self._begun)
                if end:
                    await self._copy(self._take(end))
            await self._copy(self._take(len(self._begun)))
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
        finally:
            self.done.set()
            with contextlib.suppress(OSError):
                await self.output.aclose()

    def _take(self, end: int) -> bytes:
        out = bytes(self._begun[:end])
        del self._begun[:end]
        return out

    async def _copy(self, data: bytes) -> None:
        if data and not self._broken:
            await trio.to_thread.run_sync(self._write, data, abandon_on_cancel=True)

    def _write(self, data: bytes) -> None:
        try:
            while data:
                data = data[os.write(2, data) :]
        except OSError:
            self._broken = True  # the proxy's stderr is gone: keep reading, stop writing


class AgentChild:
    """The started agent process: what the proxy needs of a ``trio.Process``.

    Attributes:
        pid: the agent's process id (also its process group id).
        stdin: trio stream to the agent's stdin.
        stdout: trio stream from the agent's stdout.
        stderr: trio stream from the agent's stderr.
    """

    def __init__(self, popen: subprocess.Popen[bytes] | Spawned) -> None:
        assert popen.stdin is not None
        assert popen.stdout is not None
        assert popen.stderr is not None
        self._popen = popen
        self.pid = popen.pid
        self.stdin = trio.lowlevel.FdStream(os.dup(popen.stdin.fileno()))
        self.stdout = trio.lowlevel.FdStream(os.dup(popen.stdout.fileno()))
        self.stderr = trio.lowlevel.FdStream(os.dup(popen.stderr.fileno()))
        widen_pipe(self.stdout.fileno())  # fewer, larger reads (issue 29)
        widen_pipe(self.stdin.fileno())
        popen.stdin.close()
        popen.stdout.close()
        popen.stderr.close()
        self._wait_lock = trio.Lock()
        self._pidfd: int | None = None
        if sys.platform == "linux":
            with contextlib.suppress(OSError, AttributeError):
                self._pidfd = os.pidfd_open(popen.pid)

    @property
    def returncode(self) -> int | None:
        """``Popen.returncode`` (negative N for signal N) once exited, else ``None``."""
        return self._popen.poll()

    async def wait(self) -> int:
        """Waits for the agent to exit (and reaps it); returns ``Popen.returncode``."""
        async with self._wait_lock:
            if self._popen.poll() is None:
                if self._pidfd is not None:
                    await trio.lowlevel.wait_readable(self._pidfd)
                else:
                    await trio.to_thread.run_sync(self._popen.wait, abandon_on_cancel=True)
            if self._pidfd is not None:
                os.close(self._pidfd)
                self._pidfd = None
        return self._popen.wait()

    def send_signal(self, sig: int) -> None:
        """Sends ``sig`` unless the agent has already been reaped."""
        self._popen.send_signal(sig)

    def kill(self) -> None:
        """Sends SIGKILL to the agent's whole process group."""
        signal_group(self.pid, signal.SIGKILL)


def signal_group(pgid: int, sig: int) -> bool:
    """Sends ``sig`` to process group ``pgid``; False when the group has no member left.

    The agent's pid names its group for as long as any member lives (the
    kernel does not reuse a process group id while it is in use).
    """
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # a member we may not signal (setuid): still there
    return True


def _proc_stats() -> list[tuple[int, list[bytes]]] | None:
    """Every process of Linux ``/proc`` as its pid and the fields of its ``stat`` after
    the command name (``state ppid pgrp ...``); ``None`` when ``/proc`` cannot be listed."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return None
    found = []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        found.append((int(entry), stat[stat.rfind(b")") + 2 :].split()))
    return found


def _live_member(pgid: int) -> bool:
    """False when every member of group ``pgid`` is a zombie (Linux ``/proc``): an exited
    grandchild waits for init to reap it, and still counts for ``killpg``. True elsewhere."""
    stats = _proc_stats()
    if stats is None:
        return True
    group = str(pgid).encode()
    return any(len(f) > 2 and f[2] == group and f[0] != b"Z" for _, f in stats)


class SandboxedCommand(list[str]):
    """An argv that runs ``inner`` inside a sandbox engine (``srt ... -- inner``).

    The engine keeps the agent in a session of its own, out of reach of the
    signals sent to the engine's process group, and ends the whole sandbox
    when it is signalled. So the stop signals (SIGINT, SIGTERM, SIGHUP) are
    sent to the agent itself, found among the engine's descendants by its
    command line, and the agent shuts down as it would unconfined; SIGKILL
    still goes to the engine's group, which takes the sandbox down with it.

    Attributes:
        inner: the agent's own argv.
        env: the environment the engine (and so the agent) starts with; ``None``:
            the proxy's.
        engine_tmp: the directory under which each start of the engine gets its own
            ``TMPDIR`` (:meth:`launch_env`), or ``None``.
    """

    def __init__(
        self,
        argv: Sequence[str],
        inner: Sequence[str],
        env: dict[str, str] | None = None,
        engine_tmp: str | None = None,
    ) -> None:
        super().__init__(argv)
        self.inner = list(inner)
        self.env = env
        self.engine_tmp = engine_tmp

    def launch_env(self) -> dict[str, str] | None:
        """The environment of one start of the engine: :attr:`env` with ``TMPDIR`` a
        new directory under :attr:`engine_tmp` (made now; removed with it at exit).

        srt keeps sockets there that it names after its pid, the same in every pid
        namespace; the agent gets its own ``TMPDIR`` from srt, not this one.

        Raises:
            OSError: the directory cannot be made.
        """
        if self.engine_tmp is None:
            return self.env
        return engine_start_env(self.env, self.engine_tmp)


def engine_start_env(env: dict[str, str] | None, engine_tmp: str) -> dict[str, str]:
    """``env`` (``None``: the proxy's) with ``TMPDIR`` a new directory under
    ``engine_tmp``: the environment of one start of the sandbox engine
    (:meth:`SandboxedCommand.launch_env`, the start-up probe).

    Raises:
        OSError: the directory cannot be made.
    """
    import tempfile  # a sandboxed start only

    out = dict(os.environ if env is None else env)
    out["TMPDIR"] = tempfile.mkdtemp(prefix="", dir=engine_tmp)  # short: srt's sockets
    return out


#: the signals a sandboxed agent gets itself (the others go to the engine's group)
_AGENT_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM, signal.SIGHUP})


def _find_descendant(root: int, argv: list[str]) -> int | None:
    """The pid of the process below ``root`` whose command line is ``argv`` and that
    started first (Linux ``/proc``), or ``None`` (see :func:`first_started_match`)."""
    want = b"\0".join(a.encode() for a in argv) + b"\0"
    stats = _proc_stats()
    if stats is None:
        return None
    return first_started_match(root, stats, want, _cmdline)


def _cmdline(pid: int) -> bytes | None:
    """``/proc/<pid>/cmdline``, or ``None`` when it cannot be read (the process is gone)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return None


def first_started_match(
    root: int,
    stats: list[tuple[int, list[bytes]]],
    want: bytes,
    cmdline: Callable[[int], bytes | None],
) -> int | None:
    """Of the processes below ``root`` whose command line is ``want``, the one that
    started first (``stat`` start time; ties: the shallower, then the first listed).

    A fork of the agent that has not called ``exec`` yet has the agent's command
    line, and once its parent has exited it is re-parented to the namespace's
    init, the agent's own parent, so it is the agent's sibling. Taken for the
    agent (it came first in ``/proc``, as after a pid wrap) it got the signal
    meant for the agent, which went on running until SIGKILLed. A fork cannot
    have started before the process it was forked from.

    Args:
        root: the pid whose descendants are searched.
        stats: every process as its pid and its ``stat`` fields after the command
            name (:func:`_proc_stats`).
        want: the command line, NUL-terminated arguments as in ``/proc/<pid>/cmdline``.
        cmdline: reads a pid's command line (``None``: it is gone).
    """
    children: dict[int, list[int]] = {}
    started: dict[int, int] = {}
    for pid, fields in stats:
        if len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(pid)
        if len(fields) > _STARTTIME:
            started[pid] = int(fields[_STARTTIME])
    best: tuple[int, int] | None = None
    found: int | None = None
    queue = list(children.get(root, ()))
    order = 0
    while queue:
        pid = queue.pop(0)
        if cmdline(pid) == want:
            key = (started.get(pid, 0), order)
            if best is None or key < best:
                best, found = key, pid
        order += 1
        queue.extend(children.get(pid, ()))
    return found


#: index of ``starttime`` (``stat`` field 22, clock ticks after boot) in :func:`_proc_stats`
#: fields, which begin with field 3 (``state``)
_STARTTIME = 19


def exit_status(returncode: int) -> int:
    """Maps a ``Popen.returncode`` to a shell exit status (signal N -> 128+N)."""
    return 128 - returncode if returncode < 0 else returncode


def describe_exit(returncode: int) -> str:
    """``"exited with status N"`` or ``"was killed by signal N (SIGNAME)"``."""
    if returncode >= 0:
        return f"exited with status {returncode}"
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = "unknown"
    return f"was killed by signal {-returncode} ({name})"


class AgentProcess:
    """A running agent, its process group and its frame transport.

    Use :meth:`start`; run :meth:`watch_exit` beside the relay; then
    :attr:`transport` for frames, :meth:`wait` for its exit, :meth:`stop` to
    end it gracefully, :meth:`stop_group` for what is left of its group.

    Attributes:
        process: the :class:`AgentChild` (``pid``, ``returncode``, ``wait``,
            ``send_signal``, ``kill``).
        transport: frames over the agent's stdout (read) and stdin (write).
    """

    def __init__(
        self, process: AgentChild, max_message_bytes: int, inner: list[str] | None = None
    ) -> None:
        self.process = process
        self._inner = inner  # a sandboxed agent's own argv (SandboxedCommand)
        self._output = _AgentOutput(process.stdout)
        self._stderr = _StderrRelay(process.stderr)
        self.transport = NdjsonTransport(
            self._output, process.stdin, max_message_bytes, name="agent"
        )

    @classmethod
    async def start(
        cls, command: Sequence[str], max_message_bytes: int, env: dict[str, str] | None = None
    ) -> AgentProcess:
        """Starts ``command`` in a new session with piped stdin/stdout/stderr (logged at info).

        Raises:
            OSError: the command cannot be executed (not found, not executable).
        """
        await trio.lowlevel.checkpoint()
        # in this (the main) thread: see acp_proxy.shell.spawn
        return cls._adopt(spawn(command, env), command, max_message_bytes)

    @classmethod
    def adopt(
        cls, early: EarlyStart, max_message_bytes: int, *, logged: bool = False
    ) -> AgentProcess:
        """The agent the command line started before the relay (issue 29); ``logged``:
        its start was logged already (by the stdio form's opening).

        Raises:
            OSError: it could not be started (:attr:`EarlyStart.error`).
        """
        if early.popen is None:
            assert early.error is not None
            raise early.error
        return cls._adopt(early.popen, early.command, max_message_bytes, logged=logged)

    @classmethod
    def _adopt(
        cls,
        popen: subprocess.Popen[bytes] | Spawned,
        command: Sequence[str],
        max_message_bytes: int,
        *,
        logged: bool = False,
    ) -> AgentProcess:
        proc = AgentChild(popen)
        if not logged:
            log_started(proc.pid, command)
        inner = command.inner if isinstance(command, SandboxedCommand) else None
        return cls(proc, max_message_bytes, inner)

    @property
    def returncode(self) -> int | None:
        """The agent's exit status once it has exited (see :func:`exit_status`)."""
        rc = self.process.returncode
        return None if rc is None else exit_status(rc)

    @property
    def exit_reason(self) -> str:
        """``"agent exited with status N"`` or ``"agent was killed by signal N (SIGNAME)"``
        once the agent has exited (the same words in the log, the audit and the
        client's error), else ``"agent closed the connection"``."""
        rc = self.process.returncode
        return "agent closed the connection" if rc is None else f"agent {describe_exit(rc)}"

    @property
    def stderr_tail(self) -> bytes:
        """The last :data:`STDERR_TAIL_BYTES` the agent wrote to stderr (so far)."""
        return bytes(self._stderr.tail)

    async def wait(self) -> int:
        """Waits for the agent to exit; returns its shell exit status."""
        return exit_status(await self.process.wait())

    async def wait_stderr(self, seconds: float) -> None:
        """After the agent's exit, waits (at most ``seconds``) until what it wrote to
        stderr has been passed on, so that :attr:`stderr_tail` is complete."""
        with trio.move_on_after(seconds):
            await self._stderr.done.wait()

    async def watch_exit(self) -> None:
        """Passes the agent's stderr on; once it exits (logged at info), its stdout and
        stderr end as soon as what it wrote is read.

        Run it as a task beside the relay, so that a background child holding
        the agent's pipes open cannot keep the connection alive after the
        agent is gone.
        """
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._stderr.run)
            rc = await self.process.wait()
            log.info("agent pid %d %s", self.process.pid, describe_exit(rc))
            self._output.agent_exited()
            self._stderr.output.agent_exited()

    def signal_group(self, sig: int) -> bool:
        """Sends ``sig`` to the agent's process group; False when nothing is left in it.

        A sandboxed agent (:class:`SandboxedCommand`) gets SIGINT, SIGTERM and
        SIGHUP itself while it runs; other signals go to the engine's group.
        """
        if self._inner is not None and sig in _AGENT_SIGNALS:
            pid = _find_descendant(self.process.pid, self._inner)
            if pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
                    return True
        return signal_group(self.process.pid, sig)

    def kill(self) -> None:
        """Sends SIGKILL to the agent's process group."""
        self.signal_group(signal.SIGKILL)

    def group_running(self) -> bool:
        """True while a member of the agent's process group is running (not a zombie)."""
        return self.signal_group(0) and _live_member(self.process.pid)

    async def wait_group(self, seconds: float) -> bool:
        """Waits at most ``seconds`` for the agent to exit and its group to empty.

        Returns:
            True when nothing is left of the group.
        """
        with trio.move_on_after(seconds):
            await self.process.wait()
            while self.group_running():  # noqa: ASYNC110 (other processes; nothing to wait on)
                await trio.sleep(GROUP_POLL_SECONDS)
            return True
        return False

    async def stop_group(self, grace_seconds: float, kill_after_seconds: float) -> None:
        """Ends the whole group: members left ``grace_seconds`` from now get SIGTERM,
        those left ``kill_after_seconds`` later SIGKILL (each step logged at info).
        Then waits (at most ``grace_seconds``) until the agent's stderr is passed on."""
        if not await self.wait_group(grace_seconds):
            log.info("agent process group %d: still running; sending SIGTERM", self.process.pid)
            self.signal_group(signal.SIGTERM)
            if not await self.wait_group(kill_after_seconds):
                log.info("agent process group %d: still running; sending SIGKILL", self.process.pid)
                self.kill()
        await self.wait_stderr(grace_seconds)

    async def stop(self, grace_seconds: float, kill_after_seconds: float) -> int:
        """Closes the agent's stdin, then ends its group (:meth:`stop_group`).

        Returns:
            The agent's shell exit status.
        """
        await self.transport.close_write()
        await self.stop_group(grace_seconds, kill_after_seconds)
        return await self.wait()
