"""Wider pipes to and from the peers: fewer, larger reads and writes (issue 29).

A Linux pipe holds 64 KiB by default, so a proxy that falls a little behind an
agent writing as fast as it can reads 64 KiB at a time, and pays the event
loop's whole read-decide-write cycle (about as much as deciding 60 ~1 KiB
messages) for each. With a pipe of :data:`PIPE_BYTES`, the same reads take up
to :data:`~acp_proxy.shell.transport.ndjson.READ_SIZE` (256 KiB) at once. Nothing
waits for a pipe to fill: a read returns what is there, so latency is unchanged.
"""

from __future__ import annotations

import contextlib
import fcntl

__all__ = ["PIPE_BYTES", "widen_pipe"]

#: the pipe capacity asked for, bytes (Linux's default ``/proc/sys/fs/pipe-max-size``)
PIPE_BYTES = 1024 * 1024

_SET = getattr(fcntl, "F_SETPIPE_SZ", None)  # Linux only
_GET = getattr(fcntl, "F_GETPIPE_SZ", None)


def widen_pipe(fd: int, size: int = PIPE_BYTES) -> int | None:
    """Asks the kernel for a pipe of ``size`` bytes behind ``fd`` (either end).

    Returns:
        The pipe's capacity afterwards, bytes; ``None`` when ``fd`` is not a
        pipe, the platform has no such call, or the kernel refused (over
        ``pipe-max-size`` or the user's pipe quota: the pipe keeps its size).
        Never raises.
    """
    if _SET is None or _GET is None:
        return None
    with contextlib.suppress(OSError, ValueError):
        if fcntl.fcntl(fd, _GET) >= size:
            return int(fcntl.fcntl(fd, _GET))
    with contextlib.suppress(OSError, ValueError):
        return int(fcntl.fcntl(fd, _SET, size))
    return None
