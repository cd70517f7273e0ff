"""WebSocket scaling: N connections to ``python -m acp_proxy --listen``, from this process."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from typing import Any

from benchmarks.client import agent_cmd, child_env, proc_stats, stream_params
from benchmarks.sizes import MIB, BenchError, Sizes, mib

__all__ = ["ws_available", "ws_scaling"]


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
                    "--no-token",  # a loopback benchmark: no generated token to read
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
            "peak_rss_mib": mib(stats.peak_rss_kib),
        }
    return out
