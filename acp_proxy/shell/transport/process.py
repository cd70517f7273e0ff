"""The agent subprocess (docs/design.md section 3, "Command line").

The agent's stdin/stdout carry ACP frames; its stderr is inherited, so it
reaches the proxy's stderr byte for byte and can never stall the relay.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence

import trio

from acp_proxy.shell.transport.ndjson import NdjsonTransport

__all__ = ["AgentProcess", "exit_status"]


class _AgentOutput(trio.abc.ReceiveStream):
    """The agent's stdout, ending once the agent has exited and it goes idle.

    A background child that inherited the agent's stdout can hold the pipe
    open long after the agent exited. After :meth:`agent_exited`, a read that
    gets no data within ``drain_seconds`` counts as end of stream; reads that
    find data keep draining it however slowly the relay consumes it.
    """

    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self._stream = stream
        self._drain_seconds: float | None = None
        self._scope: trio.CancelScope | None = None

    def agent_exited(self, drain_seconds: float) -> None:
        """From now on, ``drain_seconds`` without data ends the stream."""
        self._drain_seconds = drain_seconds
        if self._scope is not None:
            self._scope.cancel()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        while self._drain_seconds is None:
            with trio.CancelScope() as scope:
                self._scope = scope
                try:
                    return await self._stream.receive_some(max_bytes)
                finally:
                    self._scope = None
            # Cancelled by agent_exited (no data was consumed): read on with a deadline.
        with trio.move_on_after(self._drain_seconds):
            return await self._stream.receive_some(max_bytes)
        return b""

    async def aclose(self) -> None:
        await self._stream.aclose()


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


def _die_with_parent() -> None:
    """In the agent, before exec: SIGTERM it when the proxy dies (Linux ``prctl``).

    So an agent is never orphaned, even when the proxy is SIGKILLed.
    Elsewhere this does nothing. The kernel sends the signal when the
    *thread* that forked the agent ends, so :func:`_spawn` must run in the
    proxy's main (trio) thread, never in a worker thread (trio's idle
    workers exit after 10 s, which would end the agent with them).
    """
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _spawn(command: list[str], env: dict[str, str] | None) -> subprocess.Popen[bytes]:
    """Forks and execs the agent from the calling thread (see :func:`_die_with_parent`).

    Raises:
        OSError: the command cannot be executed.
    """
    return subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=None,
        env=env,
        preexec_fn=_die_with_parent,
    )


class AgentChild:
    """The started agent process: what the proxy needs of a ``trio.Process``.

    Attributes:
        pid: the agent's process id.
        stdin: trio stream to the agent's stdin.
        stdout: trio stream from the agent's stdout.
    """

    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        assert popen.stdin is not None
        assert popen.stdout is not None
        self._popen = popen
        self.pid = popen.pid
        self.stdin = trio.lowlevel.FdStream(os.dup(popen.stdin.fileno()))
        self.stdout = trio.lowlevel.FdStream(os.dup(popen.stdout.fileno()))
        popen.stdin.close()
        popen.stdout.close()
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
        """Sends SIGKILL unless the agent has already been reaped."""
        self._popen.kill()


def exit_status(returncode: int) -> int:
    """Maps a ``Popen.returncode`` to a shell exit status (signal N -> 128+N)."""
    return 128 - returncode if returncode < 0 else returncode


class AgentProcess:
    """A running agent and its frame transport.

    Use :meth:`start`; then :attr:`transport` for frames, :meth:`wait` for
    its exit, :meth:`stop` to end it gracefully.

    Attributes:
        process: the :class:`AgentChild` (``pid``, ``returncode``, ``wait``,
            ``send_signal``, ``kill``).
        transport: frames over the agent's stdout (read) and stdin (write).
    """

    def __init__(self, process: AgentChild, max_message_bytes: int) -> None:
        self.process = process
        self._output = _AgentOutput(process.stdout)
        self.transport = NdjsonTransport(
            self._output, process.stdin, max_message_bytes, name="agent"
        )

    @classmethod
    async def start(
        cls, command: Sequence[str], max_message_bytes: int, env: dict[str, str] | None = None
    ) -> AgentProcess:
        """Starts ``command`` with piped stdin/stdout and inherited stderr.

        Raises:
            OSError: the command cannot be executed (not found, not executable).
        """
        await trio.lowlevel.checkpoint()
        proc = AgentChild(_spawn(list(command), env))  # in this thread: see _die_with_parent
        return cls(proc, max_message_bytes)

    @property
    def returncode(self) -> int | None:
        """The agent's exit status once it has exited (see :func:`exit_status`)."""
        rc = self.process.returncode
        return None if rc is None else exit_status(rc)

    async def wait(self) -> int:
        """Waits for the agent to exit; returns its shell exit status."""
        return exit_status(await self.process.wait())

    async def watch_exit(self, drain_seconds: float) -> None:
        """Waits for the agent to exit; then its stdout ends once idle for ``drain_seconds``.

        Run it as a task beside the relay, so that a background child holding
        the agent's stdout open cannot keep the connection alive after the
        agent is gone.
        """
        await self.process.wait()
        self._output.agent_exited(drain_seconds)

    def send_signal(self, sig: int) -> None:
        """Passes a signal on to the agent (ignored once it has exited)."""
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(sig)

    def kill(self) -> None:
        """Sends SIGKILL (ignored once the agent has exited)."""
        self.send_signal(signal.SIGKILL)

    async def stop(self, grace_seconds: float, kill_after_seconds: float) -> int:
        """Closes the agent's stdin, waits ``grace_seconds``, then SIGTERM, then SIGKILL.

        Returns:
            The agent's shell exit status.
        """
        await self.transport.close_write()
        with trio.move_on_after(grace_seconds):
            return await self.wait()
        self.send_signal(signal.SIGTERM)
        with trio.move_on_after(kill_after_seconds):
            return await self.wait()
        self.process.kill()
        return await self.wait()
