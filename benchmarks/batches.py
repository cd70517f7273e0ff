"""Peak RSS of a real proxy carrying one large JSON-RPC batch (issue 29).

An agent batch ``[{},{},...]`` of 300,000 elements (0.9 MiB) and a client
batch of 200,000 (0.6 MiB), each sent once through ``python -m acp_proxy --
AGENT`` (:func:`benchmarks.memprobe.measure`); the figure is the proxy's
``VmHWM`` against the bound 64 MiB + 4 x the batch's size.
"""

from __future__ import annotations

import tempfile
from typing import Any

from benchmarks.memprobe import measure

__all__ = ["BATCHES", "batch_rss", "empty_objects_batch"]

#: direction -> elements of the batch
BATCHES = {"agent": 300_000, "client": 200_000}


def empty_objects_batch(elements: int) -> bytes:
    """``[{},{},...]`` with ``elements`` empty objects."""
    return b"[" + b",".join([b"{}"] * elements) + b"]"


def batch_rss(scale: float = 1.0) -> dict[str, Any]:
    """``{direction: {"elements", "bytes", "peak_rss_mib", "bound_mib"}}``; ``scale``
    shrinks the batches (``--quick``)."""
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="acp-bench-batch-") as tmp:
        for direction, elements in BATCHES.items():
            n = max(1, int(elements * scale))
            payload = empty_objects_batch(n)
            peak = measure(payload, direction == "client", tmp)
            out[direction] = {
                "elements": n,
                "bytes": len(payload),
                "peak_rss_mib": round(peak, 1),
                "bound_mib": round(64 + 4 * len(payload) / 2**20, 1),
            }
    return out
