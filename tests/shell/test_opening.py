"""The stdio form's opening (acp_proxy.shell.opening): the first messages relayed by a
synchronous loop while the relay's modules import, then handed over to the relay.

The peers are pipes; where a peer must act while the loop runs, the ``load``
callable (run in the loop's import thread) plays it, with blocking reads:
no sleeps, no timeouts.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import trio
import trio.testing

from acp_proxy.config import Config, HoldConfig
from acp_proxy.core.actions import Peer
from acp_proxy.core.engine import ProxyCore
from acp_proxy.core.wire.framing import LineFramer
from acp_proxy.shell.opening import Opening, relay_opening, write_queued
from acp_proxy.shell.relay import Relay
from acp_proxy.shell.routing import route_actions
from acp_proxy.shell.transport.ndjson import NdjsonTransport
from tests.shell.test_relay_inprocess import MemoryTransport

INIT = b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}'
ANSWER = b'{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{}}}'
NEW = b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}'
CREATED = b'{"jsonrpc":"2.0","id":1,"result":{"sessionId":"S"}}'


def ghost_chunk(sid: str = "ghost") -> bytes:
    update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "x"}}
    return json.dumps(
        {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {"sessionId": sid, "update": update},
        },
        separators=(",", ":"),
    ).encode()


class Pipes:
    """The two peers as four pipes; ``fds`` are the proxy's ends."""

    def __init__(self) -> None:
        self.client_in, self.client_w = os.pipe()  # the client writes, the proxy reads
        self.client_r, self.client_out = os.pipe()  # the proxy writes, the client reads
        self.agent_out, self.agent_w = os.pipe()  # the agent writes, the proxy reads
        self.agent_r, self.agent_in = os.pipe()  # the proxy writes, the agent reads
        self.fds = {
            Peer.CLIENT: (self.client_in, self.client_out),
            Peer.AGENT: (self.agent_out, self.agent_in),
        }
        self._buffers: dict[int, bytes] = {}

    def line(self, fd: int) -> bytes:
        """The next line the proxy wrote to ``fd`` (blocking read), without its newline."""
        buf = self._buffers.get(fd, b"")
        while b"\n" not in buf:
            data = os.read(fd, 1 << 20)
            assert data, "the proxy closed the pipe"
            buf += data
        head, _, rest = buf.partition(b"\n")
        self._buffers[fd] = rest
        return head

    def close(self) -> None:
        for fd in vars(self).values():
            if isinstance(fd, int):
                with contextlib.suppress(OSError):
                    os.close(fd)


@pytest.fixture
def pipes() -> Iterator[Pipes]:
    p = Pipes()
    yield p
    p.close()


def reference(
    feed: list[tuple[Peer, bytes]], config: Config | None = None
) -> dict[Peer, list[bytes]]:
    """What a core fed ``feed`` (frames, in order) sends each peer, by the relay's routing."""
    core = ProxyCore(config or Config())
    sent: dict[Peer, list[bytes]] = {Peer.CLIENT: [], Peer.AGENT: []}
    for peer, frame in feed:
        for to, frames in route_actions(core.receive(peer, [frame], 0.0), None).items():
            sent[to].extend(frames)
    return sent


def test_the_first_exchange_is_relayed_while_the_import_runs(pipes: Pipes) -> None:
    """initialize and its answer cross while ``load`` still runs (in another thread), with
    the bytes a core fed the same frames sends; then nothing is left over."""
    seen: dict[str, Any] = {}

    def load() -> None:  # the import thread; here it plays both peers
        seen["thread"] = threading.current_thread() is not threading.main_thread()
        os.write(pipes.client_w, INIT + b"\n")
        seen["agent"] = pipes.line(pipes.agent_r)
        os.write(pipes.agent_w, ANSWER + b"\n")
        seen["client"] = pipes.line(pipes.client_r)

    opening = Opening(ProxyCore(Config()), 1 << 20)
    relay_opening(opening, pipes.fds, load)
    expected = reference([(Peer.CLIENT, INIT), (Peer.AGENT, ANSWER)])
    assert seen == {"thread": True, "agent": INIT, "client": ANSWER}
    assert expected == {Peer.AGENT: [INIT], Peer.CLIENT: [ANSWER]}
    assert opening.core.protocol_version == 1
    assert opening.queued == {Peer.CLIENT: [], Peer.AGENT: []}
    assert opening.ended == {Peer.CLIENT: False, Peer.AGENT: False}
    assert opening.read == {Peer.CLIENT: len(INIT) + 1, Peer.AGENT: len(ANSWER) + 1}


def test_a_partial_line_and_the_end_of_stream_are_handed_over(pipes: Pipes) -> None:
    """The client's stream ends mid-way: the loop stops at once (``load`` then runs in the
    calling thread); the partial line stays in the framer for the relay."""
    os.write(pipes.client_w, INIT + b"\n" + NEW[:20])
    os.close(pipes.client_w)
    threads: list[bool] = []
    opening = Opening(ProxyCore(Config()), 1 << 20)
    relay_opening(
        opening,
        pipes.fds,
        lambda: threads.append(threading.current_thread() is threading.main_thread()),
    )
    assert threads == [True]
    assert opening.ended[Peer.CLIENT] is True
    assert pipes.line(pipes.agent_r) == INIT
    framer = opening.framers[Peer.CLIENT]
    assert framer.feed(NEW[20:] + b"\n") == [NEW]  # the rest of the line completes it


