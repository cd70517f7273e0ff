"""The refusal table: each verdict but OK is refused by its row of REFUSALS, with the row's
JSON-RPC code, the id echoed as the row says, the row's audit event and counter."""

from __future__ import annotations

import re
from typing import Any

import pytest
from support.corekit import (
    AGENT,
    CLIENT,
    assert_accounting,
    audits,
    decoded,
    events,
    open_session,
    reports,
    req,
    sends,
)

from acp_proxy.config.io import config_from_dict
from acp_proxy.core.actions import AuditEvent, Peer
from acp_proxy.core.engine import ProxyCore
from acp_proxy.core.engine.refusals import REFUSALS, AgentSide, Echo
from acp_proxy.core.wire.framing import Oversize
from acp_proxy.core.wire.jsonrpc import INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR, Verdict

_REPLY = re.compile(rb'^\{"jsonrpc":"2\.0","id":(.*),"error":\{"code":(-?\d+),"message":"([^"]*)')
_KEYS = b",".join(b'"k%d":1' % i for i in range(2000))


def core() -> ProxyCore:
    c = ProxyCore(config_from_dict({"limits": {"dense_message_bytes": 1024}}))
    open_session(c, "S")
    return c


def prompt(rid: bytes, params: bytes = b'{"sessionId":"S","prompt":[]}') -> bytes:
    return b'{"jsonrpc":"2.0","id":' + rid + b',"method":"session/prompt","params":' + params + b"}"


#: (verdict, source, frame, the id bytes it is answered under or None when dropped)
CASES: list[tuple[Verdict, Peer, Any, bytes | None]] = [
    (
        Verdict.OVERSIZE,
        CLIENT,
        Oversize(9_000_000, True, b'{"jsonrpc":"2.0","id":42,"method":"session/prompt","params":{'),
        b"42",
    ),
    (Verdict.OVERSIZE, AGENT, Oversize(9_000_000, False, b'{"jsonrpc":"2.0","id":4'), None),
    (Verdict.TOO_DEEP, CLIENT, prompt(b"3", b"[" * 600 + b"]" * 600), b"3"),
    (Verdict.NOT_JSON, CLIENT, b'{"jsonrpc":"2.0","id":3,', b"null"),
    (Verdict.NOT_JSON, AGENT, b"Starting agent...", None),
    (
        Verdict.LONG_INTEGER,
        CLIENT,
        prompt(b"3", b'{"sessionId":"S","n":' + b"7" * 4400 + b"}"),
        b"3",
    ),
    (
        Verdict.TOO_DENSE,
        CLIENT,
        b'{"jsonrpc": "2.0", "id": 3, "method": "session/prompt", '
        b'"params": {"sessionId": "S", "a": "method", ' + _KEYS + b"}}",
        b"3",
    ),
    (Verdict.INVALID, CLIENT, prompt(b"1.5"), b"1.5"),
    (Verdict.INVALID, AGENT, b'{"jsonrpc":"2.0","id":true,"method":"fs/read_text_file"}', b"true"),
    (Verdict.INVALID, AGENT, b'{"jsonrpc":"1.0","method":"session/update"}', None),
    (Verdict.BATCH, CLIENT, b'[{"jsonrpc":"2.0","id":3,"method":"session/prompt"}]', b"null"),
    (Verdict.BATCH, AGENT, b'[{"jsonrpc":"2.0","id":3,"method":"fs/read_text_file"}]', b"3"),
    (Verdict.BAD_SESSION_ID, CLIENT, prompt(b'"p"', b'{"sessionId":5}'), b'"p"'),
    (
        Verdict.BAD_SESSION_ID,
        AGENT,
        b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":5}}',
        None,
    ),
    (Verdict.AMBIGUOUS, CLIENT, prompt(b"3", b'{"sessionId":"S","session_id":"T"}'), b"3"),
    (
        Verdict.AMBIGUOUS,
        CLIENT,
        b'{"jsonrpc":"2.0","id":3,"id":4,"method":"session/prompt","params":{"sessionId":"S"}}',
        b"null",
    ),
    (
        Verdict.AMBIGUOUS,
        AGENT,
        b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S",'
        b'"update":{"sessionUpdate":"agent_message_chunk","session_id":"T"}}}',
        None,
    ),
]
_COUNTED = {"invalid", "oversize"}


def test_every_verdict_but_ok_has_a_row_and_a_case() -> None:
    """The table covers every refusal, and this suite covers every row."""
    assert set(REFUSALS) == set(Verdict) - {Verdict.OK}
    assert {case[0] for case in CASES} == set(REFUSALS)


@pytest.mark.parametrize(
    ("verdict", "source", "frame", "rid"),
    CASES,
    ids=[f"{v.name}-{s.value}-{'answered' if r else 'dropped'}" for v, s, _, r in CASES],
)
def test_a_refusal_follows_its_row(
    verdict: Verdict, source: Peer, frame: Any, rid: bytes | None
) -> None:
    """Code, the id echoed, the audit event, the counter: as the verdict's row says."""
    row = REFUSALS[verdict]
    c = core()
    before = c.statistics()
    out = c.receive(source, frame, 0.0)
    after = c.statistics()
    assert sends(out, source.other) == []  # nothing reaches the other peer
    assert_accounting(c)
    if row.counter is not None:
        assert getattr(after, row.counter) == getattr(before, row.counter) + 1
    for other in _COUNTED - {row.counter}:
        assert getattr(after, other) == getattr(before, other)
    events = [a.event for a in audits(out)]
    if rid is None:
        assert sends(out, source) == []
        assert after.dropped == before.dropped + 1
        if verdict is Verdict.OVERSIZE:
            assert events == [row.request_event]
        elif source is AGENT and row.agent is AgentSide.REFUSE:
            assert events == [AuditEvent.INVALID_MESSAGE]
        else:
            assert events == [row.notification_event if b'"method"' in frame else row.request_event]
        return
    (reply,) = sends(out, source)
    match = _REPLY.match(reply)
    assert match is not None, reply[:200]
    assert (match.group(1), int(match.group(2))) == (rid, row.code)
    assert match.group(3).decode().startswith(row.prefix)
    if verdict is Verdict.BATCH and source is AGENT:
        assert events == [row.notification_event]
    else:
        assert row.request_event in events
    assert after.answered == before.answered + 1


