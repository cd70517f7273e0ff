"""``--listen`` over loopback sockets: run_listen in-process (SIGTERM as a subprocess)."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import trio
import wsproto
import wsproto.events as wse
from support.wskit import (
    AGENT_CMD,
    REPO,
    TS_SDK_CACHE,
    TS_WS_CLIENT,
    AcpClient,
    connect,
    listening,
    local_url,
    make_config,
    upgrade_status,
    wait_closed,
    wait_for_lines,
)

from acp_proxy.errors import StartupError
from acp_proxy.shell.audit import AuditLog
from acp_proxy.shell.topology.listen import run_listen

TIMEOUT = 30


def audit_records(stream: io.StringIO) -> list[dict[str, object]]:
    """The JSON objects written to an in-memory audit log."""
    return [json.loads(line) for line in stream.getvalue().splitlines()]


async def test_full_turn_through_listener() -> None:
    """A full ACP turn crosses the listener; a child prompt without capability gets -32601."""
    stream = io.StringIO()
    cfg = make_config(ping_interval_seconds=0.05, ping_timeout_seconds=5)
    with trio.fail_after(TIMEOUT):
        async with listening(cfg, audit=AuditLog(stream)) as url, connect(url) as ws:
            client = AcpClient(ws)
            sid = await client.start_session()
            done = await client.prompt(sid)
            assert done["result"] == {"stopReason": "end_turn"}
            kinds = [n["params"]["update"]["sessionUpdate"] for n in client.notifications]
            assert kinds == [
                "agent_message_chunk",
                "agent_message_chunk",
                "subagent_update",
                "agent_message_chunk",
            ]
            child = client.notifications[2]["params"]["update"]["sessionId"]
            assert client.notifications[3]["params"]["sessionId"] == child
            await trio.sleep(0.2)  # a few keepalive pings, answered
            rejected = await client.prompt(child)
            assert rejected["error"]["code"] == -32601
            assert child in rejected["error"]["message"]
    records = audit_records(stream)
    events = [r["event"] for r in records]
    assert "child_announced" in events
    assert "mutation_rejected" in events
    per_connection = [r for r in records if r["event"] != "connection_rejected"]
    assert all(r["connection"] == 1 for r in per_connection)


async def test_connections_have_independent_registries() -> None:
    """A child announced on one connection is unknown on another (its agent answers)."""
    with trio.fail_after(TIMEOUT):
        async with (
            listening(make_config()) as url,
            connect(url) as ws1,
            connect(url) as ws2,
        ):
            one, two = AcpClient(ws1), AcpClient(ws2)
            sid1, sid2 = await one.start_session(), await two.start_session()
            assert sid1 == sid2 == "sess-1"  # two agents, same script
            await one.prompt(sid1)
            child = f"{sid1}-child"
            assert (await one.prompt(child))["error"]["code"] == -32601
            answer = await two.prompt(child)
            assert answer["error"]["code"] == -32002
            assert answer["error"]["data"]["by"] == "scripted-agent"


async def test_token_required_on_non_loopback_bind(tmp_path: Path) -> None:
    """0.0.0.0 with a token file starts; no or a wrong token is 401, the right one works."""
    token_file = tmp_path / "token"
    token_file.write_text("tok-123\n")
    stream = io.StringIO()
    cfg = make_config(token_file=str(token_file))
    with trio.fail_after(TIMEOUT):
        async with listening(cfg, url="ws://0.0.0.0:0/acp", audit=AuditLog(stream)) as url:
            url = local_url(url)
            assert await upgrade_status(url) == 401
            assert await upgrade_status(url, [(b"Authorization", b"Bearer nope")]) == 401
            good = [(b"Authorization", b"Bearer tok-123")]
            async with connect(url, headers=good) as ws:
                assert await AcpClient(ws).start_session() == "sess-1"
    assert "tok-123" not in stream.getvalue()
    rejected = [r for r in audit_records(stream) if r["event"] == "connection_rejected"]
    assert [r["status"] for r in rejected] == [401, 401]


async def test_non_loopback_bind_without_token_refuses_to_start() -> None:
    """Binding 0.0.0.0 without a token refuses to start (StartupError: status 2 in cli.py)."""
    with trio.fail_after(TIMEOUT), pytest.raises(StartupError, match="without a bearer token"):
        await run_listen(make_config(), "ws://0.0.0.0:0/acp", AGENT_CMD, None)


async def test_wrong_path_and_origin_are_refused() -> None:
    """A wrong path is 404; an Origin outside the allow-list 403; no Origin is let in."""
    cfg = make_config(allowed_origins=["https://app.example"])
    with trio.fail_after(TIMEOUT):
        async with listening(cfg) as url:
            assert await upgrade_status(url.replace("/acp", "/other")) == 404
            assert await upgrade_status(url, [(b"Origin", b"https://x.y")]) == 403
            ok = [(b"Origin", b"https://app.example")]
            async with connect(url, headers=ok) as ws:
                await AcpClient(ws).start_session()
            async with connect(url) as ws:
                await AcpClient(ws).start_session()


async def test_browser_pages_and_rebound_names_are_refused_by_default() -> None:
    """Default config on loopback: any Origin 403, a foreign Host 421 (audited); natives pass."""
    stream = io.StringIO()
    with trio.fail_after(TIMEOUT):
        async with listening(make_config(), audit=AuditLog(stream)) as url:
            port = url.split(":")[2].split("/")[0]
            assert await upgrade_status(url, [(b"Origin", b"https://evil.example")]) == 403
            assert await upgrade_status(url, host="attacker.example") == 421
            assert await upgrade_status(url, host=f"attacker.example:{port}") == 421
            for host in (f"localhost:{port}", "localhost", f"[::1]:{port}", "127.0.0.1"):
                assert await upgrade_status(url, host=host) == 101
            async with connect(url.replace("127.0.0.1", "localhost")) as ws:
                await AcpClient(ws).start_session()
    rejected = [r for r in audit_records(stream) if r["event"] == "connection_rejected"]
    assert [r["status"] for r in rejected] == [403, 421, 421]


async def test_allowed_hosts_names_a_listener_behind_a_name(tmp_path: Path) -> None:
    """listen.allowed_hosts adds names; a token on 0.0.0.0 with allowed_hosts checks Host too."""
    cfg = make_config(allowed_hosts=["acp.example"])
    with trio.fail_after(TIMEOUT):
        async with listening(cfg) as url:
            assert await upgrade_status(url, host="acp.example:443") == 101
            assert await upgrade_status(url, host="ACP.example") == 101
            assert await upgrade_status(url, host="other.example") == 421
        token_file = tmp_path / "token"
        token_file.write_text("tok\n")
        auth = [(b"Authorization", b"Bearer tok")]
        async with listening(make_config(token_file=str(token_file)), "ws://0.0.0.0:0/acp") as url:
            # A token keeps browsers out: no Host check without allowed_hosts.
            assert await upgrade_status(local_url(url), auth, host="anything.example") == 101
        cfg = make_config(token_file=str(token_file), allowed_hosts=["acp.example"])
        async with listening(cfg, "ws://0.0.0.0:0/acp") as url:
            assert await upgrade_status(local_url(url), auth, host="anything.example") == 421
            assert await upgrade_status(local_url(url), auth, host="acp.example") == 101
            assert await upgrade_status(local_url(url), auth, host="127.0.0.1") == 101


async def test_oversize_frame_closes_with_1009_and_server_lives_on() -> None:
    """A message over the limit closes that connection with 1009, audited; others go on."""
    stream = io.StringIO()
    cfg = make_config(max_message_bytes=4096)
    with trio.fail_after(TIMEOUT):
        async with (
            listening(cfg, audit=AuditLog(stream)) as url,
            connect(url) as ws_ok,
        ):
            ok = AcpClient(ws_ok)
            await ok.start_session()
            async with connect(url) as ws:
                big = json.dumps({"jsonrpc": "2.0", "method": "_x", "params": "x" * 10000})
                await ws.send_message(big)
                reason = await wait_closed(ws)
                assert reason.code == 1009
            await ok.start_session()
            async with connect(url) as ws:
                await AcpClient(ws).start_session()
    oversize = [r for r in audit_records(stream) if r["event"] == "oversize_message"]
    assert {r["connection"] for r in oversize} == {2}


async def test_binary_frame_closes_with_1003() -> None:
    """A binary frame closes the connection with 1003 and is audited."""
    stream = io.StringIO()
    with trio.fail_after(TIMEOUT):
        async with listening(make_config(), audit=AuditLog(stream)) as url, connect(url) as ws:
            await ws.send_message(b'{"jsonrpc":"2.0","method":"_x"}')
            reason = await wait_closed(ws)
            assert reason.code == 1003
    invalid = [r for r in audit_records(stream) if r["event"] == "invalid_message"]
    assert len(invalid) == 1
    assert "binary" in str(invalid[0]["reason"])


async def test_max_connections_enforced() -> None:
    """Beyond max_connections the upgrade gets 503; a freed slot is reusable."""
    with trio.fail_after(TIMEOUT):
        async with listening(make_config(max_connections=1)) as url:
            async with connect(url) as ws:
                await AcpClient(ws).start_session()
                assert await upgrade_status(url) == 503
            # The slot frees once the first connection's agent has stopped.
            for _ in range(200):
                if (status := await upgrade_status(url)) != 503:
                    break
                await trio.sleep(0.05)
            assert status == 101


async def test_closing_the_connection_stops_its_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the client closes its WebSocket, that connection's agent exits."""
    log = tmp_path / "agents.log"
    monkeypatch.setenv("ACP_TEST_AGENT_LOG", str(log))
    with trio.fail_after(TIMEOUT):
        async with listening(make_config()) as url:
            async with connect(url) as ws:
                await AcpClient(ws).start_session()
                assert len(await wait_for_lines(log, lambda ls: len(ls) >= 1)) == 1
            lines = await wait_for_lines(log, lambda ls: any(x.startswith("exit") for x in ls))
            assert lines[0].split()[1] == lines[1].split()[1]


