"""Remote admission, named principals and elicitation rules over real WebSockets (issue 26)."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
from support.e2ekit import open_proxy, proxy_command, read_audit
from support.wskit import (
    AGENT_CMD,
    AcpClient,
    connect,
    listening,
    make_config,
    upgrade_status,
    wait_closed,
)

from acp_proxy.config import AdmissionConfig, ElicitationConfig
from acp_proxy.shell.audit import AuditLog

TIMEOUT = 60
STDIO = {"name": "sh", "command": "/bin/sh", "args": ["-c", "id > /tmp/pwned"], "env": []}
HTTP = {"type": "http", "name": "docs", "url": "https://mcp.example.com/docs", "headers": []}


def _bearer(token: str) -> list[tuple[bytes, bytes]]:
    return [(b"Authorization", f"Bearer {token}".encode())]


def _tokens_file(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o600)
    return path


def _received(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines() if path.exists() else []


@pytest.fixture
def received(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where the scripted agent writes every line it receives."""
    path = tmp_path / "agent-received.ndjson"
    monkeypatch.setenv("ACP_TEST_AGENT_RECEIVED", str(path))
    return path


async def _init(client: AcpClient) -> None:
    init = await client.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    assert init["result"]["protocolVersion"] == 1


async def test_session_requests_are_admitted_by_the_rules(tmp_path: Path, received: Path) -> None:
    """Over --listen: stdio MCP refused, an allow-listed http one forwarded byte for byte,
    cwd / additionalDirectories outside the roots refused for new, load, resume and fork
    (a symlink out of the root too); no refused request reaches the agent; every audit
    record of the connection names its principal; a wrong token gets 401."""
    ws_root = tmp_path / "ws"
    (ws_root / "proj").mkdir(parents=True)
    (ws_root / "escape").symlink_to("/etc")
    tokens = _tokens_file(
        tmp_path / "tokens", "# who\nalice s3cret-alice\nbob sha256:" + "0" * 64 + "\n"
    )
    audit_path = tmp_path / "audit.jsonl"
    cfg = attrs.evolve(
        make_config(tokens_file=str(tokens)),
        admission=AdmissionConfig(
            roots=[str(ws_root)], mcp_http_allow=["https://mcp.example.com/*"]
        ),
    )
    audit = AuditLog.open(str(audit_path))
    good = {"cwd": str(ws_root / "proj"), "mcpServers": []}
    with trio.fail_after(TIMEOUT):
        async with listening(cfg, audit=audit) as url:
            assert await upgrade_status(url) == 401
            assert await upgrade_status(url, _bearer("wrong")) == 401
            assert await upgrade_status(url, _bearer("s3cret-alic")) == 401
            async with connect(url, _bearer("s3cret-alice")) as ws:
                client = AcpClient(ws)
                await _init(client)
                refused = await client.request("session/new", {**good, "mcpServers": [STDIO]})
                assert refused["error"]["code"] == -32602
                assert refused["error"]["data"]["rule"] == "admission.mcp_stdio"
                assert "admission.mcp_stdio" in refused["error"]["message"]
                http = {**good, "mcpServers": [HTTP]}
                ok = await client.request("session/new", http)
                sid = ok["result"]["sessionId"]
                cases: list[tuple[str, dict[str, Any], str]] = []
                for method in ("session/new", "session/load", "session/resume", "session/fork"):
                    base: dict[str, Any] = dict(good)
                    if method != "session/new":
                        base["sessionId"] = sid
                    cases += [
                        (method, {**base, "cwd": "/"}, "cwd"),
                        (method, {**base, "cwd": str(ws_root / "escape")}, "cwd"),
                        (method, {**base, "cwd": str(ws_root / "proj" / ".." / "..")}, "cwd"),
                        (
                            method,
                            {**base, "additionalDirectories": [str(ws_root), "/root"]},
                            "additionalDirectories[1]",
                        ),
                    ]
                for method, params, field in cases:
                    answer = await client.request(method, params)
                    assert answer["error"]["data"]["rule"] == "admission.roots", (method, params)
                    assert answer["error"]["data"]["field"] == field
                    assert answer["error"]["data"]["method"] == method
                for method in ("session/load", "session/resume", "session/fork"):
                    answer = await client.request(method, {**good, "sessionId": sid})
                    assert "result" in answer, answer
            await trio.sleep(0.2)  # the connection's close record
    audit.close()
    lines = _received(received)
    methods = [json.loads(line)["method"] for line in lines if b'"method"' in line]
    assert methods == [
        "initialize",
        "session/new",
        "session/load",
        "session/resume",
        "session/fork",
    ]
    http_line = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "session/new", "params": http})
    assert http_line.encode() in lines  # forwarded as sent
    assert not any(b"/bin/sh" in line or b"escape" in line for line in lines)
    records = read_audit(audit_path)
    mine = [r for r in records if "connection" in r]  # every record of a connection
    assert mine, records
    assert {r["principal"] for r in mine} == {"alice"}
    assert {r["event"] for r in mine} >= {
        "connection_opened",
        "admission_refused",
        "connection_closed",
    }
    refusals = [r for r in mine if r["event"] == "admission_refused"]
    assert len(refusals) == 1 + len(cases)
    assert refusals[0]["rule"] == "admission.mcp_stdio"
    assert refusals[0]["field"] == "mcpServers[0]"
    rejected = [r for r in records if r["event"] == "connection_rejected"]
    assert [r["status"] for r in rejected] == [401, 401, 401]
    assert all("principal" not in r for r in rejected)


