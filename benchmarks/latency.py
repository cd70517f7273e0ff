"""Latency: paced request/response round trips through the three pipelines at once."""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Iterator, Sequence

from benchmarks.client import open_client
from benchmarks.otlp_sink import OTEL_AVAILABLE, otlp_sink
from benchmarks.sizes import LATENCY_VARIANTS, Sizes

__all__ = ["latency", "percentile"]


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (nearest rank) of ``values``."""
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, math.ceil(q / 100.0 * len(ordered)) - 1))
    return ordered[k]


#: the ``otel`` variant exports often, so that export runs while the requests do
OTEL_ENV = {"OTEL_BSP_SCHEDULE_DELAY": "200", "OTEL_METRIC_EXPORT_INTERVAL": "1000"}


@contextlib.contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    """``values`` set in ``os.environ`` (which the pipelines inherit) for the block."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def latency(sizes: Sizes, exports: dict[str, int] | None = None) -> dict[str, list[float]]:
    """Round-trip times (ms) per variant, each pipeline paced at ``latency_rate_per_s``.

    The pipelines (:data:`~benchmarks.sizes.LATENCY_VARIANTS`: the three, the
    proxy with its trace and metrics on, and the proxy with ``--otel`` exporting
    to a local collector, :func:`~benchmarks.otlp_sink.otlp_sink`, when the otel
    extra is installed) are open at once; every tick sends one request
    through each of them, in rotating order, so a burst of load on the
    machine hits every variant alike. ``exports`` receives the collector's
    POST count per path once the pipelines are closed.
    """
    period = 1.0 / sizes.latency_rate_per_s
    warm_up = min(200, sizes.latency_n)
    variants = [v for v in LATENCY_VARIANTS if v != "otel" or OTEL_AVAILABLE]
    out: dict[str, list[float]] = {v: [] for v in variants}
    with contextlib.ExitStack() as stack:
        if OTEL_AVAILABLE:
            url, posts = stack.enter_context(otlp_sink())
            if exports is not None:
                stack.callback(lambda: exports.update(posts))
            with _environment({**OTEL_ENV, "OTEL_EXPORTER_OTLP_ENDPOINT": url}):
                clients = [stack.enter_context(open_client(v, sizes.timeout_s)) for v in variants]
        else:
            clients = [stack.enter_context(open_client(v, sizes.timeout_s)) for v in variants]
        t0 = time.perf_counter() + 0.01
        for i in range(warm_up + sizes.latency_n):
            due = t0 + i * period
            left = due - time.perf_counter()
            if left > 0.0005:
                time.sleep(left - 0.0003)
            while time.perf_counter() < due:
                pass
            for k in range(len(variants)):
                n = (i + k) % len(variants)
                rtt = clients[n].round_trip()
                if i >= warm_up:
                    out[variants[n]].append(rtt)
    return out
