"""Workload sizes (the presets), the pipeline variants and the error the modules share."""

from __future__ import annotations

import attrs

__all__ = ["KIB", "LATENCY_VARIANTS", "MIB", "PRESETS", "VARIANTS", "BenchError", "Sizes", "mib"]

KIB = 1024
MIB = 1024 * 1024


class BenchError(RuntimeError):
    """A benchmark process misbehaved (timeout, early exit, bad answer)."""


@attrs.frozen
class Sizes:
    """How big each workload is.

    Attributes:
        repeat: runs per variant for throughput figures (median reported).
        n_1k: messages of the ~1 KiB stream.
        n_200b: messages of the ~200 B stream.
        n_1mib: messages of the 1 MiB stream.
        latency_n: request/response round trips at ``latency_rate_per_s``.
        latency_rate_per_s: pace of the round trips.
        long_n: ~1 KiB messages of the long stream (peak RSS); 600,000 is ten
            minutes of a chatty agent at 1,000 messages per second.
        flood_n: messages of the flood (never-announced sessions).
        flood_size: bytes per flood message.
        flood_block: consecutive flood messages per ghost session.
        mixed_turns: turns of the mixed workload.
        scaling_n: ~1 KiB messages per scaling run.
        scaling_sessions: session counts for the scaling runs.
        ws_connections: WebSocket connection counts (if the WebSocket server exists).
        ws_n: messages per WebSocket connection.
        parse_number: calls per parser measurement.
        timeout_s: longest any single run may take.
    """

    repeat: int
    n_1k: int
    n_200b: int
    n_1mib: int
    latency_n: int
    latency_rate_per_s: float
    long_n: int
    flood_n: int
    flood_size: int
    flood_block: int
    mixed_turns: int
    scaling_n: int
    scaling_sessions: tuple[int, ...]
    ws_connections: tuple[int, ...]
    ws_n: int
    parse_number: int
    timeout_s: float = 120.0


PRESETS: dict[str, Sizes] = {
    "default": Sizes(
        repeat=3,
        n_1k=300_000,
        n_200b=500_000,
        n_1mib=300,
        latency_n=10_000,
        latency_rate_per_s=1000.0,
        long_n=600_000,
        flood_n=60_000,
        flood_size=2 * KIB,
        flood_block=500,
        mixed_turns=600,
        scaling_n=150_000,
        scaling_sessions=(1, 10, 100),
        ws_connections=(1, 10, 50),
        ws_n=5_000,
        parse_number=20_000,
    ),
    "quick": Sizes(
        repeat=1,
        n_1k=50_000,
        n_200b=80_000,
        n_1mib=60,
        latency_n=2_000,
        latency_rate_per_s=1000.0,
        long_n=100_000,
        flood_n=20_000,
        flood_size=2 * KIB,
        flood_block=500,
        mixed_turns=150,
        scaling_n=30_000,
        scaling_sessions=(1, 10, 100),
        ws_connections=(1, 10, 50),
        ws_n=1_000,
        parse_number=5_000,
        timeout_s=60.0,
    ),
    "smoke": Sizes(
        repeat=1,
        n_1k=300,
        n_200b=300,
        n_1mib=3,
        latency_n=50,
        latency_rate_per_s=1000.0,
        long_n=300,
        flood_n=300,
        flood_size=2 * KIB,
        flood_block=100,
        mixed_turns=2,
        scaling_n=300,
        scaling_sessions=(1, 10),
        ws_connections=(1, 2),
        ws_n=100,
        parse_number=200,
        timeout_s=60.0,
    ),
}


VARIANTS = ("direct", "relay", "proxy")
#: the latency runs also measure the proxy with its trace and metrics on, and with
#: OpenTelemetry exporting to a local collector (when the otel extra is installed)
LATENCY_VARIANTS = (*VARIANTS, "observed", "otel")


def mib(kib: int) -> float:
    """KiB to MiB, rounded to 0.1 (how every memory figure is reported)."""
    return round(kib / 1024.0, 1)
