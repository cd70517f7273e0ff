"""Large frames are read through views (``acp_proxy.core.wire.views``): the decisions are the
ones a whole decode gives, the bytes forwarded are the bytes received, and nothing a large
frame holds outside the decision fields is ever built."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.corekit import (
    AGENT,
    CLIENT,
    announce,
    assert_accounting,
    audits,
    chunk,
    decoded,
    enc,
    events,
    notif,
    open_session,
    req,
    sends,
)

from acp_proxy.config.io import config_from_dict
from acp_proxy.core.engine import ProxyCore
from acp_proxy.core.wire.jsonrpc import Kind, parse
from acp_proxy.core.wire.views import FIELD_BYTES, VIEW_KEY, decode_view

MIB = 1 << 20


def core(view: bool) -> ProxyCore:
    """A core with P open and child C (cancel granted); ``view``: frames over 64 bytes
    are read through views."""
    data: dict[str, Any] = {}
    if view:
        data["limits"] = {"dense_message_bytes": 64, "min_bytes_per_value": 1}
    c = ProxyCore(config_from_dict(data))
    open_session(c, "P")
    c.receive(AGENT, announce("P", "C", capabilities={"cancel": {}}, title="t"), 0.0)
    return c


def pad(frame: bytes, key: str = "pad", value: bytes = b'"' + b"x" * 200 + b'"') -> bytes:
    """``frame`` with one more top-level member (so it crosses the view threshold)."""
    return frame[:-1] + f',"{key}":'.encode() + value + b"}"


FRAMES = [
    (CLIENT, req(1, "session/prompt", {"sessionId": "C", "prompt": [{"type": "text"}]})),
    (CLIENT, notif("session/cancel", {"sessionId": "C"})),
    (CLIENT, req(2, "session/resume", {"sessionId": "C"})),
    (CLIENT, req(3, "session/prompt", {"sessionId": "P", "prompt": []})),
    (CLIENT, req(4, "session/status", {"sessionId": "C"})),
    (CLIENT, req(5, "session/prompt", {"session_id": "C", "sessionId": "P"})),
    (CLIENT, req(6, "session/prompt", {"sessionId": "P", "_meta": {"session_id": "C"}})),
    (AGENT, chunk("P", "hello")),
    (AGENT, chunk("X", "early")),
    (AGENT, announce("P", "D", capabilities={"cancel": {}}, state={"state": "running"})),
    (AGENT, announce("P", "C", capabilities=None)),
    (
        AGENT,
        enc(
            {
                "jsonrpc": "2.0",
                "method": "session/update",
                "params": {
                    "sessionId": "P",
                    "update": {
                        "sessionUpdate": "tool_call",
                        "toolCallId": "t",
                        "content": [{"type": "session", "sessionId": "Y"}],
                    },
                },
            }
        ),
    ),
]


@pytest.mark.parametrize(("source", "frame"), FRAMES)
def test_a_view_decides_as_a_whole_decode(source: Any, frame: bytes) -> None:
    """Padded past the threshold, a frame gets the same verdict through the view as decoded
    whole: the same bytes sent to the same peer, the same audit events, the same state."""
    frame = pad(frame)
    whole, view = core(False), core(True)
    a = whole.receive(source, frame, 1.0)
    b = view.receive(source, frame, 1.0)
    assert [(s.to, s.data) for s in a if hasattr(s, "to")] == [
        (s.to, s.data) for s in b if hasattr(s, "to")
    ]
    assert events(a) == events(b)
    assert whole.registry.children.keys() == view.registry.children.keys()
    for cid, child in whole.registry.children.items():
        assert child.capabilities == view.registry.children[cid].capabilities
        assert child.title == view.registry.children[cid].title
    assert whole.statistics() == view.statistics()
    assert_accounting(view)


def test_dense_content_in_a_large_frame_is_forwarded_unchanged() -> None:
    """2 MiB of `[{},{},...]` inside a prompt (default limits): nothing is built, nothing
    refused, the bytes reach the agent as they came."""
    c = core(False)
    content = b"[" + b"{}," * (2 * MIB // 3) + b"{}]"
    frame = (
        req(7, "session/prompt", {"sessionId": "P", "prompt": []})[:-2] + b',"x":' + content + b"}}"
    )
    assert len(frame) > 2 * MIB
    assert sends(c.receive(CLIENT, frame, 0.0), AGENT) == [frame]
    body, reason = decode_view(frame)
    assert reason is None
    assert set(body) == {VIEW_KEY, "jsonrpc", "id", "method", "params"}
    assert set(body["params"]) == {VIEW_KEY, "sessionId"}  # "x" and "prompt" never decoded


def test_a_large_mutation_on_a_child_is_refused() -> None:
    """A 2 MiB session/prompt on a child is refused by the proxy, as a small one is."""
    c = core(False)
    frame = req(8, "session/prompt", {"sessionId": "C", "prompt": [{"t": "x" * (2 * MIB)}]})
    out = c.receive(CLIENT, frame, 0.0)
    assert sends(out, AGENT) == []
    assert decoded(sends(out, CLIENT)[0])["error"]["code"] == -32601


def test_a_dense_large_frame_is_read_through_the_view_even_when_spaced() -> None:
    """Spacing does not stop the view (parsers agree on whitespace): a spaced 2 MiB frame of
    numbers is forwarded unchanged."""
    c = core(False)
    dense = b"[" + b"0," * MIB + b"0]"
    frame = b'{"jsonrpc": "2.0", "id": 9, "method": "_x", "params": {"a": ' + dense + b"}}"
    assert sends(c.receive(CLIENT, frame, 0.0), AGENT) == [frame]


def test_a_spaced_dense_large_frame_with_repeated_keys_is_refused_as_too_dense() -> None:
    """When a decision key is spelled twice somewhere (or anything is escaped), each decision
    level must be compact JSON; a spaced one takes the strict path, and a dense frame is
    refused there without being decoded (a request is answered -32600)."""
    c = core(False)
    dense = b'[{"id":1},' + b"0," * MIB + b"0]"
    frame = b'{"jsonrpc": "2.0", "id": 9, "method": "_x", "params": {"a": ' + dense + b"}}"
    out = c.receive(CLIENT, frame, 0.0)
    assert sends(out, AGENT) == []
    answer = decoded(sends(out, CLIENT)[0])
    assert answer["error"]["code"] == -32600
    assert "dense" in answer["error"]["message"]
    compact = frame.replace(b": ", b":").replace(b", ", b",")
    assert sends(c.receive(CLIENT, compact, 0.0), AGENT) == [compact]  # compact: the view


def test_a_spaced_large_frame_that_is_not_dense_is_decided_strictly() -> None:
    """Pretty-printed large frames are still read (strict path) and forwarded unchanged."""
    c = core(False)
    frame = b'{"jsonrpc": "2.0", "id": 9, "method": "_x", "params": {"a": "' + b"y" * MIB + b'"}}'
    assert sends(c.receive(CLIENT, frame, 0.0), AGENT) == [frame]
    dup = (
        b'{"jsonrpc":"2.0","id":9,"method":"session/cancel","params":{"sessionId":"P","sessionId":"C","a":"'
        + b"y" * MIB
        + b'"}}'
    )
    out = c.receive(CLIENT, dup, 0.0)
    assert sends(out, AGENT) == []  # a repeated decision key is refused on this path too


def test_a_large_frame_that_is_not_utf8_is_refused() -> None:
    """Invalid UTF-8 anywhere in a large frame: -32700, nothing forwarded."""
    c = core(False)
    frame = req(3, "session/prompt", {"sessionId": "P", "prompt": []})[:-2] + b',"x":"'
    frame += b"a" * MIB + b"\xed\xa0\x80" + b'"}}'
    out = c.receive(CLIENT, frame, 0.0)
    assert sends(out, AGENT) == []
    assert decoded(sends(out, CLIENT)[0])["error"]["code"] == -32700


def test_an_oversized_meta_in_large_params_is_refused() -> None:
    """A params._meta too large to check for decision keys makes a large frame ambiguous."""
    c = core(False)
    meta = json.dumps({"big": "z" * (FIELD_BYTES + 10)}).encode()
    frame = req(4, "session/prompt", {"sessionId": "P"})[:-2] + b',"_meta":' + meta + b',"x":"'
    frame += b"a" * MIB + b'"}}'
    out = c.receive(CLIENT, frame, 0.0)
    assert sends(out, AGENT) == []
    assert decoded(sends(out, CLIENT)[0])["error"]["code"] == -32600


def test_oversized_capabilities_in_a_view_grant_nothing() -> None:
    """Capabilities longer than the registry can keep stand in as {}: no grant."""
    c = core(True)
    caps = {"cancel": {}, "x": "q" * (FIELD_BYTES + 10)}
    out = c.receive(AGENT, announce("P", "E", capabilities=caps), 0.0)
    assert "child_announced" in events(out)
    cancel = notif("session/cancel", {"sessionId": "E"})
    assert sends(c.receive(CLIENT, cancel, 0.0), AGENT) == []


def test_a_large_batch_is_refused_whole() -> None:
    """A client array over the threshold: one -32600, nothing forwarded."""
    c = core(False)
    batch = b"[" + b",".join([req(1, "session/prompt", {"sessionId": "P"})] * 30000) + b"]"
    assert len(batch) > MIB
    out = c.receive(CLIENT, batch, 0.0)
    assert sends(out, AGENT) == []
    assert [decoded(s)["error"]["code"] for s in sends(out, CLIENT)] == [-32600]


def test_parse_of_a_view_keeps_the_raw_bytes() -> None:
    """A view Message keeps ``raw`` exactly; its kind and id are read."""
    frame = pad(req("r", "session/prompt", {"sessionId": "P"}), value=b'"' + b"v" * MIB + b'"')
    m = parse(frame)
    assert m.raw is frame
    assert (m.kind, m.id, m.method, m.session_id) == (Kind.REQUEST, "r", "session/prompt", "P")
    assert VIEW_KEY in m.body
    held = core(False)
    out = held.receive(AGENT, pad(chunk("Z", "x"), value=b'"' + b"v" * MIB + b'"'), 0.0)
    assert audits(out, "held")


def test_a_large_frame_with_a_lone_surrogate_escape_is_a_parse_error() -> None:
    """A large frame msgspec will not decode is refused as not JSON: the standard library,
    which would build the whole tree, is never used on a large frame."""
    c = core(False)
    frame = req(5, "session/prompt", {"sessionId": "P"})[:-2] + b',"x":"\\ud800'
    frame += b"a" * MIB + b'"}}'
    out = c.receive(CLIENT, frame, 0.0)
    assert sends(out, AGENT) == []
    assert decoded(sends(out, CLIENT)[0])["error"]["code"] == -32700


def test_a_large_agent_batch_is_dropped_unread() -> None:
    """An agent array over the threshold is dropped whole (one audit record counting its
    elements), its notifications never read."""
    c = core(False)
    batch = b"[" + b",".join([chunk("P", "x" * 100)] * 20000) + b"]"
    assert len(batch) > MIB
    out = c.receive(AGENT, batch, 0.0)
    assert sends(out) == []
    [rec] = audits(out, "batch_refused")
    assert (rec.fields["count"], rec.fields["answered"]) == (20000, 0)
    assert_accounting(c)


def test_a_spaced_level_with_a_repeated_decision_key_is_refused() -> None:
    """Spacing forces the token scan of a level; a decision key found twice there makes the
    frame ambiguous (-32600), an escaped spelling included."""
    c = core(False)
    for twin in (b'"sessionId": "C"', b'"session\\u0049d": "C"'):
        frame = b'{"jsonrpc": "2.0", "id": 6, "method": "session/cancel", "params": {'
        frame += b'"sessionId": "P", "x": "' + b"y" * MIB + b'", ' + twin + b"}}"
        out = c.receive(CLIENT, frame, 0.0)
        assert sends(out, AGENT) == []
        assert decoded(sends(out, CLIENT)[0])["error"]["code"] == -32600


def test_a_key_spelled_like_the_view_marker_is_just_a_key() -> None:
    """A peer's `"\\u0000raw"` key is an ordinary key: the view marker is not a string (found
    by a hostile review: the chain adapter sent the key's value on as the params)."""
    from acp_proxy.core.chain import ChainAdapter

    spoof = b'{"jsonrpc":"2.0","id":4,"method":"session/prompt","params":{"\\u0000raw":[123]}}'
    m = parse(spoof)
    assert VIEW_KEY not in m.params
    assert "\x00raw" in m.params
    a = ChainAdapter(ProxyCore())
    for raw in (spoof, spoof.replace(b"[123]", b'"x"'), spoof.replace(b"[123]", b"300000000")):
        a.receive(raw, 0.0)  # never raises, never allocates from the value


