"""Memory of ``--listen`` (issue 29): one queue budget shared by the connections, long
messages sent in fragments, and a real proxy's peak RSS (``VmHWM``) with many busy
connections and with one large message over WebSocket."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
from trio_websocket import WebSocketRequest, WebSocketServer
from wsproto.events import TextMessage

from acp_proxy.core.engine import ProxyCore
from acp_proxy.shell.relay import DEFAULT_MAX_QUEUED_BYTES, Relay
from acp_proxy.shell.topology.queue_share import (
    LISTEN_QUEUED_BYTES,
    MIN_QUEUED_BYTES,
    QueueShare,
    share_bytes,
)
from acp_proxy.shell.transport.websocket import open_websocket_client
from acp_proxy.shell.transport.ws_bytes import FRAGMENT_BYTES, ByteCountingConnection
from benchmarks.memprobe import SHAPES
from benchmarks.websocket import ws_run
from benchmarks.ws_memprobe import measure_ws, ws_batch_rss
from shell.test_relay_inprocess import MemoryTransport, chunk, open_session

MIB = 1024 * 1024


@pytest.mark.parametrize(
    ("connections", "share"),
    [
        (0, DEFAULT_MAX_QUEUED_BYTES),
        (1, DEFAULT_MAX_QUEUED_BYTES),
        (2, DEFAULT_MAX_QUEUED_BYTES),
        (10, LISTEN_QUEUED_BYTES // 10),
        (50, LISTEN_QUEUED_BYTES // 50),
        (10_000, MIN_QUEUED_BYTES),
    ],
)
def test_each_connection_gets_an_equal_share_within_bounds(connections: int, share: int) -> None:
    """The share is the total over the open connections, at most the stdio bound and at
    least the minimum."""
    assert share_bytes(connections) == share


def _relay() -> Relay:
    return Relay(ProxyCore(), MemoryTransport("client"), MemoryTransport("agent"))


def test_opening_and_closing_connections_resizes_every_share() -> None:
    """Each relay added shrinks every open relay's bound; each one discarded grows them."""
    queues = QueueShare(total_bytes=4 * MIB)
    relays = [_relay() for _ in range(4)]
    for relay in relays:
        queues.add(relay)
    assert [r.max_queued_bytes for r in relays] == [MIB] * 4
    queues.discard(relays[0])
    queues.discard(relays[1])
    assert [r.max_queued_bytes for r in relays[2:]] == [2 * MIB] * 2
    assert queues.share == 2 * MIB


async def _stalled_agent(client: MemoryTransport, agent: MemoryTransport) -> None:
    """Opens session ``S``, then the agent sends 1000 chunks of ~1 KiB (its channel holds
    them all) toward a client that reads no more."""
    await open_session(client, agent, "S")
    for _ in range(1000):  # ~1 MiB, well under the stdio bound
        await agent.peer_sends(chunk("S", "y" * 1000))


async def test_a_smaller_share_bounds_what_a_relay_reads_from_its_agent() -> None:
    """With the client not reading, a relay whose share is 64 KiB takes only about that much
    of the agent's output (the stdio bound of 4 MiB would take it all); when the share grows
    (a connection closed), the waiting reader goes on and takes the rest."""
    client, agent = MemoryTransport("client", out_capacity=0), MemoryTransport("agent")
    relay = Relay(ProxyCore(), client, agent, channel_batches=2000)
    queues = QueueShare(total_bytes=MIN_QUEUED_BYTES)
    queues.add(relay)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(relay.run)
        with trio.fail_after(10):
            await _stalled_agent(client, agent)
            await trio.testing.wait_all_tasks_blocked()
            before = agent.taken
            relay.set_max_queued_bytes(DEFAULT_MAX_QUEUED_BYTES)
            await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    # 64 KiB queued, one batch waiting at the budget, one being written
    assert before < 100
    assert agent.taken == 1001  # the session/new answer and the 1000 chunks


async def _echo_server(received: list[str], got: trio.Event, task_status: Any) -> None:
    """A plain trio-websocket server (it reassembles fragments) keeping the first message."""

    async def handler(request: WebSocketRequest) -> None:
        ws = await request.accept()
        received.append(str(await ws.get_message()))
        got.set()

    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    async with trio.open_nursery() as nursery:
        server = WebSocketServer(
            handler, listeners, handler_nursery=nursery, max_message_size=16 * MIB
        )
        await nursery.start(server.run)
        task_status.started(listeners[0].socket.getsockname()[1])


@pytest.mark.parametrize("offset", [0, 1, 2, 3])
async def test_a_long_message_goes_in_fragments_and_arrives_whole(
    monkeypatch: pytest.MonkeyPatch, offset: int
) -> None:
    """A message of 3.5 fragments with 4-, 3- and 2-byte characters across every fragment
    boundary reaches the peer as the same one message; no fragment is over the size."""
    sent: list[TextMessage] = []
    send = ByteCountingConnection._send

    async def record(self: ByteCountingConnection, event: Any) -> None:
        if isinstance(event, TextMessage):
            sent.append(event)
        await send(self, event)

    monkeypatch.setattr(ByteCountingConnection, "_send", record)
    text = "a" * offset + ("\U0001f600\u20ac\u00e9x" * (FRAGMENT_BYTES * 7 // 20))
    data = text.encode("utf-8")
    received: list[str] = []
    got = trio.Event()
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            port = await nursery.start(_echo_server, received, got)
            async with open_websocket_client(
                "127.0.0.1", port, "/", secure=False, headers=[],
                max_message_bytes=MIB, connect_timeout_seconds=10,
            ) as ws:  # fmt: skip
                assert isinstance(ws, ByteCountingConnection)
                await ws.send_text(memoryview(data))
                await got.wait()
            nursery.cancel_scope.cancel()
    assert received == [text]
    assert len(sent) == 4
    assert [e.message_finished for e in sent] == [False, False, False, True]
    assert all(len(e.data.encode("utf-8")) <= FRAGMENT_BYTES for e in sent)


@pytest.mark.slow
def test_busy_connections_grow_the_proxy_by_their_share_not_by_4_mib_each() -> None:
    """20 connections, each agent streaming 3 MiB to a client that reads slower: the proxy's
    peak RSS rises less than 30 MiB over its idle RSS (each connection's queue of 4 MiB
    filled to 3 MiB before the shared budget: about 60 MiB)."""
    fig = ws_run(20, 3000, timeout_s=120)
    assert 5 < fig["idle_rss_mib"] <= fig["peak_rss_mib"] < fig["idle_rss_mib"] + 30, fig


@pytest.mark.slow
@pytest.mark.parametrize("shape", ["long_string", "numbers"])
def test_a_large_agent_message_over_websocket_stays_under_the_bound(
    tmp_path: Path, shape: str
) -> None:
    """31 MiB written by the agent, forwarded to a WebSocket client: the proxy's peak RSS
    stays under 64 MiB + 4 x N (a whole-message send made four more copies: 222 MiB)."""
    payload = SHAPES[shape](31 * MIB, False)
    mib = measure_ws(payload, False, str(tmp_path), timeout_s=120)
    assert 5 < mib <= 64 + 4 * len(payload) / MIB, mib


@pytest.mark.slow
def test_the_batches_over_websocket_stay_under_the_bound() -> None:
    """The agent batch of 300,000 ``{}`` and the client batch of 200,000 over WebSocket:
    the proxy's peak RSS stays under 64 MiB + 4 x N."""
    for direction, fig in ws_batch_rss().items():
        assert 5 < fig["peak_rss_mib"] <= fig["bound_mib"], (direction, fig)
