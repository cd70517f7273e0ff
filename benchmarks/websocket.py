"""WebSocket scaling: N connections to ``python -m acp_proxy --listen``, from this process."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from benchmarks.client import ProcStats, agent_cmd, child_env, proc_stats, stream_params
from benchmarks.sizes import MIB, BenchError, Sizes, mib

__all__ = ["listen_server", "per_connection_kib", "ws_available", "ws_run", "ws_scaling"]


@contextmanager
def listen_server(
    agent: list[str], timeout_s: float, max_connections: int = 16
) -> Iterator[tuple[int, str]]:
    """``python -m acp_proxy --listen ws://127.0.0.1:0/acp --no-token -- AGENT``, started:
    ``(its pid, the URL it listens on)``; SIGTERM (then SIGKILL) on exit.

    Raises:
        BenchError: it exited or printed no URL within ``timeout_s``.
    """
    import signal

    argv = [sys.executable, "-m", "acp_proxy", "--listen", "ws://127.0.0.1:0/acp",
            "--no-token",  # a loopback benchmark: no generated token to read
            "--max-connections", str(max_connections), "--", *agent]  # fmt: skip
    with tempfile.TemporaryFile() as err:
        server = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, env=child_env()
        )
        try:
            url = ""
            deadline = time.monotonic() + timeout_s
            while not url:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise BenchError("the WebSocket server did not start")
                time.sleep(0.05)
                err.seek(0)
                for line in err.read().decode("utf-8", "replace").splitlines():
                    if "listening on " in line:
                        url = line.split("listening on ", 1)[1].split()[0]
            yield server.pid, url
        finally:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()


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


async def _ws_clients(
    url: str, n_conn: int, count: int, timeout_s: float, pid: int, idle: list[ProcStats]
) -> float:
    """Opens ``n_conn`` connections; once all are idle (a session each) appends the
    server's ``/proc`` figures to ``idle``, then starts every stream; seconds to the last end."""
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
        idle.append(proc_stats(pid))
        t0 = time.perf_counter()
        go.set()
    return max(done) - t0


def ws_scaling(sizes: Sizes) -> dict[str, Any]:
    """Aggregate throughput and the server's RSS with N WebSocket connections.

    For each N of ``sizes.ws_connections``: :func:`ws_run` with
    ``sizes.ws_n`` messages per connection, ``{"msgs_per_s", "peak_rss_mib",
    "idle_rss_mib"}``, keyed by ``str(N)``.
    """
    return {
        str(n): ws_run(n, sizes.ws_n, sizes.timeout_s, max(sizes.ws_connections))
        for n in sizes.ws_connections
    }


def per_connection_kib(scaling: dict[str, Any], key: str = "peak_rss_mib") -> float | None:
    """KiB per connection: the slope of ``key`` between the two largest N of
    :func:`ws_scaling`'s result (``None`` with fewer than two N)."""
    ns = sorted(int(k) for k in scaling)
    if len(ns) < 2:
        return None
    a, b = ns[-2:]
    rise = float(scaling[str(b)][key]) - float(scaling[str(a)][key])
    return round(rise * 1024 / (b - a), 1)


def ws_run(
    n_conn: int, count: int, timeout_s: float = 120.0, max_connections: int = 0
) -> dict[str, Any]:
    """One server, ``n_conn`` connections idle (a session each), then busy.

    Runs ``python -m acp_proxy --listen ws://127.0.0.1:0/acp -- <agent>``
    (one agent per connection: their processes are not counted); the clients
    are trio-websocket connections in this process (one reader task each), so
    they read slower than the agents write and every connection's queue toward
    its client fills. Each agent streams ``count`` ~1 KiB notifications.

    Returns:
        ``{"msgs_per_s": aggregate, "idle_rss_mib": the server's VmRSS once every
        connection is open and idle, "peak_rss_mib": its VmHWM after the streams}``.
    """
    import trio

    with listen_server(agent_cmd(), timeout_s, max(n_conn, max_connections) + 1) as (pid, url):
        idle: list[ProcStats] = []
        elapsed = trio.run(_ws_clients, url, n_conn, count, timeout_s, pid, idle)
        stats = proc_stats(pid)
    return {
        "msgs_per_s": round(n_conn * count / elapsed),
        "peak_rss_mib": mib(stats.peak_rss_kib),
        "idle_rss_mib": mib(idle[0].rss_kib),
    }
