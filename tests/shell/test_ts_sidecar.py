"""The sidecar form against the TypeScript SDK's own WebSocket server (issue 18).

A TS SDK 2.4.0 agent served by the SDK's ``AcpServer`` over WebSocket
(``tests/interop/ts/ws_server_agent.mjs``) behind ``--listen --upstream``, driven
by the SDK's ws-client (``tests/support/peers/ts_ws_client.mjs``).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial

import trio
from support.wskit import REPO, TS_SDK_CACHE, TS_WS_CLIENT, make_config

from acp_proxy.shell.topology.listen import run_listen

SERVER = REPO / "tests" / "interop" / "ts" / "ws_server_agent.mjs"


@asynccontextmanager
async def sidecar_in_front_of_ts_server(node: list[str]) -> AsyncIterator[tuple[str, trio.Process]]:
    """The TS server agent and an in-process sidecar to it: (sidecar URL, server process)."""
    env = {**os.environ, "ACP_TS_SDK_DIR": str(TS_SDK_CACHE)}
    async with trio.open_nursery() as nursery:
        server = await trio.lowlevel.open_process(
            [*node, str(SERVER)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
        )
        assert server.stdout is not None
        line = b""
        while not line.endswith(b"\n"):
            chunk = await server.stdout.receive_some(100)
            assert chunk, "the TS server agent did not start"
            line += chunk
        port = int(line.split()[1])
        run = partial(run_listen, make_config(), "ws://127.0.0.1:0/acp", [], None,
                      upstream=f"ws://127.0.0.1:{port}/acp")  # fmt: skip
        urls: list[str] = await nursery.start(run)
        try:
            yield urls[0], server
        finally:
            server.kill()
            await server.wait()
            nursery.cancel_scope.cancel()


async def _client(node: list[str], url: str, *mode: str) -> dict[str, object]:
    done = await trio.run_process(
        [*node, str(TS_WS_CLIENT), str(TS_SDK_CACHE), url, *mode],
        stdin=subprocess.DEVNULL,
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    seen: dict[str, object] = json.loads(done.stdout)
    return seen


async def test_a_turn_and_a_refused_child_mutation_through_the_sidecar(
    ts_ws_server_node: list[str],
) -> None:
    """A full turn reaches the SDK client; its prompt on the announced child is refused."""
    with trio.fail_after(90):
        async with sidecar_in_front_of_ts_server(ts_ws_server_node) as (url, _server):
            seen = await _client(ts_ws_server_node, url)
    sid, child = seen["sessionId"], seen["child"]
    assert seen["stopReason"] == "end_turn"
    assert child == f"{sid}-child"
    assert seen["updates"] == [
        [sid, "agent_message_chunk"],
        [sid, "agent_message_chunk"],
        [sid, "subagent_update"],
        [child, "agent_message_chunk"],
    ]
    prompt = seen["childPrompt"]
    assert isinstance(prompt, dict)
    assert prompt["code"] == -32601  # the proxy's refusal: no capability grants it


async def test_the_upstream_killed_mid_turn_answers_the_clients_pending_prompt(
    ts_ws_server_node: list[str],
) -> None:
    """The SDK server dies while a prompt is in flight: the SDK client's request gets an error."""
    result: dict[str, object] = {}

    async def drive(url: str) -> None:
        result.update(await _client(ts_ws_server_node, url, "hang"))

    with trio.fail_after(90):
        async with (
            sidecar_in_front_of_ts_server(ts_ws_server_node) as (url, server),
            trio.open_nursery() as nursery,
        ):
            nursery.start_soon(drive, url)
            # the prompt is in flight once the agent has started its turn
            assert server.stderr is not None
            said = b""
            while b"hanging" not in said:
                chunk = await server.stderr.receive_some(1000)
                assert chunk, said
                said += chunk
            server.kill()
    hang = result["hang"]
    assert isinstance(hang, dict)
    assert hang["code"] == -32603
    assert "upstream closed the connection" in str(hang["message"])
