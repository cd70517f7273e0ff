"""Running as a service (issue 18): SIGHUP reload, sidecar --upstream, connection ids, probes."""

from __future__ import annotations

import json
import signal
import sys
from functools import partial
from pathlib import Path
from typing import Any

import trio
from support.e2ekit import open_proxy, proxy_command, read_audit, write_config
from support.peers.own_file_agent import OwnFileAgent, assert_own_file_refused, client_messages
from support.wskit import AGENT_CMD, AcpClient, connect, listening, make_config, wait_closed
from trio_websocket import WebSocketRequest, serve_websocket

from acp_proxy.cli import main
from acp_proxy.shell.topology.listen import run_listen
from acp_proxy.shell.topology.ws_upgrade import probe_response

TIMEOUT = 60


def _listening_url(stderr: str) -> str:
    return stderr.split("listening on ")[1].split()[0]


async def _http_get(url: str, path: str) -> tuple[int, bytes]:
    """A plain HTTP GET on the listen port of ``url``: (status, body)."""
    host_port = url.split("//")[1].split("/")[0]
    host, port = host_port.rsplit(":", 1)
    stream = await trio.open_tcp_stream(host, int(port))
    async with stream:
        await stream.send_all(f"GET {path} HTTP/1.1\r\nHost: {host_port}\r\n\r\n".encode())
        data = b""
        while chunk := await stream.receive_some(4096):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), body


async def test_sighup_reloads_a_listen_server_without_closing_its_clients(tmp_path: Path) -> None:
    """A live connection keeps going after SIGHUP, and its next refusal uses the new policy."""
    config = write_config(tmp_path / "acp.toml", "[enforcement]\nreject_code = -32001\n")
    audit_path = tmp_path / "audit.jsonl"
    cmd = proxy_command("--listen", "ws://127.0.0.1:0/acp", "--no-token", "--config", str(config),
                        "--audit-log", str(audit_path), "--log-level", "info")  # fmt: skip
    with trio.fail_after(TIMEOUT):
        async with open_proxy([*cmd, *AGENT_CMD]) as proxy:
            url = _listening_url(await proxy.wait_for_stderr("listening on "))
            async with connect(url) as ws:
                client = AcpClient(ws)
                sid = await client.start_session()
                assert (await client.prompt(sid))["result"]["stopReason"] == "end_turn"
                child = f"{sid}-child"
                assert (await client.prompt(child))["error"]["code"] == -32001
                config.write_text(
                    "[enforcement]\nreject_code = -32002\n[listen]\nmax_connections = 3\n"
                )
                proxy.process.send_signal(signal.SIGHUP)
                await proxy.wait_for_stderr("config reloaded")
                assert "restart_required: listen.max_connections" in proxy.stderr_text()
                assert (await client.prompt(child))["error"]["code"] == -32002
                assert (await client.prompt(sid))["result"]["stopReason"] == "end_turn"
                # an invalid file: refused, the process and the connection go on
                config.write_text("[enforcement]\nreject_code = 'x'\n")
                proxy.process.send_signal(signal.SIGHUP)
                await proxy.wait_for_stderr("config reload failed")
                assert (await client.prompt(child))["error"]["code"] == -32002
            proxy.process.send_signal(signal.SIGTERM)
            assert await proxy.wait() == 0
    events = [r["event"] for r in read_audit(audit_path)]
    assert "config_reloaded" in events
    assert "config_reload_failed" in events
    [reloaded] = [r for r in read_audit(audit_path) if r["event"] == "config_reloaded"]
    assert reloaded["policy"].startswith("sha256:")
    assert reloaded["restart_required"] == ["listen.max_connections"]
    assert reloaded["connections"] == 1