def test_leading_whitespace_does_not_turn_the_view_off() -> None:
    """A large frame with a leading space or tab is still read through the view."""
    frame = b" \t" + pad(
        req(1, "session/prompt", {"sessionId": "P"}), value=b"[" + b"0," * MIB + b"0]"
    )
    m = parse(frame)
    assert m.kind is Kind.REQUEST
    assert VIEW_KEY in m.body
    assert m.params is not None
    assert set(m.params) == {VIEW_KEY, "sessionId"}


def test_a_large_state_report_is_never_remembered() -> None:
    """A state_update over the threshold is delivered and never kept for dedup (a view keeps
    the whole frame alive)."""
    c = core(False)
    big = enc(
        {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {
                "sessionId": "P",
                "update": {"sessionUpdate": "state_update", "state": "idle", "x": "y" * MIB},
            },
        }
    )
    assert sends(c.receive(AGENT, big, 0.0)) == [big]
    assert sends(c.receive(AGENT, big, 0.0)) == [big]  # not judged a duplicate
    assert c.dedup.nbytes == 0


def test_views_read_only_the_envelope_depth() -> None:
    """params.params.params... below the envelope depth is never read (found by a hostile
    review: each level re-read the frame)."""
    from acp_proxy.core.wire.views import MAX_VIEW_DEPTH, OPAQUE

    inner = b'{"sessionId":"P"}'
    for _ in range(10):
        inner = b'{"params":' + inner + b"}"
    frame = pad(
        b'{"jsonrpc":"2.0","id":1,"method":"_x","params":' + inner + b"}",
        value=b'"' + b"v" * MIB + b'"',
    )
    body, _ = decode_view(frame)
    level = body
    for _ in range(MAX_VIEW_DEPTH + 1):
        level = level["params"]
    assert level is OPAQUE


