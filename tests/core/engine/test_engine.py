"""ProxyCore end to end: transparency, accounting, request tracking, bad input."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.corekit import (
    AGENT,
    CLIENT,
    announce,
    assert_accounting,
    audits,
    decoded,
    enc,
    events,
    notif,
    one_send_per_message,
    open_session,
    reports,
    req,
    resp,
    sends,
)

from acp_proxy.config import Config, LimitsConfig
from acp_proxy.core.actions import Audit, Peer, Report, Send
from acp_proxy.core.engine import ProxyCore
from acp_proxy.core.wire.framing import Lines, Oversize, Partial

# ------------------------------------------------------------------ JSON with odd spelling

json_leaf = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**100), max_value=2**100)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6)
)
json_values = st.recursive(
    json_leaf,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=10,
)
ids = st.one_of(
    st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1),
    st.text(max_size=4),
    st.sampled_from([0, 1, -1, "1", 2**53 - 1, -(2**53) + 1]),
)


def _ws(rnd: random.Random) -> str:
    return rnd.choice(["", "", "", " ", "\t", "  ", "\r", " \t "])


def _str(s: str, rnd: random.Random) -> str:
    out = ['"']
    for ch in s:
        code = ord(ch)
        if ch in '"\\' or code < 0x20 or 0xD800 <= code <= 0xDFFF:
            out.append(
                f"\\u{code:04x}" if rnd.random() < 0.5 or code >= 0xD800 else json.dumps(ch)[1:-1]
            )
        elif rnd.random() < 0.25:
            if code > 0xFFFF:
                hi, lo = divmod(code - 0x10000, 0x400)
                out.append(f"\\u{0xD800 + hi:04x}\\u{0xDC00 + lo:04X}")
            else:
                out.append(f"\\u{code:04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def render(value: Any, rnd: random.Random) -> str:
    """JSON text for ``value`` with random spacing and \\u escapes (never a newline)."""
    if isinstance(value, str):
        return _str(value, rnd)
    if isinstance(value, dict):
        items = [
            f"{_ws(rnd)}{_str(k, rnd)}{_ws(rnd)}:{_ws(rnd)}{render(v, rnd)}{_ws(rnd)}"
            for k, v in value.items()
        ]
        return "{" + ",".join(items) + _ws(rnd) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_ws(rnd) + render(v, rnd) + _ws(rnd) for v in value) + _ws(rnd) + "]"
    return json.dumps(value)


def frame(value: dict[str, Any], rnd: random.Random) -> bytes:
    raw = render(value, rnd).encode("utf-8")
    assert b"\n" not in raw
    return raw


# ------------------------------------------------------------------ transparency


@given(data=st.data())
def test_transparency_without_subagents(data: st.DataObject) -> None:
    """Valid traffic without subagents is forwarded byte-for-byte, in order, nothing else."""
    rnd = data.draw(st.randoms(use_true_random=False))
    core = ProxyCore()
    pending: dict[Peer, dict[Any, str]] = {CLIENT: {}, AGENT: {}}  # requester -> id -> method
    known: list[str] = []
    expected: list[tuple[Peer, bytes]] = []
    got: list[tuple[Peer, bytes]] = []
    steps = data.draw(st.lists(st.sampled_from(["request", "notify", "respond"]), max_size=20))
    for k, step in enumerate(steps):
        source = data.draw(st.sampled_from([CLIENT, AGENT]))
        params = data.draw(st.dictionaries(st.text(max_size=5), json_values, max_size=3))
        params.pop("sessionId", None)
        if known and data.draw(st.booleans()):
            params["sessionId"] = data.draw(st.sampled_from(known))
        if step == "respond" and pending[source.other]:
            rid = data.draw(st.sampled_from(list(pending[source.other])))
            method = pending[source.other].pop(rid)
            if method == "session/new":
                result: Any = {"sessionId": f"s{k}", "modes": data.draw(json_values)}
            else:
                result = data.draw(json_values)
            if data.draw(st.booleans()):
                body: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "result": result}
                if method == "session/new" and source is AGENT:
                    known.append(f"s{k}")
            else:
                err = {
                    "code": data.draw(st.integers(-33000, 1000)),
                    "message": data.draw(st.text()),
                }
                body = {"id": rid, "error": err, "jsonrpc": "2.0"}
        elif step == "request":
            rid = data.draw(ids.filter(lambda i, s=source: i not in pending[s]))
            method = data.draw(
                st.sampled_from(
                    [
                        "initialize",
                        "session/new",
                        "session/prompt",
                        "session/cancel",
                        "_x/y",
                        "fs/read",
                    ]
                )
                if source is CLIENT
                else st.sampled_from(["session/request_permission", "_x/y", "fs/read_text_file"])
            )
            pending[source][rid] = method
            body = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
        else:
            method = data.draw(
                st.sampled_from(["_x/y", "$/cancel_request", "session/update", "_z"])
            )
            if method == "$/cancel_request":
                params["requestId"] = data.draw(ids)
            if method == "session/update":
                params["update"] = {
                    "sessionUpdate": "agent_message_chunk",
                    "content": data.draw(json_values),
                }
            body = {"method": method, "jsonrpc": "2.0", "params": params}
            if data.draw(st.booleans()):
                del body["params"]
        raw = frame(body, rnd)
        expected.append((source.other, raw))
        for action in core.receive(source, raw, float(k)):
            if isinstance(action, Report) and action.level == "info":
                continue  # a life-cycle log line (initialize, session created), not traffic
            assert isinstance(action, Send), action
            got.append((action.to, action.data))
    assert got == expected
    s = core.statistics()
    assert s.accepted == s.forwarded == len(expected)
    assert s.pending_client_requests == len(pending[CLIENT])
    assert s.pending_agent_requests == len(pending[AGENT])


# ------------------------------------------------------------------ fuzz

SIDS = st.sampled_from(["P", "C", "G", "X"])
updates = st.fixed_dictionaries(
    {
        "sessionUpdate": st.sampled_from(
            ["subagent_update", "state_update", "session_message", "agent_message_chunk", 7]
        )
    },
    optional={
        "sessionId": SIDS | json_leaf,
        "state": st.sampled_from(
            [None, "x", {"state": "running"}, {"state": "idle"}, {"state": 1}]
        ),
        "capabilities": st.sampled_from([None, {}, {"cancel": {}}, {"cancel": True}, [1]]),
        "title": json_leaf,
        "senderSessionId": SIDS,
        "recipientSessionId": SIDS,
        "_meta": st.none() | st.dictionaries(st.sampled_from("ab"), json_leaf),
        "extra": json_values,
    },
)
messages = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.sampled_from(["2.0", "2.0", "2.0", "1.0", 2]),
        "id": ids | st.sampled_from([None, 1.5, True, [1]]),
        "method": st.sampled_from(
            [
                "session/update",
                "session/new",
                "session/load",
                "session/cancel",
                "session/prompt",
                "session/request_permission",
                "initialize",
                "_x",
            ]
        )
        | json_leaf,
        "params": st.fixed_dictionaries(
            {}, optional={"sessionId": SIDS | json_leaf, "update": updates}
        )
        | json_values,
        "result": st.fixed_dictionaries(
            {}, optional={"sessionId": SIDS, "protocolVersion": json_leaf}
        )
        | json_values,
        "error": json_values,
    },
)
inputs = st.one_of(
    st.binary(max_size=60),
    json_values.map(lambda v: json.dumps(v).encode()),
    messages.map(lambda m: json.dumps(m).encode()),
    st.lists(messages, max_size=3).map(lambda ms: json.dumps(ms).encode()),
    messages.map(
        lambda m: json.dumps(m).encode().replace(b'"sessionId"', b'"sessionId":"P","sessionId"', 1)
    ),
    st.lists(messages, max_size=2).map(
        lambda ms: json.dumps(ms).encode().replace(b"{", b'{"n": 1e400, ', 2)
    ),
    messages.map(
        lambda m: json.dumps(m).encode().replace(b'"state": {', b'"state": {"n": 1e400, ', 1)
    ),
)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def strict_json(data: bytes) -> Any:
    """Decodes ``data`` as UTF-8 JSON, refusing NaN / Infinity."""
    return json.loads(data.decode("utf-8"), parse_constant=_no_constant)


events_st = st.one_of(
    st.tuples(st.just("receive"), st.sampled_from([CLIENT, AGENT]), inputs),
    st.tuples(st.just("timer"), st.just(CLIENT), st.just(b"")),
    st.tuples(st.just("close"), st.sampled_from([CLIENT, AGENT]), st.just(b"")),
    st.tuples(st.just("oversize"), st.sampled_from([CLIENT, AGENT]), st.just(b"")),
)


@given(evs=st.lists(events_st, max_size=25), on_expire=st.sampled_from(["release", "drop"]))
def test_fuzz_never_raises_and_accounts_for_every_message(
    evs: list[tuple[str, Peer, bytes]], on_expire: str
) -> None:
    """Arbitrary input never raises; accepted == forwarded + answered + dropped + held."""
    from acp_proxy.config import HoldConfig

    core = ProxyCore(
        Config(
            hold=HoldConfig(on_expire=on_expire, timeout_seconds=3.0, max_messages_per_session=3)
        )
    )
    open_session(core, "P")
    seen: set[bytes] = set()
    for k, (kind, peer, raw) in enumerate(evs):
        seen.add(raw)
        now = float(k)
        if kind == "receive":
            out = core.receive(peer, raw, now)
        elif kind == "timer":
            out = core.handle_timer(now)
        elif kind == "close":
            out = core.peer_closed(peer, now, "gone")
        else:
            out = core.receive(peer, Oversize(99, True), now)
        for a in out:
            assert isinstance(a, Send | Audit | Report)
            if isinstance(a, Send):
                assert b"\n" not in a.data
                if a.data not in seen:
                    strict_json(a.data)  # anything the proxy writes itself is valid JSON
        assert_accounting(core)
        t = core.get_timer()
        assert t is None or t >= 0


# ------------------------------------------------------------------ request tracking


def test_same_id_used_by_both_sides_at_once() -> None:
    """Client and agent requests with the same id are tracked apart and both answered."""
    core = ProxyCore()
    frames = [
        (CLIENT, req(1, "_x/a")),
        (AGENT, req(1, "_y/b")),
        (AGENT, resp(1, "to-client")),
        (CLIENT, resp(1, "to-agent")),
    ]
    for src, f in frames:
        assert sends(core.receive(src, f, 0.0), src.other) == [f]
    s = core.statistics()
    assert (s.pending_client_requests, s.pending_agent_requests) == (0, 0)
    assert s.forwarded == 4


def test_string_and_integer_ids_are_different_requests() -> None:
    """Id "1" and id 1 are distinct requests; a response matches only its own type."""
    core = ProxyCore()
    core.receive(CLIENT, req(1, "_x/a"), 0.0)
    out = core.receive(AGENT, resp("1", None), 0.0)
    assert sends(out) == []
    assert events(out) == ["unknown_response"]
    assert core.statistics().pending_client_requests == 1


def test_largest_safe_integer_id_round_trips() -> None:
    """An id of 2**53 - 1 matches its response exactly (no float rounding); 2**53 is refused
    (a JavaScript peer reads 2**53 and 2**53 + 1 as one id)."""
    core = ProxyCore()
    big = 2**53 - 1
    core.receive(CLIENT, req(big, "_x/a"), 0.0)
    assert events(core.receive(AGENT, resp(big - 1, None), 0.0)) == ["unknown_response"]
    assert sends(core.receive(AGENT, resp(big, None), 0.0)) == [resp(big, None)]
    out = core.receive(CLIENT, req(2**53, "_x/a"), 0.0)
    assert sends(out, AGENT) == []
    assert decoded(sends(out, CLIENT)[0])["error"]["code"] == -32600


def test_response_to_unknown_id_from_agent_is_dropped_and_audited() -> None:
    """A response matching no request in flight is dropped with an unknown_response record."""
    core = ProxyCore()
    out = core.receive(AGENT, resp(77, {}), 0.0)
    assert sends(out) == []
    [rec] = audits(out)
    assert (rec.event, rec.direction, rec.fields["id"]) == ("unknown_response", "agent->client", 77)
    assert core.statistics().dropped == 1
    assert_accounting(core)


def test_response_answers_only_once() -> None:
    """A second response to the same id is unknown: dropped."""
    core = ProxyCore()
    core.receive(CLIENT, req("a", "_x"), 0.0)
    assert sends(core.receive(AGENT, resp("a", 1), 0.0)) == [resp("a", 1)]
    assert sends(core.receive(AGENT, resp("a", 2), 0.0)) == []


def test_duplicate_id_in_flight_is_dropped_unanswered() -> None:
    """A request reusing an id still in flight is neither forwarded nor answered (an answer
    would be a second response to that id): dropped with an audit record; the id gets
    exactly one answer, the agent's."""
    core = ProxyCore()
    core.receive(CLIENT, req(5, "_x"), 0.0)
    out = core.receive(CLIENT, req(5, "_y"), 0.0)
    assert sends(out) == []
    assert audits(out, "request_dropped")[0].fields["id"] == 5
    answer = resp(5, {})
    assert sends(core.receive(AGENT, answer, 1.0), CLIENT) == [answer]
    assert_accounting(core)


