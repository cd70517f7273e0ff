"""The audit and log writers never raise, on any value, and stay bounded under a flood.

- Every audit event the core emits, driven with hostile values (ids and
  session fields of the wrong type, nesting 1,000 and 100,000 deep, lone
  surrogates, ``1e400`` / NaN, bytes that are not UTF-8, a 10,000-digit
  integer, megabyte strings), is written as exactly one valid JSON line whose
  session fields are strings or ``null``.
- A flood of invalid input (100,000 non-JSON agent lines, 20,000 invalid
  client lines) writes less to the audit log and stderr than its own size,
  and the suppressed counts add up to what the core counted.
"""

from __future__ import annotations

import io
import json
import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from acp_proxy.config.io import config_from_dict
from acp_proxy.core.actions import Action, Audit, Peer
from acp_proxy.core.engine import ProxyCore
from acp_proxy.core.wire.framing import Lines, Oversize, Partial
from acp_proxy.shell import routing as shell
from acp_proxy.shell.audit import FIELD_LIMIT, AuditLog, Throttle, format_record
from acp_proxy.shell.routing import LOG_LINE_LIMIT, flush_log_summaries, route_actions

CLIENT, AGENT = Peer.CLIENT, Peer.AGENT
EVENTS = (
    "child_announced",
    "child_updated",
    "invalid_subagent_update",
    "mutation_rejected",
    "notification_dropped",
    "request_dropped",
    "held",
    "released",
    "hold_expired",
    "duplicate_dropped",
    "invalid_message",
    "unknown_response",
    "oversize_message",
    "peer_closed",
    "connection_opened",
    "connection_closed",
    "connection_rejected",
    "keepalive_timeout",
)


def deep(n: int) -> Any:
    v: Any = "CHILD"
    for _ in range(n):
        v = [v]
    return v


HOSTILE: list[Any] = [
    deep(1000),
    deep(100_000),
    {"sessionId": "CHILD", "nested": deep(50)},
    "x\ud800y",
    "\udfff",
    float("inf"),
    float("nan"),
    -float("inf"),
    b"\xed\xa0\x80\xff",
    10**10_000,
    "s" * 1_000_000,
    [1.5, None, True],
    {1: 2},
    ("tuple",),
    object(),
    "",
]


def strict_json(line: str) -> Any:
    def no_constant(name: str) -> Any:
        raise AssertionError(f"{name} is not JSON")

    return json.loads(line, parse_constant=no_constant)


def check_line(line: str, limit: int = 16 * 1024) -> dict[str, Any]:
    assert "\n" not in line
    obj = strict_json(line)
    assert isinstance(obj, dict)
    for key, value in obj.items():
        if key == "sessionId" or key.endswith("SessionId"):
            assert value is None or type(value) is str, (key, value)
            if isinstance(value, str):
                assert len(value) <= FIELD_LIMIT + 30
        if key == "id":
            assert value is None or type(value) in (str, int), value
    assert len(line) < limit, len(line)
    return obj


@pytest.mark.parametrize("event", EVENTS)
def test_every_event_with_every_hostile_value_is_one_json_line(event: str) -> None:
    """Each hostile value in each field of each event: one valid, bounded line."""
    for value in HOSTILE:
        for key in ("sessionId", "parentSessionId", "senderSessionId", "id", "method", "reason"):
            record = Audit(event, "agent->client", {key: value, "count": value})
            obj = check_line(format_record(record, {"connection": value}))
            assert obj["event"] == event
            if key.endswith("essionId") and type(value) is not str:
                assert obj[key] is None
                assert any(key in note for note in obj["notes"])
        line = format_record(Audit(event, None, {"content": value}))
        assert len(check_line(line, 80_000).get("content", "")) < 70_000


def audit_actions(actions: list[Action]) -> list[Audit]:
    return [a for a in actions if isinstance(a, Audit)]


def hostile_session(v: Any) -> bytes:
    return json.dumps(v, separators=(",", ":")).encode()