def test_an_escaped_reference_in_a_long_content_list_holds_the_message() -> None:
    """A content list over 256 KiB with an escape counts as referencing a session nobody
    knows: the message is held, as a small one naming an unannounced child would be."""
    c = core(False)
    item = b'{"type":"session","session\\u0049d":"unknown-child"}'
    content = (
        b"["
        + item
        + b","
        + b",".join([b'{"type":"content","t":"' + b"x" * 100 + b'"}'] * 3000)
        + b"]"
    )
    frame = (
        b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"P","update":'
        b'{"sessionUpdate":"tool_call","toolCallId":"t","content":'
        + content
        + b',"pad":"'
        + b"p" * MIB
        + b'"}}}'
    )
    out = c.receive(AGENT, frame, 0.0)
    assert sends(out) == []
    assert audits(out, "held")


def test_a_huge_integer_is_refused_whatever_the_frame_size() -> None:
    """A 5000-digit number is not JSON to the proxy in a small frame and in a large one."""
    c = core(False)
    for filler in (b"", b"z" * MIB):
        frame = b'{"jsonrpc":"2.0","id":2,"method":"_x","params":{"n":' + b"7" * 5000
        frame += b',"f":"' + filler + b'"}}'
        out = c.receive(CLIENT, frame, 0.0)
        assert sends(out, AGENT) == []