def test_refused_mutation_reusing_an_id_in_flight_gets_no_second_answer() -> None:
    """A refused request whose id is already in flight is dropped, not answered: the client
    sees exactly one answer for that id."""
    core = ProxyCore()
    open_session(core, "P")
    core.receive(AGENT, announce("P", "C"), 0.0)
    core.receive(CLIENT, req(5, "session/prompt", {"sessionId": "P"}), 0.0)
    out = core.receive(CLIENT, req(5, "session/prompt", {"sessionId": "C"}), 0.0)
    assert sends(out) == []
    assert events(out) == ["mutation_rejected", "request_dropped"]
    answer = resp(5, {"stopReason": "end_turn"})
    assert sends(core.receive(AGENT, answer, 1.0), CLIENT) == [answer]
    assert_accounting(core)


def test_max_pending_requests_is_enforced() -> None:
    """Beyond limits.max_pending_requests a request is answered by the proxy."""
    core = ProxyCore(Config(limits=LimitsConfig(max_pending_requests=2)))
    for i in range(2):
        assert sends(core.receive(CLIENT, req(i, "_x"), 0.0), AGENT)
    out = core.receive(CLIENT, req(9, "_x"), 0.0)
    assert sends(out, AGENT) == []
    assert decoded(sends(out, CLIENT)[0])["id"] == 9


