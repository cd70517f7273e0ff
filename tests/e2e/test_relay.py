"""The transparent stdio relay, end to end: real proxy and agent processes.

The test is the client (the proxy's stdin/stdout) and, through the bridge
agent, the agent too, so every byte on both of the proxy's sides is checked.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
import trio
from support.e2ekit import (
    agent_next_is_ping,
    agent_to_client,
    bridged_proxy,
    client_next_is_pong,
    client_to_agent,
    exchange,
    handshake_v1,
    notif,
    ok,
    read_audit,
    req,
    update,
    write_config,
)

TIMEOUT = 20

# Frames whose exact bytes a JSON re-serializer would change: odd spacing and key
# order, \u escapes (incl. a surrogate pair and U+2028), raw UTF-8, integers beyond
# 64 bits, 1.50 and 1e400, unknown fields, _meta, trailing blanks.
CLIENT_FRAMES = [
    b'{"id":1,  "jsonrpc" : "2.0","method":"_x/y","params":{"z":1,"a":"\\u00e9\\ud83d\\ude00",'
    b'"big":1180591620717411303424,"neg":-1180591620717411303424,"f":1.50,"e":1e400,'
    b'"_meta":{"vendor.x":{"deep":[1,{},[]]}}},"unknownTop":{"k":null}}\n',
    b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":1}}\n',
    '{"jsonrpc":"2.0","method":"_x/raw","params":{"text":"日本語 \u2028 ok"}}   \t\n'.encode(),
    b' {"jsonrpc":"2.0","id":"s-\\"q\\"","method":"_x/array","params":[1,2,3]}\n',
    b'{"jsonrpc":"2.0","method":"_x/lone","params":{"s":"\\ud800 \\udfff","n":-0.0e-0}}\n',
]
AGENT_FRAMES = [
    b'{ "result" : {"b":2,"a":1,"_meta":{"q":null}} , "id":1, "jsonrpc":"2.0", "extra": 7 }\n',
    b'{"method":"_vendor/event","jsonrpc":"2.0","params":{"n":18446744073709551616,'
    b'"s":"\\u2028\\u0000"}}\n',
    b'{"jsonrpc":"2.0","id":"s-\\"q\\"","error":{"code":-32800,"message":"cancelled",'
    b'"data":{"why":"$/cancel_request"}}}\n',
    b'{"jsonrpc":"2.0","id":9007199254740991,"method":"_x/ask","params":{}}\n',
]


async def test_frames_pass_byte_for_byte_both_directions() -> None:
    """Unusual but valid frames (spacing, key order, escapes, 2**70 as a value, the largest
    id a JavaScript peer reads exactly, extensions) pass unchanged."""
    with trio.fail_after(TIMEOUT):
        async with bridged_proxy() as (proxy, agent):
            for frame in CLIENT_FRAMES:
                await client_to_agent(proxy, agent, frame)
            for frame in AGENT_FRAMES:
                await agent_to_client(proxy, agent, frame)
            # The client answers the agent's request whose id is 2**53 - 1.
            await client_to_agent(
                proxy, agent, b'{"jsonrpc":"2.0","id":9007199254740991,"result":null}\n'
            )
            await proxy.close_stdin()
            assert await agent.lines.read_to_eof() == b""
            assert await proxy.wait() == 0
            await proxy.out.expect_eof()


async def test_many_frames_in_one_write_keep_order() -> None:
    """A burst of frames in one write (and one split mid-line) arrives whole and in order."""
    frames = [notif("_x/n", {"n": i}) for i in range(500)]
    blob = b"".join(frames)
    with trio.fail_after(TIMEOUT):
        async with bridged_proxy() as (proxy, agent):
            await proxy.send(blob[:1001])
            await trio.sleep(0.05)
            await proxy.send(blob[1001:])
            for f in frames:
                assert await agent.recv_line() == f
            await agent.send(blob[:777])
            await trio.sleep(0.05)
            await agent.send(blob[777:])
            for f in frames:
                assert await proxy.out.recv_line() == f


async def test_crlf_and_bom_are_accepted_and_not_passed_on() -> None:
    """A leading UTF-8 BOM and \\r\\n line endings are stripped; the frames pass as \\n lines."""
    a = notif("_x/a")
    b = notif("_x/b", {"t": "x\r"})
    with trio.fail_after(TIMEOUT):
        async with bridged_proxy() as (proxy, agent):
            await proxy.send(b"\xef\xbb\xbf" + a[:-1] + b"\r\n" + b[:-1] + b"\r\n")
            assert await agent.recv_line() == a
            assert await agent.recv_line() == b
            await agent.send(b"\xef\xbb\xbf" + b[:-1] + b"\r\n" + a[:-1] + b"\r\n")
            assert await proxy.out.recv_line() == b
            assert await proxy.out.recv_line() == a


async def test_same_id_used_by_both_sides_at_once() -> None:
    """Client and agent requests with the same id, in flight at once, each get their answer."""
    with trio.fail_after(TIMEOUT):
        async with bridged_proxy() as (proxy, agent):
            await handshake_v1(proxy, agent)
            prompt = req(7, "session/prompt", {"sessionId": "S1", "prompt": []})
            perm = req(7, "session/request_permission", {"sessionId": "S1", "options": []})
            await client_to_agent(proxy, agent, prompt)
            await agent_to_client(proxy, agent, perm)
            perm_answer = ok(7, {"outcome": {"outcome": "cancelled"}})
            await client_to_agent(proxy, agent, perm_answer)
            done = ok(7, {"stopReason": "end_turn"})
            await agent_to_client(proxy, agent, done)
            # Both requests are settled: a second answer to id 7 is dropped either way.
            await agent.send(done)
            await client_next_is_pong(proxy, agent)
            await proxy.send(perm_answer)
            await agent_next_is_ping(proxy, agent)


async def test_agent_stderr_passes_through_unchanged() -> None:
    """The agent's stderr bytes (not UTF-8, no final newline) reach the proxy's stderr unchanged."""
    noise = b"agent log \xff\xfe not utf-8\r\n\x1b[31mred\x1b[0m\nno newline at end"
    with trio.fail_after(TIMEOUT):
        async with bridged_proxy(agent_args=["--stderr-hex", noise.hex()]) as (proxy, agent):
            await client_to_agent(proxy, agent, notif("_x/go"))
            await proxy.close_stdin()
            assert await proxy.wait() == 0
            assert await proxy.all_stderr() == noise


@pytest.mark.parametrize("code", [0, 7, 255])
async def test_exit_status_is_the_agents(code: int) -> None:
    """The proxy exits with the agent's exit status when the agent ends on its own."""
    with trio.fail_after(TIMEOUT):
        async with bridged_proxy(agent_args=["--exit-code", str(code)]) as (proxy, agent):
            await agent_to_client(proxy, agent, notif("_x/bye"))
            await agent.close()
            assert await proxy.wait() == code
            await proxy.out.expect_eof()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_signal_to_proxy_is_passed_to_agent(sig: signal.Signals) -> None:
    """SIGTERM/SIGINT sent to the proxy reach the agent; the proxy then exits with its status."""
    with trio.fail_after(TIMEOUT):
        async with bridged_proxy(agent_args=["--signal-exit", "42"]) as (proxy, agent):
            await client_to_agent(proxy, agent, notif("_x/up"))
            proxy.process.send_signal(sig)
            assert await proxy.wait() == 42
            assert f"bridge-agent: got {sig.name}\n".encode() in await proxy.all_stderr()