def test_a_refusal_never_answers_an_id_still_in_flight() -> None:
    """An ambiguous or invalid request reusing an id in flight is dropped, not answered:
    that id gets one answer, the agent's."""
    c = core(False)
    c.receive(CLIENT, req(7, "session/prompt", {"sessionId": "P"}), 0.0)
    for bad in (
        req(7, "session/prompt", {"session_id": "P"}),
        req(7, "session/prompt", {"sessionId": ["P"]}),
    ):
        out = c.receive(CLIENT, bad, 0.0)
        assert sends(out) == []
        assert "request_dropped" in events(out)
    assert_accounting(c)


def test_a_chain_refusal_never_answers_an_id_still_in_flight() -> None:
    """The chain adapter's own refusals (a plain initialize, a malformed envelope) drop a
    request whose id is in flight instead of answering it a second time."""
    from acp_proxy.core.chain import ChainAdapter

    ch = ChainAdapter(ProxyCore())
    ch.receive(req(0, "proxy/initialize", {"protocolVersion": 1}), 0.0)
    ch.receive(req(5, "session/prompt", {"sessionId": "s", "prompt": []}), 1.0)
    for again in (
        req(5, "initialize", {"protocolVersion": 1}),
        req(5, "proxy/successor", {"method": 3}),
    ):
        out = ch.receive(again, 2.0)
        assert not [s for s in out if hasattr(s, "data") and b'"id":5' in s.data]
        assert "request_dropped" in events(out)