def test_error_response_with_null_id_passes_through() -> None:
    """An error answer with id null (to something unreadable) is forwarded as is."""
    core = ProxyCore()
    f = b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse"}}'
    assert sends(core.receive(AGENT, f, 0.0)) == [f]


def test_malformed_error_is_forwarded_and_counted() -> None:
    """An error response with a malformed error object is forwarded but counted."""
    core = ProxyCore()
    core.receive(CLIENT, req(1, "_x"), 0.0)
    f = b'{"jsonrpc":"2.0","id":1,"error":"boom"}'
    assert sends(core.receive(AGENT, f, 0.0)) == [f]
    assert core.statistics().malformed_errors == 1


# ------------------------------------------------------------------ bad input


@pytest.mark.parametrize("raw", [b"{", b"hello", b"\xff", b'{"a":NaN}'])
def test_invalid_json_from_client_gets_parse_error_with_null_id(raw: bytes) -> None:
    """Non-JSON from the client is answered -32700 with id null and not forwarded."""
    core = ProxyCore()
    out = core.receive(CLIENT, raw, 0.0)
    assert sends(out, AGENT) == []
    body = decoded(sends(out, CLIENT)[0])
    assert body["id"] is None
    assert body["error"]["code"] == -32700
    assert "invalid_message" in events(out)
    assert_accounting(core)


