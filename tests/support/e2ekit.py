"""End-to-end kit: the proxy as a real subprocess, the test on both of its sides.

The test is the client (the proxy's stdin/stdout pipes) and, through
``tests/support/peers/bridge_agent.py``, also the agent: the bridge copies its stdio
to a Unix socket the test listens on, byte for byte.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import trio

TESTS = Path(__file__).resolve().parent.parent
BRIDGE_AGENT = TESTS / "support" / "peers" / "bridge_agent.py"
READ_SIZE = 1024 * 1024


def enc(obj: Any) -> bytes:
    """Compact JSON of ``obj`` (no line ending)."""
    return json.dumps(obj, separators=(",", ":")).encode()


def line(obj: Any) -> bytes:
    """Compact JSON of ``obj`` plus ``\\n``: one frame on the wire."""
    return enc(obj) + b"\n"


def req(rid: Any, method: str, params: Any = None) -> bytes:
    """A request frame (with ``\n``)."""
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        body["params"] = params
    return line(body)


def notif(method: str, params: Any = None) -> bytes:
    """A notification frame (with ``\n``)."""
    body: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        body["params"] = params
    return line(body)


def ok(rid: Any, result: Any) -> bytes:
    """A success response frame (with ``\n``)."""
    return line({"jsonrpc": "2.0", "id": rid, "result": result})


def update(session_id: str, **fields: Any) -> bytes:
    """A ``session/update`` notification for ``session_id`` with ``update`` = ``fields``."""
    return notif("session/update", {"sessionId": session_id, "update": fields})


def strict_wire_policy() -> str:
    """The text of ``config strict`` with its ``[sandbox]`` off: for tests of the wire
    policy whose agents are not run confined (the sandbox has its own tests,
    ``tests/e2e/test_sandbox.py``)."""
    text = (TESTS.parent / "acp_proxy" / "config" / "strict.toml").read_text(encoding="utf-8")
    head, sep, tail = text.partition("\n[sandbox]\n")
    assert sep, "strict.toml has no [sandbox] table"
    assert "\nenabled = true\n" in tail, "strict.toml's [sandbox] is not enabled"
    return head + sep + tail.replace("\nenabled = true\n", "\nenabled = false\n", 1)


def proxy_command(*proxy_args: str) -> list[str]:
    """The proxy's argv up to and including ``--``."""
    return [sys.executable, "-m", "acp_proxy", *proxy_args, "--"]


class LineStream:
    """Reads newline-ended lines (and raw bytes) from a trio receive stream."""

    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self.stream = stream
        self._buf = bytearray()
        self.eof = False

    async def _fill(self) -> bool:
        if self.eof:
            return False
        data = await self.stream.receive_some(READ_SIZE)
        if not data:
            self.eof = True
            return False
        self._buf += data
        return True

    async def recv_line(self) -> bytes:
        """The next line, ``\\n`` included.

        Raises:
            EOFError: the stream ended first (the partial rest is kept).
        """
        start = 0
        while True:
            nl = self._buf.find(b"\n", start)
            if nl >= 0:
                out = bytes(self._buf[: nl + 1])
                del self._buf[: nl + 1]
                return out
            start = len(self._buf)
            if not await self._fill():
                raise EOFError(f"stream ended; {len(self._buf)} bytes without newline")

    async def recv_json(self) -> Any:
        """The next line decoded as JSON."""
        return json.loads(await self.recv_line())

    async def read_to_eof(self) -> bytes:
        """Everything until end of stream (including any buffered rest)."""
        while await self._fill():
            pass
        out = bytes(self._buf)
        self._buf.clear()
        return out

    async def expect_eof(self) -> None:
        """Asserts nothing more arrives before end of stream."""
        rest = await self.read_to_eof()
        assert rest == b"", f"unexpected bytes before EOF: {rest[:300]!r}"


