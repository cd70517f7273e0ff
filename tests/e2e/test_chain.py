"""``acp-proxy --chain`` under a test conductor, compared with standalone mode.

The same scripted scenario runs twice, with the test playing both the client
and the agent:

* chain mode: ``python -m acp_proxy --chain``; a test conductor (built from
  the Proxy Chains RFD's message reference) speaks to it on stdio, plain for
  the client, in ``proxy/successor`` envelopes for the successor;
* standalone mode: ``python -m acp_proxy -- <bridge>``, where the agent is a
  tiny process bridging its stdio to a socket the test holds.

What the client and the agent see must be the same, byte for byte, once the
ids the proxy picks for its own requests are numbered in order.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import trio

TIMEOUT_SECONDS = 60
PY = sys.executable

# The standalone "agent": relays its stdin/stdout to a TCP socket the test holds.
BRIDGE = r"""
import os, socket, sys, threading
sock = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
def upstream():
    while True:
        data = os.read(0, 65536)
        if not data:
            sock.shutdown(socket.SHUT_WR)
            return
        sock.sendall(data)
threading.Thread(target=upstream, daemon=True).start()
while True:
    data = sock.recv(65536)
    if not data:
        break
    view = memoryview(data)
    while view:
        view = view[os.write(1, view):]
"""


def enc(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def req(rid: Any, method: str, params: Any) -> bytes:
    return enc({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})


def notif(method: str, params: Any) -> bytes:
    return enc({"jsonrpc": "2.0", "method": method, "params": params})


def resp(rid: Any, result: Any) -> bytes:
    return enc({"jsonrpc": "2.0", "id": rid, "result": result})


def err(rid: Any, code: int, message: str) -> bytes:
    return enc({"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}})


def update(sid: str, upd: dict[str, Any], **extra: Any) -> bytes:
    return notif("session/update", {"sessionId": sid, "update": upd, **extra})


def chunk(sid: str, text: str) -> bytes:
    content = {"type": "text", "text": text}
    return update(sid, {"sessionUpdate": "agent_message_chunk", "content": content})


class LineReader:
    """Newline-delimited frames from a trio receive stream."""

    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self.stream = stream
        self.buf = b""

    async def next(self) -> bytes | None:
        while b"\n" not in self.buf:
            data = await self.stream.receive_some(65536)
            if not data:
                return None
            self.buf += data
        line, _, self.buf = self.buf.partition(b"\n")
        return line


class Side:
    """One party the test plays (client or agent): what it sent, what it saw."""

    def __init__(self, send: Callable[[bytes], Awaitable[None]]) -> None:
        self.send = send
        self.saw: list[bytes] = []
        self._tx, self._rx = trio.open_memory_channel[bytes](1000)

    async def deliver(self, frame: bytes) -> None:
        self.saw.append(frame)
        await self._tx.send(frame)

    async def recv(self) -> Any:
        return json.loads(await self._rx.receive())


class Harness:
    """A running proxy with the client and agent sides the scenario drives."""

    client: Side
    agent: Side
    audit_path: Path

    async def close(self) -> int:
        """Ends the client's stream and waits for the proxy; returns its exit status."""
        raise NotImplementedError