@pytest.mark.parametrize(
    ("raw", "rid"),
    [
        (b'{"jsonrpc":"1.0","id":5,"method":"x"}', 5),
        (b'{"jsonrpc":"2.0","id":"q","method":"x","params":3}', "q"),
        (b'{"jsonrpc":"2.0","id":6}', 6),
        (b'{"jsonrpc":"2.0","id":1.5,"method":"x"}', 1.5),  # untracked: under its bytes
        (b"[]", None),
        (b"42", None),
    ],
)
def test_invalid_request_from_client_gets_invalid_request_with_its_id(raw: bytes, rid: Any) -> None:
    """A JSON but not JSON-RPC message is answered -32600 with its id when one is readable."""
    core = ProxyCore()
    out = core.receive(CLIENT, raw, 0.0)
    assert sends(out, AGENT) == []
    body = decoded(sends(out, CLIENT)[0])
    assert body["id"] == rid
    assert body["error"]["code"] == -32600


def test_non_json_agent_line_is_dropped_and_reported() -> None:
    """A non-JSON agent stdout line is dropped, counted and reported, never forwarded."""
    core = ProxyCore()
    out = core.receive(AGENT, b"Loading model...", 0.0)
    assert sends(out) == []
    assert reports(out)
    assert core.statistics().non_json_agent_lines == 1
    assert_accounting(core)


