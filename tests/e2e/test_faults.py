"""Hostile input and faults, end to end: what the client receives and how the proxy exits."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from pathlib import Path

import pytest
import trio
from support.e2ekit import (
    AgentSide,
    agent_next_is_ping,
    agent_to_client,
    bridged_proxy,
    client_next_is_pong,
    client_to_agent,
    exchange,
    handshake_v1,
    line,
    notif,
    ok,
    open_proxy,
    process_running,
    proxy_command,
    read_audit,
    req,
    update,
    write_config,
)

TIMEOUT = 30
MIB = 1024 * 1024


def _error(rid: object, code: int, message: str, data: object = None) -> dict[str, object]:
    err: dict[str, object] = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    return {"jsonrpc": "2.0", "id": rid, "error": err}


def _vm_hwm_bytes(pid: int) -> int:
    """Peak resident set size of process ``pid`` (Linux ``VmHWM``)."""
    with open(f"/proc/{pid}/status") as f:
        for text in f:
            if text.startswith("VmHWM:"):
                return int(text.split()[1]) * 1024
    raise AssertionError("no VmHWM in /proc status")


def _pipe_max_bytes() -> int:
    """The largest pipe buffer an unprivileged process may ask for (Linux)."""
    return int(Path("/proc/sys/fs/pipe-max-size").read_text())


# ------------------------------------------------------------------ agent faults


async def test_agent_killed_mid_turn_answers_pending_requests(tmp_path: Path) -> None:
    """When the agent dies, every client request in flight is answered with -32603 naming
    the agent's exit status, and the proxy exits with that status."""
    pid_file = tmp_path / "agent.pid"
    with trio.fail_after(TIMEOUT):
        async with bridged_proxy(agent_args=["--pid-file", str(pid_file)]) as (proxy, agent):
            await handshake_v1(proxy, agent)
            await client_to_agent(
                proxy, agent, req(2, "session/prompt", {"sessionId": "S1", "prompt": []})
            )
            await client_to_agent(proxy, agent, req("x", "_vendor/slow", {}))
            await agent_to_client(
                proxy, agent, update("S1", sessionUpdate="agent_message_chunk", content={})
            )
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
            reason = "agent was killed by signal 9 (SIGKILL)"
            assert await proxy.out.recv_json() == _error(
                2,
                -32603,
                f"acp-proxy: {reason}; session/prompt got no answer",
                {"method": "session/prompt", "sessionId": "S1", "reason": reason},
            )
            assert await proxy.out.recv_json() == _error(
                "x",
                -32603,
                f"acp-proxy: {reason}; _vendor/slow got no answer",
                {"method": "_vendor/slow", "sessionId": None, "reason": reason},
            )
            await proxy.out.expect_eof()
            assert await proxy.wait() == 137


async def test_agent_that_never_exits_is_killed_and_its_requests_answered(tmp_path: Path) -> None:
    """After the client's EOF, the agent's own pending request is answered with -32603; an agent
    that ignores both EOF and SIGTERM is killed after grace + kill_after seconds."""
    cfg = write_config(
        tmp_path / "c.toml", "[process]\ngrace_seconds = 0.3\nkill_after_seconds = 0.3\n"
    )
    args = ["--ignore-eof", "--ignore-sigterm"]
    with trio.fail_after(TIMEOUT):
        async with bridged_proxy(["--config", str(cfg)], args) as (proxy, agent):
            await handshake_v1(proxy, agent)
            ask = req(0, "session/request_permission", {"sessionId": "S1", "options": []})
            await agent_to_client(proxy, agent, ask)
            start = trio.current_time()
            await proxy.close_stdin()
            reason = "client closed its stream"
            assert await agent.recv_json() == _error(
                0,
                -32603,
                f"acp-proxy: {reason}; session/request_permission got no answer",
                {"method": "session/request_permission", "sessionId": "S1", "reason": reason},
            )
            assert await agent.lines.read_to_eof() == b""  # then its stdin was closed
            assert await proxy.wait() == 128 + signal.SIGKILL
            assert trio.current_time() - start >= 0.55
            await proxy.out.expect_eof()


