"""JSON-lines audit log writer (DESIGN.md section 3, "Audit log")."""

from __future__ import annotations

import datetime as _dt
import json
from typing import IO, Any

from acp_proxy.core.actions import Audit

__all__ = ["AuditLog", "format_record"]


def format_record(record: Audit, context: dict[str, Any] | None = None) -> str:
    """One audit line (no trailing newline).

    Shape: ``{"ts": "2026-11-30T03:14:15.123456Z", "event": ..., "direction": ...,
    <fields without None values>, <context>}``.

    Args:
        record: the core's audit action.
        context: extra keys for every record of a connection (e.g. ``connection``).
    """
    ts = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    obj: dict[str, Any] = {"ts": ts, "event": record.event}
    if record.direction is not None:
        obj["direction"] = record.direction
    for k, v in record.fields.items():
        if v is not None:
            obj[k] = v
    if context:
        obj.update(context)
    text = json.dumps(obj, ensure_ascii=False, default=str)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate a peer sent (valid JSON, not UTF-8)
        text = json.dumps(obj, ensure_ascii=True, default=str)
    return text


class AuditLog:
    """Appends audit records to a file, one JSON object per line, flushed per line.

    Args:
        stream: an open text stream (the caller owns it).
        context: keys added to every record.
    """

    def __init__(self, stream: IO[str], context: dict[str, Any] | None = None) -> None:
        self._stream = stream
        self._context = context or {}
        self.records_written = 0

    @classmethod
    def open(cls, path: str, context: dict[str, Any] | None = None) -> AuditLog:
        """Opens ``path`` for appending (line-buffered).

        Raises:
            OSError: the file cannot be opened.
        """
        return cls(open(path, "a", encoding="utf-8", buffering=1), context)

    def write(self, record: Audit) -> None:
        """Writes one record; an I/O error disables the log instead of raising."""
        try:
            self._stream.write(format_record(record, self._context) + "\n")
            self.records_written += 1
        except (OSError, ValueError):
            pass

    def with_context(self, **context: Any) -> AuditLog:
        """A writer on the same stream with more context keys."""
        return AuditLog(self._stream, {**self._context, **context})

    def close(self) -> None:
        """Closes the stream."""
        self._stream.close()
