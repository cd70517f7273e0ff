"""``--connect`` as a subprocess against a WebSocket ACP agent served by the test."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import attrs
import trio
from support.peers.own_file_agent import OwnFileAgent, assert_own_file_refused, client_messages
from support.peers.scripted_agent import ScriptedAgent
from support.wskit import REPO, AcpClient, ProcessPipes
from trio_websocket import ConnectionClosed, WebSocketRequest, serve_websocket

TIMEOUT = 30


@attrs.define
class ServedConnection:
    """What the test agent server saw of one connection."""

    authorization: bytes | None
    close_code: int | None = None
    closed: trio.Event = attrs.field(factory=trio.Event)


@asynccontextmanager
async def acp_ws_server(
    token: bytes | None = None,
) -> AsyncIterator[tuple[str, list[ServedConnection]]]:
    """A WebSocket ACP agent (the scripted agent's logic) on 127.0.0.1; yields its URL.

    With ``token``, upgrades without ``Authorization: Bearer <token>`` get 401.
    A prompt ``exit`` is answered, then the connection is closed with 1011.
    """
    seen: list[ServedConnection] = []

    async def handler(request: WebSocketRequest) -> None:
        auth = [v for k, v in request.headers if k.lower() == b"authorization"]
        served = ServedConnection(auth[0] if auth else None)
        seen.append(served)
        if token is not None and served.authorization != b"Bearer " + token:
            await request.reject(401)
            return
        ws = await request.accept()
        agent = ScriptedAgent()
        try:
            while True:
                message = await ws.get_message()
                for out in agent.handle(json.loads(message)):
                    await ws.send_message(json.dumps(out))
                if agent.exit_requested:
                    await ws.aclose(1011, "agent exited")
        except ConnectionClosed as exc:
            served.close_code = exc.reason.code if exc.reason else None
        finally:
            served.closed.set()

    async with trio.open_nursery() as nursery:
        server = await nursery.start(serve_websocket, handler, "127.0.0.1", 0, None)
        yield f"ws://127.0.0.1:{server.port}/acp", seen
        nursery.cancel_scope.cancel()


@asynccontextmanager
async def connect_proxy(url: str, *options: str) -> AsyncIterator[ProcessPipes]:
    """``python -m acp_proxy --connect URL`` with piped stdio; killed on exit if still running."""
    argv = [sys.executable, "-m", "acp_proxy", "--connect", url, *options]
    proc = await trio.lowlevel.open_process(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO
    )
    try:
        yield ProcessPipes(proc)
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                await pipe.aclose()


async def read_stderr(pipes: ProcessPipes) -> str:
    """Everything the process wrote to stderr (read to EOF)."""
    assert pipes.proc.stderr is not None
    data = b""
    while chunk := await pipes.proc.stderr.receive_some(65536):
        data += chunk
    return data.decode()


async def test_connect_relays_a_full_turn() -> None:
    """--connect: stdio client to a WebSocket agent, children enforced; stdin EOF exits 0."""
    with trio.fail_after(TIMEOUT):
        async with acp_ws_server() as (url, seen), connect_proxy(url) as pipes:
            client = AcpClient(None, pipes.send_text, pipes.receive_text)
            sid = await client.start_session()
            assert (await client.prompt(sid))["result"]["stopReason"] == "end_turn"
            kinds = [n["params"]["update"]["sessionUpdate"] for n in client.notifications]
            assert kinds.count("subagent_update") == 1
            rejected = await client.prompt(f"{sid}-child")
            assert rejected["error"]["code"] == -32601
            await pipes.close_stdin()
            assert await pipes.proc.wait() == 0
            await seen[0].closed.wait()
            assert seen[0].close_code == 1000
            assert seen[0].authorization is None


async def test_connect_sends_the_bearer_token(tmp_path: Path) -> None:
    """--connect sends Authorization: Bearer from the token file; without it, 401 exits 2."""
    token_file = tmp_path / "token"
    token_file.write_text("tok-456\n")
    with trio.fail_after(TIMEOUT):
        async with acp_ws_server(token=b"tok-456") as (url, seen):
            async with connect_proxy(url, "--token-file", str(token_file)) as pipes:
                client = AcpClient(None, pipes.send_text, pipes.receive_text)
                assert await client.start_session() == "sess-1"
                await pipes.close_stdin()
                assert await pipes.proc.wait() == 0
            assert seen[0].authorization == b"Bearer tok-456"
            async with connect_proxy(url) as pipes:
                assert await pipes.proc.wait() == 2
                err = await read_stderr(pipes)
                assert "HTTP 401" in err
                assert "--token-file" in err
            assert "tok-456" not in str(seen[1:])


async def test_connect_failure_exits_1() -> None:
    """--connect to a port nobody listens on exits 1 with a clear message."""
    sock = trio.socket.socket()
    await sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # the port is now (very likely) closed
    with trio.fail_after(TIMEOUT):
        async with connect_proxy(f"ws://127.0.0.1:{port}/acp") as pipes:
            assert await pipes.proc.wait() == 1
            assert "cannot connect to" in await read_stderr(pipes)


async def test_connect_abnormal_agent_close_exits_1() -> None:
    """When the remote agent closes with an error code, --connect exits 1 naming it."""
    with trio.fail_after(TIMEOUT):
        async with acp_ws_server() as (url, _seen), connect_proxy(url) as pipes:
            client = AcpClient(None, pipes.send_text, pipes.receive_text)
            sid = await client.start_session()
            assert (await client.prompt(sid, "exit"))["result"]["stopReason"] == "end_turn"
            assert await pipes.proc.wait() == 1
            assert "1011" in await read_stderr(pipes)


async def test_connect_sigterm_closes_with_1001() -> None:
    """SIGTERM to --connect closes the agent connection with 1001 and exits 0."""
    with trio.fail_after(TIMEOUT):
        async with acp_ws_server() as (url, seen), connect_proxy(url) as pipes:
            client = AcpClient(None, pipes.send_text, pipes.receive_text)
            await client.start_session()
            pipes.proc.send_signal(signal.SIGTERM)
            assert await pipes.proc.wait() == 0
            await seen[0].closed.wait()
            assert seen[0].close_code == 1001


async def test_connect_waits_for_answers_in_flight_when_stdin_closes() -> None:
    """A request written right before stdin EOF still gets a slow agent's answer, not an error."""

    async def slow_agent(request: WebSocketRequest) -> None:
        ws = await request.accept()
        with contextlib.suppress(ConnectionClosed):
            message = json.loads(await ws.get_message())
            await trio.sleep(0.3)  # the agent's latency, not a timeout of the test
            answer = {"jsonrpc": "2.0", "id": message["id"], "result": {"protocolVersion": 1}}
            await ws.send_message(json.dumps(answer))
            await ws.get_message()  # until the proxy closes

    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            server = await nursery.start(serve_websocket, slow_agent, "127.0.0.1", 0, None)
            async with connect_proxy(f"ws://127.0.0.1:{server.port}/acp") as pipes:
                init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
                await pipes.send_text(json.dumps(init))
                await pipes.close_stdin()
                answer = json.loads(await pipes.receive_text())
                assert answer == {"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": 1}}
                assert await pipes.proc.wait() == 0
            nursery.cancel_scope.cancel()