async def test_agent_exiting_before_answering_initialize() -> None:
    """An agent that exits after reading initialize: the client gets -32603 for it and the
    proxy exits with the agent's status."""
    with trio.fail_after(TIMEOUT):
        async with bridged_proxy(agent_args=["--exit-code", "3"]) as (proxy, agent):
            await client_to_agent(proxy, agent, req(0, "initialize", {"protocolVersion": 1}))
            await agent.close()
            reason = "agent exited with status 3"
            assert await proxy.out.recv_json() == _error(
                0,
                -32603,
                f"acp-proxy: {reason}; initialize got no answer",
                {"method": "initialize", "sessionId": None, "reason": reason},
            )
            await proxy.out.expect_eof()
            assert await proxy.wait() == 3


async def test_agent_crashing_at_startup() -> None:
    """An agent that dies at once: nothing on stdout, its stderr passed on, its status returned."""
    crash = "import sys; sys.stderr.write('agent: boom\\n'); sys.exit(3)"
    with trio.fail_after(TIMEOUT):
        async with open_proxy([*proxy_command(), sys.executable, "-c", crash]) as proxy:
            await proxy.out.expect_eof()
            assert await proxy.wait() == 3
            assert b"agent: boom\n" in await proxy.all_stderr()


async def test_agent_exit_ends_the_connection_even_if_a_child_holds_its_stdout(
    tmp_path: Path,
) -> None:
    """An agent that exits while a background child of it keeps its stdout open: the proxy
    answers the client and exits with the agent's status after the grace period, not when
    the child finally closes the pipe."""
    cfg = write_config(tmp_path / "c.toml", "[process]\ngrace_seconds = 0.3\n")
    agent = (
        "import subprocess, sys\n"
        "child = subprocess.Popen(['sleep', '30'], stderr=subprocess.DEVNULL)\n"
        "sys.stderr.write(f'child {child.pid}\\n')\n"
        "sys.stdin.readline()\n"
        'sys.stdout.write(\'{"jsonrpc":"2.0","method":"_x/bye"}\\n\')\n'
        "sys.exit(4)\n"
    )
    cmd = [*proxy_command("--config", str(cfg)), sys.executable, "-c", agent]
    with trio.fail_after(TIMEOUT):
        async with open_proxy(cmd) as proxy:
            err = await proxy.wait_for_stderr("\n")
            child_pid = int(err.split()[1])
            try:
                start = trio.current_time()
                await proxy.send(req(0, "initialize", {"protocolVersion": 1}))
                assert await proxy.out.recv_line() == notif("_x/bye")
                # no initialize answer: the error carries the agent's last stderr line
                reason = f"agent exited with status 4; its stderr ended with: child {child_pid}"
                assert await proxy.out.recv_json() == _error(
                    0,
                    -32603,
                    f"acp-proxy: {reason}; initialize got no answer",
                    {"method": "initialize", "sessionId": None, "reason": reason},
                )
                await proxy.out.expect_eof()
                assert await proxy.wait() == 4
                assert trio.current_time() - start < 10
                # the child was in the agent's process group: stopped after the grace period
                assert not process_running(child_pid)
            finally:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(child_pid, signal.SIGKILL)