class TestConductor(Harness):
    """A conductor for one proxy component (RFD message reference), playing client and successor.

    To the proxy: the client's messages go plain (``initialize`` as
    ``proxy/initialize``), the successor's inside ``proxy/successor``
    envelopes carrying a hop-local ``_meta``. From the proxy: envelopes are
    unwrapped for the successor, who sees the proxy's envelope ids as request
    ids; a ``$/cancel_request`` naming one of them is the proxy cancelling it
    on this hop, which the conductor turns into a cancel toward the successor.
    """

    __test__ = False

    def __init__(self, proc: trio.Process, prefix: str, audit_path: Path) -> None:
        assert proc.stdin is not None
        assert proc.stdout is not None
        self.proc = proc
        self.stdin = proc.stdin
        self.reader = LineReader(proc.stdout)
        self.prefix = prefix
        self.audit_path = audit_path
        self.successor_method = f"{prefix}proxy/successor"
        self.client = Side(self._client_send)
        self.agent = Side(self._successor_send)
        self.ours: dict[Any, Any] = {}  # our envelope id -> the successor's own request id
        self.theirs: set[Any] = set()  # the proxy's envelope ids still unanswered
        self.count = 0

    async def _write(self, frame: bytes) -> None:
        await self.stdin.send_all(frame + b"\n")

    async def _client_send(self, frame: bytes) -> None:
        body = json.loads(frame)
        if body.get("method") == "initialize":
            body["method"] = f"{self.prefix}proxy/initialize"
            frame = enc(body)
        await self._write(frame)

    def _envelope(self, rid: Any, method: str, params: Any) -> bytes:
        inner: dict[str, Any] = {"method": method, "params": params}
        inner["_meta"] = {"conductor.test/hop": self.count}
        body: dict[str, Any] = {"jsonrpc": "2.0"}
        if rid is not None:
            body["id"] = rid
        body.update(method=self.successor_method, params=inner)
        return enc(body)

    async def _successor_send(self, frame: bytes) -> None:
        body = json.loads(frame)
        method = body.get("method")
        if method is None:  # answers a request the successor saw under the proxy's envelope id
            self.theirs.discard(body["id"])
            await self._write(frame)
            return
        self.count += 1
        if method == "$/cancel_request":
            # Hop-scoped: the successor cancels its request, so we cancel our envelope.
            own = body["params"]["requestId"]
            envelope_id = next(c for c, o in self.ours.items() if o == own)
            params = {**body["params"], "requestId": envelope_id}
            if self.prefix:  # the Rust SDK sends it wrapped
                await self._write(self._envelope(None, method, params))
            else:
                await self._write(notif(method, params))
            return
        rid = None
        if "id" in body:
            rid = f"conductor-{self.count}"
            self.ours[rid] = body["id"]
        await self._write(self._envelope(rid, method, body.get("params")))

    async def pump(self) -> None:
        """Routes every frame from the proxy to the side that sees it."""
        while (frame := await self.reader.next()) is not None:
            body = json.loads(frame)
            method = body.get("method")
            if method in ("proxy/successor", "_proxy/successor"):
                assert method == self.successor_method, frame
                params = body["params"]
                assert "_meta" not in params, "the proxy sets no envelope _meta"
                inner: dict[str, Any] = {"jsonrpc": "2.0"}
                if "id" in body:
                    inner["id"] = body["id"]
                    self.theirs.add(body["id"])
                inner["method"] = params["method"]
                if "params" in params:
                    inner["params"] = params["params"]
                await self.agent.deliver(enc(inner))
            elif method == "$/cancel_request" and body["params"]["requestId"] in self.theirs:
                assert not self.prefix, "the Rust spelling wraps cancels"
                await self.agent.deliver(frame)
            elif method is None and body["id"] in self.ours:
                own = self.ours.pop(body["id"])
                await self.agent.deliver(enc({**body, "id": own}))
            else:
                await self.client.deliver(frame)

    async def close(self) -> int:
        await self.stdin.aclose()
        return await self.proc.wait()


class Standalone(Harness):
    """``acp-proxy -- <bridge>``: the client on the proxy's stdio, the agent on a socket."""

    def __init__(self, proc: trio.Process, agent: trio.SocketStream, audit_path: Path) -> None:
        assert proc.stdin is not None
        assert proc.stdout is not None
        self.proc = proc
        self.stdin = proc.stdin
        self.sock = agent
        self.audit_path = audit_path

        async def to_client(frame: bytes) -> None:
            await self.stdin.send_all(frame + b"\n")

        async def to_agent(frame: bytes) -> None:
            await self.sock.send_all(frame + b"\n")

        self.client = Side(to_client)
        self.agent = Side(to_agent)

    async def pump(self) -> None:
        """Reads both streams until they end."""
        assert self.proc.stdout is not None

        async def read(stream: trio.abc.ReceiveStream, side: Side) -> None:
            reader = LineReader(stream)
            while (frame := await reader.next()) is not None:
                await side.deliver(frame)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(read, self.proc.stdout, self.client)
            await read(self.sock, self.agent)
            await self.sock.aclose()  # the proxy closed the agent's stdin: let the bridge exit

    async def close(self) -> int:
        await self.stdin.aclose()
        return await self.proc.wait()


