"""Benchmark: the proxy's cost, measured against baselines in the same run.

``python -m benchmarks [--quick | --preset NAME] [--profile FILE]``

Every throughput workload is run, from one process of this module, three ways:

- **direct**: the bench (the reader, the client) talks to the benchmark agent
  (:mod:`benchmarks.peer`) over pipes, nothing in between;
- **relay**: a zero-inspection line relay (:func:`run_relay`, a minimal trio
  program in this module: reads chunks, splits lines, forwards them) runs as
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
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import math
import os
import select
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import attrs

from benchmarks import peer as _bench_peer

__all__ = ["PRESETS", "BenchError", "Sizes", "main", "run_bench", "run_relay"]

KIB = 1024
MIB = 1024 * 1024

#: Targets from the issue. Throughput ratio vs the relay, latency in ms, RSS in MiB.
TARGET_RATIO_VS_RELAY = 0.5
TARGET_P99_MS = 1.0
TARGET_RSS_MIB = 64.0


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


# ------------------------------------------------------------------ commands


#: The repository root. ``benchmarks`` is not installed with the package, so the
#: processes the bench starts (``-m benchmarks.peer``, ``-m benchmarks.bench
#: --relay``) find it through ``PYTHONPATH`` (see :func:`child_env`).
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def child_env() -> dict[str, str]:
    """This process's environment with :data:`ROOT` first on ``PYTHONPATH``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, env.get("PYTHONPATH", "")) if p)
    return env


def agent_cmd() -> list[str]:
    """The benchmark agent's argv."""
    return [sys.executable, "-m", "benchmarks.peer"]


def variant_cmd(variant: str, agent: Sequence[str], proxy_prefix: Sequence[str] = ()) -> list[str]:
    """The argv the client launches for ``variant`` in front of ``agent``.

    Args:
        variant: ``"direct"``, ``"relay"`` or ``"proxy"``.
        agent: the agent's argv.
        proxy_prefix: inserted before ``-m acp_proxy`` (e.g. a profiler).
    """
    if variant == "direct":
        return list(agent)
    if variant == "relay":
        return [sys.executable, "-m", "benchmarks.bench", "--relay", "--", *agent]
    if variant == "proxy":
        return [sys.executable, *proxy_prefix, "-m", "acp_proxy", "--", *agent]
    raise ValueError(f"unknown variant {variant!r}")


# ------------------------------------------------------------------- client


@attrs.frozen
class ProcStats:
    """One process's counters from ``/proc``.

    Attributes:
        peak_rss_kib: ``VmHWM``, KiB.
        rss_kib: ``VmRSS``, KiB.
        cpu_s: ``utime + stime``, seconds.
    """

    peak_rss_kib: int
    rss_kib: int
    cpu_s: float


def proc_stats(pid: int) -> ProcStats:
    """Reads ``pid``'s peak RSS, RSS and CPU time from ``/proc``.

    Raises:
        OSError: the process is gone.
    """
    fields: dict[str, int] = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmHWM", "VmRSS"):
                fields[key] = int(rest.split()[0])
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    after_comm = stat[stat.rindex(")") + 2 :].split()
    ticks = int(after_comm[11]) + int(after_comm[12])  # fields 14 and 15 of stat(5)
    return ProcStats(fields["VmHWM"], fields["VmRSS"], ticks / os.sysconf("SC_CLK_TCK"))


@attrs.frozen
class StreamResult:
    """One timed workload through one variant.

    Attributes:
        lines: lines received before ``bench/done`` (included).
        elapsed_s: first byte to ``bench/done``, seconds.
        stats: the middle process's counters at the end, or ``None`` (direct).
        cpu_s: the middle process's CPU seconds over the workload (0 for direct).
    """

    lines: int
    elapsed_s: float
    stats: ProcStats | None
    cpu_s: float