@pytest.mark.slow
async def test_quiet_agent_is_left_alone() -> None:
    """An agent with no traffic for 11 s (longer than trio's 10 s idle worker-thread
    lifetime) is not signalled: nothing tied to a proxy thread ends it."""
    with trio.fail_after(TIMEOUT + 11):
        async with bridged_proxy(agent_args=["--signal-exit", "42"]) as (proxy, agent):
            await handshake_v1(proxy, agent)
            await trio.sleep(11)
            await exchange(proxy, agent, req(2, "_x/still-there", {}), ok(2, {}))
            await proxy.close_stdin()
            assert await proxy.wait() == 0
            assert b"bridge-agent: got" not in await proxy.all_stderr()


async def test_client_eof_closes_agent_stdin_and_agent_exits_without_waiting(
    tmp_path: Path,
) -> None:
    """Client EOF closes the agent's stdin at once; an agent that then exits is not made to wait."""
    cfg = write_config(tmp_path / "c.toml", "[process]\ngrace_seconds = 30.0\n")
    with trio.fail_after(TIMEOUT):
        async with bridged_proxy(["--config", str(cfg)], ["--exit-code", "3"]) as (proxy, agent):
            await client_to_agent(proxy, agent, notif("_x/last"))
            start = trio.current_time()
            await proxy.close_stdin()
            assert await agent.lines.read_to_eof() == b""  # the agent saw EOF on its stdin
            assert await proxy.wait() == 3
            assert trio.current_time() - start < 10


