"""The transport interface the relay uses (docs/design.md section 1, ``transport/``).

A transport delivers batches of frames read from a peer and writes batches
of frames to it. Foreign exceptions (``OSError``, ``trio.BrokenResourceError``,
WebSocket errors) are translated to :class:`Closed` at this one boundary.
"""

from __future__ import annotations

import abc

from acp_proxy.core.wire.framing import Incoming

__all__ = ["Closed", "FrameTransport", "Incoming"]


class Closed(Exception):
    """The peer is gone (EOF on write, broken pipe, connection closed)."""


class FrameTransport(abc.ABC):
    """Frames to and from one peer."""

    #: human name of the peer ("client", "agent") for logs
    name: str = "peer"

    @abc.abstractmethod
    async def receive_batch(self) -> list[Incoming] | None:
        """Waits for the next frames.

        Returns:
            A non-empty list of frames and framer reports in stream order, or
            ``None`` at end of stream (after any :class:`Partial` report).

        Raises:
            Closed: the connection failed while reading.
        """

    @abc.abstractmethod
    async def send_batch(self, frames: list[bytes]) -> None:
        """Writes ``frames`` in order (each a message without a line ending).

        A frame may hold several messages joined by ``b"\\n"`` (see
        :class:`~acp_proxy.core.actions.Send`).

        Raises:
            Closed: the peer no longer accepts data.
        """

    @abc.abstractmethod
    async def close_write(self) -> None:
        """Signals end of stream to the peer (closes its stdin / the socket)."""

    async def aclose(self) -> None:
        """Releases the transport's resources (default: :meth:`close_write`)."""
        await self.close_write()