async def start(cmd: list[str]) -> trio.Process:
    return await trio.lowlevel.open_process(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE)


async def run(
    harness_factory: Callable[[trio.Nursery], Awaitable[Harness]],
    script: Callable[[Harness], Awaitable[None]],
) -> Harness:
    """Runs ``script`` against a fresh harness, closes it and waits for every stream to end."""
    with trio.fail_after(TIMEOUT_SECONDS):
        async with trio.open_nursery() as nursery:
            h = await harness_factory(nursery)
            await script(h)
            assert await h.close() == 0
    return h


def chain_factory(tmp_path: Path, prefix: str) -> Callable[[trio.Nursery], Awaitable[Harness]]:
    async def factory(nursery: trio.Nursery) -> Harness:
        audit = tmp_path / f"chain{prefix}.jsonl"
        proc = await start([PY, "-m", "acp_proxy", "--chain", "--audit-log", str(audit)])
        conductor = TestConductor(proc, prefix, audit)
        nursery.start_soon(conductor.pump)
        return conductor

    return factory


def standalone_factory(tmp_path: Path) -> Callable[[trio.Nursery], Awaitable[Harness]]:
    async def factory(nursery: trio.Nursery) -> Harness:
        audit = tmp_path / "standalone.jsonl"
        (listener,) = await trio.open_tcp_listeners(0, host="127.0.0.1")
        port = listener.socket.getsockname()[1]
        cmd = [PY, "-m", "acp_proxy", "--audit-log", str(audit), "--", PY, "-c", BRIDGE, str(port)]
        proc = await start(cmd)
        sock = await listener.accept()
        await listener.aclose()
        h = Standalone(proc, sock, audit)
        nursery.start_soon(h.pump)
        return h

    return factory


