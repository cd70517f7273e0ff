"""Newline-delimited JSON over this process's stdin/stdout (stdlib only), for the raw test
agents run as scripts (``probe_agent.py``, ``hostile_perm_agent.py``)."""

from __future__ import annotations

import json
import os
import select
import sys
from typing import Any


class StdioLines:
    """One JSON value a line: :meth:`send` writes one, :meth:`read` returns the next
    (``None`` after ``timeout`` seconds without a whole line); the process exits 0
    when stdin ends."""

    def __init__(self) -> None:
        self._out = sys.stdout.buffer
        self._buf = b""

    def send(self, obj: dict[str, Any]) -> None:
        self._out.write(json.dumps(obj).encode() + b"\n")
        self._out.flush()

    def read(self, timeout: float) -> Any:
        while b"\n" not in self._buf:
            ready, _, _ = select.select([0], [], [], timeout)
            if not ready:
                return None
            chunk = os.read(0, 1 << 20)
            if not chunk:
                sys.exit(0)
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)
