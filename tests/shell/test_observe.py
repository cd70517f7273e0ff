"""Metrics, status and the life-cycle log (README "See what it does")."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import pytest
import trio
from prometheus_client.parser import text_string_to_metric_families
from support.corekit import AGENT, CLIENT, announce, chunk, req, resp

from acp_proxy.config import Config, ListenConfig
from acp_proxy.core.actions import Action, Report
from acp_proxy.core.engine import ProxyCore
from acp_proxy.core.engine.negotiated import MAX_NAME_CHARS
from acp_proxy.core.trace import TracingCore
from acp_proxy.errors import UsageError
from acp_proxy.shell.metrics import parse_address, serve_metrics
from acp_proxy.shell.observe import Hub, Tally, install, make_core
from acp_proxy.shell.routing import LOG_THROTTLE, route_actions
from acp_proxy.shell.watch import open_hub


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


async def test_metrics_answers_carry_standard_reason_phrases() -> None:
    """`HTTP/1.1 404 Not Found`, not `HTTP/1.1 404 ` (an empty reason phrase)."""
    async with trio.open_nursery() as nursery:
        port = await nursery.start(serve_metrics, "127.0.0.1:0", Hub(tally=Tally()), Config())
        for request, line in (
            (b"GET /nope HTTP/1.1", b"HTTP/1.1 404 Not Found"),
            (b"GET /metrics HTTP/1.1", b"HTTP/1.1 200 OK"),
            (b"DELETE /metrics HTTP/1.1", b"HTTP/1.1 405 Method Not Allowed"),
        ):
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            await stream.send_all(request + b"\r\nHost: 127.0.0.1\r\n\r\n")
            data = b""
            while chunk_ := await stream.receive_some(65536):
                data += chunk_
            await stream.aclose()
            assert data.partition(b"\r\n")[0] == line
        nursery.cancel_scope.cancel()


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
        # agent-given text only with audit.include_content
        assert "title" not in conn["children"]["kid"]
        assert "searcher" not in body.decode()
        assert conn["principal"] is None
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


LIFE_CYCLE = [
    "initialized, protocol version 1; client 'zed', agent 'claude'",
    "session 's1' created",
    "child 'kid' announced under 's1', grants: cancel",
    "the agent's side ended: agent pid 7 exited with status 0",
]


def _logged_life_cycle(core: ProxyCore, caplog: pytest.LogCaptureFixture) -> list[str]:
    """The lines the shell logs for a session through ``core`` (as the relay does)."""
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="acp_proxy"):
        for actions in session_actions(core):
            route_actions(actions, None)
        route_actions(core.peer_closed(AGENT, 3.0, "agent pid 7 exited with status 0"), None)
    return [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]


def session_actions(core: ProxyCore) -> list[list[Action]]:
    """:func:`session`, keeping each call's actions."""
    out: list[list[Action]] = []
    real = core.receive

    def keep(*args: Any) -> list[Action]:
        out.append(real(*args))
        return out[-1]

    core.receive = keep  # type: ignore[method-assign]
    try:
        session(core)
    finally:
        del core.receive
    return out


def test_info_logging_alone_keeps_the_plain_core(caplog: pytest.LogCaptureFixture) -> None:
    """--log-level info with no trace and no metrics: the cores are plain (no tracing cost),
    and the life-cycle still reaches the log, from the plain core's own reports."""
    assert open_hub(Config(), "run") is None
    install(None)
    core = make_core(Config())
    assert type(core) is ProxyCore
    assert not isinstance(core, TracingCore)
    label = core.ledger.label
    assert re.fullmatch(r"connection \d+", label)
    assert _logged_life_cycle(core, caplog) == [f"{label}: {line}" for line in LIFE_CYCLE]
    # the names are the core's, for /status
    assert (core.negotiated.client_name, core.negotiated.agent_name) == ("zed", "claude")


def test_the_life_cycle_is_logged_once_when_traced(caplog: pytest.LogCaptureFixture) -> None:
    """With a trace or metrics (the tracing core) the lines are the same, not doubled."""
    hub = Hub(tally=Tally())
    core = hub.make_core(Config())
    assert type(core) is TracingCore
    assert _logged_life_cycle(core, caplog) == [f"connection 1: {line}" for line in LIFE_CYCLE]
    conn = hub.connections[1]
    assert (conn.client_name, conn.agent_name, conn.closed) == ("zed", "claude", "agent")


def test_life_cycle_reports_cost_nothing_above_info(caplog: pytest.LogCaptureFixture) -> None:
    """At warning level the info reports are neither logged nor counted by the rate limit
    (so no "suppressed" summary appears for lines nobody asked for)."""
    core = ProxyCore(Config(), label="connection 9")
    suppressed = LOG_THROTTLE.total_suppressed
    with caplog.at_level(logging.WARNING, logger="acp_proxy"):
        for _ in range(50):
            route_actions(core.receive(CLIENT, req(0, "initialize", {}), 0.0), None)
            route_actions(core.receive(AGENT, resp(0, {"protocolVersion": 1}), 0.0), None)
    assert caplog.records == []
    assert LOG_THROTTLE.total_suppressed == suppressed