async def test_agent_exit_closes_the_connection() -> None:
    """An agent that exits (status 3) ends its connection with 1011 naming the status."""
    with trio.fail_after(TIMEOUT):
        async with listening(make_config()) as url, connect(url) as ws:
            client = AcpClient(ws)
            sid = await client.start_session()
            assert (await client.prompt(sid, "exit"))["result"]["stopReason"] == "end_turn"
            reason = await wait_closed(ws)
            assert reason.code == 1011
            assert "status 3" in (reason.reason or "")


async def test_multiline_text_frame_reaches_the_agent_as_one_line() -> None:
    """A pretty-printed JSON frame (raw newlines) is one message for the stdio agent."""
    with trio.fail_after(TIMEOUT):
        async with listening(make_config()) as url, connect(url) as ws:
            client = AcpClient(ws)
            init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
            await ws.send_message(json.dumps(init, indent=2))
            assert (await client.receive())["result"]["protocolVersion"] == 1


async def test_agent_that_cannot_start_is_http_500() -> None:
    """An agent command that cannot be executed refuses the upgrade with 500."""
    missing = [str(REPO / "no-such-agent")]
    with trio.fail_after(TIMEOUT):
        async with listening(make_config(), agent_cmd=missing) as url:
            assert await upgrade_status(url) == 500


