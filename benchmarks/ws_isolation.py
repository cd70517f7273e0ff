"""Another connection's round trips while ``--listen`` handles a hostile 32 MiB message.

The figure ``tests/shell/test_ws_isolation.py`` used to assert against a wall
clock (worst < 2 s; the test now asserts the order of events instead). One
``python -m acp_proxy --listen ... -- python -m benchmarks.peer``; connection A
sends one request of about 32 MiB whose params are ``["\\u0041",{},{},...]``
(about 10 million JSON values, the shape that once froze every connection
for 6.6 s); connection B does ``bench/echo`` round trips before (200) and
while A's message is sent and handled, until A's answer arrives. A is a
separate process (:data:`_ATTACKER`): masking and framing 32 MiB in the
measuring process would stall B's own loop, not the proxy.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from typing import Any

from benchmarks.client import agent_cmd, child_env
from benchmarks.sizes import MIB, BenchError
from benchmarks.websocket import listen_server

__all__ = ["hostile_request", "ws_isolation"]

# argv: URL, SIZE. Sends the hostile request on one connection; prints "answered" after its answer.
_ATTACKER = r"""
import sys, trio
from trio_websocket import open_websocket_url
from benchmarks.ws_isolation import hostile_request

async def main():
    text = hostile_request(int(sys.argv[2]))
    async with open_websocket_url(sys.argv[1], max_message_size=64 << 20) as ws:
        print("connected", flush=True)
        await ws.send_message(text)
        await ws.get_message()
        print("answered", flush=True)

trio.run(main)
"""


def hostile_request(size_bytes: int) -> str:
    """A request of about ``size_bytes`` whose params are ``["\\u0041",{},{},...]``."""
    head = '{"jsonrpc":"2.0","id":7,"method":"_x","params":["\\u0041",'
    return head + ",".join(["{}"] * ((size_bytes - len(head) - 2) // 3)) + "]}"


async def _round_trip(ws: Any, rid: int) -> float:
    start = time.perf_counter()
    await ws.send_message(json.dumps({"jsonrpc": "2.0", "id": rid, "method": "bench/echo"}))
    await ws.get_message()
    return (time.perf_counter() - start) * 1000.0


async def _measure(url: str, size_bytes: int, timeout_s: float) -> dict[str, Any]:
    import trio
    from trio_websocket import open_websocket_url

    with trio.fail_after(timeout_s):
        async with open_websocket_url(url, max_message_size=64 * MIB) as other:
            await other.send_message('{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}')
            await other.get_message()
            before = [await _round_trip(other, i) for i in range(1, 201)]
            argv = [sys.executable, "-c", _ATTACKER, url, str(size_bytes)]
            during: list[float] = []
            attacker = await trio.lowlevel.open_process(
                argv, stdout=subprocess.PIPE, env=child_env()
            )
            try:
                stdout = attacker.stdout
                assert stdout is not None
                out = b""
                while b"connected" not in out:
                    chunk = await stdout.receive_some()
                    if not chunk:
                        raise BenchError("ws_isolation: the attacker did not connect")
                    out += chunk
                answered = trio.Event()

                async def wait_answer() -> None:
                    while chunk := await stdout.receive_some():
                        if b"answered" in chunk:
                            answered.set()
                            return
                    raise BenchError("ws_isolation: the attacker ended without an answer")

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(wait_answer)
                    while not answered.is_set():
                        during.append(await _round_trip(other, 1000 + len(during)))
            finally:
                attacker.kill()
                await attacker.wait()
    return {
        "message_bytes": size_bytes,
        "before_p50_ms": round(statistics.median(before), 3),
        "during_p50_ms": round(statistics.median(during), 3),
        "during_worst_ms": round(max(during), 1),
        "round_trips_during": len(during),
    }


def ws_isolation(size_bytes: int = 32 * MIB - 64, timeout_s: float = 120.0) -> dict[str, Any]:
    """``{"message_bytes", "before_p50_ms", "during_p50_ms", "during_worst_ms",
    "round_trips_during"}``: connection B's round trips (ms) before and while
    connection A's hostile message of ``size_bytes`` is sent and handled."""
    import trio

    with listen_server(agent_cmd(), timeout_s) as (_pid, url):
        result: dict[str, Any] = trio.run(_measure, url, size_bytes, timeout_s)
    return result