async def test_the_101_carries_a_connection_id_and_the_probes_answer(tmp_path: Path) -> None:
    """Acp-Connection-Id on the 101, the same id in the audit; /healthz and /readyz are 200."""
    records: list[Any] = []

    class Sink:
        def write(self, record: Any) -> None:
            records.append(record)

    with trio.fail_after(TIMEOUT):
        async with listening(make_config(), audit=Sink()) as url:
            assert await _http_get(url, "/healthz") == (200, b"ok\n")
            assert await _http_get(url, "/readyz?verbose") == (200, b"ok\n")
            ids = []
            for _ in range(2):
                async with connect(url) as ws:
                    headers = dict(ws.handshake_headers)
                    ids.append(headers[b"acp-connection-id"].decode())
                    await AcpClient(ws).start_session()
    assert len(set(ids)) == 2
    opened = [r.fields for r in records if r.event == "connection_opened"]
    assert [f["connectionId"] for f in opened] == ids
    assert [f["connection"] for f in opened] == [1, 2]


async def test_readyz_is_503_while_draining_after_sigterm(tmp_path: Path) -> None:
    """SIGTERM: while the connections drain (an agent ignoring SIGTERM), /readyz says 503."""
    config = write_config(tmp_path / "acp.toml",
                          "[process]\ngrace_seconds = 3\nkill_after_seconds = 3\n")  # fmt: skip
    stubborn = [sys.executable, "-c",
                "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                "time.sleep(60)"]  # fmt: skip
    cmd = proxy_command("--listen", "ws://127.0.0.1:0/acp", "--no-token", "--config", str(config))
    with trio.fail_after(TIMEOUT):
        async with open_proxy([*cmd, *stubborn]) as proxy:
            url = _listening_url(await proxy.wait_for_stderr("listening on "))
            async with connect(url) as ws:
                assert await _http_get(url, "/readyz") == (200, b"ok\n")
                proxy.process.send_signal(signal.SIGTERM)
                assert (await wait_closed(ws)).code == 1001
                assert await _http_get(url, "/readyz") == (503, b"draining\n")
                assert await _http_get(url, "/healthz") == (200, b"ok\n")
            assert await proxy.wait() == 0


# ---------------------------------------------------------------- sidecar


async def _sidecar(upstream: str, nursery: trio.Nursery, **listen: Any) -> str:
    run = partial(
        run_listen, make_config(**listen), "ws://127.0.0.1:0/side", [], None, upstream=upstream
    )
    urls: list[str] = await nursery.start(run)
    return urls[0]


async def test_sidecar_relays_a_turn_to_a_websocket_agent_and_enforces() -> None:
    """--listen --upstream: a turn through two hops; a child prompt refused by the sidecar."""
    with trio.fail_after(TIMEOUT):
        async with listening(make_config()) as agent_url, trio.open_nursery() as nursery:
            url = await _sidecar(agent_url, nursery)
            async with connect(url) as ws:
                client = AcpClient(ws)
                sid = await client.start_session()
                assert (await client.prompt(sid))["result"]["stopReason"] == "end_turn"
                kinds = [n["params"]["update"]["sessionUpdate"] for n in client.notifications]
                assert "subagent_update" in kinds
                refused = await client.prompt(f"{sid}-child")
                assert refused["error"]["code"] == -32601
                assert "acp-proxy" in refused["error"]["message"]
            nursery.cancel_scope.cancel()


async def test_the_sidecar_keeps_the_proxy_s_own_files_out_of_the_upstream_s_reach(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """--listen --upstream: the upstream agent asking a client to write the proxy's audit
    log is refused under its id, as with a local agent (issue 31)."""
    from acp_proxy.config import Config
    from acp_proxy.config.model import AuditConfig
    from acp_proxy.shell import places

    audit = tmp_path / "audit.jsonl"
    monkeypatch.setattr(
        places, "_OWN", places.own_files(Config(audit=AuditConfig(path=str(audit))), None)
    )
    agent = OwnFileAgent(audit, tmp_path / "notes.txt")
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            server = await nursery.start(serve_websocket, agent.handler, "127.0.0.1", 0, None)
            url = await _sidecar(f"ws://127.0.0.1:{server.port}/acp", nursery)
            async with connect(url) as ws:
                for message in client_messages(tmp_path):
                    await ws.send_message(json.dumps(message))
                    assert json.loads(await ws.get_message())["id"] == message["id"]
                asked = json.loads(await ws.get_message())  # only the second write
                assert asked["params"]["path"] == str(tmp_path / "notes.txt")
                await ws.send_message(
                    json.dumps({"jsonrpc": "2.0", "id": asked["id"], "result": {}})
                )
                await agent.both_answered.wait()
            nursery.cancel_scope.cancel()
    assert_own_file_refused(agent)


async def test_an_upstream_that_refuses_is_reported_like_an_agent_exit() -> None:
    """The upstream answers 404: the client's initialize gets an error naming it; closed 1011."""
    with trio.fail_after(TIMEOUT):
        async with listening(make_config()) as agent_url, trio.open_nursery() as nursery:
            url = await _sidecar(agent_url.replace("/acp", "/nothing-here"), nursery)
            async with connect(url) as ws:
                await ws.send_message(json.dumps(
                    {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}))  # fmt: skip
                answer = json.loads(await ws.get_message())
                assert answer["id"] == 1
                assert "HTTP 404" in answer["error"]["message"]
                reason = await wait_closed(ws)
                assert reason.code == 1011
                assert "HTTP 404" in (reason.reason or "")
            nursery.cancel_scope.cancel()


async def test_an_upstream_dropped_mid_turn_answers_the_pending_prompt() -> None:
    """The upstream's socket drops while a prompt is in flight: the client gets an error."""

    async def dropping_agent(request: WebSocketRequest) -> None:
        ws = await request.accept()
        while True:
            msg = json.loads(await ws.get_message())
            if msg.get("method") == "session/prompt":
                await trio.aclose_forcefully(ws._stream)  # no close frame: 1006
                return
            result: Any = {"protocolVersion": 1}
            if msg.get("method") == "session/new":
                result = {"sessionId": "S"}
            await ws.send_message(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}))

    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            server = await nursery.start(
                partial(serve_websocket, dropping_agent, "127.0.0.1", 0, ssl_context=None)
            )
            port = server.port
            url = await _sidecar(f"ws://127.0.0.1:{port}/agent", nursery)
            async with connect(url) as ws:
                client = AcpClient(ws)
                sid = await client.start_session()
                answer = await client.prompt(sid)
                assert answer["error"]["code"] == -32603
                assert "upstream closed the connection" in answer["error"]["message"]
                reason = await wait_closed(ws)
                assert reason.code == 1011
            nursery.cancel_scope.cancel()


