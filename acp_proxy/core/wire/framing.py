"""Newline-delimited framing for ACP over stdio (docs/protocol.md section 1).

Sans-IO: :class:`LineFramer` takes bytes in arbitrary chunks and yields
complete frames. It splits on ``0x0A`` only (never on ``\\r`` or U+2028),
accepts and strips one ``\\r`` before the ``\\n`` and a UTF-8 BOM at the very
start of the stream, and never buffers more than ``max_message_bytes`` of one
message: an oversize message is skipped up to its newline and reported as an
:class:`Oversize` event (with its first :data:`OVERSIZE_PREFIX_BYTES`, so its
id can be read), and the stream lives on. A last line without a newline is
delivered as a frame when it is a complete JSON value, else reported as
:class:`Partial`.

Scanning is linear: every byte is examined once by ``bytes.find``.
"""

from __future__ import annotations

from collections.abc import Iterator

import attrs
import msgspec

__all__ = ["BOM", "OVERSIZE_PREFIX_BYTES", "Incoming", "LineFramer", "Lines", "Oversize", "Partial"]

BOM = b"\xef\xbb\xbf"

#: bytes kept of the start of an oversize message (:attr:`Oversize.prefix`)
OVERSIZE_PREFIX_BYTES = 4096


@attrs.frozen
class Oversize:
    """A message longer than ``max_message_bytes`` was skipped.

    Attributes:
        size_bytes: bytes skipped (the whole message when its end was seen,
            otherwise the bytes skipped so far, at least ``max_message_bytes + 1``).
        complete: True when the newline ending it was seen.
        prefix: its first bytes (at most :data:`OVERSIZE_PREFIX_BYTES`; not
            compared), enough to read the id of a request written
            ``{"jsonrpc", "id", "method", ...}`` as clients do.
    """

    size_bytes: int
    complete: bool
    prefix: bytes = attrs.field(default=b"", eq=False, repr=False)


@attrs.frozen
class Partial:
    """Bytes left without a final newline when the stream ended.

    Attributes:
        size_bytes: length of the half-written last line, in bytes.
    """

    size_bytes: int


@attrs.frozen
class Lines:
    """Complete lines of one read, not split yet (from :meth:`LineFramer.feed_runs`).

    Attributes:
        data: the lines as they arrived, joined by ``b"\\n"`` (the last one's
            newline removed); never longer than ``max_message_bytes``, so no
            line in it is oversize. Lines may still end in ``\\r`` or be blank.
    """

    data: bytes

    def frames(self) -> list[bytes]:
        """The frames :meth:`LineFramer.feed` gives for the same bytes.

        One ``\\r`` before each newline is dropped and blank lines are skipped.
        """
        out = []
        for line in self.data.split(b"\n"):
            if line[-1:] == b"\r":
                line = line[:-1]
            if line:
                out.append(line)
        return out