@attrs.define
class ProxyRun:
    """A running proxy: the test's client side of it.

    Attributes:
        process: the proxy process.
        out: lines the proxy writes to the client (its stdout).
        stderr: everything the proxy (and the agent, inherited) wrote to stderr so far.
    """

    process: trio.Process
    out: LineStream
    stderr: bytearray = attrs.field(factory=bytearray)
    stderr_closed: trio.Event = attrs.field(factory=trio.Event)
    _stderr_grew: trio.Event = attrs.field(factory=trio.Event)

    async def drain_stderr(self, stream: trio.abc.ReceiveStream) -> None:
        """Collects stderr into :attr:`stderr` until it closes."""
        while True:
            data = await stream.receive_some(READ_SIZE)
            if not data:
                self.stderr_closed.set()
                self._stderr_grew.set()
                return
            self.stderr += data
            self._stderr_grew.set()
            self._stderr_grew = trio.Event()

    async def send(self, data: bytes) -> None:
        """Writes raw bytes to the proxy's stdin (the client -> agent direction)."""
        assert self.process.stdin is not None
        await self.process.stdin.send_all(data)

    async def close_stdin(self) -> None:
        """The client closes its side (EOF on the proxy's stdin)."""
        assert self.process.stdin is not None
        await self.process.stdin.aclose()

    async def wait(self) -> int:
        """Waits for the proxy to exit; its exit status (as a shell would report it)."""
        rc = await self.process.wait()
        return 128 - rc if rc < 0 else rc

    def stderr_text(self) -> str:
        return self.stderr.decode("utf-8", "replace")

    async def all_stderr(self) -> bytes:
        """Everything written to stderr, once it has been closed (the proxy exited)."""
        await self.stderr_closed.wait()
        return bytes(self.stderr)

    async def wait_for_stderr(self, text: str, count: int = 1) -> str:
        """Waits until ``text`` occurs ``count`` times on stderr (it is read concurrently,
        so it may lag behind stdout); returns the stderr text."""
        while self.stderr_text().count(text) < count:
            if self.stderr_closed.is_set():
                raise AssertionError(f"{text!r} not on stderr: {self.stderr_text()[-2000:]}")
            await self._stderr_grew.wait()
        return self.stderr_text()


@attrs.define
class AgentSide:
    """The test's side of the bridge agent: the agent's stdin/stdout, raw."""

    stream: trio.SocketStream
    lines: LineStream

    async def send(self, data: bytes) -> None:
        """Writes raw bytes to the agent's stdout (the agent -> client direction)."""
        await self.stream.send_all(data)

    async def recv_line(self) -> bytes:
        return await self.lines.recv_line()

    async def recv_json(self) -> Any:
        return await self.lines.recv_json()

    async def close(self) -> None:
        """Ends the agent: its stdout closes and it exits with its ``--exit-code``."""
        await self.stream.aclose()


@asynccontextmanager
async def open_proxy(command: Sequence[str], *, own_group: bool = False) -> AsyncIterator[ProxyRun]:
    """Starts ``command`` (a proxy command line) with piped stdio.

    The proxy's stderr is drained into :attr:`ProxyRun.stderr` all the time.
    On exit the process is killed if still running. ``own_group``: in a new
    process group, like the foreground job of a terminal.
    """
    proc = await trio.lowlevel.open_process(
        list(command),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        process_group=0 if own_group else None,
    )
    assert proc.stdout is not None
    assert proc.stderr is not None
    run = ProxyRun(proc, LineStream(proc.stdout))
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run.drain_stderr, proc.stderr)
            try:
                yield run
            finally:
                if proc.returncode is None:
                    proc.kill()
                with trio.move_on_after(5) as scope:
                    scope.shield = True
                    await proc.wait()
                nursery.cancel_scope.cancel()
    finally:
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                await stream.aclose()


