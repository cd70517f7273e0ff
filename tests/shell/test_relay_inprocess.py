"""The trio relay over in-memory transports, with trio's virtual clock (no sleeps, no processes)."""

from __future__ import annotations

import json
from typing import Any

import trio
import trio.testing

from acp_proxy.config import Config, HoldConfig
from acp_proxy.core.engine import ProxyCore
from acp_proxy.shell.relay import Relay
from acp_proxy.shell.transport.base import Closed, FrameTransport, Incoming


class MemoryTransport(FrameTransport):
    """A peer made of two memory channels: frames the peer sends, frames written to it."""

    def __init__(self, name: str, out_capacity: float = 1000) -> None:
        self.name = name
        self._in_tx, self._in_rx = trio.open_memory_channel[list[Incoming]](1000)
        self._out_tx, self.out_rx = trio.open_memory_channel[bytes](out_capacity)
        self.write_closed = trio.Event()
        self.taken = 0  # frames the relay has read from this peer

    async def peer_sends(self, *frames: bytes) -> None:
        await self._in_tx.send(list(frames))

    async def peer_eof(self) -> None:
        await self._in_tx.aclose()

    async def receive_batch(self) -> list[Incoming] | None:
        try:
            batch = await self._in_rx.receive()
        except trio.EndOfChannel:
            return None
        self.taken += len(batch)
        return batch

    async def send_batch(self, frames: list[bytes]) -> None:
        for f in frames:
            try:
                await self._out_tx.send(f)
            except trio.BrokenResourceError as exc:
                raise Closed(f"{self.name} gone") from exc

    async def close_write(self) -> None:
        self.write_closed.set()

    async def next_json(self) -> Any:
        return json.loads(await self.out_rx.receive())


def enc(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def chunk(sid: str, text: str) -> bytes:
    return enc(
        {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {
                "sessionId": sid,
                "update": {"sessionUpdate": "agent_message_chunk", "content": {"text": text}},
            },
        }
    )


async def open_session(client: MemoryTransport, agent: MemoryTransport, sid: str) -> None:
    await client.peer_sends(enc({"jsonrpc": "2.0", "id": sid, "method": "session/new"}))
    assert (await agent.next_json())["method"] == "session/new"
    await agent.peer_sends(enc({"jsonrpc": "2.0", "id": sid, "result": {"sessionId": sid}}))
    assert (await client.next_json())["result"] == {"sessionId": sid}


async def test_hold_timeout_releases_through_the_relay_timer(autojump_clock: Any) -> None:
    """Held traffic for a never-announced session reaches the client at hold.timeout_seconds."""
    client, agent = MemoryTransport("client"), MemoryTransport("agent")
    core = ProxyCore(Config(hold=HoldConfig(timeout_seconds=7.0)))
    relay = Relay(core, client, agent, wait_agent=_status(0))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(relay.run)
        with trio.fail_after(60):
            await open_session(client, agent, "S")
            start = trio.current_time()
            await agent.peer_sends(chunk("ghost", "early"))
            await agent.peer_sends(chunk("S", "live"))
            assert (await client.next_json())["params"]["sessionId"] == "S"  # not blocked
            held = await client.next_json()
            assert held["params"]["sessionId"] == "ghost"
            assert trio.current_time() - start == 7.0
        nursery.cancel_scope.cancel()


async def test_flood_for_unknown_session_stays_bounded_while_others_stream(
    autojump_clock: Any,
) -> None:
    """A flood for a never-announced session keeps the hold within max_bytes; others flow."""
    client, agent = MemoryTransport("client", out_capacity=10_000), MemoryTransport("agent")
    core = ProxyCore(Config(hold=HoldConfig(max_bytes=4096, on_expire="drop")))
    relay = Relay(core, client, agent, wait_agent=_status(0))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(relay.run)
        with trio.fail_after(60):
            await open_session(client, agent, "S")
            for i in range(500):
                await agent.peer_sends(chunk("ghost", "x" * 100), chunk("S", str(i)))
            for i in range(500):
                assert (await client.next_json())["params"]["update"]["content"]["text"] == str(i)
            stats = core.statistics()
            assert stats.held_bytes <= 4096
            assert stats.dropped > 0
        nursery.cancel_scope.cancel()


async def test_agent_exit_answers_pending_client_requests() -> None:
    """When the agent's stream ends, each client request in flight gets an error with the status."""
    client, agent = MemoryTransport("client"), MemoryTransport("agent")
    relay = Relay(ProxyCore(), client, agent, wait_agent=_status(3))
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(relay.run)
            await client.peer_sends(enc({"jsonrpc": "2.0", "id": 1, "method": "session/prompt"}))
            await agent.next_json()
            await agent.peer_eof()
            answer = await client.next_json()
    assert answer["id"] == 1
    assert "agent exited with status 3" in answer["error"]["message"]


async def test_client_eof_closes_agent_input_and_stops_it() -> None:
    """Client EOF closes the agent's input after pending agent requests are answered."""
    client, agent = MemoryTransport("client"), MemoryTransport("agent")
    stopped = trio.Event()

    async def stop_agent() -> None:
        stopped.set()
        await agent.peer_eof()

    relay = Relay(ProxyCore(), client, agent, wait_agent=_status(0), stop_agent=stop_agent)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(relay.run)
            await agent.peer_sends(enc({"jsonrpc": "2.0", "id": 0, "method": "fs/read_text_file"}))
            assert (await client.next_json())["method"] == "fs/read_text_file"
            await client.peer_eof()
            answer = await agent.next_json()
            assert answer["id"] == 0
            assert answer["error"]["code"] == -32603
            await agent.write_closed.wait()
            await stopped.wait()


async def test_client_that_stops_reading_stops_the_relay_reading_the_agent() -> None:
    """Backpressure: with the client not reading, the relay stops taking frames from the agent."""
    client, agent = MemoryTransport("client", out_capacity=0), MemoryTransport("agent")
    relay = Relay(ProxyCore(), client, agent, channel_batches=2, max_queued_bytes=10_000)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(relay.run)
        with trio.fail_after(10):
            await client.peer_sends(enc({"jsonrpc": "2.0", "id": "n", "method": "session/new"}))
            await agent.next_json()
            # the session/new response cannot be delivered: the client never reads
            await agent.peer_sends(enc({"jsonrpc": "2.0", "id": "n", "result": {"sessionId": "S"}}))
            for _ in range(1000):
                await agent.peer_sends(chunk("S", "y" * 1000))
            await trio.testing.wait_all_tasks_blocked()
            assert agent.taken < 100  # bounded by the channel and the byte budget, not 1000
        nursery.cancel_scope.cancel()


def _status(code: int) -> Any:
    async def wait() -> int:
        return code

    return wait
