"""``--listen``: one connection's hostile message does not stall the others (issue 14).

Asserted by order, not by a clock: while one connection's core call for a
large message is held open, another connection's round trips complete
(:func:`test_other_connections_run_while_a_large_message_is_in_the_core`).
How long the other connection's round trips take while a hostile message is
handled is a figure of ``python -m benchmarks`` (``ws_isolation``).
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import threading
from typing import Any

import pytest
import trio
from support.wskit import AGENT_CMD, REPO, AcpClient, connect, listening, make_config

from acp_proxy.core.wire.framing import Lines
from acp_proxy.shell import relay as relay_module
from acp_proxy.shell.relay import THREAD_THRESHOLD_BYTES

MIB = 1024 * 1024
#: seconds a held core call waits for the test before giving up (only if the loop is frozen)
GATE_SECONDS = 30.0


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
    """While a 32 MiB message of a hostile shape is handled on one connection, another's
    round trips go on being answered, and the hostile one gets an error."""
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
                    trips = 0
                    while not answered.is_set():
                        answer = await client.request("_ping")
                        trips += 1
                        assert answer["error"]["code"] == -32601
                nursery.cancel_scope.cancel()
        finally:
            proc.kill()
            await proc.wait()
            await stderr.aclose()
    assert trips >= 1  # the first was sent before the hostile message
    assert answered.is_set()


def _is_large(batch: list[Any]) -> bool:
    return any(
        (type(item) is bytes and len(item) >= THREAD_THRESHOLD_BYTES)
        or (type(item) is Lines and len(item.data) >= THREAD_THRESHOLD_BYTES)
        for item in batch
    )


async def test_other_connections_run_while_a_large_message_is_in_the_core(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A core call for a large client message is held open until another connection has
    completed three round trips: they complete (the call runs off the event loop, with
    the cyclic GC paused), and the large message is answered after them."""
    entered, release = threading.Event(), threading.Event()
    seen: dict[str, Any] = {}
    handle = relay_module.Relay._handle

    def held(self: Any, source: Any, batch: list[Any], now: float) -> Any:
        if _is_large(batch):
            seen["off_loop"] = threading.current_thread() is not threading.main_thread()
            seen["gc_paused"] = not gc.isenabled()
            entered.set()
            # only if the event loop is frozen does this wait run out (then the test fails)
            seen["released"] = release.wait(GATE_SECONDS)
        return handle(self, source, batch, now)

    monkeypatch.setattr(relay_module.Relay, "_handle", held)
    big = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "_big",
        "params": {"x": "a" * THREAD_THRESHOLD_BYTES},
    }
    order: list[str] = []
    with trio.fail_after(60):
        cfg = make_config(max_message_bytes=4 * MIB)
        async with listening(cfg) as url, connect(url) as hostile, connect(url) as other:
            client = AcpClient(other)
            await client.start_session()
            await AcpClient(hostile).send(big)
            assert await trio.to_thread.run_sync(entered.wait, GATE_SECONDS)
            for _ in range(3):
                answer = await client.request("_ping")
                assert answer["error"]["code"] == -32601
                order.append("other")
            release.set()
            answer = await AcpClient(hostile).receive()
            order.append("large")
    assert answer["id"] == 7
    assert order == ["other", "other", "other", "large"]
    assert seen == {"off_loop": True, "gc_paused": True, "released": True}


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