async def test_agent_output_is_drained_after_exit_however_slow_the_client(
    tmp_path: Path,
) -> None:
    """An agent that exits with output still unread (the client is not reading): long after
    the grace period the client still receives every message, then EOF and the status."""
    if _pipe_max_bytes() < MIB:
        pytest.skip("needs pipes of 1 MiB (fs.pipe-max-size)")
    # With one-batch channels the relay holds 3 to 5 of these 256 KiB messages before
    # its reader waits; the 1 MiB pipe takes the rest, so the agent can finish and
    # exit while its reader is held back with output still in the pipe.
    cfg = write_config(
        tmp_path / "c.toml", "[limits]\nchannel_messages = 1\n[process]\ngrace_seconds = 0.2\n"
    )
    size, count = 256 * 1024, 6
    agent = (
        "import fcntl, json, os, sys\n"
        "fcntl.fcntl(1, 1031, 1 << 20)  # F_SETPIPE_SZ: up to 1 MiB can wait in the pipe\n"
        f"for i in range({count}):\n"
        "    body = {'jsonrpc': '2.0', 'method': '_x/bulk', "
        f"'params': {{'i': i, 'f': 'z' * {size}}}}}\n"
        "    sys.stdout.write(json.dumps(body, separators=(',', ':')) + '\\n')\n"
        "sys.stdout.flush()\n"
        "sys.stderr.write('agent: all written\\n')\n"
        "sys.exit(6)\n"
    )
    frames = [notif("_x/bulk", {"i": i, "f": "z" * size}) for i in range(count)]
    cmd = [*proxy_command("--config", str(cfg)), sys.executable, "-c", agent]
    with trio.fail_after(TIMEOUT):
        async with open_proxy(cmd) as proxy:
            with trio.move_on_after(10):
                await proxy.wait_for_stderr("agent: all written\n")
            assert "agent: all written" in proxy.stderr_text(), proxy.stderr_text()[-3000:]
            await trio.sleep(1.0)  # the agent has exited; the proxy is held back for > grace
            for f in frames:
                assert await proxy.out.recv_line() == f
            await proxy.out.expect_eof()
            assert await proxy.wait() == 6


async def test_agent_command_that_cannot_be_started(tmp_path: Path) -> None:
    """An agent executable that cannot be started (neither a binary nor a #! script): exit
    status 127 and a message on stderr. (A missing #! interpreter is a usage error:
    tests/e2e/test_newuser_messages.py.)"""
    agent = tmp_path / "agent-binary"
    agent.write_bytes(b"\x00\x01 not an executable format\n")
    agent.chmod(0o755)
    with trio.fail_after(TIMEOUT):
        async with open_proxy([*proxy_command(), str(agent)]) as proxy:
            await proxy.out.expect_eof()
            assert await proxy.wait() == 127
            assert f"cannot start agent '{agent}'".encode() in await proxy.all_stderr()


async def test_half_written_last_line_is_reported_not_forwarded() -> None:
    """A last agent line without its newline at EOF is reported on stderr and never forwarded."""
    half = b'{"jsonrpc":"2.0","method":"_x/half","params":{'
    with trio.fail_after(TIMEOUT):
        async with bridged_proxy() as (proxy, agent):
            await agent_to_client(proxy, agent, notif("_x/whole"))
            await agent.send(half)
            await agent.close()
            await proxy.out.expect_eof()
            assert await proxy.wait() == 0
            report = f"agent: half-written last line at end of stream ({len(half)} bytes)"
            assert f"{report}, not forwarded".encode() in await proxy.all_stderr()


async def test_non_json_agent_lines_are_dropped_and_reported() -> None:
    """Agent stdout lines that are not JSON (log noise, binary) are dropped and named on stderr."""
    with trio.fail_after(TIMEOUT):
        async with bridged_proxy() as (proxy, agent):
            await agent.send(b"Loading model...\n\x00\xff\xfe binary\n")
            await agent_to_client(proxy, agent, notif("_x/after"))
            err = await proxy.wait_for_stderr("agent stdout line is not JSON, dropped", 2)
            assert "agent stdout line is not JSON, dropped: 'Loading model...'" in err


async def test_agent_closing_stdout_but_running_on_is_terminated(tmp_path: Path) -> None:
    """An agent that closes its stdout but keeps running is terminated after the grace
    period; the client's pending request is answered with the resulting status."""
    cfg = write_config(tmp_path / "c.toml", "[process]\ngrace_seconds = 0.3\n")
    agent = "import os, sys, time\nsys.stdin.readline()\nos.close(1)\ntime.sleep(60)\n"
    cmd = [*proxy_command("--config", str(cfg)), sys.executable, "-c", agent]
    with trio.fail_after(TIMEOUT):
        async with open_proxy(cmd) as proxy:
            await proxy.send(req(0, "initialize", {"protocolVersion": 1}))
            reason = "agent was killed by signal 15 (SIGTERM)"
            assert await proxy.out.recv_json() == _error(
                0,
                -32603,
                f"acp-proxy: {reason}; initialize got no answer",
                {"method": "initialize", "sessionId": None, "reason": reason},
            )
            assert await proxy.wait() == 143
            assert b"agent closed stdout but did not exit; terminating it" in (
                await proxy.all_stderr()
            )