@asynccontextmanager
async def bridged_proxy(
    proxy_args: Sequence[str] = (), agent_args: Sequence[str] = ()
) -> AsyncIterator[tuple[ProxyRun, AgentSide]]:
    """The proxy running the bridge agent; yields (client side, agent side).

    Args:
        proxy_args: proxy options before ``--``.
        agent_args: bridge agent options (see ``tests/support/peers/bridge_agent.py``).
    """
    tmp = tempfile.mkdtemp(prefix="acpx-", dir="/tmp")  # short: Unix socket path limit
    path = os.path.join(tmp, "a.sock")
    sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
    try:
        await sock.bind(path)
        sock.listen(1)
        listener = trio.SocketListener(sock)
        cmd = [*proxy_command(*proxy_args), sys.executable, str(BRIDGE_AGENT), path, *agent_args]
        async with open_proxy(cmd) as proxy:
            stream = await listener.accept()
            await listener.aclose()
            agent = AgentSide(stream, LineStream(stream))
            try:
                yield proxy, agent
            finally:
                await stream.aclose()
    finally:
        sock.close()
        shutil.rmtree(tmp, ignore_errors=True)


def process_running(pid: int) -> bool:
    """True while process ``pid`` runs (a zombie waiting for init to reap it does not; Linux)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except FileNotFoundError:
        return False
    return stat[stat.rfind(b")") + 2 :][:1] != b"Z"


def read_audit(path: Path) -> list[dict[str, Any]]:
    """The audit log's records (one JSON object per line), without the chain's
    ``run_started`` / ``run_closed`` records."""
    if not path.exists():
        return []
    records = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    return [r for r in records if r.get("event") not in RUN_RECORDS]


#: the records that frame a run in the audit log's chain
RUN_RECORDS = frozenset({"run_started", "run_closed"})


def write_config(path: Path, text: str) -> Path:
    """Writes a TOML config file and returns its path."""
    path.write_text(text)
    return path


async def handshake_v1(proxy: ProxyRun, agent: AgentSide, session_id: str = "S1") -> None:
    """initialize (v1, id 0) and session/new (id 1) through the proxy, asserting byte equality."""
    await exchange(
        proxy,
        agent,
        req(0, "initialize", {"protocolVersion": 1, "clientCapabilities": {}}),
        ok(0, {"protocolVersion": 1}),
    )
    await exchange(
        proxy,
        agent,
        req(1, "session/new", {"cwd": "/", "mcpServers": []}),
        ok(1, {"sessionId": session_id}),
    )


async def exchange(proxy: ProxyRun, agent: AgentSide, request: bytes, response: bytes) -> None:
    """Client sends ``request``, the agent sees it as sent, answers ``response``,
    and the client receives that answer unchanged (both are frames)."""
    await client_to_agent(proxy, agent, request)
    await agent_to_client(proxy, agent, response)


async def client_to_agent(proxy: ProxyRun, agent: AgentSide, data: bytes) -> None:
    """``data`` (one line) goes client -> agent unchanged."""
    await proxy.send(data)
    assert await agent.recv_line() == data


async def agent_to_client(proxy: ProxyRun, agent: AgentSide, data: bytes) -> None:
    """``data`` (one line) goes agent -> client unchanged."""
    await agent.send(data)
    assert await proxy.out.recv_line() == data


PING = line({"jsonrpc": "2.0", "method": "_test/ping"})
PONG = line({"jsonrpc": "2.0", "method": "_test/pong"})


async def agent_next_is_ping(proxy: ProxyRun, agent: AgentSide) -> None:
    """Sends a sentinel notification; the agent's next line must be it (nothing
    sent before it was forwarded)."""
    await proxy.send(PING)
    assert await agent.recv_line() == PING


async def client_next_is_pong(proxy: ProxyRun, agent: AgentSide) -> None:
    """Sends a sentinel from the agent; the client's next line must be it."""
    await agent.send(PONG)
    assert await proxy.out.recv_line() == PONG
