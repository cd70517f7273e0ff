"""Benchmark: the proxy's cost, measured against baselines in the same run.

``python -m benchmarks [throughput] [--quick | --preset NAME] [--profile FILE]``
(``python -m benchmarks startup [RUNS]``: the start-up figures only; ``throughput``:
the stream and mixed-turn ratios only)

Every throughput workload is run, from one process of this module, three ways:

- **direct**: the bench (the reader, the client) talks to the benchmark agent
  (:mod:`benchmarks.peer`) over pipes, nothing in between;
- **relay**: a zero-inspection line relay (:func:`~benchmarks.relay.run_relay`,
  a minimal trio program: reads chunks, splits lines, forwards them) runs as
  a subprocess between them, exactly like the proxy;
- **proxy**: ``python -m acp_proxy -- <agent>``.

The agent answers ``initialize`` and ``session/new`` (the sessions are then
known to the proxy, so nothing is held), then on ``bench/go`` writes N
pre-built lines as fast as it can and a final ``bench/done``. The reader
counts newlines only and times first byte to ``bench/done``. Runs of the
three variants are interleaved and repeated; the median counts.

Latency: ``bench/echo`` request/response round trips paced at 1,000 per
second through each pipeline, the three taking turns every tick; the added
latency is the proxy's round-trip percentile minus the direct one (two hops:
the request and the response both cross it). On a loaded machine the p99 of
every pipeline is the scheduler's, and their difference is noisy.

Memory is the middle process's peak RSS (``VmHWM`` of ``/proc/PID/status``,
read just before it is stopped); CPU is its ``utime + stime`` over the
workload (``/proc/PID/stat``, clock ticks of 10 ms) divided by the messages.
Also measured: a flood of traffic for never-announced sessions (held at the
default ``[hold]`` limits), a mixed turn with two children, 1/10/100
sessions on one connection, 1/10/50 WebSocket connections (``--listen``),
the framer + core cost in process, and JSON decoders side by side.

Output: a table (figures, targets, pass/fail), then as the LAST line one
JSON object with every figure. ``--quick`` runs smaller versions of every
workload (same keys) in well under a minute.

This module runs the workloads and prints the result; they live by concern in
:mod:`benchmarks.sizes` (presets), :mod:`benchmarks.client` (the pipelines),
:mod:`benchmarks.throughput`, :mod:`benchmarks.latency`,
:mod:`benchmarks.memory`, :mod:`benchmarks.websocket`,
:mod:`benchmarks.core_cost` (in process), :mod:`benchmarks.relay` (the
baseline), :mod:`benchmarks.report` (targets and table) and
:mod:`benchmarks.profiling`. Their public names are re-exported here
(``bench.core_cost_us``, ``bench.variant_cmd``, ...).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from benchmarks.audit_cost import audit_cost_us
from benchmarks.batches import batch_rss
from benchmarks.client import (
    ROOT,
    Client,
    ProcStats,
    StreamResult,
    agent_cmd,
    child_env,
    open_client,
    proc_stats,
    stream_params,
    variant_cmd,
)
from benchmarks.core_cost import core_cost_us, parser_comparison
from benchmarks.latency import latency, percentile
from benchmarks.memory import flood, relay_stats
from benchmarks.profiling import profile_proxy
from benchmarks.relay import run_relay
from benchmarks.report import (
    TARGET_P99_MS,
    TARGET_RATIO_VS_RELAY,
    TARGET_RSS_MIB,
    format_table,
    targets,
)
from benchmarks.sandbox_startup import sandbox_startup
from benchmarks.sizes import KIB, MIB, PRESETS, VARIANTS, BenchError, Sizes, mib
from benchmarks.startup import main as startup_main
from benchmarks.startup import startup_added
from benchmarks.throughput import measure_stream, median_rate, mixed, run_throughput, throughput
from benchmarks.websocket import per_connection_kib, ws_available, ws_scaling
from benchmarks.ws_isolation import ws_isolation
from benchmarks.ws_memprobe import ws_batch_rss

__all__ = [
    "KIB",
    "MIB",
    "PRESETS",
    "ROOT",
    "TARGET_P99_MS",
    "TARGET_RATIO_VS_RELAY",
    "TARGET_RSS_MIB",
    "VARIANTS",
    "BenchError",
    "Client",
    "ProcStats",
    "Sizes",
    "StreamResult",
    "agent_cmd",
    "child_env",
    "core_cost_us",
    "flood",
    "format_table",
    "latency",
    "main",
    "measure_stream",
    "median_rate",
    "mib",
    "mixed",
    "open_client",
    "parser_comparison",
    "percentile",
    "proc_stats",
    "profile_proxy",
    "relay_stats",
    "run_bench",
    "run_relay",
    "stream_params",
    "targets",
    "throughput",
    "variant_cmd",
    "ws_available",
    "ws_scaling",
]


def run_bench(sizes: Sizes, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Runs every workload at ``sizes``; returns the figures (the JSON line).

    Args:
        sizes: the preset.
        log: progress messages.
    """
    res: dict[str, Any] = {}
    started = time.perf_counter()
    load_start = round(os.getloadavg()[0], 2)

    log("throughput: ~1 KiB agent_message_chunk stream")
    t1k = throughput(sizes.n_1k, 1024, sizes)
    rate_1k = {v: round(median_rate(t1k[v], sizes.n_1k)) for v in VARIANTS}
    res["throughput_1k_msgs_per_s"] = rate_1k
    res["throughput_ratio_1k_vs_relay"] = round(rate_1k["proxy"] / rate_1k["relay"], 3)
    res["throughput_ratio_1k_vs_direct"] = round(rate_1k["proxy"] / rate_1k["direct"], 3)
    cpu_proxy = statistics.median(r.cpu_s for r in t1k["proxy"])
    cpu_relay = statistics.median(r.cpu_s for r in t1k["relay"])
    res["cpu_us_per_msg"] = round(cpu_proxy / sizes.n_1k * 1e6, 2)
    res["cpu_us_per_msg_relay"] = round(cpu_relay / sizes.n_1k * 1e6, 2)

    log("throughput: ~200 B stream")
    t200 = throughput(sizes.n_200b, 200, sizes)
    rate_200 = {v: round(median_rate(t200[v], sizes.n_200b)) for v in VARIANTS}
    res["throughput_200b_msgs_per_s"] = rate_200
    res["throughput_ratio_200b_vs_relay"] = round(rate_200["proxy"] / rate_200["relay"], 3)
    res["cpu_us_per_msg_200b"] = round(
        statistics.median(r.cpu_s for r in t200["proxy"]) / sizes.n_200b * 1e6, 2
    )

    log("throughput: 1 MiB messages")
    tm = throughput(sizes.n_1mib, MIB, sizes)
    rate_m = {v: round(median_rate(tm[v], sizes.n_1mib), 1) for v in VARIANTS}
    res["throughput_1mib_msgs_per_s"] = rate_m
    res["throughput_ratio_1mib_vs_relay"] = round(rate_m["proxy"] / rate_m["relay"], 3)
    rss_1mib_kib = max(r.stats.peak_rss_kib for r in tm["proxy"] if r.stats is not None)

    log(f"latency: request/response at {sizes.latency_rate_per_s:g} msg/s")
    exports: dict[str, int] = {}
    lat = latency(sizes, exports)
    lat_pct = {
        v: {"p50": round(percentile(x, 50), 3), "p99": round(percentile(x, 99), 3)}
        for v, x in lat.items()
    }
    res["rtt_ms"] = lat_pct
    res["added_latency_ms"] = {
        q: round(max(0.0, lat_pct["proxy"][q] - lat_pct["direct"][q]), 3) for q in ("p50", "p99")
    }
    res["added_latency_ms_observed"] = {
        q: round(max(0.0, lat_pct["observed"][q] - lat_pct["direct"][q]), 3) for q in ("p50", "p99")
    }
    if "otel" in lat_pct:
        res["added_latency_ms_otel"] = {
            q: round(max(0.0, lat_pct["otel"][q] - lat_pct["direct"][q]), 3) for q in ("p50", "p99")
        }
        res["otel_export_posts"] = exports
    res["added_latency_ms_relay"] = {
        q: round(max(0.0, lat_pct["relay"][q] - lat_pct["direct"][q]), 3) for q in ("p50", "p99")
    }

    log(f"memory: long stream of {sizes.long_n} ~1 KiB messages")
    long_p = relay_stats("proxy", sizes.long_n, 1024, sizes)
    long_r = relay_stats("relay", sizes.long_n, 1024, sizes)
    assert long_p.stats is not None
    assert long_r.stats is not None

    log(f"memory: flood of {sizes.flood_n} messages for never-announced sessions")
    fl, fl_elapsed = flood(sizes)
    assert fl.stats is not None

    res["peak_rss_mib"] = {
        "stream": mib(long_p.stats.peak_rss_kib),
        "flood": mib(fl.stats.peak_rss_kib),
        "messages_1mib": mib(rss_1mib_kib),
    }
    res["peak_rss_mib_relay"] = {"stream": mib(long_r.stats.peak_rss_kib)}
    res["long_stream_messages"] = sizes.long_n
    res["flood"] = {
        "messages": sizes.flood_n,
        "bytes_each": sizes.flood_size,
        "delivered_before_done": fl.lines - 1,
        "msgs_per_s": round(sizes.flood_n / fl_elapsed),
    }

    log("mixed turn: two children, announcements, child traffic, duplicate state reports")
    res["mixed_turn"] = mixed(sizes)
    mt = res["mixed_turn"]["msgs_per_s"]
    res["mixed_turn"]["ratio_vs_relay"] = round(mt["proxy"] / mt["relay"], 3)

    log(f"scaling: sessions {list(sizes.scaling_sessions)} on one connection")
    scaling: dict[str, Any] = {}
    for k in sizes.scaling_sessions:
        runs = [
            measure_stream("proxy", sizes.scaling_n, 1024, k, sizes.timeout_s)
            for _ in range(sizes.repeat)
        ]
        scaling[str(k)] = {
            "msgs_per_s": round(median_rate(runs, sizes.scaling_n)),
            "peak_rss_mib": mib(max(r.stats.peak_rss_kib for r in runs if r.stats is not None)),
        }
    res["scaling_sessions"] = scaling
    if ws_available():
        log(f"scaling: WebSocket connections {list(sizes.ws_connections)}")
        res["scaling_ws_connections"] = ws_scaling(sizes)
        res["ws_per_connection_kib"] = per_connection_kib(res["scaling_ws_connections"])
        log("isolation: another connection's round trips while a hostile message is handled")
        res["ws_isolation"] = ws_isolation((32 if sizes.repeat >= 3 else 4) * MIB - 64)
    else:
        res["scaling_ws_connections"] = (
            "not measured: acp_proxy.shell.topology.listen (--listen ws://...) does not exist yet"
        )

    log("in process: framer + core per message, no I/O")
    res["core_us_per_msg"] = {
        label: round(min(core_cost_us(size, sizes.parse_number) for _ in range(3)), 2)
        for label, size in (("1k", 1024), ("200b", 200))
    }

    log("parsers: decode of one ~1 KiB / ~200 B chunk")
    pc = parser_comparison(sizes.parse_number)
    res["json_parse_us"] = pc["1k"]
    res["json_parse_us_200b"] = pc["200b"]

    log("audit log: cost per audited record, chained vs plain")
    res["audit_us_per_record"] = audit_cost_us(max(1000, sizes.parse_number // 4))
    log("start-up: time to the initialize response, plain and sandboxed (srt)")
    res["sandbox_startup"] = sandbox_startup(5 if sizes.repeat >= 3 else 3, sizes.timeout_s)

    log("start-up added: launch to the initialize answer, direct and through the proxy")
    res["startup"] = startup_added(9 if sizes.repeat >= 3 else 3, sizes.timeout_s)

    log("memory: one agent batch of 300,000 {} and one client batch of 200,000")
    res["batch_rss"] = batch_rss(1.0 if sizes.repeat >= 3 else 0.1)
    log("memory: the same batches over WebSocket (--listen)")
    ws_batches = ws_batch_rss(1.0 if sizes.repeat >= 3 else 0.1)
    res["batch_rss"].update({f"{d}_ws": fig for d, fig in ws_batches.items()})

    res["targets"] = targets(res)
    res["load_avg_1m"] = {"start": load_start, "end": round(os.getloadavg()[0], 2)}
    res["cpus"] = os.cpu_count()
    res["bench_seconds"] = round(time.perf_counter() - started, 1)
    return res


def _run_path() -> str:
    """The proxy's run path (compiled or pure Python, and why): the proxy under test
    runs with this environment, so it takes the same (``runs.RUN_PATH``)."""
    from acp_proxy.core.wire.runs import RUN_PATH

    return RUN_PATH


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m benchmarks``; returns the exit status."""
    args_in = list(sys.argv[1:] if argv is None else argv)
    if args_in and args_in[0] == "--relay":
        rest = args_in[1:]
        if rest and rest[0] == "--":
            rest = rest[1:]
        return run_relay(rest)
    if args_in and args_in[0] == "startup":  # only the start-up figures (issue 29)
        return startup_main(args_in[1:])
    p = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="The proxy's cost against a direct pipe and a zero-inspection relay.",
    )
    p.add_argument(
        "part",
        nargs="?",
        choices=["all", "throughput"],
        default="all",
        help="'throughput': only the stream and mixed-turn ratios (default: all); "
        "'startup [RUNS]': only the start-up figures",
    )
    p.add_argument("--quick", action="store_true", help="smaller workloads (< 60 s)")
    p.add_argument("--preset", choices=sorted(PRESETS), help="workload sizes (default: default)")
    p.add_argument(
        "--profile",
        metavar="FILE",
        help="also profile the proxy (cProfile) on the ~1 KiB stream; stats to FILE",
    )
    args = p.parse_args(args_in)
    preset = args.preset or ("quick" if args.quick else "default")
    sizes = PRESETS[preset]

    def log(msg: str) -> None:
        print(f"# {msg}", file=sys.stderr, flush=True)

    if args.part == "throughput":
        res = run_throughput(sizes, log)
        res["preset"] = preset
        res["run_path"] = _run_path()
        print(json.dumps(res, separators=(", ", ": ")), flush=True)
        return 0
    profile_top: list[str] | None = None
    if args.profile:
        log("profile: proxy under cProfile on the ~1 KiB stream")
        listing, profile_top = profile_proxy(sizes.n_1k, args.profile, sizes.timeout_s)
        print(listing)
    res = run_bench(sizes, log)
    res["preset"] = preset
    res["run_path"] = _run_path()
    if profile_top is not None:
        res["profile_top_own_s"] = profile_top
    print(format_table(res))
    print(json.dumps(res, separators=(", ", ": ")), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