def test_ambiguous_agent_notification_is_dropped() -> None:
    """An agent notification with duplicate decision keys is dropped and audited."""
    core = ProxyCore()
    open_session(core, "P")
    raw = (
        b'{"jsonrpc":"2.0","method":"session/update",'
        b'"params":{"sessionId":"P","sessionId":"Q","update":{}}}'
    )
    out = core.receive(AGENT, raw, 0.0)
    assert sends(out) == []
    assert events(out) == ["notification_dropped"]


def test_oversize_from_client_is_answered_and_from_agent_dropped() -> None:
    """An oversize client message gets -32600 (id null); an agent one is dropped; both audited."""
    core = ProxyCore()
    out = core.receive(CLIENT, Oversize(10**9, True), 0.0)
    body = decoded(sends(out, CLIENT)[0])
    assert (body["id"], body["error"]["code"]) == (None, -32600)
    assert "oversize_message" in events(out)
    out = core.receive(AGENT, Oversize(10**9, True), 0.0)
    assert sends(out) == []
    assert "oversize_message" in events(out)
    assert core.statistics().oversize == 2
    assert_accounting(core)


def test_partial_last_line_is_dropped_and_audited() -> None:
    """A half-written last line is never forwarded; it is audited."""
    core = ProxyCore()
    out = core.receive(AGENT, Partial(12), 0.0)
    assert sends(out) == []
    assert events(out) == ["invalid_message"]
    assert_accounting(core)


# ------------------------------------------------------------------ peers closing