def core_paths() -> Iterator[list[Action]]:
    """Drives the core through every audit path it has, with hostile values."""
    cfg = config_from_dict({"hold": {"timeout_seconds": 1.0, "max_messages_per_session": 2}})
    core = ProxyCore(cfg)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))
    yield core.receive(CLIENT, b'{"jsonrpc":"2.0","id":"n","method":"session/new","params":{}}', 0)
    yield core.receive(AGENT, b'{"jsonrpc":"2.0","id":"n","result":{"sessionId":"P"}}', 0)
    for v in [deep(900), {"a": "b"}, 1e300, "x\\ud800", ["P"]]:
        sid = hostile_session(v)
        upd = b'{"sessionUpdate":"subagent_update","sessionId":' + sid + b"}"
        yield core.receive(
            AGENT,
            b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":'
            + sid
            + b',"update":'
            + upd
            + b"}}",
            0,
        )
        params = b'{"sessionId":"P","update":' + upd + b"}"
        yield core.receive(
            AGENT, b'{"jsonrpc":"2.0","method":"session/update","params":' + params + b"}", 0
        )
        yield core.receive(
            CLIENT,
            b'{"jsonrpc":"2.0","id":' + sid + b',"method":"session/prompt","params":{}}',
            0,
        )
        yield core.receive(AGENT, b'{"jsonrpc":"2.0","id":' + sid + b',"result":{}}', 0)
        yield core.receive(AGENT, b'{"jsonrpc":"2.0","id":' + sid + b',"error":' + sid + b"}", 0)
    # announced child with no capabilities, then mutations on it
    child = b'{"sessionUpdate":"subagent_update","sessionId":"C\\u00e9\\ud83d\\ude00","title":"t"}'
    yield core.receive(
        AGENT,
        b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"P","update":'
        + child
        + b"}}",
        0,
    )
    for rid in [b'"x\\udfff"', b"1" + b"0" * 40, b'"' + b"i" * 100_000 + b'"']:
        yield core.receive(
            CLIENT,
            b'{"jsonrpc":"2.0","id":' + rid + b',"method":"session/prompt",'
            b'"params":{"sessionId":"C\\u00e9\\ud83d\\ude00","prompt":[]}}',
            0,
        )
        yield core.receive(AGENT, b'{"jsonrpc":"2.0","id":' + rid + b',"result":1}', 0)
    yield core.receive(
        CLIENT,
        b'{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"C\\u00e9\\ud83d\\ude00"}}',
        0,
    )
    # held traffic for unknown sessions, released on expiry and overflow
    # (a lone surrogate or an id past limits.max_session_id_bytes is refused before)
    for sid in [b'"H\\u00e9\\ud83d\\ude00"', b'"' + b"h" * 1000 + b'"']:
        for i in range(4):
            yield core.receive(
                AGENT,
                b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":'
                + sid
                + b',"update":{"sessionUpdate":"agent_message_chunk","n":'
                + str(i).encode()
                + b"}}}",
                0,
            )
    yield core.handle_timer(5.0)
    # duplicates, ambiguity, invalid JSON, batches, deep nesting, NaN, 1e400
    state = b'{"sessionUpdate":"state_update","state":"idle"}'
    for _ in range(2):
        yield core.receive(
            AGENT,
            b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"P",'
            b'"update":' + state + b"}}",
            5,
        )
    yield core.receive(CLIENT, b'{"jsonrpc":"2.0","id":1,"id":2,"method":"x"}', 5)
    yield core.receive(CLIENT, b"\xed\xa0\x80\xff not json", 5)
    yield core.receive(AGENT, b"\xed\xa0\x80\xff not json", 5)
    yield core.receive(CLIENT, b"[" * 100_000, 5)
    yield core.receive(CLIENT, b'{"jsonrpc":"2.0","id":1e400,"method":"x"}', 5)
    yield core.receive(CLIENT, b'{"jsonrpc":"2.0","id":NaN,"method":"x"}', 5)
    yield core.receive(CLIENT, b"[]", 5)
    yield core.receive(CLIENT, b'[1,{"jsonrpc":"2.0","id":[[[]]],"method":"m"}]', 5)
    yield core.receive(AGENT, Lines(b"x\ny\n\xff"), 5)
    yield core.receive(CLIENT, Oversize(10**12, True), 5)
    yield core.receive(AGENT, Oversize(10**12, False), 5)
    yield core.receive(AGENT, Partial(10**9), 5)
    yield core.peer_closed(AGENT, 6, "agent exited \ud800 " + "z" * 10_000)
    yield core.peer_closed(CLIENT, 6, "")