async def scenario(h: Harness) -> None:
    """Initialize; session/new with an early update; a child; refused mutations; cancels."""
    client, agent = h.client, h.agent
    client_info = {"name": "test-client", "version": "1"}
    await client.send(
        req(0, "initialize", {"protocolVersion": 2, "capabilities": {}, "clientInfo": client_info})
    )
    init = await agent.recv()
    assert init["method"] == "initialize"
    assert init["params"]["clientInfo"] == client_info
    caps = {"loadSession": False, "_meta": {"vendor.y": True}}
    await agent.send(resp(init["id"], {"protocolVersion": 2, "agentCapabilities": caps}))
    assert (await client.recv())["result"]["protocolVersion"] == 2

    # session/new: the agent's first update arrives before the response and is held.
    await client.send(req(1, "session/new", {"cwd": "/tmp", "mcpServers": []}))
    new = await agent.recv()
    assert new["method"] == "session/new"
    await agent.send(chunk("S1", "early"))
    await agent.send(resp(new["id"], {"sessionId": "S1"}))
    assert (await client.recv())["id"] == 1
    released = await client.recv()
    assert released["params"]["sessionId"] == "S1"

    # A prompt starts a child, whose first chunk comes before its announcement.
    prompt_params = {"sessionId": "S1", "prompt": [{"type": "text", "text": "go"}]}
    await client.send(req(2, "session/prompt", prompt_params))
    prompt = await agent.recv()
    assert prompt["method"] == "session/prompt"
    await agent.send(chunk("C1", "child early"))
    sub = {
        "sessionUpdate": "subagent_update",
        "sessionId": "C1",
        "title": "Search the docs",
        "capabilities": {},
        "state": {"state": "running"},
        "_meta": {"vendor.x": 1},
    }
    await agent.send(update("S1", sub, _meta={"trace": "t-1"}))
    options = [{"optionId": "allow", "name": "Allow", "kind": "allow_once"}]
    perm_params = {"sessionId": "C1", "toolCall": {"toolCallId": "t1"}, "options": options}
    await agent.send(req("perm-1", "session/request_permission", perm_params))
    announced = await client.recv()
    assert announced["params"]["update"]["sessionUpdate"] == "subagent_update"
    assert (await client.recv())["params"]["sessionId"] == "C1"
    perm = await client.recv()
    assert perm["method"] == "session/request_permission"

    # Mutations on the child without its capability: refused, never reach the agent.
    await client.send(req(3, "session/prompt", {**prompt_params, "sessionId": "C1"}))
    refused = await client.recv()
    assert refused["id"] == 3
    assert refused["error"]["code"] == -32601
    await client.send(notif("session/cancel", {"sessionId": "C1"}))
    await client.send(resp(perm["id"], {"outcome": {"outcome": "selected", "optionId": "allow"}}))
    assert (await agent.recv())["id"] == "perm-1"

    # A repeated state report is removed; then the prompt ends.
    idle = {"sessionUpdate": "state_update", "state": "idle"}
    await agent.send(update("C1", idle))
    await agent.send(update("C1", idle))
    await agent.send(resp(prompt["id"], {"stopReason": "end_turn"}))
    assert (await client.recv())["params"]["update"] == idle
    assert (await client.recv())["id"] == 2

    # The client cancels a request in flight to the agent.
    await client.send(req(4, "session/prompt", prompt_params))
    second = await agent.recv()
    await client.send(notif("$/cancel_request", {"requestId": 4}))
    cancel = await agent.recv()
    assert cancel["method"] == "$/cancel_request"
    assert cancel["params"]["requestId"] == second["id"]
    await agent.send(err(second["id"], -32800, "Request cancelled"))
    assert (await client.recv())["error"]["code"] == -32800

    # The agent cancels a request in flight to the client.
    await agent.send(
        req("perm-2", "session/request_permission", {**perm_params, "sessionId": "S1"})
    )
    perm2 = await client.recv()
    await agent.send(notif("$/cancel_request", {"requestId": "perm-2"}))
    cancel2 = await client.recv()
    assert cancel2["params"]["requestId"] == perm2["id"]
    await client.send(err(perm2["id"], -32800, "Request cancelled"))
    answer = await agent.recv()
    assert answer["id"] == "perm-2"
    assert answer["error"]["code"] == -32800


def numbered(frames: list[bytes]) -> list[bytes]:
    """Frames with the ids of requests received (and cancels naming them) numbered in order."""
    ids: dict[Any, str] = {}
    result = []
    for frame in frames:
        body = json.loads(frame)
        if "method" in body and "id" in body:
            body["id"] = ids.setdefault(body["id"], f"#{len(ids)}")
            frame = enc(body)
        elif body.get("method") == "$/cancel_request":
            target = body["params"]["requestId"]
            body["params"]["requestId"] = ids.get(target, target)
            frame = enc(body)
        result.append(frame)
    return result


def audit_trail(path: Path) -> list[tuple[Any, ...]]:
    """The audit events, without timestamps, request ids, connection ends and the
    chain's run records."""
    records = [json.loads(line) for line in path.read_text().splitlines()]
    keys = ("event", "direction", "sessionId", "parentSessionId", "method", "capability")
    skip = {"peer_closed", "run_started", "run_closed"}
    return [tuple(r.get(k) for k in keys) for r in records if r["event"] not in skip]


