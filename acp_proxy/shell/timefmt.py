"""The one way the proxy writes a wall-clock time: ISO 8601, UTC, with ``Z``.

Used by the audit log, the trace header and ``/status`` (issue 32), so that the
three can be compared by eye and parsed the same way.
"""

from __future__ import annotations

import datetime as _dt
import time

__all__ = ["iso_utc"]


def iso_utc(seconds: float | None = None) -> str:
    """``seconds`` since the epoch (default: now) as ``YYYY-MM-DDTHH:MM:SS.ffffffZ``."""
    moment = time.time() if seconds is None else seconds
    return _dt.datetime.fromtimestamp(moment, _dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
