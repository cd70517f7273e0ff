"""Permission ask timeouts through the trio relay's timer, on trio's virtual clock."""

from __future__ import annotations

from typing import Any

import trio

from acp_proxy.config.io import config_from_dict
from acp_proxy.core.actions import Peer
from acp_proxy.core.engine import ProxyCore
from acp_proxy.shell.relay import Relay

from .test_relay_inprocess import MemoryTransport, _status, enc, open_session


async def test_ask_timeout_answers_cancelled_through_the_relay_timer(autojump_clock: Any) -> None:
    """A forwarded permission request the client leaves unanswered is answered cancelled to
    the agent at ask_timeout_seconds; the client's late answer never reaches the agent."""
    rules = [{"name": "ask-briefly", "action": "ask", "ask_timeout_seconds": 12.5}]
    core = ProxyCore(config_from_dict({"permissions": {"rules": rules}}))
    client, agent = MemoryTransport("client"), MemoryTransport("agent")
    relay = Relay(core, client, agent, wait_agent=_status(0))
    ask = {
        "jsonrpc": "2.0",
        "id": 9,
        "method": "session/request_permission",
        "params": {"sessionId": "S", "toolCall": {"toolCallId": "t"}, "options": []},
    }
    async with trio.open_nursery() as nursery:
        nursery.start_soon(relay.run)
        with trio.fail_after(60):
            await open_session(client, agent, "S")
            start = trio.current_time()
            await agent.peer_sends(enc(ask))
            assert (await client.next_json())["id"] == 9
            answer = await agent.next_json()
            assert answer == {
                "jsonrpc": "2.0",
                "id": 9,
                "result": {"outcome": {"outcome": "cancelled"}},
            }
            assert trio.current_time() - start == 12.5
            cancel = await client.next_json()
            assert cancel["method"] == "$/cancel_request"
            assert cancel["params"] == {"requestId": 9}
            late = {"jsonrpc": "2.0", "id": 9, "result": {"outcome": {"outcome": "cancelled"}}}
            await client.peer_sends(enc(late))
            await trio.sleep(1)
            assert agent.out_rx.statistics().current_buffer_used == 0
            assert core.pending_requests(Peer.AGENT) == 0
        nursery.cancel_scope.cancel()