class Client:
    """A client at the top of a pipeline (``argv`` is what it launches).

    Blocking I/O on the child's pipes; every wait has a deadline.

    Args:
        argv: the command (the agent itself, the relay or the proxy).
        timeout_s: deadline of any single wait.
        stderr: where the child's stderr goes (a file), or ``None`` (inherit).
        middle: True when ``argv`` is a relay or proxy whose counters matter.
    """

    def __init__(
        self, argv: Sequence[str], timeout_s: float, stderr: Any = None, *, middle: bool
    ) -> None:
        self.proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            bufsize=0,
            env=child_env(),
        )
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self._wfd = self.proc.stdin.fileno()
        self._rfd = self.proc.stdout.fileno()
        self._buf = bytearray()
        self._next_id = 0
        self.timeout_s = timeout_s
        self.middle = middle
        self.sessions: list[str] = []

    # -- raw I/O

    def send(self, obj: Any) -> None:
        """Writes one JSON-RPC message."""
        data = memoryview(json.dumps(obj, separators=(",", ":")).encode() + b"\n")
        while data:
            n = os.write(self._wfd, data)
            data = data[n:]

    def _read(self, deadline: float) -> bytes:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([self._rfd], [], [], left)[0]:
            raise BenchError(f"timed out waiting for {self.proc.args!r}")
        chunk = os.read(self._rfd, MIB)
        if not chunk:
            raise BenchError(f"{self.proc.args!r} closed its output early")
        return chunk

    def read_message(self) -> Any:
        """Reads one whole line and decodes it."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            nl = self._buf.find(b"\n")
            if nl >= 0:
                line = bytes(self._buf[:nl])
                del self._buf[: nl + 1]
                return json.loads(line)
            self._buf += self._read(deadline)

    def request(self, method: str, params: Any) -> Any:
        """Sends a request and returns its ``result`` (other lines are skipped)."""
        rid = self._next_id
        self._next_id += 1
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        while True:
            msg = self.read_message()
            if isinstance(msg, dict) and msg.get("id") == rid:
                if "result" not in msg:
                    raise BenchError(f"{method} failed: {msg!r}")
                return msg["result"]

    def handshake(self, n_sessions: int = 1) -> list[str]:
        """``initialize`` then ``n_sessions`` x ``session/new``; returns the session ids."""
        self.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        for _ in range(n_sessions):
            result = self.request("session/new", {"cwd": "/tmp", "mcpServers": []})
            self.sessions.append(str(result["sessionId"]))
        return self.sessions

    # -- workloads

    def run_workload(self, params: dict[str, Any]) -> StreamResult:
        """Sends ``bench/go`` and reads until ``bench/done``.

        Returns:
            Lines counted, time from first byte to ``bench/done``, and the
            middle process's counters.
        """
        before = proc_stats(self.proc.pid) if self.middle else None
        self.send({"jsonrpc": "2.0", "method": "bench/go", "params": params})
        deadline = time.monotonic() + self.timeout_s
        marker = b'"bench/done"'
        tail = b""
        lines = 0
        first = self._read(deadline)
        t_first = time.perf_counter()
        chunk = first
        while True:
            lines += chunk.count(b"\n")
            if marker in chunk or marker in tail + chunk[: len(marker)]:
                t_done = time.perf_counter()
                break
            tail = chunk[-len(marker) :]
            chunk = self._read(deadline)
        stats = proc_stats(self.proc.pid) if self.middle else None
        cpu = stats.cpu_s - before.cpu_s if stats is not None and before is not None else 0.0
        return StreamResult(lines, t_done - t_first, stats, cpu)

    def round_trip(self) -> float:
        """One ``bench/echo`` request and its answer; returns the RTT in ms."""
        rid = self._next_id
        self._next_id += 1
        line = b'{"jsonrpc":"2.0","id":%d,"method":"bench/echo","params":{}}\n' % rid
        start = time.perf_counter()
        os.write(self._wfd, line)
        msg = self.read_message()
        rtt = (time.perf_counter() - start) * 1000.0
        if not isinstance(msg, dict) or msg.get("id") != rid:
            raise BenchError(f"unexpected answer to bench/echo {rid}: {msg!r}")
        return rtt

    def close(self) -> int:
        """Closes the child's stdin and waits for it (kills it after the deadline)."""
        with contextlib.suppress(OSError):
            os.close(self._wfd)
        assert self.proc.stdin is not None
        with contextlib.suppress(OSError):
            self.proc.stdin.close()
        # Drain whatever is still coming (held traffic released at the end).
        deadline = time.monotonic() + self.timeout_s
        with contextlib.suppress(BenchError, OSError):
            while True:
                self._read(deadline)
        try:
            return self.proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise BenchError(f"{self.proc.args!r} did not exit after its input closed") from None
        finally:
            assert self.proc.stdout is not None
            self.proc.stdout.close()