async def test_keepalive_closes_a_silent_peer() -> None:
    """A peer that never answers pings is closed with 1011 after the ping timeout."""
    cfg = make_config(ping_interval_seconds=0.1, ping_timeout_seconds=0.2)
    with trio.fail_after(TIMEOUT):
        async with listening(cfg) as url:
            port = int(url.rsplit(":", 1)[1].split("/")[0])
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            conn = wsproto.WSConnection(wsproto.ConnectionType.CLIENT)
            await stream.send_all(conn.send(wse.Request(host="127.0.0.1", target="/acp")))
            pings = 0
            close: wse.CloseConnection | None = None
            while close is None:
                data = await stream.receive_some(65536)
                assert data, "server dropped the connection without a close frame"
                conn.receive_data(data)
                for event in conn.events():
                    if isinstance(event, wse.Ping):
                        pings += 1  # and never answered
                    elif isinstance(event, wse.CloseConnection):
                        close = event
            assert pings >= 1
            assert close.code == 1011
            await stream.aclose()


async def test_sigterm_stops_listener_and_agents(tmp_path: Path) -> None:
    """SIGTERM: connections are closed with 1001, agents stopped, exit status 0."""
    log = tmp_path / "agents.log"
    env = {**os.environ, "ACP_TEST_AGENT_LOG": str(log)}
    argv = [sys.executable, "-m", "acp_proxy", "--listen", "ws://127.0.0.1:0/acp", "--no-token",
            "--", *AGENT_CMD]  # fmt: skip
    with trio.fail_after(TIMEOUT):
        proc = await trio.lowlevel.open_process(
            argv, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=REPO
        )
        assert proc.stderr is not None
        err = b""
        while b"listening on " not in err or not err.endswith(b"\n"):
            chunk = await proc.stderr.receive_some(4096)
            assert chunk, err
            err += chunk
        url = err.decode().split("listening on ")[1].split()[0]
        async with connect(url) as ws:
            await AcpClient(ws).start_session()
            proc.send_signal(signal.SIGTERM)
            reason = await wait_closed(ws)
            assert reason.code == 1001
        assert await proc.wait() == 0
        lines = log.read_text().splitlines()
        assert [x.split()[0] for x in lines] == ["start", "exit"]


# ------------------------------------------------------- TypeScript SDK interop