async def test_half_written_last_client_line_is_reported_not_forwarded() -> None:
    """A client that closes its stdin in the middle of a line: reported, never forwarded."""
    with trio.fail_after(TIMEOUT):
        async with bridged_proxy() as (proxy, agent):
            await client_to_agent(proxy, agent, notif("_x/whole"))
            half = b'{"jsonrpc":"2.0","id":1,"method":"session/pro'
            await proxy.send(half)
            await proxy.close_stdin()
            await agent.lines.expect_eof()
            assert await proxy.wait() == 0
            report = f"client: half-written last line at end of stream ({len(half)} bytes)"
            assert f"{report}, not forwarded".encode() in await proxy.all_stderr()


async def test_agent_response_to_unknown_id_is_dropped(tmp_path: Path) -> None:
    """An agent response to an id the client never sent is dropped and audited."""
    audit = tmp_path / "audit.jsonl"
    with trio.fail_after(TIMEOUT):
        async with bridged_proxy(["--audit-log", str(audit)]) as (proxy, agent):
            await agent.send(ok(41, {}))
            await client_next_is_pong(proxy, agent)
            await proxy.close_stdin()
            assert await proxy.wait() == 0
    assert [(r["event"], r["id"]) for r in read_audit(audit) if "id" in r] == [
        ("unknown_response", 41)
    ]


# ----------------------------------------------------------------- client faults


@pytest.mark.parametrize(
    ("frame", "answer"),
    [
        pytest.param(
            b'{"jsonrpc":"2.0","id":1,"method":\n',
            _error(
                None,
                -32700,
                "acp-proxy: not valid JSON: Expecting value: line 1 column 34 (char 33)",
            ),
            id="truncated-json",
        ),
        pytest.param(
            b"\xff\xfe not utf-8\n",
            None,  # -32700: message from the decoder
            id="not-utf8",
        ),
        pytest.param(
            b'{"jsonrpc":"2.0","id":5}\n',
            _error(5, -32600, "acp-proxy: a response needs exactly one of result and error"),
            id="neither-request-nor-response",
        ),
        pytest.param(
            b'{"id":6,"method":"session/new","params":{}}\n',
            _error(6, -32600, 'acp-proxy: missing or wrong "jsonrpc" (must be "2.0")'),
            id="no-jsonrpc-member",
        ),
        pytest.param(
            b'{"jsonrpc":"2.0","id":7,"method":"x","params":3}\n',
            _error(7, -32600, 'acp-proxy: "params" must be an object or an array'),
            id="scalar-params",
        ),
        pytest.param(
            b'{"jsonrpc":"2.0","id":9,"method":"session/cancel","method":"session/prompt"}\n',
            _error(
                9,
                -32600,
                "acp-proxy: ambiguous message: duplicate keys in decision fields "
                "(method, id, params, sessionId, update)",
            ),
            id="duplicate-method-key",
        ),
        pytest.param(
            b"[" * 100_000 + b"]" * 100_000 + b"\n",
            _error(
                None, -32600, "acp-proxy: nested deeper than 512 levels (limits.max_nesting_depth)"
            ),
            id="deeply-nested",
        ),
        pytest.param(
            b'{"jsonrpc":"2.0","id":3,"method":"x","params":' + b"[" * 600 + b"]" * 600 + b"}\n",
            _error(  # the id read by a scan of the top-level members, at any depth
                3, -32600, "acp-proxy: nested deeper than 512 levels (limits.max_nesting_depth)"
            ),
            id="nested-past-the-limit",
        ),
        pytest.param(
            b"[]\n",
            _error(None, -32600, "acp-proxy: empty batch"),
            id="empty-batch",
        ),
        pytest.param(
            b"42\n",
            _error(None, -32600, "acp-proxy: not a JSON object"),
            id="not-an-object",
        ),
    ],
)
async def test_invalid_client_frames_are_answered_not_forwarded(
    frame: bytes, answer: dict[str, object] | None
) -> None:
    """Invalid client frames get the JSON-RPC error they deserve and never reach the agent."""
    with trio.fail_after(TIMEOUT):
        async with bridged_proxy() as (proxy, agent):
            await proxy.send(frame)
            got = await proxy.out.recv_json()
            if answer is None:
                assert got["id"] is None
                assert got["error"]["code"] == -32700
                assert got["error"]["message"].startswith("acp-proxy: not valid JSON: ")
            else:
                assert got == answer
            await agent_next_is_ping(proxy, agent)
            # The connection lives on.
            await exchange(proxy, agent, req(8, "_x/after", {}), ok(8, {}))