async def test_the_relay_transport_resumes_from_the_opening_s_framer() -> None:
    """``NdjsonTransport.resume``: a stream whose end was read in the opening delivers the
    framer's last line, then the end, without reading again."""
    framer = LineFramer(1 << 20)
    assert framer.feed(NEW) == []
    sender, receiver = trio.testing.memory_stream_pair()
    transport = NdjsonTransport(receiver, sender, 1 << 20, name="client")
    transport.resume(framer, ended=True)
    await sender.send_all(b"never read\n")
    assert await transport.receive_batch() == [NEW]
    assert await transport.receive_batch() is None


def test_writes_that_fill_the_pipe_leave_the_exact_rest(pipes: Pipes) -> None:
    """A pipe that takes only part of the queue: what was written plus what is left, with
    the newlines, is the whole queue, cut anywhere (mid-frame or before a newline)."""
    fcntl.fcntl(pipes.agent_in, fcntl.F_SETPIPE_SZ, 4096)
    size = fcntl.fcntl(pipes.agent_in, fcntl.F_GETPIPE_SZ)
    os.set_blocking(pipes.agent_in, False)
    frames = [b"a" * 3000, b"b" * (size - 3000 - 1), b"c" * 5000, b"d"]  # b ends at the cut
    queue = list(frames)
    got = b""
    rounds = 0
    while queue:
        assert write_queued(pipes.agent_in, queue)
        rounds += 1
        got += os.read(pipes.agent_r, 1 << 20)
        assert got + b"".join(f + b"\n" for f in queue) == b"".join(f + b"\n" for f in frames)
    assert rounds >= 3
    assert got == b"".join(f + b"\n" for f in frames)


def test_a_write_to_a_closed_peer_stops_the_opening_with_the_frames_kept(pipes: Pipes) -> None:
    os.close(pipes.agent_r)
    os.set_blocking(pipes.agent_in, False)
    queue = [INIT]
    assert write_queued(pipes.agent_in, queue) is False
    assert queue == [INIT]


def test_the_core_timer_fires_in_the_opening(pipes: Pipes) -> None:
    """Agent traffic for a session the client cannot know is held; when its hold times
    out during the opening, it is released as the relay would release it."""
    config = Config(hold=HoldConfig(timeout_seconds=5.0))
    os.write(pipes.agent_w, ghost_chunk() + b"\n")
    times = iter([100.0])

    def clock() -> float:  # the receive at 100 s, every later reading past the hold
        return next(times, 1000.0)

    seen: list[bytes] = []
    opening = Opening(ProxyCore(config), 1 << 20)
    relay_opening(opening, pipes.fds, lambda: seen.append(pipes.line(pipes.client_r)), clock)
    assert seen == [ghost_chunk()]
    core = ProxyCore(config)
    assert route_actions(core.receive(Peer.AGENT, [ghost_chunk()], 100.0), None) == {}
    released = route_actions(core.handle_timer(1000.0), None)
    assert released == {Peer.CLIENT: [ghost_chunk()]}
    assert opening.core.get_timer() is None


def test_a_load_failure_is_raised_after_the_loop_stops(pipes: Pipes) -> None:
    def load() -> None:
        raise ImportError("no trio")

    with pytest.raises(ImportError, match="no trio"):
        relay_opening(Opening(ProxyCore(Config()), 1 << 20), pipes.fds, load)


async def test_the_relay_writes_the_opening_s_frames_before_its_own(autojump_clock: Any) -> None:
    """``Relay(queued=...)``: what the opening had not written goes out first, in order,
    ahead of what the relay then decides."""
    client, agent = MemoryTransport("client"), MemoryTransport("agent")
    core = ProxyCore()
    for peer, frame in ((Peer.CLIENT, INIT), (Peer.AGENT, ANSWER), (Peer.CLIENT, NEW)):
        core.receive(peer, [frame], 0.0)
    queued = {Peer.CLIENT: [ANSWER], Peer.AGENT: [b"", NEW]}  # b"": a newline still due
    relay = Relay(core, client, agent, queued=queued)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(relay.run)
        with trio.fail_after(60):
            assert await client.out_rx.receive() == ANSWER
            assert await agent.out_rx.receive() == b""
            assert await agent.out_rx.receive() == NEW
            await agent.peer_sends(CREATED)
            assert await client.out_rx.receive() == CREATED
        nursery.cancel_scope.cancel()


def test_after_an_opening_trio_runs_on_the_opening_s_clock() -> None:
    """The relay after an opening keeps the core's clock (``perf_counter``): trio's own has
    a random offset of 10,000 s or more, which would put the opening's deadlines in
    the past."""
    from acp_proxy.cli import _trio_run

    async def now() -> int:
        return int(trio.current_time())

    before = time.perf_counter()
    assert before - 1 <= _trio_run(now, clock=True) <= time.perf_counter() + 1
    assert _trio_run(now) > time.perf_counter() + 5000


def test_the_import_waits_for_the_agent_s_first_bytes(
    pipes: Pipes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The import starts once the agent has written (its boot is over), not before; the
    bound (:data:`IMPORT_AFTER_SECONDS`, 30 s here) is not what starts it."""
    monkeypatch.setattr("acp_proxy.shell.opening.IMPORT_AFTER_SECONDS", 30.0)
    os.write(pipes.client_w, INIT + b"\n")
    opening = Opening(ProxyCore(Config()), 1 << 20)
    at_load: list[int] = []

    def load() -> None:
        at_load.append(opening.read[Peer.AGENT])

    def agent() -> None:  # answers once initialize has reached it
        assert pipes.line(pipes.agent_r) == INIT
        os.write(pipes.agent_w, ANSWER + b"\n")

    peer = threading.Thread(target=agent)
    peer.start()
    begin = time.monotonic()
    relay_opening(opening, pipes.fds, load)
    peer.join()
    assert at_load == [len(ANSWER) + 1]
    assert time.monotonic() - begin < 30.0
    assert pipes.line(pipes.client_r) == ANSWER
