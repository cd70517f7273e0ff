"""Throughput: streams of chunks and the mixed turn, each run through every variant."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from benchmarks import peer as _bench_peer
from benchmarks.client import StreamResult, open_client, stream_params
from benchmarks.sizes import VARIANTS, BenchError, Sizes

__all__ = ["measure_stream", "median_rate", "mixed", "run_throughput", "throughput"]


def measure_stream(
    variant: str, count: int, size: int, n_sessions: int, timeout_s: float
) -> StreamResult:
    """One stream of ``count`` chunks of ``size`` bytes over ``n_sessions`` sessions."""
    with open_client(variant, timeout_s, n_sessions) as c:
        res = c.run_workload(stream_params(count, size, c.sessions))
    if res.lines != count + 1:
        raise BenchError(f"{variant}: expected {count + 1} lines, got {res.lines}")
    return res


def throughput(
    count: int, size: int, sizes: Sizes, variants: Sequence[str] = VARIANTS, n_sessions: int = 1
) -> dict[str, list[StreamResult]]:
    """Interleaved repeated runs of one stream; results per variant."""
    out: dict[str, list[StreamResult]] = {v: [] for v in variants}
    for _ in range(sizes.repeat):
        for v in variants:
            out[v].append(measure_stream(v, count, size, n_sessions, sizes.timeout_s))
    return out


def median_rate(results: list[StreamResult], count: int) -> float:
    """Median messages per second."""
    return statistics.median(count / r.elapsed_s for r in results)


def mixed(sizes: Sizes) -> dict[str, Any]:
    """The mixed turn workload, per variant: throughput and what the proxy removed."""
    sent = sum(len(_bench_peer.mixed_turn(t)) for t in range(sizes.mixed_turns))
    rates: dict[str, list[float]] = {v: [] for v in VARIANTS}
    delivered: dict[str, int] = {}
    for _ in range(sizes.repeat):
        for v in VARIANTS:
            with open_client(v, sizes.timeout_s) as c:
                r = c.run_workload({"kind": "mixed", "turns": sizes.mixed_turns})
            rates[v].append(sent / r.elapsed_s)
            delivered[v] = r.lines - 1
    return {
        "messages": sent,
        "msgs_per_s": {v: statistics.median(rates[v]) for v in VARIANTS},
        "delivered": delivered,
    }


def run_throughput(sizes: Sizes, log: Any = print) -> dict[str, Any]:
    """Only the throughput ratios (``python -m benchmarks throughput``).

    The ~1 KiB and ~200 B streams and the mixed turn through every variant,
    with the proxy's CPU per message and the load average at start and end.
    The keys are those of the full run's JSON line.
    """
    import os

    res: dict[str, Any] = {"load_avg_1m": {"start": round(os.getloadavg()[0], 2)}}
    for label, count, size in (("1k", sizes.n_1k, 1024), ("200b", sizes.n_200b, 200)):
        log(f"throughput: ~{size} B stream")
        runs = throughput(count, size, sizes)
        rate = {v: round(median_rate(runs[v], count)) for v in VARIANTS}
        res[f"throughput_{label}_msgs_per_s"] = rate
        res[f"throughput_ratio_{label}_vs_relay"] = round(rate["proxy"] / rate["relay"], 3)
        for v in ("relay", "proxy"):
            cpu = statistics.median(r.cpu_s for r in runs[v]) / count * 1e6
            res[f"cpu_us_per_msg_{label}_{v}"] = round(cpu, 2)
    log("mixed turn")
    res["mixed_turn"] = mixed(sizes)
    mt = res["mixed_turn"]["msgs_per_s"]
    res["mixed_turn"]["ratio_vs_relay"] = round(mt["proxy"] / mt["relay"], 3)
    res["load_avg_1m"]["end"] = round(os.getloadavg()[0], 2)
    return res