async def test_agent_ignoring_eof_is_terminated_after_grace(tmp_path: Path) -> None:
    """An agent still running after its stdin closed gets SIGTERM after process.grace_seconds."""
    cfg = write_config(
        tmp_path / "c.toml", "[process]\ngrace_seconds = 0.5\nkill_after_seconds = 5.0\n"
    )
    with trio.fail_after(TIMEOUT):
        async with bridged_proxy(["--config", str(cfg)], ["--ignore-eof"]) as (proxy, agent):
            await client_to_agent(proxy, agent, notif("_x/last"))
            start = trio.current_time()
            await proxy.close_stdin()
            assert await agent.lines.read_to_eof() == b""
            assert await proxy.wait() == 128 + signal.SIGTERM
            elapsed = trio.current_time() - start
            assert 0.4 <= elapsed < 5


# ---------------------------------------------------------------- ACP behaviour


def _chunk(session_id: str, text: str) -> bytes:
    return update(
        session_id,
        sessionUpdate="agent_message_chunk",
        content={"type": "text", "text": text},
    )


async def test_child_mutations_enforced_end_to_end(tmp_path: Path) -> None:
    """A child announced with {"cancel": {}} gets the client's session/cancel; its session/prompt
    is refused with -32601 and never reaches the agent; after capabilities: null the cancel is
    dropped too, and the audit log says so."""
    audit = tmp_path / "audit.jsonl"
    with trio.fail_after(TIMEOUT):
        async with bridged_proxy(["--audit-log", str(audit)]) as (proxy, agent):
            await handshake_v1(proxy, agent)
            prompt = req(2, "session/prompt", {"sessionId": "S1", "prompt": []})
            await client_to_agent(proxy, agent, prompt)
            announce = update(
                "S1",
                sessionUpdate="subagent_update",
                sessionId="C1",
                title="helper",
                capabilities={"cancel": {}},
                state={"state": "running"},
            )
            await agent_to_client(proxy, agent, announce)

            cancel = notif("session/cancel", {"sessionId": "C1"})
            await client_to_agent(proxy, agent, cancel)

            await proxy.send(req(3, "session/prompt", {"sessionId": "C1", "prompt": []}))
            assert await proxy.out.recv_json() == {
                "jsonrpc": "2.0",
                "id": 3,
                "error": {
                    "code": -32601,
                    "message": "acp-proxy: session/prompt refused on child session "
                    "'C1': no child capability grants this method",
                    "data": {"sessionId": "C1", "method": "session/prompt", "capability": None},
                },
            }
            await agent_next_is_ping(proxy, agent)  # the refused prompt never reached the agent

            revoke = update(
                "S1", sessionUpdate="subagent_update", sessionId="C1", capabilities=None
            )
            await agent_to_client(proxy, agent, revoke)
            await proxy.send(cancel)
            await agent_next_is_ping(proxy, agent)  # the cancel was dropped

            # The parent session is not a child: its cancel passes.
            await client_to_agent(proxy, agent, notif("session/cancel", {"sessionId": "S1"}))
            await agent_to_client(proxy, agent, ok(2, {"stopReason": "cancelled"}))
            await proxy.close_stdin()
            assert await proxy.wait() == 0

    records = read_audit(audit)
    events = [(r["event"], r.get("sessionId"), r.get("method")) for r in records]
    assert ("child_announced", "C1", None) in events
    assert ("notification_dropped", "C1", "session/cancel") in events
    rejected = [r for r in records if r["event"] == "mutation_rejected"]
    assert [(r["method"], r.get("id"), r["parentSessionId"]) for r in rejected] == [
        ("session/prompt", 3, "S1"),
        ("session/cancel", None, "S1"),
    ]


