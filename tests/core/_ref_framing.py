"""Reference copy (commit 7c37d17, frozen) for differential tests.

Newline-delimited framing for ACP over stdio (PROTOCOL.md section 1).

Sans-IO: :class:`LineFramer` takes bytes in arbitrary chunks and yields
complete frames. It splits on ``0x0A`` only (never on ``\\r`` or U+2028),
accepts and strips one ``\\r`` before the ``\\n`` and a UTF-8 BOM at the very
start of the stream, and never buffers more than ``max_message_bytes`` of one
message: an oversize message is skipped up to its newline and reported as an
:class:`Oversize` event, and the stream lives on.

Scanning is linear: every byte is examined once by ``bytes.find``.
"""

from __future__ import annotations

from collections.abc import Iterator

import attrs

__all__ = ["BOM", "LineFramer", "Oversize", "Partial"]

BOM = b"\xef\xbb\xbf"


@attrs.frozen
class Oversize:
    """A message longer than ``max_message_bytes`` was skipped.

    Attributes:
        size_bytes: bytes skipped (the whole message when its end was seen,
            otherwise the bytes skipped so far, at least ``max_message_bytes + 1``).
        complete: True when the newline ending it was seen.
    """

    size_bytes: int
    complete: bool


@attrs.frozen
class Partial:
    """Bytes left without a final newline when the stream ended.

    Attributes:
        size_bytes: length of the half-written last line, in bytes.
    """

    size_bytes: int


class LineFramer:
    """Splits a byte stream into newline-delimited frames.

    Args:
        max_message_bytes: largest frame accepted, in bytes, not counting the
            line ending. Must be >= 1.

    Raises:
        ValueError: if ``max_message_bytes`` < 1.
    """

    def __init__(self, max_message_bytes: int) -> None:
        if max_message_bytes < 1:
            raise ValueError("max_message_bytes must be >= 1")
        self.max_message_bytes = max_message_bytes
        self._buf = bytearray()
        self._scanned = 0  # bytes of _buf already known to hold no newline
        self._skipping = 0  # >0: inside an oversize message, bytes skipped so far
        self._skipped_cr = False  # the last byte skipped was \r (maybe part of \r\n)
        self._bom_checked = False

    @property
    def buffered_bytes(self) -> int:
        """Bytes held for an incomplete frame (at most ``max_message_bytes + 1``)."""
        return len(self._buf)

    def feed(self, data: bytes | bytearray) -> Iterator[bytes | Oversize]:
        """Adds ``data`` and yields every frame it completes, in order.

        Frames are ``bytes`` without the line ending (``\\n`` or ``\\r\\n``).
        Empty lines are skipped silently (blank lines carry no message).

        Args:
            data: the next chunk of the stream, any length (may be empty).

        Yields:
            ``bytes`` frames and :class:`Oversize` reports, in stream order.
        """
        if not data:
            return
        self._buf += data
        if not self._bom_checked:
            if len(self._buf) < len(BOM) and BOM.startswith(bytes(self._buf)):
                return
            self._bom_checked = True
            if self._buf.startswith(BOM):
                del self._buf[: len(BOM)]
        buf = self._buf
        start = 0
        limit = self.max_message_bytes
        while True:
            nl = buf.find(b"\n", max(start, self._scanned))
            if nl < 0:
                break
            self._scanned = 0
            if self._skipping:
                total = self._skipping + (nl - start)
                # A \r before the \n is line ending, not message (it may lie in an
                # earlier chunk), as for a complete oversize line below.
                if (buf[nl - 1] == 0x0D) if nl > start else self._skipped_cr:
                    total -= 1
                self._skipping = 0
                start = nl + 1
                yield Oversize(total, True)
                continue
            end = nl
            if end > start and buf[end - 1] == 0x0D:
                end -= 1
            length = end - start
            if length > limit:
                yield Oversize(length, True)
            elif length:
                yield bytes(buf[start:end])
            start = nl + 1
        if start:
            del buf[:start]
        # Whatever is left has no newline.
        if self._skipping:
            self._skipping += len(buf)
            if buf:
                self._skipped_cr = buf[-1] == 0x0D
            buf.clear()
            self._scanned = 0
        elif len(buf) > limit + 1:
            # +1 leaves room for a trailing \r of a message of exactly `limit` bytes.
            self._skipping = len(buf)
            self._skipped_cr = buf[-1] == 0x0D
            buf.clear()
            self._scanned = 0
        else:
            self._scanned = len(buf)

    def close(self) -> Iterator[Partial | Oversize]:
        """Ends the stream; reports a half-written last line, if any.

        Yields:
            :class:`Partial` for leftover bytes, :class:`Oversize` with
            ``complete=False`` for an unfinished oversize message.
        """
        if self._skipping:
            yield Oversize(self._skipping, False)
        elif self._buf:
            yield Partial(len(self._buf))
        self._skipping = 0
        self._buf.clear()
        self._scanned = 0
