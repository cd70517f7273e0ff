"""Wider pipes to and from the peers (issue 29): fewer, larger reads and writes."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import tempfile

import trio

from acp_proxy.shell.transport.pipes import PIPE_BYTES, widen_pipe
from acp_proxy.shell.transport.process import AgentChild


def _capacity(fd: int) -> int:
    return int(fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ))


def test_widen_pipe_grows_a_pipe_from_either_end() -> None:
    r, w = os.pipe()
    try:
        assert _capacity(r) < PIPE_BYTES
        assert widen_pipe(w) == PIPE_BYTES
        assert _capacity(r) == PIPE_BYTES
        assert widen_pipe(r, 4096) == PIPE_BYTES  # never shrinks
    finally:
        os.close(r)
        os.close(w)


def test_widen_pipe_leaves_what_is_not_a_pipe_alone() -> None:
    with tempfile.TemporaryFile() as f:
        assert widen_pipe(f.fileno()) is None
    r, w = os.pipe()
    os.close(r)
    os.close(w)
    assert widen_pipe(r) is None  # closed: no error either


def test_the_agents_pipes_are_widened() -> None:
    popen = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )

    async def main() -> tuple[int, int]:
        child = AgentChild(popen)
        sizes = (_capacity(child.stdout.fileno()), _capacity(child.stdin.fileno()))
        await child.stdin.aclose()
        await child.wait()
        await child.stdout.aclose()
        await child.stderr.aclose()
        return sizes

    assert trio.run(main) == (PIPE_BYTES, PIPE_BYTES)


def _send_through_pipe(frames: list[bytes], size: int = 64 * 1024) -> bytes:
    """``NdjsonTransport.send_batch(frames)`` over a pipe of ``size`` bytes, read slowly."""
    from acp_proxy.shell.transport.ndjson import NdjsonTransport

    async def main() -> bytes:
        r, w = os.pipe()
        fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, size)
        rx = trio.lowlevel.FdStream(r)
        tx = NdjsonTransport(None, trio.lowlevel.FdStream(w), 1 << 30)
        got = bytearray()

        async def read_all() -> None:
            while data := await rx.receive_some(7000):  # less than a pipe at a time
                got.extend(data)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(read_all)
            await tx.send_batch(list(frames))
            await tx.close_write()
        await rx.aclose()
        return bytes(got)

    return trio.run(main)


def test_send_batch_writes_every_frame_and_newline_through_partial_writes() -> None:
    """writev path: frames larger than the pipe, empty ones, many small ones; the bytes
    are exactly the frames joined by newlines."""
    frames = [b"a" * 300_000, b"", b'{"x":1}', b"b" * 70_000] + [b"%d" % i for i in range(200)]
    assert _send_through_pipe(frames, 4096) == b"".join(f + b"\n" for f in frames)
    many = [b"m%d" % i for i in range(5000)]  # past WRITEV_FRAMES: joined, one buffer
    assert _send_through_pipe(many) == b"".join(f + b"\n" for f in many)


def test_send_batch_to_a_closed_reader_is_closed() -> None:
    from acp_proxy.shell.transport.base import Closed
    from acp_proxy.shell.transport.ndjson import NdjsonTransport

    async def main() -> str:
        r, w = os.pipe()
        os.close(r)
        tx = NdjsonTransport(None, trio.lowlevel.FdStream(w), 1 << 20)
        try:
            await tx.send_batch([b"x"])
        except Closed as exc:
            return str(exc)
        finally:
            await tx.close_write()
        return "sent"

    assert "write failed" in trio.run(main)