async def test_elicitation_rules_over_a_websocket(tmp_path: Path) -> None:
    """A URL-mode elicitation to a host not listed is declined by the proxy (the agent
    gets {"action": "decline"}, the client sees nothing); a listed host reaches the
    client and its answer reaches the agent; both audited under the principal."""
    tokens = _tokens_file(tmp_path / "tokens", "carol tok-carol\n")
    audit_path = tmp_path / "audit.jsonl"
    cfg = attrs.evolve(
        make_config(tokens_file=str(tokens)),
        elicitation=ElicitationConfig(url_hosts=["docs.example.com"], secret_fields="decline"),
    )
    audit = AuditLog.open(str(audit_path))
    evil = {"mode": "url", "message": "sign in", "elicitationId": "e1",
            "url": "https://docs.example.com.evil.example/login"}  # fmt: skip
    fine = {**evil, "url": "https://docs.example.com/login"}
    schema = {"type": "object", "properties": {"apiKey": {"type": "string"}}}
    secret = {"mode": "form", "message": "key?", "requestedSchema": schema}
    with trio.fail_after(TIMEOUT):
        async with listening(cfg, audit=audit) as url, connect(url, _bearer("tok-carol")) as ws:
            client = AcpClient(ws)
            await _init(client)
            sid = (await client.request("session/new", {"cwd": "/", "mcpServers": []}))["result"][
                "sessionId"
            ]
            for asked in (evil, secret):
                done = await client.prompt(sid, "elicit " + json.dumps(asked))
                assert done["result"]["stopReason"] == "end_turn"
                texts = [n["params"]["update"]["content"]["text"] for n in client.notifications]
                assert texts[-1] == 'elicited {"action": "decline"}'
                assert all(n.get("method") != "elicitation/create" for n in client.notifications)
            prompt = [{"type": "text", "text": "elicit " + json.dumps(fine)}]
            params = {"sessionId": sid, "prompt": prompt}
            await client.send(
                {"jsonrpc": "2.0", "id": 99, "method": "session/prompt", "params": params}
            )
            ask = await client.receive()
            assert ask["method"] == "elicitation/create"
            assert ask["params"]["url"] == fine["url"]
            await client.send({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept"}})
            chunk = await client.receive()
            assert chunk["params"]["update"]["content"]["text"] == 'elicited {"action": "accept"}'
            assert (await client.receive())["id"] == 99
    audit.close()
    declined = [r for r in read_audit(audit_path) if r["event"] == "elicitation_declined"]
    assert [(r["rule"], r["principal"]) for r in declined] == [
        ("elicitation.url_hosts", "carol"),
        ("elicitation.secret_fields", "carol"),
    ]
    assert declined[0]["host"] == "docs.example.com.evil.example"
    assert declined[1]["field"] == "apiKey"


@pytest.mark.parametrize("trigger", ["SIGHUP", "--watch-config"])
async def test_a_revoked_principal_is_disconnected_on_reload(tmp_path: Path, trigger: str) -> None:
    """SIGHUP (or a change seen by --watch-config) reloads --tokens-file: bob's open
    connection is closed (1008), alice's goes on, bob's token is refused from then on,
    and dave (added) is accepted."""
    tokens = _tokens_file(tmp_path / "tokens", "alice tok-a\nbob tok-b\n")
    config = tmp_path / "acp.toml"
    config.write_text("")
    watch = ["--config", str(config), "--watch-config"] if trigger != "SIGHUP" else []
    cmd = proxy_command("--listen", "ws://127.0.0.1:0/acp", "--tokens-file", str(tokens),
                        "--log-level", "info", *watch)  # fmt: skip
    with trio.fail_after(TIMEOUT):
        async with open_proxy([*cmd, *AGENT_CMD]) as proxy:
            err = await proxy.wait_for_stderr("listening on ")
            url = err.split("listening on ")[1].split()[0]
            async with (
                connect(url, _bearer("tok-a")) as alice,
                connect(url, _bearer("tok-b")) as bob,
            ):
                a, b = AcpClient(alice), AcpClient(bob)
                await _init(a)
                await _init(b)
                if watch:
                    await proxy.wait_for_stderr("for changes of tokens")
                _tokens_file(tokens, "alice tok-a\ndave tok-d\n")
                if not watch:
                    proxy.process.send_signal(signal.SIGHUP)
                closed = await wait_closed(bob)
                assert (closed.code, closed.reason) == (1008, "principal revoked")
                await proxy.wait_for_stderr("1 revoked, 1 connection(s) closed")
                await a.request("session/new", {"cwd": "/", "mcpServers": []})
            assert await upgrade_status(url, _bearer("tok-b")) == 401
            assert await upgrade_status(url, _bearer("tok-d")) == 101


def test_a_tokens_file_others_can_read_is_refused(tmp_path: Path) -> None:
    """Mode 0644: exit 2 with a sentence saying chmod 600."""
    tokens = tmp_path / "tokens"
    tokens.write_text("alice tok\n")
    tokens.chmod(0o644)
    r = subprocess.run(
        proxy_command(
            "--listen", "ws://127.0.0.1:0/acp", "--tokens-file", str(tokens), "--", "true"
        ),
        capture_output=True,
        timeout=TIMEOUT,
    )
    assert r.returncode == 2
    assert b"chmod 600" in r.stderr


_OTHER_USER = r"""
import encodings.idna, json, os, socket, sys
path, port = sys.argv[1], int(sys.argv[2])
os.setgid(65534)
os.setuid(65534)
out = {"uid": os.getuid()}
try:
    token = open(path).read().strip()
    out["read"] = True
except OSError as exc:
    token, out["read"] = "", exc.__class__.__name__
s = socket.create_connection(("127.0.0.1", port), timeout=10)
head = ("GET /acp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n" % port)
if token:
    head += "Authorization: Bearer %s\r\n" % token
s.sendall((head + "\r\n").encode())
out["status"] = int(s.recv(4096).split(b" ")[1])
print(json.dumps(out))
"""


async def test_another_local_user_cannot_connect_to_a_default_loopback_listener(
    tmp_path: Path,
) -> None:
    """--listen on loopback with no token file generates one (0600, in the runtime
    directory, path printed); a client running as uid 65534 can neither read it nor
    connect (401); the owner with the token gets 101."""
    assert os.getuid() == 0, "the test switches to uid 65534"
    cmd = [*proxy_command("--listen", "ws://127.0.0.1:0/acp"), *AGENT_CMD]
    with trio.fail_after(TIMEOUT):
        async with open_proxy(cmd) as proxy:
            err = await proxy.wait_for_stderr("listening on ")
            url = err.split("listening on ")[1].split()[0]
            path = err.split(" is in ")[1].split()[0]
            st = os.stat(path)
            assert stat.S_IMODE(st.st_mode) == 0o600
            assert st.st_uid == 0
            assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) & 0o077 == 0
            port = url.rsplit(":", 1)[1].split("/")[0]
            other = await trio.run_process(
                [sys.executable, "-c", _OTHER_USER, path, port], capture_stdout=True, cwd="/"
            )
            seen = json.loads(other.stdout)
            assert seen == {"uid": 65534, "read": "PermissionError", "status": 401}
            token = (await trio.Path(path).read_text()).strip()
            assert await upgrade_status(url, _bearer(token)) == 101
            assert await upgrade_status(url) == 401


async def test_the_generated_token_note_names_the_connect_command_and_dies_with_the_listener(
    tmp_path: Path,
) -> None:
    """The generated-token line shows the --connect command that works; the token file
    is removed when the listener stops on SIGTERM."""
    cmd = [*proxy_command("--listen", "ws://127.0.0.1:0/acp"), *AGENT_CMD]
    with trio.fail_after(TIMEOUT):
        async with open_proxy(cmd) as proxy:
            err = await proxy.wait_for_stderr("listening on ")
            url = err.split("listening on ")[1].split()[0]
            path = err.split(" is in ")[1].split()[0]
            assert f"acp-proxy --connect {url} --token-file {path}" in err
            assert await trio.Path(path).exists()
            proxy.process.send_signal(signal.SIGTERM)
            await proxy.process.wait()
        assert not await trio.Path(path).exists()


async def test_no_token_says_who_can_connect() -> None:
    """--no-token keeps a token-less loopback listener, and its warning says so."""
    cmd = [*proxy_command("--listen", "ws://127.0.0.1:0/acp", "--no-token"), *AGENT_CMD]
    with trio.fail_after(TIMEOUT):
        async with open_proxy(cmd) as proxy:
            err = await proxy.wait_for_stderr("listening on ")
            assert "every user of this machine" in err
            url = err.split("listening on ")[1].split()[0]
            assert await upgrade_status(url) == 101


def test_a_non_loopback_bind_still_needs_a_token() -> None:
    r = subprocess.run(
        proxy_command("--listen", "ws://0.0.0.0:0/acp", "--", "true"),
        capture_output=True,
        timeout=TIMEOUT,
    )
    assert r.returncode == 2
    assert b"without a bearer token" in r.stderr


async def test_the_stdio_drop_in_forwards_the_same_session_new_unchanged(received: Path) -> None:
    """The local editor is trusted: a session/new with a stdio MCP server and cwd "/"
    reaches the agent byte for byte under the default config."""
    new = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "session/new",
                      "params": {"cwd": "/", "mcpServers": [STDIO, HTTP]}}).encode()  # fmt: skip
    init = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                       "params": {"protocolVersion": 1}}).encode()  # fmt: skip
    with trio.fail_after(TIMEOUT):
        async with open_proxy([*proxy_command(), *AGENT_CMD]) as proxy:
            await proxy.send(init + b"\n")
            assert (await proxy.out.recv_json())["id"] == 1
            await proxy.send(new + b"\n")
            assert (await proxy.out.recv_json())["result"]["sessionId"] == "sess-1"
    assert _received(received) == [init, new]


