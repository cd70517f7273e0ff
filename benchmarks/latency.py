"""Latency: paced request/response round trips through the three pipelines at once."""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Sequence

from benchmarks.client import open_client
from benchmarks.sizes import LATENCY_VARIANTS, Sizes

__all__ = ["latency", "percentile"]


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (nearest rank) of ``values``."""
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, math.ceil(q / 100.0 * len(ordered)) - 1))
    return ordered[k]


def latency(sizes: Sizes) -> dict[str, list[float]]:
    """Round-trip times (ms) per variant, each pipeline paced at ``latency_rate_per_s``.

    The pipelines (:data:`~benchmarks.sizes.LATENCY_VARIANTS`: the three, and the
    proxy with its trace and metrics on) are open at once; every tick sends one request
    through each of them, in rotating order, so a burst of load on the
    machine hits every variant alike.
    """
    period = 1.0 / sizes.latency_rate_per_s
    warm_up = min(200, sizes.latency_n)
    out: dict[str, list[float]] = {v: [] for v in LATENCY_VARIANTS}
    with contextlib.ExitStack() as stack:
        clients = [stack.enter_context(open_client(v, sizes.timeout_s)) for v in LATENCY_VARIANTS]
        t0 = time.perf_counter() + 0.01
        for i in range(warm_up + sizes.latency_n):
            due = t0 + i * period
            left = due - time.perf_counter()
            if left > 0.0005:
                time.sleep(left - 0.0003)
            while time.perf_counter() < due:
                pass
            for k in range(len(LATENCY_VARIANTS)):
                n = (i + k) % len(LATENCY_VARIANTS)
                rtt = clients[n].round_trip()
                if i >= warm_up:
                    out[LATENCY_VARIANTS[n]].append(rtt)
    return out