async def test_client_response_to_unknown_id_is_dropped() -> None:
    """A client response to an id the agent never sent is dropped."""
    with trio.fail_after(TIMEOUT):
        async with bridged_proxy() as (proxy, agent):
            await proxy.send(ok(99, {"outcome": {"outcome": "cancelled"}}))
            await agent_next_is_ping(proxy, agent)


@pytest.mark.parametrize("how", ["closes-both", "stops-reading"])
async def test_client_disconnecting_mid_stream_stops_agent(how: str) -> None:
    """A client that goes away while the agent streams: the agent's stdin is closed, the
    agent exits, and so does the proxy, with the agent's status."""
    with trio.fail_after(TIMEOUT):
        async with bridged_proxy(agent_args=["--exit-code", "5"]) as (proxy, agent):
            await handshake_v1(proxy, agent)
            chunk = update("S1", sessionUpdate="agent_message_chunk", content={"text": "x" * 200})

            async def stream_updates() -> None:
                try:
                    while True:
                        await agent.send(chunk * 20)
                        await trio.sleep(0.001)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    pass

            async with trio.open_nursery() as nursery:
                nursery.start_soon(stream_updates)
                for _ in range(50):
                    assert await proxy.out.recv_line() == chunk
                if how == "closes-both":
                    await proxy.close_stdin()
                assert proxy.process.stdout is not None
                await proxy.process.stdout.aclose()
                assert await proxy.wait() == 5
                nursery.cancel_scope.cancel()


async def test_never_ending_line_is_cut_and_connection_lives_on() -> None:
    """A client line beyond --max-message-bytes is skipped without buffering it (memory stays
    flat over 64 MiB), answered with -32600 once it ends, and the next message passes."""
    with trio.fail_after(TIMEOUT):
        async with bridged_proxy(["--max-message-bytes", "4096"]) as (proxy, agent):
            await client_to_agent(proxy, agent, notif("_x/before"))
            block = b"a" * MIB
            for _ in range(64):
                await proxy.send(block)
            assert _vm_hwm_bytes(proxy.process.pid) < 100 * MIB
            await proxy.send(b"\n")
            assert await proxy.out.recv_json() == _error(
                None,
                -32600,
                "acp-proxy: message of 67108864 bytes exceeds limits.max_message_bytes (4096)",
            )
            await exchange(proxy, agent, req(1, "_x/after", {}), ok(1, {}))
            # An oversize agent line is dropped and reported; the agent's next line passes.
            big = notif("_x/big", {"b": "b" * 5000})
            await agent.send(big)
            await client_next_is_pong(proxy, agent)
            await proxy.wait_for_stderr(
                f"agent sent an oversize message: message of {len(big) - 1} bytes exceeds "
                "limits.max_message_bytes (4096)"
            )


# ----------------------------------------------------------- volume and pressure


