"""Memory: the long stream and the flood of never-announced sessions (the middle peak RSS)."""

from __future__ import annotations

import time

from benchmarks.client import StreamResult, open_client
from benchmarks.sizes import Sizes
from benchmarks.throughput import measure_stream

__all__ = ["flood", "relay_stats"]


def flood(sizes: Sizes) -> tuple[StreamResult, float]:
    """Traffic for never-announced sessions at default hold limits (proxy only)."""
    with open_client("proxy", sizes.timeout_s) as c:
        t0 = time.perf_counter()
        r = c.run_workload(
            {
                "kind": "flood",
                "count": sizes.flood_n,
                "size": sizes.flood_size,
                "block": sizes.flood_block,
            }
        )
        elapsed = time.perf_counter() - t0
    return r, elapsed


def relay_stats(variant: str, count: int, size: int, sizes: Sizes) -> StreamResult:
    """One stream through ``variant``, for its peak RSS and CPU."""
    return measure_stream(variant, count, size, 1, sizes.timeout_s)