async def test_duplicate_state_reports_removed_end_to_end() -> None:
    """With protocol v2, a state_update or a child's mirrored state that repeats the last one
    delivered is dropped; a changed one passes; a mirror carrying news loses only its state."""
    with trio.fail_after(TIMEOUT):
        async with bridged_proxy() as (proxy, agent):
            await exchange(
                proxy,
                agent,
                req(0, "initialize", {"protocolVersion": 2, "capabilities": {}}),
                ok(0, {"protocolVersion": 2}),
            )
            await exchange(
                proxy, agent, req(1, "session/new", {"cwd": "/"}), ok(1, {"sessionId": "S1"})
            )
            running = update("S1", sessionUpdate="state_update", state="running")
            idle = update("S1", sessionUpdate="state_update", state="idle", stopReason="end_turn")
            await agent_to_client(proxy, agent, running)
            await agent.send(running + running)
            await agent_to_client(proxy, agent, idle)  # the two repeats never arrived
            await agent_to_client(proxy, agent, running)  # a change back is news again

            def mirror(**fields: object) -> bytes:
                return update("S1", sessionUpdate="subagent_update", sessionId="C1", **fields)

            await agent_to_client(proxy, agent, mirror(state={"state": "running"}))
            await agent.send(mirror(state={"state": "running"}))
            await client_next_is_pong(proxy, agent)  # pure repeat dropped
            await agent.send(mirror(title="renamed", state={"state": "running"}))
            assert await proxy.out.recv_line() == mirror(title="renamed")
            idle_state = {"state": "idle", "stopReason": "end_turn"}
            await agent_to_client(proxy, agent, mirror(state=idle_state))
            # The child's own state_update channel is separate from its mirror.
            await agent_to_client(
                proxy, agent, update("C1", sessionUpdate="state_update", **idle_state)
            )


async def test_early_traffic_is_held_until_the_session_is_known() -> None:
    """An update for a session sent before the session/new response that creates it, and child
    traffic sent before the child's announcement, reach the client right after those messages;
    traffic of known sessions is not held."""
    with trio.fail_after(TIMEOUT):
        async with bridged_proxy() as (proxy, agent):
            await handshake_v1(proxy, agent)
            await client_to_agent(
                proxy, agent, req(2, "session/new", {"cwd": "/", "mcpServers": []})
            )
            early = _chunk("S2", "early")
            created = ok(2, {"sessionId": "S2"})
            await agent.send(early)
            await agent_to_client(proxy, agent, _chunk("S1", "S1 flows"))  # not held
            await agent.send(created)
            assert await proxy.out.recv_line() == created
            assert await proxy.out.recv_line() == early

            child_chunk = _chunk("C9", "child")
            child_ask = req(0, "session/request_permission", {"sessionId": "C9", "options": []})
            announce = update("S2", sessionUpdate="subagent_update", sessionId="C9")
            await agent.send(child_chunk + child_ask)
            await client_next_is_pong(proxy, agent)  # both are held
            await agent.send(announce)
            assert await proxy.out.recv_line() == announce
            assert await proxy.out.recv_line() == child_chunk
            assert await proxy.out.recv_line() == child_ask
            await client_to_agent(proxy, agent, ok(0, {"outcome": {"outcome": "cancelled"}}))