async def test_agent_stderr_flood_does_not_stall_the_relay() -> None:
    """While the agent writes 8 MiB to stderr, messages keep flowing both ways."""
    flood = 8 * MIB
    with trio.fail_after(TIMEOUT):
        async with bridged_proxy(agent_args=["--stderr-flood-bytes", str(flood)]) as (
            proxy,
            agent,
        ):
            for i in range(200):
                await exchange(proxy, agent, req(i, "_x/echo", {"i": i}), ok(i, {"i": i}))
            await proxy.close_stdin()
            assert await proxy.wait() == 0
            assert len(await proxy.all_stderr()) == flood


@pytest.mark.parametrize("message_bytes", [1024, 4 * MIB], ids=["1KiB-messages", "4MiB-messages"])
async def test_client_not_reading_makes_agent_wait_with_bounded_memory(
    message_bytes: int,
) -> None:
    """A client that stops reading blocks the agent's writes (backpressure); the proxy's peak
    memory stays under 100 MiB; once the client reads again everything arrives in order."""
    filler = "f" * (message_bytes - 60)
    frames = [
        line({"jsonrpc": "2.0", "method": "_x/flood", "params": {"n": i, "f": filler}})
        for i in range(10)
    ]
    # Writes of about 256 KiB, or one message each when messages are big; 10-message cycle.
    repeat = (256 * 1024) // len(b"".join(frames))
    writes = [(b"".join(frames) * repeat, 10 * repeat)] if repeat else [(f, 1) for f in frames]
    written_bytes = written_frames = 0
    stop = trio.Event()
    flood_done = trio.Event()

    async def flood(agent: AgentSide) -> None:
        nonlocal written_bytes, written_frames
        i = 0
        while written_bytes < 400 * MIB and not stop.is_set():
            data, count = writes[i % len(writes)]
            await agent.send(data)
            written_bytes += len(data)
            written_frames += count
            i += 1
        flood_done.set()

    with trio.fail_after(60):
        async with bridged_proxy() as (proxy, agent), trio.open_nursery() as nursery:
            await agent_to_client(proxy, agent, notif("_x/start"))
            baseline = _vm_hwm_bytes(proxy.process.pid)
            nursery.start_soon(flood, agent)
            seen = -1
            while seen != written_bytes and not flood_done.is_set():  # until the agent is stuck
                seen = written_bytes
                await trio.sleep(1.0)
            peak = _vm_hwm_bytes(proxy.process.pid)
            stop.set()
            facts = f"{seen / MIB:.0f} MiB written, proxy peak RSS {peak / MIB:.0f} MiB"
            print(facts, f"({baseline / MIB:.0f} MiB at start)")
            assert not flood_done.is_set(), "the agent was never made to wait"
            assert seen < 100 * MIB, facts
            assert peak < 100 * MIB, facts
            # Reading again drains everything, in order, and the agent finishes writing.
            n = 0
            while not (flood_done.is_set() and n == written_frames):
                got = await proxy.out.recv_line()
                assert got == frames[n % 10], f"message {n}: {got[:80]!r}"
                n += 1
            await client_next_is_pong(proxy, agent)


async def test_20mib_prompt_and_response_pass_byte_for_byte() -> None:
    """A 20 MiB session/prompt and a 20 MiB agent response pass unchanged."""
    text = ("prompt 文字 \\u00e9 " * (20 * MIB // 20))[: 20 * MIB]
    prompt = req(
        3, "session/prompt", {"sessionId": "S1", "prompt": [{"type": "text", "text": text}]}
    )
    answer = ok(3, {"stopReason": "end_turn", "_meta": {"echo": text[::-1]}})
    assert len(prompt) > 20 * MIB
    assert len(answer) > 20 * MIB
    with trio.fail_after(TIMEOUT):
        async with bridged_proxy() as (proxy, agent):
            await handshake_v1(proxy, agent)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(proxy.send, prompt)
                assert await agent.recv_line() == prompt
            async with trio.open_nursery() as nursery:
                nursery.start_soon(agent.send, answer)
                assert await proxy.out.recv_line() == answer