@contextlib.contextmanager
def open_client(
    variant: str, timeout_s: float, n_sessions: int = 1, proxy_prefix: Sequence[str] = ()
) -> Iterator[Client]:
    """A handshaken :class:`Client` for ``variant``; closed (and checked) on exit."""
    with tempfile.TemporaryFile() as err:
        client = Client(
            variant_cmd(variant, agent_cmd(), proxy_prefix),
            timeout_s,
            stderr=err,
            middle=variant != "direct",
        )
        try:
            client.handshake(n_sessions)
            yield client
        except BaseException:
            client.proc.kill()
            client.proc.wait()
            err.seek(0)
            text = err.read().decode("utf-8", "replace")[-2000:]
            if text:
                print(f"[{variant} stderr]\n{text}", file=sys.stderr)
            raise
        client.close()


# ---------------------------------------------------------------- workloads


def stream_params(count: int, size: int, sessions: list[str]) -> dict[str, Any]:
    """``bench/go`` params of a stream of ``count`` chunks of ``size`` bytes."""
    return {"kind": "stream", "count": count, "size": size, "sessions": sessions}


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


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (nearest rank) of ``values``."""
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, math.ceil(q / 100.0 * len(ordered)) - 1))
    return ordered[k]


def latency(sizes: Sizes) -> dict[str, list[float]]:
    """Round-trip times (ms) per variant, each pipeline paced at ``latency_rate_per_s``.

    The three pipelines are open at once; every tick sends one request
    through each of them, in rotating order, so a burst of load on the
    machine hits every variant alike.
    """
    period = 1.0 / sizes.latency_rate_per_s
    warm_up = min(200, sizes.latency_n)
    out: dict[str, list[float]] = {v: [] for v in VARIANTS}
    with contextlib.ExitStack() as stack:
        clients = [stack.enter_context(open_client(v, sizes.timeout_s)) for v in VARIANTS]
        t0 = time.perf_counter() + 0.01
        for i in range(warm_up + sizes.latency_n):
            due = t0 + i * period
            left = due - time.perf_counter()
            if left > 0.0005:
                time.sleep(left - 0.0003)
            while time.perf_counter() < due:
                pass
            for k in range(len(VARIANTS)):
                n = (i + k) % len(VARIANTS)
                rtt = clients[n].round_trip()
                if i >= warm_up:
                    out[VARIANTS[n]].append(rtt)
    return out


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


def ws_available() -> bool:
    """True when the WebSocket server (``acp_proxy.shell.topology.listen.run_listen``) exists."""
    try:
        import acp_proxy.shell.topology.listen as ws_app
    except ImportError:
        return False
    return hasattr(ws_app, "run_listen")


async def _ws_connection(
    url: str, count: int, ready: Any, go: Any, done: list[float], timeout_s: float
) -> None:
    import trio
    from trio_websocket import open_websocket_url

    def msg(rid: int | None, method: str, params: Any) -> str:
        m: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
        if rid is not None:
            m["id"] = rid
        return json.dumps(m)

    with trio.fail_after(timeout_s):
        async with open_websocket_url(url, max_message_size=64 * MIB) as ws:
            await ws.send_message(msg(0, "initialize", {"protocolVersion": 1}))
            await ws.get_message()
            await ws.send_message(msg(1, "session/new", {"cwd": "/tmp", "mcpServers": []}))
            sid = json.loads(await ws.get_message())["result"]["sessionId"]
            ready.release()
            await go.wait()
            await ws.send_message(msg(None, "bench/go", stream_params(count, 1024, [sid])))
            received = 0
            while True:
                text = await ws.get_message()
                received += 1
                if "bench/done" in text[:64]:
                    break
            done.append(time.perf_counter())
            if received != count + 1:
                raise BenchError(f"ws: expected {count + 1} messages, got {received}")


async def _ws_clients(url: str, n_conn: int, count: int, timeout_s: float) -> float:
    import trio

    ready = trio.Semaphore(n_conn)
    for _ in range(n_conn):
        await ready.acquire()
    go = trio.Event()
    done: list[float] = []
    async with trio.open_nursery() as nursery:
        for _ in range(n_conn):
            nursery.start_soon(_ws_connection, url, count, ready, go, done, timeout_s)
        with trio.fail_after(timeout_s):
            for _ in range(n_conn):
                await ready.acquire()
        t0 = time.perf_counter()
        go.set()
    return max(done) - t0


def ws_scaling(sizes: Sizes) -> dict[str, Any]:
    """Aggregate throughput and the server's peak RSS with N WebSocket connections.

    Runs ``python -m acp_proxy --listen ws://127.0.0.1:0/acp -- <agent>``
    (one agent per connection); the clients are trio-websocket connections
    in this process, so their cost is part of the figure.
    """
    import signal

    import trio

    out: dict[str, Any] = {}
    for n_conn in sizes.ws_connections:
        with tempfile.TemporaryFile() as err:
            server = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "acp_proxy",
                    "--listen",
                    "ws://127.0.0.1:0/acp",
                    "--max-connections",
                    str(max(sizes.ws_connections) + 1),
                    "--",
                    *agent_cmd(),
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                env=child_env(),
            )
            try:
                url = ""
                deadline = time.monotonic() + sizes.timeout_s
                while not url:
                    if time.monotonic() > deadline or server.poll() is not None:
                        raise BenchError("the WebSocket server did not start")
                    time.sleep(0.05)
                    err.seek(0)
                    for line in err.read().decode("utf-8", "replace").splitlines():
                        if "listening on " in line:
                            url = line.split("listening on ", 1)[1].split()[0]
                elapsed = trio.run(_ws_clients, url, n_conn, sizes.ws_n, sizes.timeout_s)
                stats = proc_stats(server.pid)
            finally:
                server.send_signal(signal.SIGTERM)
                try:
                    server.wait(timeout=sizes.timeout_s)
                except subprocess.TimeoutExpired:
                    server.kill()
                    server.wait()
        out[str(n_conn)] = {
            "msgs_per_s": round(n_conn * sizes.ws_n / elapsed),
            "peak_rss_mib": _mib(stats.peak_rss_kib),
        }
    return out


# ------------------------------------------------------------------ parsers


def parser_comparison(number: int) -> dict[str, dict[str, float]]:
    """Microseconds per decode of a ~1 KiB and a ~200 B chunk, per JSON parser.

    ``json`` / ``orjson`` / ``msgspec``: a generic decode to Python objects.
    ``msgspec_struct``: msgspec decoding only the fields the proxy decides on
    (unknown fields are skipped). ``dup_guard``: the duplicate-key pre-check
    :func:`acp_proxy.core.wire.guard.maybe_duplicated`. ``parse``: the proxy's
    whole :func:`acp_proxy.core.wire.jsonrpc.parse`.
    """
    import msgspec

    from acp_proxy.core.wire import guard, jsonrpc

    decoders: dict[str, Callable[[bytes], Any]] = {"json": json.loads}
    try:
        import orjson  # installed with the [test] extra; not a runtime dependency
    except ImportError:
        pass
    else:
        decoders["orjson"] = orjson.loads
    # Only the fields decisions need; the rest is skipped (still validated).
    upd = msgspec.defstruct("Update", [("sessionUpdate", Any, None)])
    params = msgspec.defstruct("Params", [("sessionId", Any, None), ("update", upd | None, None)])
    envelope = msgspec.defstruct(
        "Envelope",
        [
            ("jsonrpc", Any, None),
            ("id", Any, None),
            ("method", Any, None),
            ("params", params | None, None),
        ],
    )
    decoders["msgspec"] = msgspec.json.Decoder().decode
    decoders["msgspec_struct"] = msgspec.json.Decoder(envelope).decode
    decoders["dup_guard"] = guard.maybe_duplicated
    decoders["parse"] = jsonrpc.parse
    out: dict[str, dict[str, float]] = {}
    for label, size in (("1k", 1024), ("200b", 200)):
        line = _bench_peer.stream_line("s0", size, 7).rstrip(b"\n")
        out[label] = {}
        for name, fn in decoders.items():
            best = min(timeit.repeat(functools.partial(fn, line), number=number, repeat=5))
            out[label][name] = round(best / number * 1e6, 3)
    return out


# ------------------------------------------------------------- in process


def core_cost_us(size: int, count: int) -> float:
    """Microseconds per ~``size``-byte chunk through framer + core, in process (no I/O).

    The shell's share of the work (framing with ``feed_runs``,
    :meth:`ProxyCore.receive` of each framer item, grouping the sends,
    joining a write) without pipes or scheduling: the proxy's CPU floor per
    message, steadier than the end-to-end figures.
    """
    from acp_proxy.core.actions import Peer
    from acp_proxy.core.engine import ProxyCore
    from acp_proxy.core.wire.framing import LineFramer, Lines
    from acp_proxy.shell.routing import route_actions

    core = ProxyCore()
    hello = [
        (Peer.CLIENT, b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}'),
        (Peer.CLIENT, b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{}}'),
        (Peer.AGENT, b'{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}'),
        (Peer.AGENT, b'{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s0"}}'),
    ]
    for peer, raw in hello:
        core.receive(peer, raw, 0.0)
    data = b"".join(_bench_peer.stream_lines(count, size, ["s0"]))
    chunks = [data[i : i + 64 * KIB] for i in range(0, len(data), 64 * KIB)]
    framer = LineFramer(32 * MIB)
    written = 0
    start = time.perf_counter()
    for chunk in chunks:
        actions = []
        for item in framer.feed_runs(chunk):
            if type(item) is Lines:
                actions.extend(core.receive(Peer.AGENT, item, 0.0))
            elif type(item) is bytes:
                actions.extend(core.receive(Peer.AGENT, [item], 0.0))
            else:
                raise BenchError(f"core_cost: unexpected {item!r}")
        for frames in route_actions(actions, None).values():
            frames.append(b"")
            written += len(b"\n".join(frames))
    elapsed = time.perf_counter() - start
    if written < len(data):
        raise BenchError("core_cost: the core did not forward every chunk")
    return elapsed / count * 1e6


# -------------------------------------------------------------------- relay


async def _pump(rx: Any, tx: Any, close_tx: bool) -> None:
    import trio

    partial = b""
    try:
        while True:
            data = await rx.receive_some(256 * KIB)
            if not data:
                break
            data = partial + data
            cut = data.rfind(b"\n") + 1
            if not cut:
                partial = data
                continue
            lines = data[:cut].split(b"\n")
            lines.pop()
            partial = data[cut:]
            lines.append(b"")
            await tx.send_all(b"\n".join(lines))
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        pass
    if close_tx:
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            await tx.aclose()


async def _relay_main(argv: Sequence[str]) -> int:
    import trio

    proc = await trio.lowlevel.open_process(
        list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    stdin = trio.lowlevel.FdStream(os.dup(0))
    stdout = trio.lowlevel.FdStream(os.dup(1))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_pump, stdin, proc.stdin, True)
        await _pump(proc.stdout, stdout, False)
        nursery.cancel_scope.cancel()
    return await proc.wait()


def run_relay(argv: Sequence[str]) -> int:
    """The zero-inspection baseline: relays lines between stdio and ``argv``.

    Reads chunks, splits complete lines, forwards them; no parsing. Returns
    the agent's exit status.
    """
    import trio

    status: int = trio.run(_relay_main, argv)
    return status


# -------------------------------------------------------------------- run


def _mib(kib: int) -> float:
    return round(kib / 1024.0, 1)


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
    lat = latency(sizes)
    lat_pct = {
        v: {"p50": round(percentile(x, 50), 3), "p99": round(percentile(x, 99), 3)}
        for v, x in lat.items()
    }
    res["rtt_ms"] = lat_pct
    res["added_latency_ms"] = {
        q: round(max(0.0, lat_pct["proxy"][q] - lat_pct["direct"][q]), 3) for q in ("p50", "p99")
    }
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
        "stream": _mib(long_p.stats.peak_rss_kib),
        "flood": _mib(fl.stats.peak_rss_kib),
        "messages_1mib": _mib(rss_1mib_kib),
    }
    res["peak_rss_mib_relay"] = {"stream": _mib(long_r.stats.peak_rss_kib)}
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
            "peak_rss_mib": _mib(max(r.stats.peak_rss_kib for r in runs if r.stats is not None)),
        }
    res["scaling_sessions"] = scaling
    if ws_available():
        log(f"scaling: WebSocket connections {list(sizes.ws_connections)}")
        res["scaling_ws_connections"] = ws_scaling(sizes)
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

    res["targets"] = targets(res)
    res["load_avg_1m"] = {"start": load_start, "end": round(os.getloadavg()[0], 2)}
    res["cpus"] = os.cpu_count()
    res["bench_seconds"] = round(time.perf_counter() - started, 1)
    return res


def targets(res: dict[str, Any]) -> dict[str, bool]:
    """Pass/fail of every target of the issue."""
    rss = res["peak_rss_mib"]
    return {
        "throughput_1k_vs_relay>=0.5": res["throughput_ratio_1k_vs_relay"] >= TARGET_RATIO_VS_RELAY,
        "added_latency_p99<1ms": res["added_latency_ms"]["p99"] < TARGET_P99_MS,
        "peak_rss_stream<64MiB": rss["stream"] < TARGET_RSS_MIB,
        "peak_rss_flood<64MiB": rss["flood"] < TARGET_RSS_MIB,
        "peak_rss_1mib<68MiB": rss["messages_1mib"] < TARGET_RSS_MIB + 4.0,
    }


def format_table(res: dict[str, Any]) -> str:
    """The human-readable table."""
    rows: list[tuple[str, str, str, str, str, str]] = [
        ("figure", "direct", "relay", "proxy", "target", "result")
    ]

    def ok(flag: bool) -> str:
        return "PASS" if flag else "FAIL"

    tg = res["targets"]
    t1k = res["throughput_1k_msgs_per_s"]
    rows.append(
        (
            "1 KiB stream, msgs/s",
            f"{t1k['direct']:,}",
            f"{t1k['relay']:,}",
            f"{t1k['proxy']:,}",
            "",
            "",
        )
    )
    rows.append(
        (
            "  proxy / relay",
            "",
            "",
            f"{res['throughput_ratio_1k_vs_relay']:.2f}x",
            ">= 0.5x",
            ok(tg["throughput_1k_vs_relay>=0.5"]),
        )
    )
    rows.append(
        ("  proxy / direct", "", "", f"{res['throughput_ratio_1k_vs_direct']:.2f}x", "", "")
    )
    t200 = res["throughput_200b_msgs_per_s"]
    rows.append(
        (
            "200 B stream, msgs/s",
            f"{t200['direct']:,}",
            f"{t200['relay']:,}",
            f"{t200['proxy']:,}",
            "",
            f"{res['throughput_ratio_200b_vs_relay']:.2f}x relay",
        )
    )
    tm = res["throughput_1mib_msgs_per_s"]
    rows.append(
        (
            "1 MiB messages, msgs/s",
            f"{tm['direct']:,}",
            f"{tm['relay']:,}",
            f"{tm['proxy']:,}",
            "",
            f"{res['throughput_ratio_1mib_vs_relay']:.2f}x relay",
        )
    )
    mt = res["mixed_turn"]["msgs_per_s"]
    rows.append(
        (
            "mixed turn, msgs/s",
            f"{mt['direct']:,.0f}",
            f"{mt['relay']:,.0f}",
            f"{mt['proxy']:,.0f}",
            "",
            f"{res['mixed_turn']['ratio_vs_relay']:.2f}x relay",
        )
    )
    rtt = res["rtt_ms"]
    for q in ("p50", "p99"):
        rows.append(
            (
                f"round trip {q}, ms",
                f"{rtt['direct'][q]:.3f}",
                f"{rtt['relay'][q]:.3f}",
                f"{rtt['proxy'][q]:.3f}",
                "",
                "",
            )
        )
    added = res["added_latency_ms"]
    rows.append(("  added by proxy p50, ms", "", "", f"{added['p50']:.3f}", "", ""))
    rows.append(
        (
            "  added by proxy p99, ms",
            "",
            "",
            f"{added['p99']:.3f}",
            "< 1 ms",
            ok(tg["added_latency_p99<1ms"]),
        )
    )
    rows.append(
        (
            "CPU per message, us",
            "",
            f"{res['cpu_us_per_msg_relay']:.2f}",
            f"{res['cpu_us_per_msg']:.2f}",
            "",
            "",
        )
    )
    rss = res["peak_rss_mib"]
    rows.append(
        (
            "peak RSS long stream, MiB",
            "",
            f"{res['peak_rss_mib_relay']['stream']:.1f}",
            f"{rss['stream']:.1f}",
            "< 64",
            ok(tg["peak_rss_stream<64MiB"]),
        )
    )
    rows.append(
        (
            "peak RSS flood, MiB",
            "",
            "",
            f"{rss['flood']:.1f}",
            "< 64",
            ok(tg["peak_rss_flood<64MiB"]),
        )
    )
    rows.append(
        (
            "peak RSS 1 MiB msgs, MiB",
            "",
            "",
            f"{rss['messages_1mib']:.1f}",
            "< 68",
            ok(tg["peak_rss_1mib<68MiB"]),
        )
    )
    for k, v in res["scaling_sessions"].items():
        rows.append(
            (
                f"{k} sessions: msgs/s, MiB",
                "",
                "",
                f"{v['msgs_per_s']:,} / {v['peak_rss_mib']:.1f}",
                "",
                "",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(6)]
    lines = []
    for n, r in enumerate(rows):
        lines.append(
            "  ".join(
                (c.ljust(widths[i]) if i == 0 else c.rjust(widths[i])) for i, c in enumerate(r)
            ).rstrip()
        )
        if n == 0:
            lines.append("-" * len(lines[0]))
    pj = res["json_parse_us"]
    lines.append("")
    lines.append(
        "JSON decode of a ~1 KiB chunk, us: " + ", ".join(f"{k} {v:.2f}" for k, v in pj.items())
    )
    pj2 = res["json_parse_us_200b"]
    lines.append(
        "JSON decode of a ~200 B chunk, us:  " + ", ".join(f"{k} {v:.2f}" for k, v in pj2.items())
    )
    cc = res["core_us_per_msg"]
    lines.append(
        f"framer + core in process (no I/O), us/msg: 1 KiB {cc['1k']:.2f}, 200 B {cc['200b']:.2f}"
    )
    la = res["load_avg_1m"]
    lines.append(
        f"load average (1 min) at start / end: {la['start']} / {la['end']} on {res['cpus']} CPUs"
    )
    ws = res["scaling_ws_connections"]
    if isinstance(ws, dict):
        lines.append(
            "WebSocket connections (aggregate msgs/s, server peak RSS MiB): "
            + ", ".join(
                f"{k}: {v['msgs_per_s']:,} / {v['peak_rss_mib']:.1f}" for k, v in ws.items()
            )
        )
    else:
        lines.append(f"WebSocket connections: {ws}")
    return "\n".join(lines)


# ---------------------------------------------------------------- profile


def profile_proxy(
    count: int, out_path: str, timeout_s: float, top: int = 25
) -> tuple[str, list[str]]:
    """Runs the ~1 KiB stream through the proxy under cProfile.

    Args:
        count: messages in the stream.
        out_path: where ``cProfile`` writes its stats.
        timeout_s: deadline of any wait.
        top: entries shown (by own time).

    Returns:
        The ``pstats`` listing, and the top 10 entries as
        ``"file:line(function) own_s/cumulative_s"`` strings.
    """
    import io
    import pstats

    prefix = ["-m", "cProfile", "-o", out_path]
    with open_client("proxy", timeout_s, 1, proxy_prefix=prefix) as c:
        c.run_workload(stream_params(count, 1024, c.sessions))
    buf = io.StringIO()
    st = pstats.Stats(out_path, stream=buf)
    st.sort_stats("tottime").print_stats(top)
    raw_stats: dict[tuple[str, int, str], tuple[int, int, float, float, Any]]
    raw_stats = st.stats  # type: ignore[attr-defined]
    ranked = sorted(raw_stats.items(), key=lambda kv: kv[1][2], reverse=True)[:10]
    brief = [
        f"{os.path.basename(f)}:{line}({fn}) {tt:.3f}/{ct:.3f}"
        for (f, line, fn), (_cc, _nc, tt, ct, _callers) in ranked
    ]
    return buf.getvalue(), brief


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m benchmarks``; returns the exit status."""
    args_in = list(sys.argv[1:] if argv is None else argv)
    if args_in and args_in[0] == "--relay":
        rest = args_in[1:]
        if rest and rest[0] == "--":
            rest = rest[1:]
        return run_relay(rest)
    p = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="The proxy's cost against a direct pipe and a zero-inspection relay.",
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

    profile_top: list[str] | None = None
    if args.profile:
        log("profile: proxy under cProfile on the ~1 KiB stream")
        listing, profile_top = profile_proxy(sizes.n_1k, args.profile, sizes.timeout_s)
        print(listing)
    res = run_bench(sizes, log)
    res["preset"] = preset
    if profile_top is not None:
        res["profile_top_own_s"] = profile_top
    print(format_table(res))
    print(json.dumps(res, separators=(", ", ": ")), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