def test_every_core_audit_path_with_hostile_values_writes_one_json_line_each(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Through the core, the shell's router (debug logging on) and the writer."""
    stream = io.StringIO()
    log = AuditLog(stream, {"connection": 1}, Throttle(burst=10**9))
    n = 0
    events: set[str] = set()
    with caplog.at_level(logging.DEBUG, logger="acp_proxy"):
        for actions in core_paths():
            route_actions(actions, log)
            n += len(audit_actions(actions))
            events.update(a.event for a in audit_actions(actions))
    lines = stream.getvalue().splitlines()
    assert len(lines) == n == log.records_written
    for line in lines:
        check_line(line)
    assert {"invalid_message", "mutation_rejected", "held", "hold_expired"} <= events
    assert {"unknown_response", "oversize_message", "peer_closed"} <= events
    for rec in caplog.records:
        assert len(rec.getMessage()) <= LOG_LINE_LIMIT + 30


class FakeClock:
    """Seconds that move only when told."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_flood_of_invalid_agent_lines_is_counted_not_written_line_by_line(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """100,000 non-JSON agent lines over 10 s: bounded output, exact counts."""
    clock = FakeClock()
    monkeypatch.setattr(shell, "LOG_THROTTLE", Throttle(clock=clock))
    stream = io.StringIO()
    log = AuditLog(stream, throttle=Throttle(clock=clock))
    core = ProxyCore()
    flood = b"x\n" * 1000
    with caplog.at_level(logging.WARNING, logger="acp_proxy"):
        for i in range(100):
            clock.now = i * 0.1
            route_actions(core.receive(AGENT, Lines(flood), clock.now), log)
        log.flush_summaries(everything=True)
        flush_log_summaries(everything=True)
    assert core.statistics().non_json_agent_lines == 100_000
    records = [json.loads(line) for line in stream.getvalue().splitlines()]
    written = [r for r in records if r["event"] == "invalid_message"]
    summaries = [r for r in records if r["event"] == "suppressed"]
    assert len(written) == 10 * 10  # ten per second
    assert sum(r["suppressed"] for r in summaries) + len(written) == 100_000
    messages = [r.getMessage() for r in caplog.records]
    assert sum(m.startswith("agent stdout line is not JSON") for m in messages) == 100
    assert any("suppressed" in m for m in messages)
    log_bytes = sum(len(m) for m in messages)
    audit_bytes = len(stream.getvalue())
    assert audit_bytes + log_bytes < len(flood) * 100 // 5, (audit_bytes, log_bytes)


AGENT_FLOOD = (
    "import sys\nsys.stdout.write('x\\n' * 100000); sys.stdout.flush()\nsys.stdin.read()\n"
)


async def test_a_real_proxy_writes_less_than_a_flood_of_invalid_input(tmp_path: Path) -> None:
    """The proxy process: 100,000 non-JSON agent lines and 20,000 invalid client lines
    (320 KB in all) write less than that to the audit log and stderr together."""
    audit = tmp_path / "audit.jsonl"
    argv = [sys.executable, "-m", "acp_proxy", "--audit-log", str(audit), "--"]
    argv += [sys.executable, "-c", AGENT_FLOOD]
    client_flood = b'{"id":1}\n' * 10_000 + b"\xff\n" * 10_000
    with trio.fail_after(60):
        done = await trio.run_process(
            argv, stdin=client_flood, capture_stdout=True, capture_stderr=True, check=False
        )
    assert done.returncode == 0, done.stderr[-2000:]
    input_bytes = len(client_flood) + len(b"x\n" * 100_000)
    written = audit.stat().st_size + len(done.stderr)
    assert written < input_bytes, (audit.stat().st_size, len(done.stderr), input_bytes)
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    agent_side = [r for r in records if r.get("direction") == "agent->client"]
    counted = sum(r.get("suppressed", 0) for r in agent_side) + sum(
        r["event"] == "invalid_message" for r in agent_side
    )
    assert counted == 100_000
    client_side = [r for r in records if r.get("direction") == "client->agent"]
    counted = sum(r.get("suppressed", 0) for r in client_side) + sum(
        r["event"] == "invalid_message" for r in client_side
    )
    assert counted == 20_000
    assert done.stdout.count(b"\n") == 20_000  # every invalid client line still answered


def test_enforcement_decisions_are_never_suppressed() -> None:
    """A flood of refused mutations writes one mutation_rejected record per decision (the
    throttle counts other kinds, never these)."""
    clock = FakeClock()
    stream = io.StringIO()
    log = AuditLog(stream, throttle=Throttle(clock=clock))
    for i in range(500):
        log.write(Audit("mutation_rejected", "client->agent", {"sessionId": "C", "id": i}))
        log.write(Audit("invalid_message", "client->agent", {"id": i}))
    log.flush_summaries(everything=True)
    records = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [r["id"] for r in records if r["event"] == "mutation_rejected"] == list(range(500))
    assert sum(r["event"] == "invalid_message" for r in records) == 10