@pytest.mark.parametrize("prefix", ["", "_"], ids=["proxy", "_proxy"])
async def test_chain_mode_shows_both_sides_what_standalone_mode_shows(
    tmp_path: Path, prefix: str
) -> None:
    """Under a conductor, client and successor see standalone mode's messages, same bytes."""
    alone = await run(standalone_factory(tmp_path), scenario)
    chain = await run(chain_factory(tmp_path, prefix), scenario)
    assert numbered(chain.client.saw) == numbered(alone.client.saw)
    assert numbered(chain.agent.saw) == numbered(alone.agent.saw)
    assert len(alone.client.saw) == 12
    assert len(alone.agent.saw) == 7
    trail = audit_trail(chain.audit_path)
    assert trail == audit_trail(alone.audit_path)
    assert [e[0] for e in trail] == [
        "held",
        "released",
        "held",
        "child_announced",
        "released",
        "permission_decided",  # the ask and the client's answer: recorded under --chain too
        "mutation_rejected",
        "mutation_rejected",
        "notification_dropped",
        "permission_answered",
        "duplicate_dropped",
        "permission_decided",
        "permission_answered",
    ]


async def test_conductor_closing_stdin_ends_the_proxy_with_status_zero(tmp_path: Path) -> None:
    """EOF from the conductor answers the pending proxy/initialize and exits 0."""

    async def script(h: Harness) -> None:
        await h.client.send(req("i", "initialize", {"protocolVersion": 2}))
        assert (await h.agent.recv())["method"] == "initialize"

    h = await run(chain_factory(tmp_path, ""), script)
    (answer,) = [json.loads(f) for f in h.client.saw]
    assert answer["id"] == "i"
    assert answer["error"]["code"] == -32603


async def own_file_write(h: Harness) -> None:
    """The agent asks the client to write the proxy's audit log: refused by the proxy,
    answered to the agent under its id, never seen by the client (issue 31)."""
    client, agent = h.client, h.agent
    caps = {"fs": {"readTextFile": True, "writeTextFile": True}}
    await client.send(req(0, "initialize", {"protocolVersion": 1, "clientCapabilities": caps}))
    init = await agent.recv()
    await agent.send(resp(init["id"], {"protocolVersion": 1, "agentCapabilities": {}}))
    assert (await client.recv())["id"] == 0
    await client.send(req(1, "session/new", {"cwd": str(h.audit_path.parent), "mcpServers": []}))
    new = await agent.recv()
    await agent.send(resp(new["id"], {"sessionId": "S1"}))
    assert (await client.recv())["id"] == 1
    write = {"sessionId": "S1", "path": str(h.audit_path), "content": "{}\n"}
    await agent.send(req("w-1", "fs/write_text_file", write))
    refused = await agent.recv()
    assert refused["id"] == "w-1"
    assert "own file" in refused["error"]["message"]
    read = {"sessionId": "S1", "path": str(h.audit_path.parent / "notes.txt")}
    await agent.send(req("r-1", "fs/read_text_file", read))  # another file: forwarded
    asked = await client.recv()
    assert asked["method"] == "fs/read_text_file"
    await client.send(resp(asked["id"], {"content": "hi"}))
    assert (await agent.recv())["id"] == "r-1"


@pytest.mark.parametrize("mode", ["standalone", "chain"])
async def test_the_proxy_s_own_files_are_out_of_the_agent_s_reach_in_chain_mode_too(
    tmp_path: Path, mode: str
) -> None:
    """--chain applied no filesystem rules: the agent could have the client rewrite the
    audit log. Both modes now refuse it and record the decision."""
    factory = chain_factory(tmp_path, "") if mode == "chain" else standalone_factory(tmp_path)
    h = await run(factory, own_file_write)
    records = [json.loads(line) for line in h.audit_path.read_text().splitlines()]
    refused = [r for r in records if r["event"] == "request_refused"]
    assert [r["method"] for r in refused] == ["fs/write_text_file"]  # id: the core's own
    assert "own file" in refused[0]["reason"]