async def test_typescript_sdk_ws_client_interop(ts_ws_node: list[str]) -> None:
    """The official TS SDK's ws-client completes a turn through --listen; child prompt -32601."""
    with trio.fail_after(60):
        async with listening(make_config()) as url:
            done = await trio.run_process(
                [*ts_ws_node, str(TS_WS_CLIENT), str(TS_SDK_CACHE), url],
                stdin=subprocess.DEVNULL,
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
    assert done.returncode == 0, done.stderr.decode()
    seen = json.loads(done.stdout)
    assert seen["protocolVersion"] == 1
    assert seen["stopReason"] == "end_turn"
    sid, child = seen["sessionId"], seen["child"]
    assert child == f"{sid}-child"
    assert seen["updates"] == [
        [sid, "agent_message_chunk"],
        [sid, "agent_message_chunk"],
        [sid, "subagent_update"],
        [child, "agent_message_chunk"],
    ]
    assert seen["childPrompt"]["code"] == -32601


_BURST_AGENT = [
    sys.executable,
    "-c",
    "import sys\n"
    'lines = [b\'{"jsonrpc":"2.0","method":"_burst","params":{"n":%d}}\' % i'
    " for i in range(50)]\n"
    "sys.stdout.buffer.write(b'\\n'.join(lines) + b'\\n')\n"
    "sys.stdout.buffer.flush()\n"
    "sys.stdin.buffer.read()\n",
]


async def test_a_burst_of_agent_lines_arrives_as_one_text_message_each() -> None:
    """Lines the core forwards as one joined run are split into WebSocket messages again."""
    with trio.fail_after(TIMEOUT):
        async with (
            listening(make_config(), agent_cmd=_BURST_AGENT) as url,
            connect(url) as ws,
        ):
            got = [await ws.get_message() for _ in range(50)]
    assert [json.loads(m)["params"]["n"] for m in got] == list(range(50))
    assert all("\n" not in m for m in got)


async def _status_line(url: str, request: bytes) -> bytes:
    """The first line the listen port answers ``request`` (raw bytes) with."""
    address, _, port = url.split("://", 1)[1].partition("/")[0].rpartition(":")
    stream = await trio.open_tcp_stream(address, int(port))
    try:
        await stream.send_all(request)
        data = b""
        while b"\r\n" not in data and (more := await stream.receive_some(65536)):
            data += more
    finally:
        await stream.aclose()
    return data.partition(b"\r\n")[0]


async def test_the_listen_port_answers_with_standard_reason_phrases() -> None:
    """Refusals, the upgrade and the probes carry a reason phrase (`HTTP/1.1 404 Not Found`,
    not `HTTP/1.1 404 `)."""
    upgrade = (
        b"Upgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    with trio.fail_after(TIMEOUT):
        async with listening(make_config()) as url:
            host = url.split("://", 1)[1].partition("/")[0].encode()
            head = b"Host: " + host + b"\r\n"
            wrong_path = b"GET /other HTTP/1.1\r\n" + head + upgrade
            assert await _status_line(url, wrong_path) == b"HTTP/1.1 404 Not Found"
            probe = b"GET /readyz HTTP/1.1\r\n" + head + b"\r\n"
            assert await _status_line(url, probe) == b"HTTP/1.1 200 OK"
            accepted = b"GET /acp HTTP/1.1\r\n" + head + upgrade
            assert await _status_line(url, accepted) == b"HTTP/1.1 101 Switching Protocols"


async def test_listen_fails_closed_when_a_required_audit_record_is_lost(tmp_path: Path) -> None:
    """--listen with audit.required: the log removed, the next audited message (an invalid
    request the proxy would answer) is answered with the audit error instead, and so is
    every later request: nothing more reaches the agent."""
    path = tmp_path / "audit.jsonl"
    log = AuditLog.open(str(path), {"run": "r1"}, required=True)
    with trio.fail_after(TIMEOUT):
        async with listening(make_config(), audit=log) as url, connect(url) as ws:
            client = AcpClient(ws)
            await client.start_session()
            path.unlink()
            await client.send({"jsonrpc": "2.0", "id": 5, "method": 123})  # audited: invalid
            refused = await client.receive()
            assert refused["id"] == 5
            assert "audit log could not be written" in refused["error"]["message"]
            await client.send({"jsonrpc": "2.0", "id": 6, "method": "session/list", "params": {}})
            later = await client.receive()
            assert later["id"] == 6
            assert "audit log could not be written" in later["error"]["message"]
    assert log.failure is not None
    assert "removed" in log.failure
    log.close()
