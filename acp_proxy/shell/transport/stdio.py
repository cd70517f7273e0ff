"""The proxy's own stdin/stdout as the client transport (docs/design.md section 3)."""

from __future__ import annotations

import os

import trio

from acp_proxy.shell.transport.ndjson import NdjsonTransport
from acp_proxy.shell.transport.pipes import widen_pipe

__all__ = ["open_stdio_transport"]


def open_stdio_transport(max_message_bytes: int) -> NdjsonTransport:
    """Frames over duplicates of file descriptors 0 and 1.

    Args:
        max_message_bytes: the framer's limit, bytes.

    Returns:
        The client transport. Nothing else may write to stdout.
    """
    rx = trio.lowlevel.FdStream(os.dup(0))
    tx = trio.lowlevel.FdStream(os.dup(1))
    widen_pipe(rx.fileno())  # when they are pipes: fewer, larger reads and writes
    widen_pipe(tx.fileno())
    return NdjsonTransport(rx, tx, max_message_bytes, name="client")