async def _get(port: int, path: str, token: str | None = None) -> tuple[int, bytes]:
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        auth = f"Authorization: Bearer {token}\r\n" if token else ""
        head = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{auth}Connection: close\r\n\r\n"
        await stream.send_all(head.encode())
        data = b""
        while chunk := await stream.receive_some(65536):
            data += chunk
    top, _, body = data.partition(b"\r\n\r\n")
    return int(top.split(b" ")[1]), body


async def test_the_principal_is_on_trace_records_and_status(tmp_path: Path) -> None:
    """Every trace record of erin's connection names her; /status needs a token and
    names her connection's principal."""
    tokens = _tokens_file(tmp_path / "tokens", "erin tok-e\n")
    trace = tmp_path / "trace.jsonl"
    cmd = proxy_command("--listen", "ws://127.0.0.1:0/acp", "--tokens-file", str(tokens),
                        "--trace", str(trace), "--metrics", "127.0.0.1:0",
                        "--log-level", "info")  # fmt: skip
    with trio.fail_after(TIMEOUT):
        async with open_proxy([*cmd, *AGENT_CMD]) as proxy:
            err = await proxy.wait_for_stderr("listening on ")
            url = err.split("listening on ")[1].split()[0]
            await proxy.wait_for_stderr("serving metrics on ")
            metrics = proxy.stderr_text().split("serving metrics on http://")[1]
            port = int(metrics.split("/")[0].rsplit(":", 1)[1])
            async with connect(url, _bearer("tok-e")) as ws:
                client = AcpClient(ws)
                await _init(client)
                await client.request("session/new", {"cwd": "/", "mcpServers": []})
                assert (await _get(port, "/status"))[0] == 401
                assert (await _get(port, "/status", "wrong"))[0] == 401
                code, body = await _get(port, "/status", "tok-e")
                assert code == 200
                assert [c["principal"] for c in json.loads(body)["connections"]] == ["erin"]
    records = [json.loads(line) for line in trace.read_text().splitlines()]
    messages = [r for r in records if "conn" in r]
    assert len(messages) >= 4
    assert {r.get("principal") for r in messages} == {"erin"}