#: What one read yields: frames (bytes, no line ending), runs of unsplit
#: complete lines, and framer reports; ``ProxyCore.receive`` takes them all.
Incoming = bytes | Lines | Oversize | Partial


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
        self._skipping = 0  # >0: inside an oversize message, bytes skipped so far
        self._skipped_cr = False  # the last byte skipped was \r (maybe part of \r\n)
        self._bom_checked = False
        self._prefix = b""  # the start of the oversize message being skipped

    @property
    def buffered_bytes(self) -> int:
        """Bytes held for an incomplete frame (at most ``max_message_bytes + 1``)."""
        return len(self._buf)

    def feed(self, data: bytes | bytearray) -> list[bytes | Oversize]:
        """Adds ``data`` and returns every frame it completes, in order.

        Frames are ``bytes`` without the line ending (``\\n`` or ``\\r\\n``).
        Empty lines are skipped silently (blank lines carry no message).

        Args:
            data: the next chunk of the stream, any length (may be empty).

        Returns:
            ``bytes`` frames and :class:`Oversize` reports, in stream order.
        """
        return self._feed(data, False)  # type: ignore[return-value]

    def feed_runs(self, data: bytes | bytearray) -> list[bytes | Lines | Oversize]:
        """As :meth:`feed`, but the lines that begin and end in ``data`` come unsplit.

        When they total at most ``max_message_bytes``, the complete lines
        that start inside ``data`` are one :class:`Lines` item (a message begun
        in an earlier chunk still comes first as a frame). ``Lines.frames()``
        gives exactly the frames :meth:`feed` would have: a consumer that can
        handle a run of lines at once (one decode for all of them) skips the
        per-line split.

        Returns:
            ``bytes`` frames, :class:`Lines` runs and :class:`Oversize`
            reports, in stream order.
        """
        return self._feed(data, True)

    def _feed(self, data: bytes | bytearray, runs: bool) -> list[bytes | Lines | Oversize]:
        out: list[bytes | Lines | Oversize] = []
        if not data:
            return out
        buf = self._buf
        if not self._bom_checked:
            buf += data
            if len(buf) < len(BOM) and BOM.startswith(bytes(buf)):
                return out
            self._bom_checked = True
            if buf.startswith(BOM):
                del buf[: len(BOM)]
            data = bytes(buf)
            buf.clear()
        elif type(data) is not bytes:
            data = bytes(data)
        limit = self.max_message_bytes
        start = 0
        # Frames are sliced from ``data`` itself (one copy each); only a message
        # begun in an earlier chunk goes through the buffer.
        if self._skipping:
            nl = data.find(b"\n")
            if nl < 0:
                self._skipping += len(data)
                self._skipped_cr = data[-1] == 0x0D
                return out
            total = self._skipping + nl
            # A \r before the \n is line ending, not message (it may lie in an
            # earlier chunk), as for a complete oversize line below.
            if (data[nl - 1] == 0x0D) if nl > 0 else self._skipped_cr:
                total -= 1
            self._skipping = 0
            out.append(Oversize(total, True, self._prefix))
            self._prefix = b""
            start = nl + 1
        elif buf:
            nl = data.find(b"\n")
            if nl < 0:
                buf += data
                self._tail()
                return out
            buf += data[:nl]
            if buf[-1] == 0x0D:
                del buf[-1]
            length = len(buf)
            if length > limit:
                out.append(Oversize(length, True, bytes(buf[:OVERSIZE_PREFIX_BYTES])))
            elif length:
                out.append(bytes(buf))
            buf.clear()
            start = nl + 1
        if runs:
            last = data.rfind(b"\n", start)
            if start < last and last - start <= limit:
                out.append(Lines(data[start:last]))
                start = last + 1
        find = data.find
        append = out.append
        while True:
            nl = find(b"\n", start)
            if nl < 0:
                break
            end = nl
            if end > start and data[end - 1] == 0x0D:
                end -= 1
            length = end - start
            if length > limit:
                append(Oversize(length, True, data[start : start + OVERSIZE_PREFIX_BYTES]))
            elif length:
                append(data[start:end])
            start = nl + 1
        if start < len(data):
            buf += data[start:] if start else data
            self._tail()
        return out

    def _tail(self) -> None:
        """``_buf`` holds the start of a message, no newline: skip it if too long."""
        buf = self._buf
        if len(buf) > self.max_message_bytes + 1:
            # +1 leaves room for a trailing \r of a message of exactly `limit` bytes.
            self._skipping = len(buf)
            self._skipped_cr = buf[-1] == 0x0D
            self._prefix = bytes(buf[:OVERSIZE_PREFIX_BYTES])
            buf.clear()

    def close(self) -> Iterator[bytes | Partial | Oversize]:
        """Ends the stream; delivers or reports a last line without a newline, if any.

        Yields:
            the last line as a frame when it is one complete JSON value (one
            ``\\r`` at its end dropped) of at most ``max_message_bytes``;
            otherwise :class:`Partial` for leftover bytes; :class:`Oversize`
            with ``complete=False`` for an unfinished oversize message.
        """
        if self._skipping:
            yield Oversize(self._skipping, False, self._prefix)
        elif self._buf:
            last = bytes(self._buf[:-1] if self._buf[-1] == 0x0D else self._buf)
            if last and len(last) <= self.max_message_bytes and _complete_json(last):
                yield last
            else:
                yield Partial(len(self._buf))
        self._skipping = 0
        self._prefix = b""
        self._buf.clear()


def _complete_json(data: bytes) -> bool:
    """True when ``data`` is exactly one JSON value (validated, nothing built)."""
    try:
        msgspec.json.decode(data, type=msgspec.Raw)
    except msgspec.DecodeError:
        return False
    return True
