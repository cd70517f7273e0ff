"""``--listen``: one connection's hostile message does not stall the others (issue 14)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

import pytest
import trio
from support.wskit import AGENT_CMD, REPO, AcpClient, connect, listening, make_config

from acp_proxy.shell.relay import THREAD_THRESHOLD_BYTES

#: the other connection's worst round trip allowed while the hostile message is handled, s
WORST_ROUND_TRIP_SECONDS = 2.0
MIB = 1024 * 1024


def hostile_request(size_bytes: int) -> str:
    """A request of ``size_bytes`` whose params are ``["\\u0041",{},{},...]``.

    About 10 million JSON values. Before large frames were read through views
    (``acp_proxy.core.wire.views``) and handed to a worker thread, the ``\\u``
    escape sent this frame down the standard library decoder with a Python
    hook per object, which stalled every connection for ~6.6 s; now the view
    never builds the array (and a thread would keep the loop turning if it
    did). The bound must hold whatever the core does.
    """
    head = '{"jsonrpc":"2.0","id":7,"method":"_x","params":["\\u0041",'
    count = (size_bytes - len(head) - 2) // 3
    return head + ",".join(["{}"] * count) + "]}"


def deep_arrays(size_bytes: int) -> str:
    """Params of arrays nested 500 deep, repeated to ``size_bytes``."""
    unit = "[" * 500 + "]" * 500
    head = '{"jsonrpc":"2.0","id":7,"method":"_x","params":{"a":['
    return head + ",".join([unit] * ((size_bytes - len(head)) // 1001)) + "]}}"


def escaped_decision_keys(size_bytes: int) -> str:
    """About 2.5 million keys in ``params`` itself (a decision level) and an escape, so
    the view reads every member of that level."""
    head = '{"jsonrpc":"2.0","id":7,"method":"_x","params":{"q":"\\u0041"'
    count = (size_bytes - len(head)) // 13
    return (
        head + "".join(f',"k{i:07d}":0' for i in range(count))[: size_bytes - len(head) - 2] + "}}"
    )


def spaced_dense(size_bytes: int) -> str:
    """Spaced, a decision key spelled twice, and dense: refused before it is decoded."""
    head = '{"jsonrpc": "2.0", "id": 7, "method": "_x", "params": {"a": [{"id": 1}, '
    return head + "0, " * ((size_bytes - len(head)) // 3) + "0]}}"


@pytest.mark.slow
@pytest.mark.parametrize(
    "shape", [hostile_request, deep_arrays, escaped_decision_keys, spaced_dense]
)
async def test_a_hostile_32_mib_message_does_not_stall_other_connections(shape: Any) -> None:
    """While a 32 MiB message is handled on one connection, another's round trips stay short."""
    text = shape(32 * MIB - 64)
    argv = [sys.executable, "-m", "acp_proxy", "--listen", "ws://127.0.0.1:0/acp", "--no-token",
            "--", *AGENT_CMD]  # fmt: skip
    with trio.fail_after(120):
        proc = await trio.lowlevel.open_process(
            argv, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=REPO
        )
        assert proc.stderr is not None
        stderr = proc.stderr
        try:
            err = b""
            while b"listening on " not in err or not err.endswith(b"\n"):
                chunk = await stderr.receive_some(4096)
                assert chunk, err
                err += chunk
            url = err.decode().split("listening on ")[1].split()[0]
            async with trio.open_nursery() as nursery:

                async def drain_stderr() -> None:
                    while await stderr.receive_some(65536):
                        pass

                nursery.start_soon(drain_stderr)
                async with connect(url) as hostile, connect(url) as other:
                    client = AcpClient(other)
                    await client.start_session()
                    answered = trio.Event()

                    async def attack() -> None:
                        await hostile.send_message(text)
                        answer = json.loads(await hostile.get_message())
                        assert "error" in answer  # the agent's -32601, or the proxy's refusal
                        answered.set()

                    nursery.start_soon(attack)
                    worst, trips = 0.0, 0
                    while not answered.is_set():
                        start = time.perf_counter()  # wall clock: what the other client sees
                        answer = await client.request("_ping")
                        worst = max(worst, time.perf_counter() - start)
                        trips += 1
                        assert answer["error"]["code"] == -32601
                nursery.cancel_scope.cancel()
        finally:
            proc.kill()
            await proc.wait()
            await stderr.aclose()
    print(f"worst round trip {worst:.3f} s over {trips} round trips")
    assert trips >= 5  # round trips really ran while the hostile message was handled
    assert worst < WORST_ROUND_TRIP_SECONDS


async def test_large_frames_keep_their_order_through_the_worker_thread() -> None:
    """A frame over the threshold and small ones after it reach the agent in order."""
    big = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "_big",
        "params": {"x": "a" * THREAD_THRESHOLD_BYTES},
    }
    with trio.fail_after(30):
        async with listening(make_config(max_message_bytes=4 * MIB)) as url, connect(url) as ws:
            client = AcpClient(ws)
            await client.send(big)
            for rid in (2, 3):
                await client.send({"jsonrpc": "2.0", "id": rid, "method": "_small"})
            ids = [(await client.receive())["id"] for _ in range(3)]
    assert ids == [1, 2, 3]
