"""Metrics, status and the life-cycle log (README "See what it does")."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
import trio
from prometheus_client.parser import text_string_to_metric_families
from support.corekit import AGENT, CLIENT, announce, chunk, req, resp

from acp_proxy.config import Config, ListenConfig
from acp_proxy.core.engine import ProxyCore
from acp_proxy.core.trace import TracingCore
from acp_proxy.errors import UsageError
from acp_proxy.shell.metrics import parse_address, serve_metrics
from acp_proxy.shell.observe import Hub, Tally


def session(core: ProxyCore) -> None:
    """initialize, session/new, a child announced with a grant, traffic held for a ghost."""
    core.receive(
        CLIENT, req(0, "initialize", {"protocolVersion": 1, "clientInfo": {"name": "zed"}}), 0.0
    )
    core.receive(AGENT, resp(0, {"protocolVersion": 1, "agentInfo": {"name": "claude"}}), 0.5)
    core.receive(CLIENT, req(1, "session/new", {"cwd": "/", "mcpServers": []}), 1.0)
    core.receive(AGENT, resp(1, {"sessionId": "s1"}), 1.2)
    core.receive(AGENT, announce("s1", "kid", title="searcher", capabilities={"cancel": {}}), 2.0)
    core.receive(AGENT, chunk("ghost", "early"), 2.0)


async def get(port: int, path: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    await stream.send_all(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{extra}\r\n".encode())
    data = b""
    while chunk_ := await stream.receive_some(65536):
        data += chunk_
    await stream.aclose()
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def test_a_hub_that_observes_nothing_gives_the_plain_core() -> None:
    assert type(Hub().make_core(Config())) is ProxyCore
    assert type(Hub(tally=Tally()).make_core(Config())) is TracingCore


async def test_metrics_and_status_over_http() -> None:
    hub = Hub(tally=Tally())
    core = hub.make_core(Config(), agent_pid=4242)
    async with trio.open_nursery() as nursery:
        port = await nursery.start(serve_metrics, "127.0.0.1:0", hub, Config())
        assert (await get(port, "/readyz"))[0] == 200
        session(core)
        code, body = await get(port, "/metrics")
        assert code == 200
        families = {f.name: f for f in text_string_to_metric_families(body.decode())}
        samples: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for f in families.values()
            for s in f.samples
        }
        assert (
            samples[
                ("acp_proxy_messages_total", (("direction", "agent->client"), ("kind", "response")))
            ]
            == 2
        )
        assert (
            samples[
                ("acp_proxy_messages_total", (("direction", "client->agent"), ("kind", "request")))
            ]
            == 2
        )
        assert samples[("acp_proxy_decisions_total", (("decision", "forwarded"),))] == 5
        assert samples[("acp_proxy_decisions_total", (("decision", "held"),))] == 1
        assert samples[("acp_proxy_held_messages", ())] == 1
        assert samples[("acp_proxy_held_bytes", ())] == len(chunk("ghost", "early"))
        assert samples[("acp_proxy_children", ())] == 1
        assert families["acp_proxy_request_duration_seconds"].type == "histogram"
        assert samples[("acp_proxy_request_duration_seconds_count", ())] == 2
        assert samples[("acp_proxy_request_duration_seconds_bucket", (("le", "0.25"),))] == 1
        assert samples[("acp_proxy_request_duration_seconds_bucket", (("le", "0.5"),))] == 2

        code, body = await get(port, "/status")
        assert code == 200
        status: dict[str, Any] = json.loads(body)
        assert status["agentPid"] == 4242
        (conn,) = status["connections"]
        assert conn["protocolVersion"] == 1
        assert (conn["client"], conn["agent"]) == ("zed", "claude")
        assert "s1" in conn["sessions"]
        assert conn["children"]["kid"]["parent"] == "s1"
        assert conn["children"]["kid"]["title"] == "searcher"
        assert conn["children"]["kid"]["capabilities"] == {"cancel": {}}
        assert conn["heldSessions"] == 1
        assert conn["counters"]["held"] == 1
        assert (await get(port, "/healthz")) == (200, b"ok\n")
        assert (await get(port, "/nope"))[0] == 404
        # a web page cannot read it
        assert (await get(port, "/status", {"Origin": "https://evil.example"}))[0] == 403

        core.peer_closed(AGENT, 3.0, "agent exited")
        assert (await get(port, "/readyz"))[0] == 503
        nursery.cancel_scope.cancel()


async def test_a_non_loopback_address_needs_a_token(tmp_path: Path) -> None:
    hub = Hub(tally=Tally())
    with pytest.raises(UsageError, match="not a loopback address"):
        await serve_metrics("0.0.0.0:0", hub, Config())
    token = tmp_path / "token"
    token.write_text("s3cret-token\n")
    cfg = Config(listen=ListenConfig(token_file=str(token)))
    async with trio.open_nursery() as nursery:
        port = await nursery.start(serve_metrics, "0.0.0.0:0", hub, cfg)
        assert (await get(port, "/metrics"))[0] == 401
        auth = {"Authorization": "Bearer s3cret-token"}
        assert (await get(port, "/metrics", auth))[0] == 200
        assert (await get(port, "/metrics", {"Authorization": "Bearer wrong"}))[0] == 401
        nursery.cancel_scope.cancel()


def test_addresses_are_host_and_port() -> None:
    assert parse_address("127.0.0.1:9464") == ("127.0.0.1", 9464)
    assert parse_address("[::1]:9464") == ("::1", 9464)
    for bad in ("9464", "host:", "host:99999", ":80"):
        with pytest.raises(UsageError):
            parse_address(bad)


def test_the_life_cycle_is_logged_at_info(caplog: pytest.LogCaptureFixture) -> None:
    hub = Hub(lifecycle=True)
    core = hub.make_core(Config())
    with caplog.at_level(logging.INFO, logger="acp_proxy.lifecycle"):
        session(core)
        core.peer_closed(AGENT, 3.0, "agent pid 7 exited with status 0")
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "connection 1: initialized, protocol version 1; client 'zed', agent 'claude'",
        "connection 1: session s1 created",
        "connection 1: child kid announced under s1, grants: cancel",
        "connection 1: the agent's side ended: agent pid 7 exited with status 0",
    ]
