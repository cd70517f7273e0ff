"""Newline-delimited JSON frames over any trio byte stream (docs/protocol.md section 1)."""

from __future__ import annotations

import contextlib
import os

import trio

from acp_proxy.core.wire.framing import LineFramer
from acp_proxy.shell.opening import READ_BYTES
from acp_proxy.shell.transport.base import Closed, FrameTransport, Incoming

__all__ = ["NdjsonTransport"]

READ_SIZE = READ_BYTES

#: at most this many frames go out in one ``writev`` (two buffers each, under
#: the kernel's 1024); a longer batch is joined into one buffer instead
WRITEV_FRAMES = 256


async def _writev_all(fd: int, frames: list[bytes]) -> None:
    """Writes each frame and a newline to the non-blocking ``fd`` without joining them.

    The bytes a relay forwards unchanged reach the kernel straight from the
    buffers they were read into (no copy to add the newlines; issue 29).

    Raises:
        trio.ClosedResourceError: ``fd`` was closed.
        OSError: the write failed (e.g. a broken pipe).
    """
    if fd < 0:
        raise trio.ClosedResourceError("file was already closed")
    await trio.lowlevel.checkpoint()
    iov: list[bytes | memoryview] = []
    for frame in frames:
        iov.append(frame)
        iov.append(b"\n")
    i = 0
    while i < len(iov):
        try:
            n = os.writev(fd, iov[i:] if i else iov)
        except BlockingIOError:
            await trio.lowlevel.wait_writable(fd)
            continue
        while n:  # skip what was written; a buffer written in part goes on as a view
            head = iov[i]
            if n >= len(head):
                n -= len(head)
                i += 1
            else:
                iov[i] = memoryview(head)[n:]
                n = 0
        while i < len(iov) and not len(iov[i]):
            i += 1


class NdjsonTransport(FrameTransport):
    """Frames over a ``trio.abc.ReceiveStream`` / ``trio.abc.SendStream`` pair.

    Args:
        receive_stream: bytes from the peer (``None``: nothing to read).
        send_stream: bytes to the peer (``None``: write-only transports).
        max_message_bytes: the framer's limit, bytes.
        name: the peer's name for logs.
    """

    def __init__(
        self,
        receive_stream: trio.abc.ReceiveStream | None,
        send_stream: trio.abc.SendStream | None,
        max_message_bytes: int,
        name: str = "peer",
    ) -> None:
        self._rx = receive_stream
        self._tx = send_stream
        self._framer = LineFramer(max_message_bytes)
        self._eof = False
        self._ended = False  # the stream's end was read elsewhere (resume)
        self.name = name
        #: bytes asked of one read: :data:`READ_SIZE`, fewer where many connections
        #: share the process (``--listen``: each read's bytes stay queued until written)
        self.read_size = READ_SIZE

    def resume(self, framer: LineFramer, ended: bool) -> None:
        """Goes on from bytes read before the relay (:mod:`~acp_proxy.shell.opening`):
        ``framer`` holds any partial line; ``ended``: the stream's end was read, so the
        next batch is the framer's last line and then the end."""
        self._framer = framer
        self._ended = ended

    async def receive_batch(self) -> list[Incoming] | None:
        if self._rx is None or self._eof:
            return None
        if self._ended:
            self._eof = True
            return list(self._framer.close()) or None
        while True:
            try:
                data = await self._rx.receive_some(self.read_size)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                raise Closed(f"{self.name}: read failed: {exc!r}") from exc
            if not data:
                self._eof = True
                tail: list[Incoming] = list(self._framer.close())
                return tail or None
            frames: list[Incoming] = list(self._framer.feed_runs(data))
            if frames:
                return frames

    async def send_batch(self, frames: list[bytes]) -> None:
        if self._tx is None:
            raise Closed(f"{self.name}: not writable")
        tx = self._tx
        try:
            if type(tx) is trio.lowlevel.FdStream and len(frames) <= WRITEV_FRAMES:
                await _writev_all(tx.fileno(), frames)
                return
            if len(frames) == 1:
                payload = frames[0] + b"\n"
            else:
                frames.append(b"")
                payload = b"\n".join(frames)
            await tx.send_all(payload)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            raise Closed(f"{self.name}: write failed: {exc!r}") from exc

    async def close_write(self) -> None:
        if self._tx is not None:
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                await self._tx.aclose()

    async def aclose(self) -> None:
        await self.close_write()
        if self._rx is not None:
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                await self._rx.aclose()