def test_agent_closing_answers_every_pending_client_request() -> None:
    """peer_closed(AGENT, detail) answers each pending client request with an error naming it."""
    core = ProxyCore()
    rids = [1, "two", 2**53 - 1]
    for rid in rids:
        core.receive(CLIENT, req(rid, "session/prompt", {"sessionId": "S"}), 0.0)
    out = core.peer_closed(AGENT, 1.0, "agent exited with status 137")
    answers = [decoded(d) for d in sends(out, CLIENT)]
    assert sorted(map(str, (a["id"] for a in answers))) == sorted(map(str, rids))
    for a in answers:
        assert a["error"]["code"] == -32603
        assert "agent exited with status 137" in a["error"]["message"]
    assert sends(out, AGENT) == []
    assert events(out)[0] == "peer_closed"
    assert core.statistics().pending_client_requests == 0
    # later requests are answered at once
    late = core.receive(CLIENT, req(9, "_x"), 2.0)
    assert sends(late, AGENT) == []
    assert "agent exited with status 137" in decoded(sends(late, CLIENT)[0])["error"]["message"]
    assert core.peer_closed(AGENT, 3.0, "again") == []
    assert_accounting(core)


def test_client_closing_answers_pending_agent_requests() -> None:
    """peer_closed(CLIENT) answers the agent's pending requests so it never waits."""
    core = ProxyCore()
    open_session(core, "S")
    core.receive(AGENT, req("perm", "session/request_permission", {"sessionId": "S"}), 0.0)
    out = core.peer_closed(CLIENT, 1.0)
    [answer] = sends(out, AGENT)
    assert decoded(answer)["id"] == "perm"
    late = core.receive(AGENT, req("p2", "session/request_permission", {"sessionId": "S"}), 2.0)
    assert sends(late, CLIENT) == []
    assert decoded(sends(late, AGENT)[0])["id"] == "p2"
    assert_accounting(core)


def test_notifications_are_forwarded_unchanged_with_odd_bytes() -> None:
    """Escapes, spacing, big numbers and U+2028 survive byte for byte."""
    core = ProxyCore()
    raw = (
        b'{ "jsonrpc":"2.0" ,"method":"_x/y","params":{"n":123456789012345678901234567890,'
        b'"s":"\\u00e9\xe2\x80\xa8","f":1.10}}'
    )
    assert sends(core.receive(CLIENT, raw, 0.0)) == [raw]
    assert sends(core.receive(AGENT, raw, 0.0)) == [raw]
    assert notif("x") == enc({"jsonrpc": "2.0", "method": "x"})


def test_batch_element_with_out_of_range_number_is_refused_not_mangled() -> None:
    """A batch element holding 1e400 is refused; the proxy never writes Infinity."""
    core = ProxyCore()
    out = core.receive(
        CLIENT, b'[{"jsonrpc":"2.0","id":1,"method":"_x","params":{"v":1e400}}]', 0.0
    )
    assert sends(out, AGENT) == []
    body = strict_json(sends(out, CLIENT)[0])
    assert body["error"]["code"] == -32600
    assert_accounting(core)


def test_single_frame_with_out_of_range_number_is_forwarded_as_is() -> None:
    """Outside a batch, 1e400 is valid JSON text and is forwarded byte for byte."""
    core = ProxyCore()
    raw = b'{"jsonrpc":"2.0","method":"_x","params":{"v":1e400}}'
    assert sends(core.receive(CLIENT, raw, 0.0)) == [raw]


def test_client_messages_after_the_agent_exited_are_answered_or_dropped() -> None:
    """After the agent is gone a request is answered and a notification dropped with audit."""
    core = ProxyCore()
    core.peer_closed(AGENT, 0.0, "agent exited with status 3")
    out = core.receive(CLIENT, req(1, "session/prompt", {"sessionId": "S"}), 1.0)
    assert sends(out, AGENT) == []
    [answer] = sends(out, CLIENT)
    assert "status 3" in decoded(answer)["error"]["message"]
    out = core.receive(CLIENT, notif("session/cancel", {"sessionId": "S"}), 1.0)
    assert sends(out) == []
    [rec] = audits(out, "notification_dropped")
    assert rec.fields["reason"] == "agent exited with status 3"
    assert_accounting(core)


