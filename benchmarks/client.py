"""The client at the top of a pipeline: the processes it starts, what it sends, what it measures.

:func:`variant_cmd` builds the pipeline (direct, relay or proxy in front of
the benchmark agent), :class:`Client` drives it over pipes with a deadline on
every wait, and :func:`proc_stats` reads the middle process's counters from
``/proc``.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from typing import Any

import attrs

from benchmarks.sizes import MIB, BenchError

__all__ = [
    "ROOT",
    "Client",
    "ProcStats",
    "StreamResult",
    "agent_cmd",
    "child_env",
    "open_client",
    "proc_stats",
    "stream_params",
    "variant_cmd",
]

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
        variant: ``"direct"``, ``"relay"``, ``"proxy"``, ``"observed"`` (the proxy
            with ``--trace`` to a temporary file and ``--metrics`` on a free port) or
            ``"otel"`` (the proxy with ``--otel``; the ``OTEL_*`` environment says where).
        agent: the agent's argv.
        proxy_prefix: inserted before ``-m acp_proxy`` (e.g. a profiler).
    """
    if variant == "direct":
        return list(agent)
    if variant == "relay":
        return [sys.executable, "-m", "benchmarks.bench", "--relay", "--", *agent]
    if variant == "proxy":
        # BENCH_PROXY_CONFIG: a config file for the proxy (e.g. budgets on, issue 28)
        config = os.environ.get("BENCH_PROXY_CONFIG")
        options = ["--config", config] if config else []
        return [sys.executable, *proxy_prefix, "-m", "acp_proxy", *options, "--", *agent]
    if variant == "observed":
        trace = os.path.join(tempfile.gettempdir(), f"acp-proxy-bench-{os.getpid()}.trace.jsonl")
        return [
            sys.executable, *proxy_prefix, "-m", "acp_proxy",
            "--trace", trace, "--metrics", "127.0.0.1:0", "--", *agent,
        ]  # fmt: skip
    if variant == "otel":
        return [sys.executable, *proxy_prefix, "-m", "acp_proxy", "--otel", "--", *agent]
    raise ValueError(f"unknown variant {variant!r}")


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


def stream_params(count: int, size: int, sessions: list[str]) -> dict[str, Any]:
    """``bench/go`` params of a stream of ``count`` chunks of ``size`` bytes."""
    return {"kind": "stream", "count": count, "size": size, "sessions": sessions}
