"""The trace file writer: the records of :mod:`acp_proxy.core.trace` as JSON lines.

docs/trace-format.md. The first line is the header record; each later line one
record, with the connection number (``conn``) and the wall-clock time (``ts``)
added. Lines are written whole under a lock (a core call may run in a worker
thread) and flushed at once, so a trace read while the proxy runs, or after it
was killed, ends with a whole record. Writing never raises: a full disk stops
the trace, not the proxy.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from typing import IO, Any

import msgspec

from acp_proxy.core.trace import Record, header
from acp_proxy.shell.timefmt import iso_utc

__all__ = ["TraceWriter", "encode_record"]

log = logging.getLogger("acp_proxy.trace")

_ENCODER = msgspec.json.Encoder()


def encode_record(record: Record) -> bytes:
    """One record as compact JSON (any id or value a peer sent is written as JSON can)."""
    try:
        return _ENCODER.encode(record)
    except (TypeError, ValueError, OverflowError):
        return json.dumps(record, separators=(",", ":"), default=repr).encode()


class TraceWriter:
    """Appends trace records to a file.

    Args:
        stream: a binary stream (the writer owns it).
        include_content: the records carry message text (written in the header).
        context: keys of the header record (``pid``, ``run``, ...).
    """

    def __init__(
        self, stream: IO[bytes], include_content: bool, context: dict[str, Any] | None = None
    ) -> None:
        self._stream = stream
        self._lock = threading.Lock()
        self.include_content = include_content
        self.records_written = 0
        self._broken = False
        self._line(
            header(
                include_content,
                started=iso_utc(),
                **(context or {}),
            )
        )

    @classmethod
    def open(
        cls, path: str, include_content: bool, context: dict[str, Any] | None = None
    ) -> TraceWriter:
        """A new trace at ``path`` (truncated; readable by its owner only).

        Raises:
            OSError: the file cannot be opened.
        """
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        return cls(open(fd, "wb"), include_content, context)

    def _line(self, record: Record) -> None:
        data = encode_record(record) + b"\n"
        with self._lock:
            if self._broken:
                return
            try:
                self._stream.write(data)
                self._stream.flush()
                self.records_written += 1
            except (OSError, ValueError) as exc:
                self._broken = True
                log.warning("trace stopped: %s", exc)

    def write(self, conn: int, record: Record) -> None:
        """Writes one record of connection ``conn``."""
        record["conn"] = conn
        record["ts"] = round(time.time(), 6)
        self._line(record)

    def close(self) -> None:
        """Closes the file."""
        with self._lock:
            self._broken = True
            with contextlib.suppress(OSError):
                self._stream.close()