_SIDS = ["S", "C", "U"]
# Agent frames of every kind the fast paths must tell apart.
AGENT_FRAME = st.one_of(
    st.builds(
        lambda sid, su, text: enc(
            {
                "jsonrpc": "2.0",
                "method": "session/update",
                "params": {"sessionId": sid, "update": {"sessionUpdate": su, "t": text}},
            }
        ),
        st.sampled_from(_SIDS),
        st.sampled_from(["agent_message_chunk", "state_update", "session_message"]),
        st.text(max_size=5),
    ),
    st.builds(
        lambda sid, child: enc(
            {
                "jsonrpc": "2.0",
                "method": "session/update",
                "params": {
                    "sessionId": sid,
                    "update": {"sessionUpdate": "subagent_update", "sessionId": child},
                },
            }
        ),
        st.sampled_from(_SIDS),
        st.sampled_from(_SIDS),
    ),
    st.builds(lambda rid: req(rid, "fs/read_text_file", {"sessionId": "S"}), st.integers(0, 3)),
    st.sampled_from(
        [
            b'{"jsonrpc":"2.0","method":"_x/y","params":{"session_id":"U"}}',
            b'{"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "U"}}',
            b'{"jsonrpc":"2.0","method":"n","params":{"sessionId":"S","sessionId":"U"}}',
            b'{"jsonrpc":"2.0","method":"n"}',
            b"not json",
        ]
    ),
)

_U = b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":'
# Lines shaped like session/update envelopes, written the ways that must not
# change the verdict of the one-decode envelope path (core/runs.py).
ENVELOPE_FRAME = st.sampled_from(
    [
        _U + b'"S","update":{"sessionUpdate":"x","content":{"a" : 1,"a":2}}}}',
        _U + b'"S","update":{"sessionUpdate":"x","content":{"text":"\xc3\xa9\\u00e9"}}}}',
        _U + b'"S","update":{"sessionUpdate":"x","content":{"text":"\xff"}}}}',
        _U + b'"S","update":{"sessionUpdate":"x","content":{"text":"\xed\xa0\x80"}}}}',
        _U + b'"S","update":{"sessionUpdate":"x","content":{"v":1e400}}}}',
        _U + b'"S","update":{"sessionUpdate":"subagent\\u005fupdate","sessionId":"C"}}}',
        _U + b'"S","update":{"sessionUpdate":"state\\u005fupdate","state":"idle"}}}',
        _U + b'"S","update":{"sessionUpdate":"x","sessionUpdate":"subagent_update",'
        b'"sessionId":"C"}}}',
        _U + b'"S","update":{"session\\u0055pdate":"subagent_update","sessionId":"C"}}}',
        _U + b'"\\u0053","update":{"sessionUpdate":"x"}}}',
        _U + b'"U","update":{"sessionUpdate":"x"}}}',
        _U + b'"C","update":{"sessionUpdate":"x"}}}',
        _U + b'"S","update":{"sessionUpdate":"x","session_update":"subagent_update"}}}',
        _U + b'"S","update":{"sessionUpdate":5}}}',
        _U + b'"S","update":{"sessionUpdate":"x"},"_meta":{"k":[1,2]}}}',
        b'{"jsonrpc":"2.0","method":"session/update","params":{"_meta":{},"sessionId":"S",'
        b'"update":{"sessionUpdate":"x"}}}',
        b'{"jsonrpc":"2.0","method":"_x/y","params":{"sessionId":"S","update":{"a":1}}}',
        b'{"jsonrpc":"1.0","method":"session/update","params":{"sessionId":"S","update":{}}}',
        b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{}},'
        b'"id":1}',
        b'{"method":"session/update","jsonrpc":"2.0","params":{"sessionId":"S","update":{}}}',
        _U + b'"S","update":{"sessionUpdate":"x","content":' + b"7" * 4301 + b"}}}",
        _U + b'"S","update":{"sessionUpdate":"x"},"_meta":[' + b"7" * 4301 + b"]}}",
    ]
)


