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
framer: importing it costs the standard library only.
"""

from __future__ import annotations

import ctypes
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence

__all__ = ["EarlyStart", "hold_signals", "release_signals", "spawn", "start_early"]

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
_original_mask: set[int | signal.Signals] | None = None


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
    if env is None:
        env = getattr(command, "env", None)
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
        popen: subprocess.Popen[bytes] | None,
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
        return EarlyStart(command, spawn(command), None)
    except OSError as exc:
        release_signals()
        return EarlyStart(command, None, exc)