async def test_connect_keeps_the_proxy_s_own_files_out_of_the_agent_s_reach(
    tmp_path: Path,
) -> None:
    """The client of --connect is this machine's editor: a remote agent asking it to write
    the proxy's audit log is refused under its id (issue 31), and the editor never sees
    the request; another file's request reaches it."""
    audit = tmp_path / "audit.jsonl"
    agent = OwnFileAgent(audit, tmp_path / "notes.txt")
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            server = await nursery.start(serve_websocket, agent.handler, "127.0.0.1", 0, None)
            url = f"ws://127.0.0.1:{server.port}/acp"
            async with connect_proxy(url, "--audit-log", str(audit)) as pipes:
                for message in client_messages(tmp_path):
                    await pipes.send_text(json.dumps(message))
                    assert json.loads(await pipes.receive_text())["id"] == message["id"]
                asked = json.loads(await pipes.receive_text())  # only the second write
                assert asked["params"]["path"] == str(tmp_path / "notes.txt")
                answer = {"jsonrpc": "2.0", "id": asked["id"], "result": {}}
                await pipes.send_text(json.dumps(answer))
                await agent.both_answered.wait()
                await pipes.close_stdin()
                assert await pipes.proc.wait() == 0
            nursery.cancel_scope.cancel()
    assert_own_file_refused(agent)