@given(data=st.data())
def test_receive_frames_equals_receive_one_by_one(data: st.DataObject) -> None:
    """The batched entry point gives the same actions and counters as receive per frame."""
    frame = AGENT_FRAME
    frames = data.draw(st.lists(frame, max_size=12))
    one, many = ProxyCore(), ProxyCore()
    for core in (one, many):
        open_session(core, "S")
    expected: list[Any] = []
    for raw in frames:
        expected.extend(one.receive(AGENT, raw, 1.0))
    assert many.receive(AGENT, frames, 1.0) == expected
    assert many.statistics() == one.statistics()


@given(
    frames=st.lists(
        st.one_of(AGENT_FRAME, ENVELOPE_FRAME, ENVELOPE_FRAME), min_size=1, max_size=12
    ),
    ends=st.lists(st.sampled_from([b"\n", b"\n", b"\n", b"\r\n", b"\n\n"]), max_size=12),
    source=st.sampled_from([AGENT, AGENT, CLIENT]),
)
def test_receive_lines_equals_receive_one_by_one(
    frames: list[bytes], ends: list[bytes], source: Any
) -> None:
    """A run of lines gives the same messages, audits and counters as receive per frame."""
    data = b"".join(f + (ends[i] if i < len(ends) else b"\n") for i, f in enumerate(frames))
    _assert_run_equals_per_frame(source, Lines(data[:-1] if data.endswith(b"\n") else data))


def _assert_run_equals_per_frame(source: Any, lines: Lines) -> None:
    """receive_lines gives what receive gives for each frame (messages, audits, counters)."""
    one, many = ProxyCore(), ProxyCore()
    for core in (one, many):
        open_session(core, "S")
    expected: list[Any] = []
    for raw in lines.frames():
        expected.extend(one.receive(source, raw, 1.0))
    assert one_send_per_message(many.receive(source, lines, 1.0)) == expected
    assert many.statistics() == one.statistics()


@pytest.mark.parametrize(
    "params",
    [
        {"sessionId": "S", "update": {"sessionUpdate": "x", "content": {"t": "a"}}},  # envelope
        {"sessionId": "S", "other": [1, {"a": None}]},  # any other canonical JSON
    ],
)
def test_receive_lines_forwards_a_plain_run_as_one_send_of_the_original_bytes(
    params: dict[str, Any],
) -> None:
    """Notifications for a known session leave as one write, byte for byte."""
    core = ProxyCore()
    open_session(core, "S")
    before = core.statistics().forwarded
    data = b"\n".join([notif("session/update", params)] * 5)
    assert core.receive(AGENT, Lines(data), 0.0) == [Send(CLIENT, data)]
    assert core.statistics().forwarded == before + 5
    assert_accounting(core)


def test_receive_lines_holds_an_unknown_child_between_plain_stretches() -> None:
    """Plain stretches around an inspected message keep their order; unknown traffic is held."""
    core = ProxyCore()
    open_session(core, "S")
    plain = notif("session/update", {"sessionId": "S", "update": {"sessionUpdate": "x"}})
    early = notif("session/update", {"sessionId": "K", "update": {"sessionUpdate": "x"}})
    announce = notif(
        "session/update",
        {"sessionId": "S", "update": {"sessionUpdate": "subagent_update", "sessionId": "K"}},
    )
    out = core.receive(AGENT, Lines(b"\n".join([plain, plain, early, announce, plain])), 0.0)
    assert one_send_per_message([a for a in out if isinstance(a, Send)]) == [
        Send(CLIENT, plain),
        Send(CLIENT, plain),
        Send(CLIENT, announce),
        Send(CLIENT, early),
        Send(CLIENT, plain),
    ]
    assert_accounting(core)


@given(frames=st.lists(ENVELOPE_FRAME, min_size=1, max_size=8))
def test_envelope_runs_equal_receive_one_by_one(frames: list[bytes]) -> None:
    """Runs of envelope-shaped lines only: same messages, audits and counters as per frame."""
    _assert_run_equals_per_frame(AGENT, Lines(b"\n".join(frames)))