def test_a_peer_name_is_kept_bounded() -> None:
    core = ProxyCore(Config())
    huge = "x" * 100_000
    core.receive(CLIENT, req(0, "initialize", {"clientInfo": {"name": huge}}), 0.0)
    actions = core.receive(AGENT, resp(0, {"protocolVersion": 1, "agentInfo": {"name": 7}}), 0.0)
    assert core.negotiated.client_name == "x" * MAX_NAME_CHARS
    assert core.negotiated.agent_name is None
    (report,) = [a for a in actions if type(a) is Report]
    assert report.kind == "initialized"
    assert report.text.endswith("agent (unnamed)")


def test_protocol_v2_peer_names_are_read_from_info() -> None:
    """v2 `initialize` names the peers in `info` (not clientInfo/agentInfo): the info log
    line, /status (the connection) and the trace's `peer` all carry the names."""
    hub = Hub(tally=Tally())
    core = hub.make_core(Config())
    assert type(core) is TracingCore
    records: list[dict[str, Any]] = []
    to_hub = core.emit

    def emit(record: dict[str, Any]) -> None:
        records.append(record)
        to_hub(record)

    core.emit = emit
    v2_client = {"protocolVersion": 2, "info": {"name": "zed", "version": "1"}, "capabilities": {}}
    core.receive(CLIENT, req(0, "initialize", v2_client), 0.0)
    v2_agent = {
        "protocolVersion": 2,
        "info": {"name": "claude", "version": "2"},
        "capabilities": {},
    }
    actions = core.receive(AGENT, resp(0, v2_agent), 0.0)
    (report,) = [a for a in actions if type(a) is Report]
    assert report.text.endswith("client 'zed', agent 'claude'")
    conn = hub.connections[1]
    assert (conn.client_name, conn.agent_name) == ("zed", "claude")
    assert [r.get("peer") for r in records if r["type"] == "message"] == ["zed", "claude"]
    # a v1 spelling still wins where both are given
    core = ProxyCore(Config())
    both = {"clientInfo": {"name": "v1-name"}, "info": {"name": "v2-name"}}
    core.receive(CLIENT, req(0, "initialize", both), 0.0)
    assert core.negotiated.client_name == "v1-name"


async def test_idle_connections_beyond_the_bound_do_not_block_the_metrics_server() -> None:
    """MAX_CONNECTIONS idle connections (a slowloris) hold their slots; one more is closed at
    once, and a request still gets its answer when a slot frees (hostile review: no cap)."""
    from acp_proxy.shell import metrics

    async with trio.open_nursery() as nursery:
        port = await nursery.start(serve_metrics, "127.0.0.1:0", Hub(tally=Tally()), Config())
        idle = [
            await trio.open_tcp_stream("127.0.0.1", port) for _ in range(metrics.MAX_CONNECTIONS)
        ]
        with trio.fail_after(20):
            while True:  # until the server has taken every slot, one more is closed at once
                extra = await trio.open_tcp_stream("127.0.0.1", port)
                with trio.move_on_after(1):
                    if await extra.receive_some(1) == b"":
                        break
                idle.append(extra)  # it got a slot before the others were taken
            await extra.aclose()
        await idle.pop().aclose()
        with trio.fail_after(5):
            while True:  # the freed slot serves the next request
                try:
                    status, _ = await get(port, "/healthz")
                except (IndexError, trio.BrokenResourceError):
                    status = 0  # closed unanswered: the slot is not free yet
                if status == 200:
                    break
                await trio.sleep(0.05)
        for stream in idle:
            await stream.aclose()
        nursery.cancel_scope.cancel()


async def test_status_and_metrics_count_would_block_per_rule() -> None:
    """policy.mode = "observe": /status and /metrics count would-block decisions per rule,
    and budget decisions per budget (issue 28)."""
    from acp_proxy.config.io import config_from_dict

    cfg = config_from_dict({"policy": {"mode": "observe"}, "budgets": {"prompts_per_window": 1}})
    hub = Hub(tally=Tally())
    core = hub.make_core(cfg)
    session(core)
    for rid in (10, 11, 12):
        core.receive(CLIENT, req(rid, "session/prompt", {"sessionId": "s1", "prompt": []}), 4.0)
    async with trio.open_nursery() as nursery:
        port = await nursery.start(serve_metrics, "127.0.0.1:0", hub, Config())
        _code, body = await get(port, "/metrics")
        samples = {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(body.decode())
            for s in f.samples
        }
        rule = (("rule", "prompts_per_window"),)
        assert samples[("acp_proxy_would_block_total", rule)] == 2
        budget = (("budget", "prompts_per_window"),)
        assert samples[("acp_proxy_budget_exceeded_total", budget)] == 2
        status = json.loads((await get(port, "/status"))[1])
        assert status["wouldBlock"] == {"prompts_per_window": 2}
        (conn,) = status["connections"]
        assert conn["policyMode"] == "observe"
        assert conn["budgets"]["exceeded"] == {"prompts_per_window": 2}
        nursery.cancel_scope.cancel()