def test_probe_response_answers_probes_only() -> None:
    """GET /healthz and /readyz without Upgrade are probes; an upgrade or another path is not."""
    get = b"GET %s HTTP/1.1\r\nHost: x\r\n%s\r\n"
    assert probe_response(get % (b"/readyz", b""), ready=False).startswith(b"HTTP/1.1 503 ")
    assert probe_response(get % (b"/healthz", b""), ready=False).startswith(b"HTTP/1.1 200 ")
    assert probe_response(get % (b"/readyz", b"Upgrade: websocket\r\n"), ready=True) is None
    assert probe_response(get % (b"/acp", b""), ready=True) is None
    assert probe_response(b"POST /healthz HTTP/1.1\r\n\r\n", ready=True) is None


def test_cli_refuses_service_options_that_do_not_fit(capsys: Any) -> None:
    """--watch-config needs --config; --upstream takes no agent command and needs --listen."""
    assert main(["--watch-config", "--", "agent"]) == 2
    assert "--watch-config needs --config" in capsys.readouterr().err
    argv = ["--listen", "ws://127.0.0.1:0/a", "--upstream", "ws://127.0.0.1:9/a", "--", "agent"]
    assert main(argv) == 2
    assert "--upstream takes no agent command" in capsys.readouterr().err
    assert main(["--upstream", "ws://127.0.0.1:9/a", "--", "agent"]) == 2
    assert "--upstream applies to --listen only" in capsys.readouterr().err