def test_the_rows_codes_and_echoes() -> None:
    """The codes and echoes of the table itself (docs/design.md section 2)."""
    codes = {v: row.code for v, row in REFUSALS.items()}
    assert codes[Verdict.NOT_JSON] == PARSE_ERROR
    assert codes[Verdict.BAD_SESSION_ID] == INVALID_PARAMS
    assert {v for v, code in codes.items() if code == INVALID_REQUEST} == set(REFUSALS) - {
        Verdict.NOT_JSON,
        Verdict.BAD_SESSION_ID,
    }
    assert REFUSALS[Verdict.AMBIGUOUS].echo is Echo.TRACKED_UNLESS_REPEATED
    assert REFUSALS[Verdict.INVALID].echo is Echo.BYTES


def test_an_agent_line_that_is_not_json_is_counted_as_such() -> None:
    """The NOT_JSON row's agent side: a warning with a preview and its own counter."""
    c = core()
    out = c.receive(AGENT, b"Starting agent...", 0.0)
    assert c.statistics().non_json_agent_lines == 1
    assert any("not JSON" in r.text for r in reports(out))


@pytest.mark.parametrize(
    "answer",
    [
        b'{"jsonrpc":"2.0","id":"n2","result":{"sessionId":"\\ud800"}}',
        b'{"jsonrpc":"2.0","id":"n2","result":{"sessionId":"a"},"result":{"sessionId":"b"}}',
        b'{"jsonrpc":"2.0","id":"n2","error":{"code":1,"message":"x"},"error":{"code":2}}',
    ],
    ids=["surrogate session id", "result twice", "error twice"],
)
def test_a_refused_agent_answer_ends_the_client_request_it_answers(answer: bytes) -> None:
    """The agent's answer is dropped (a peer could read it otherwise), and the client's
    request it answers is answered -32603 under its id: it waited for the agent's exit."""
    c = ProxyCore()
    open_session(c, "S")
    c.receive(CLIENT, req("n2", "session/new", {"cwd": "/", "mcpServers": []}), 0.0)
    out = c.receive(AGENT, answer, 0.0)
    [frame] = sends(out, CLIENT)
    err = decoded(frame)
    assert err["id"] == "n2"
    assert err["error"]["code"] == -32603
    assert c.pending_requests(CLIENT) == 0
    assert AuditEvent.INVALID_MESSAGE in events(out)
    assert_accounting(c)
    # an answer to nothing in flight is only dropped
    assert sends(c.receive(AGENT, answer, 0.0)) == []
    assert_accounting(c)


@pytest.mark.parametrize(
    "answer",
    [
        b'{"jsonrpc":"2.0","id":70,"result":{"content":"a"},"result":{"content":"b"}}',
        b'{"jsonrpc":"2.0","id":70,"error":{"code":1,"message":"x"},"error":{"code":2}}',
    ],
    ids=["result twice", "error twice"],
)
def test_a_refused_client_answer_ends_the_agent_request_it_answers(answer: bytes) -> None:
    """The reverse of the agent's case: the client's answer is dropped, and the agent's
    request it answers is answered -32603 under its id: it waited for the client."""
    c = ProxyCore()
    open_session(c, "S")
    ask = req(70, "fs/read_text_file", {"sessionId": "S", "path": "/w/a.txt"})
    assert sends(c.receive(AGENT, ask, 0.0), CLIENT)
    assert c.pending_requests(AGENT) == 1
    out = c.receive(CLIENT, answer, 0.0)
    assert sends(out, CLIENT) == []
    [frame] = sends(out, AGENT)
    err = decoded(frame)
    assert err["id"] == 70
    assert err["error"]["code"] == -32603
    assert "fs/read_text_file" in err["error"]["message"]
    assert c.pending_requests(AGENT) == 0
    assert AuditEvent.INVALID_MESSAGE in events(out)
    assert_accounting(c)
    # an answer to nothing in flight is only dropped
    assert sends(c.receive(CLIENT, answer, 0.0)) == []
    assert_accounting(c)


def test_a_refused_client_answer_with_its_id_repeated_ends_nothing() -> None:
    """Which request a repeated id meant cannot be read: the agent's stays in flight."""
    c = ProxyCore()
    open_session(c, "S")
    c.receive(AGENT, req(70, "fs/read_text_file", {"sessionId": "S", "path": "/w/a"}), 0.0)
    out = c.receive(CLIENT, b'{"jsonrpc":"2.0","id":70,"id":71,"result":{}}', 0.0)
    assert sends(out, AGENT) == []
    assert c.pending_requests(AGENT) == 1
    assert_accounting(c)
