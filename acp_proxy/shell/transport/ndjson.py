"""Newline-delimited JSON frames over any trio byte stream (docs/protocol.md section 1)."""

from __future__ import annotations

import contextlib

import trio

from acp_proxy.core.wire.framing import LineFramer
from acp_proxy.shell.transport.base import Closed, FrameTransport, Incoming

__all__ = ["NdjsonTransport"]

READ_SIZE = 256 * 1024


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
        self.name = name

    async def receive_batch(self) -> list[Incoming] | None:
        if self._rx is None or self._eof:
            return None
        while True:
            try:
                data = await self._rx.receive_some(READ_SIZE)
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
        if len(frames) == 1:
            payload = frames[0] + b"\n"
        else:
            frames.append(b"")
            payload = b"\n".join(frames)
        try:
            await self._tx.send_all(payload)
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
