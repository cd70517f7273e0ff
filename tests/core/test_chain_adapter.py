"""ChainAdapter: proxy-chain mode as a pure mapping onto ProxyCore (docs/protocol.md section 5)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.corekit import (
    AGENT,
    CLIENT,
    announce,
    audits,
    chunk,
    decoded,
    enc,
    err,
    events,
    notif,
    req,
    resp,
    sends,
    state_update,
)

from acp_proxy.config import Config, HoldConfig
from acp_proxy.core.actions import Action, Send
from acp_proxy.core.chain import ChainAdapter, ToCore
from acp_proxy.core.engine import ProxyCore
from acp_proxy.core.wire.framing import Oversize, Partial
from acp_proxy.core.wire.jsonscan import member_spans

SPELLINGS = ["", "_"]  # the schema's proxy/..., the Rust SDK's _proxy/...


def envelope(
    rid: Any, method: str, params: Any = None, prefix: str = "", meta: Any = None
) -> bytes:
    """A ``proxy/successor`` request (``rid`` not None) or notification from the conductor."""
    inner: dict[str, Any] = {"method": method}
    if params is not None:
        inner["params"] = params
    if meta is not None:
        inner["_meta"] = meta
    body: dict[str, Any] = {"jsonrpc": "2.0"}
    if rid is not None:
        body["id"] = rid
    body["method"] = f"{prefix}proxy/successor"
    body["params"] = inner
    return enc(body)


def adapter(config: Config | None = None) -> ChainAdapter:
    return ChainAdapter(ProxyCore(config))


def out(actions: list[Action]) -> list[Any]:
    """Decoded frames written to the conductor; asserts they all go there."""
    assert all(a.to is CLIENT for a in actions if isinstance(a, Send)), actions
    return [decoded(d) for d in sends(actions)]


def only(actions: list[Action]) -> Any:
    frames = out(actions)
    assert len(frames) == 1, frames
    return frames[0]


def initialized(prefix: str = "") -> ChainAdapter:
    """An adapter past ``proxy/initialize`` (the successor answered protocol version 2)."""
    a = adapter()
    wrapped = only(a.receive(req(0, f"{prefix}proxy/initialize", {"protocolVersion": 2}), 0.0))
    only(a.receive(resp(wrapped["id"], {"protocolVersion": 2}), 0.0))
    return a


def opened(prefix: str = "", sid: str = "S") -> ChainAdapter:
    """An initialized adapter with session ``sid`` known to the client."""
    a = initialized(prefix)
    wrapped = only(a.receive(req("new", "session/new", {"cwd": "/", "mcpServers": []}), 0.0))
    assert only(a.receive(resp(wrapped["id"], {"sessionId": sid}), 0.0))["id"] == "new"
    return a


# ------------------------------------------------------------ member_spans


def test_member_spans_finds_each_value_exactly() -> None:
    """Spans cover each member value byte for byte, nested brackets and escapes included."""
    raw = b' { "a" : [1, {"b": "}]"}] , "c":"x\\"y" ,"d":{} , "e" : -1.5e3 } '
    spans = member_spans(raw)
    assert spans is not None
    got = {k: raw[s:e] for k, (s, e) in spans.items()}
    assert got == {"a": b'[1, {"b": "}]"}]', "c": b'"x\\"y"', "d": b"{}", "e": b"-1.5e3"}


def test_member_spans_decodes_escaped_keys_and_lets_the_later_duplicate_win() -> None:
    """An escaped key is matched by its value; of two equal keys the later one counts."""
    raw = b'{"p\\u0061rams":1,"x":2,"x":[3],"params":{}}'
    dups: set[str] = set()
    spans = member_spans(raw, dups=dups)
    assert spans is not None
    assert {k: raw[s:e] for k, (s, e) in spans.items()} == {"params": b"{}", "x": b"[3]"}
    assert dups == {"x", "params"}


@pytest.mark.parametrize("raw", [b"[1]", b'"s"', b"", b"  ", b"{", b'{"a":1'])
def test_member_spans_refuses_what_is_not_a_complete_object(raw: bytes) -> None:
    """Anything but an object gives None."""
    assert member_spans(raw) is None


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=10,
)


@given(st.dictionaries(st.text(), json_values, max_size=5), st.sampled_from([None, 1, 3]))
def test_member_spans_agree_with_the_decoder(obj: dict[str, Any], indent: int | None) -> None:
    """For any object in any layout, each span decodes to that member's value."""
    raw = json.dumps(obj, indent=indent, ensure_ascii=indent is None).encode()
    spans = member_spans(raw)
    assert spans is not None
    assert spans.keys() == obj.keys()
    for key, (s, e) in spans.items():
        assert json.loads(raw[s:e]) == obj[key]


# ------------------------------------------------------------- initialize


@pytest.mark.parametrize("prefix", SPELLINGS)
def test_proxy_initialize_reaches_the_successor_as_initialize(prefix: str) -> None:
    """proxy/initialize reaches the successor as a wrapped initialize, in the same spelling."""
    a = adapter()
    params = b'{"protocolVersion": 2, "capabilities": {}, "_meta": {"k": "\\u00e9"}}'
    raw = b'{"jsonrpc":"2.0","id":7,"method":"' + prefix.encode() + b'proxy/initialize","params":'
    acts = a.receive(raw + params + b"}", 0.0)
    (data,) = sends(acts)
    assert data == (
        b'{"jsonrpc":"2.0","id":1,"method":"'
        + prefix.encode()
        + b'proxy/successor","params":{"method":"initialize","params":'
        + params
        + b"}}"
    )
    assert a.statistics().successor_method == f"{prefix}proxy/successor"


def test_successor_initialize_result_answers_proxy_initialize_unchanged() -> None:
    """The successor's initialize result is the proxy/initialize result, byte for byte."""
    a = adapter()
    wrapped = only(a.receive(req("init", "proxy/initialize", {"protocolVersion": 2}), 0.0))
    result = b'{"protocolVersion":2,"agentCapabilities":{"x":1.0e0},"authMethods":[]}'
    acts = a.receive(
        b'{"jsonrpc":"2.0","id":' + enc(wrapped["id"]) + b',"result":' + result + b"}", 0.0
    )
    assert sends(acts) == [b'{"jsonrpc":"2.0","id":"init","result":' + result + b"}"]
    assert a.core.protocol_version == 2


def test_plain_initialize_is_refused() -> None:
    """A conductor that sends initialize (we would be the last component) gets an error."""
    a = adapter()
    acts = a.receive(req(1, "initialize", {"protocolVersion": 2}), 0.0)
    answer = only(acts)
    assert answer["id"] == 1
    assert answer["error"]["code"] == -32600
    assert "proxy/initialize" in answer["error"]["message"]
    assert events(acts) == ["invalid_message"]


def test_first_envelope_sets_the_spelling_when_no_initialize_was_seen() -> None:
    """Without proxy/initialize, the first envelope's spelling is used on output."""
    a = adapter()
    a.receive(envelope(None, "session/update", {"sessionId": "x"}, prefix="_"), 0.0)
    assert only(a.receive(req(1, "session/list", {}), 0.0))["method"] == "_proxy/successor"


# --------------------------------------------------- client -> successor


@pytest.mark.parametrize("prefix", SPELLINGS)
@pytest.mark.parametrize("rid", [1, 2, "1", "req-x"])
def test_client_request_round_trip_restores_the_client_id(prefix: str, rid: Any) -> None:
    """A client request goes out under an envelope id; its answer returns under the client's id."""
    a = opened(prefix)
    params = b'{ "sessionId" : "S", "prompt" : [ {"type":"text","text":"h\\u00e9 \xe2\x82\xac"} ] }'
    raw = (
        b'{"params":'
        + params
        + b',"method":"session/prompt","id":'
        + enc(rid)
        + b',"jsonrpc":"2.0"}'
    )
    wrapped = sends(a.receive(raw, 0.0))
    assert len(wrapped) == 1
    env = decoded(wrapped[0])
    assert env["method"] == f"{prefix}proxy/successor"
    assert env["params"]["method"] == "session/prompt"
    assert b'"params":' + params + b"}}" in wrapped[0]  # spliced byte for byte
    assert a.statistics().successor_requests_in_flight == 1
    result = b'{"stopReason" : "end_turn", "_meta":{"n":1}}'
    back = a.receive(
        b'{"jsonrpc":"2.0","id":' + enc(env["id"]) + b',"result":' + result + b"}", 0.0
    )
    assert sends(back) == [b'{"jsonrpc":"2.0","id":' + enc(rid) + b',"result":' + result + b"}"]
    assert a.statistics().successor_requests_in_flight == 0


def test_successor_error_comes_back_as_the_client_requests_error() -> None:
    """The error of an envelope request is the wrapped request's error, unchanged."""
    a = opened()
    env = only(a.receive(req(5, "session/load", {"sessionId": "T"}), 0.0))
    error = b'{"code":-32002,"message":"no such session","data":{"sessionId":"T"}}'
    back = a.receive(b'{"jsonrpc":"2.0","id":' + enc(env["id"]) + b',"error":' + error + b"}", 0.0)
    assert sends(back) == [b'{"jsonrpc":"2.0","id":5,"error":' + error + b"}"]


def test_client_notification_is_wrapped_without_an_id() -> None:
    """A client notification travels as a proxy/successor notification."""
    a = opened()
    env = only(a.receive(notif("session/cancel", {"sessionId": "S"}), 0.0))
    assert "id" not in env
    assert env["params"] == {"method": "session/cancel", "params": {"sessionId": "S"}}


def test_message_without_params_is_wrapped_without_params() -> None:
    """Absent or null params stay absent inside the envelope."""
    a = opened()
    env = only(a.receive(enc({"jsonrpc": "2.0", "method": "_vendor/ping", "params": None}), 0.0))
    assert env["params"] == {"method": "_vendor/ping"}


# --------------------------------------------------- successor -> client


def test_successor_notification_is_unwrapped_byte_for_byte_without_envelope_meta() -> None:
    """The wrapped params reach the client unchanged; the envelope's own _meta stays on the hop."""
    a = opened()
    params = b'{"sessionId":"S","update":{"sessionUpdate":"agent_message_chunk"},"_meta":{"w":1}}'
    raw = (
        b'{"jsonrpc":"2.0","method":"proxy/successor","params":{"_meta":{"hop":true},'
        b'"method":"session/update","params":' + params + b"}}"
    )
    acts = a.receive(raw, 0.0)
    assert sends(acts) == [b'{"jsonrpc":"2.0","method":"session/update","params":' + params + b"}"]


@pytest.mark.parametrize("prefix", SPELLINGS)
def test_successor_request_gets_a_fresh_id_and_its_answer_goes_to_the_envelope(prefix: str) -> None:
    """A successor request reaches the client under our id; the answer answers the envelope."""
    a = opened(prefix)
    params = {"sessionId": "S", "toolCall": {"toolCallId": "t"}, "options": []}
    ask = only(a.receive(envelope("c-1", "session/request_permission", params, prefix), 0.0))
    assert ask["method"] == "session/request_permission"
    assert ask["params"] == params
    assert ask["id"] != "c-1"
    assert a.statistics().conductor_requests_in_flight == 1
    result = b'{"outcome":{"outcome":"selected","optionId":"allow"}}'
    back = a.receive(
        b'{"jsonrpc":"2.0","id":' + enc(ask["id"]) + b',"result":' + result + b"}", 0.0
    )
    assert sends(back) == [b'{"jsonrpc":"2.0","id":"c-1","result":' + result + b"}"]
    assert a.statistics().conductor_requests_in_flight == 0


def test_ids_of_both_directions_never_collide() -> None:
    """Envelope ids and ids given to successor requests come from one counter."""
    a = opened()
    env = only(a.receive(req(100, "session/prompt", {"sessionId": "S", "prompt": []}), 0.0))
    ask = only(a.receive(envelope(env["id"], "fs/read_text_file", {"sessionId": "S"}), 0.0))
    assert ask["id"] != env["id"]
    # The conductor answers our envelope; the client answers the successor's request.
    assert only(a.receive(resp(env["id"], {"stopReason": "end_turn"}), 0.0))["id"] == 100
    assert only(a.receive(resp(ask["id"], {"content": ""}), 0.0))["id"] == env["id"]


# ------------------------------------------- registry, enforcement, hold


def test_successor_traffic_before_session_new_response_is_held_then_released() -> None:
    """An early session/update for the new session waits for the session/new response."""
    a = initialized()
    env = only(a.receive(req(1, "session/new", {"cwd": "/", "mcpServers": []}), 0.0))
    early = a.receive(envelope(None, "session/update", {"sessionId": "S1", "update": {}}), 0.0)
    assert sends(early) == []
    assert events(early) == ["held"]
    acts = a.receive(resp(env["id"], {"sessionId": "S1"}), 0.0)
    frames = out(acts)
    assert [f.get("id") for f in frames] == [1, None]
    assert frames[1]["params"]["sessionId"] == "S1"
    assert "released" in events(acts)


def test_rejected_child_mutation_is_answered_here_and_never_wrapped() -> None:
    """A mutation on a child without the capability is refused by the proxy itself."""
    a = opened()
    acts = a.receive(
        envelope(None, "session/update", decoded(announce("S", "C", capabilities={}))["params"]),
        0.0,
    )
    assert "child_announced" in events(acts)
    refused = a.receive(req(9, "session/prompt", {"sessionId": "C", "prompt": []}), 0.0)
    answer = only(refused)
    assert answer["id"] == 9
    assert answer["error"]["code"] == -32601
    assert answer["error"]["data"]["capability"] is None  # no grant exists for it
    dropped = a.receive(notif("session/cancel", {"sessionId": "C"}), 0.0)
    assert sends(dropped) == []
    assert "mutation_rejected" in events(dropped)
    assert a.statistics().wrapped == 2  # initialize and session/new only


def test_duplicate_state_report_from_the_successor_is_removed() -> None:
    """Dedup works on unwrapped successor traffic as it does standalone."""
    a = opened()
    upd = decoded(state_update("S", "idle"))["params"]
    assert len(out(a.receive(envelope(None, "session/update", upd), 0.0))) == 1
    again = a.receive(envelope(None, "session/update", upd), 0.0)
    assert sends(again) == []
    assert events(again) == ["duplicate_dropped"]


def test_hold_timeout_with_drop_answers_the_held_successor_request_through_its_envelope() -> None:
    """A held successor request dropped on timeout is answered as the envelope's error."""
    a = ChainAdapter(ProxyCore(Config(hold=HoldConfig(timeout_seconds=1.0, on_expire="drop"))))
    a.receive(req(0, "proxy/initialize", {}), 0.0)
    a.receive(resp(1, {"protocolVersion": 2}), 0.0)
    held = a.receive(envelope("c-9", "session/request_permission", {"sessionId": "ghost"}), 0.0)
    assert sends(held) == []
    assert a.get_timer() == 1.0
    answer = only(a.handle_timer(1.5))
    assert answer["id"] == "c-9"
    assert answer["error"]["code"] == -32600
    assert a.statistics().conductor_requests_in_flight == 0


# ---------------------------------------------------------- cancellation


def test_client_cancel_becomes_a_plain_cancel_of_our_envelope() -> None:
    """Spec spelling: the client's cancel of B is our plain $/cancel_request of envelope E."""
    a = opened()
    env = only(a.receive(req("p", "session/prompt", {"sessionId": "S", "prompt": []}), 0.0))
    cancel = notif("$/cancel_request", {"requestId": "p", "_meta": {"why": "user"}})
    assert only(a.receive(cancel, 0.0)) == {
        "jsonrpc": "2.0",
        "method": "$/cancel_request",
        "params": {"requestId": env["id"], "_meta": {"why": "user"}},
    }


def test_client_cancel_is_wrapped_in_the_rust_spelling() -> None:
    """Rust SDK spelling: the cancel of envelope E travels wrapped, as that SDK sends it."""
    a = opened("_")
    env = only(a.receive(req("p", "session/prompt", {"sessionId": "S", "prompt": []}), 0.0))
    got = only(a.receive(notif("$/cancel_request", {"requestId": "p"}), 0.0))
    assert got == {
        "jsonrpc": "2.0",
        "method": "_proxy/successor",
        "params": {"method": "$/cancel_request", "params": {"requestId": env["id"]}},
    }


def test_cancel_for_nothing_in_flight_is_dropped_with_a_record() -> None:
    """A cancel naming an answered or unknown request goes nowhere, audited."""
    a = opened()
    acts = a.receive(notif("$/cancel_request", {"requestId": "nope"}), 0.0)
    assert sends(acts) == []
    (record,) = audits(acts, "notification_dropped")
    assert record.fields["id"] == "nope"


@pytest.mark.parametrize("wrapped", [False, True])
def test_conductor_cancel_of_a_successor_request_cancels_our_request_to_the_client(
    wrapped: bool,
) -> None:
    """Cancelling envelope C (plain or wrapped) becomes our cancel of request X to the client."""
    a = opened()
    ask = only(a.receive(envelope("c-1", "session/request_permission", {"sessionId": "S"}), 0.0))
    params = {"requestId": "c-1"}
    cancel = (
        envelope(None, "$/cancel_request", params) if wrapped else notif("$/cancel_request", params)
    )
    got = only(a.receive(cancel, 0.0))
    assert got == {
        "jsonrpc": "2.0",
        "method": "$/cancel_request",
        "params": {"requestId": ask["id"]},
    }
    back = only(a.receive(err(ask["id"], -32800, "Request cancelled"), 0.0))
    assert back["id"] == "c-1"
    assert back["error"]["code"] == -32800


def test_wrapped_cancel_naming_nothing_in_flight_is_dropped() -> None:
    """A wrapped cancel for an unknown envelope is dropped with a record."""
    a = opened()
    acts = a.receive(envelope(None, "$/cancel_request", {"requestId": "zz"}), 0.0)
    assert sends(acts) == []
    assert events(acts) == ["notification_dropped"]


# ------------------------------------------------------ bad input, close


@pytest.mark.parametrize(
    "params",
    [{"params": {}}, {"method": 3}, {"method": "x", "params": "str"}, None],
)
def test_malformed_envelope_request_is_answered_with_invalid_params(params: Any) -> None:
    """An envelope without a string method or with scalar params gets -32602."""
    a = opened()
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": "c-1", "method": "proxy/successor"}
    if params is not None:
        body["params"] = params
    acts = a.receive(enc(body), 0.0)
    answer = only(acts)
    assert answer["id"] == "c-1"
    assert answer["error"]["code"] == -32602
    assert events(acts) == ["invalid_message"]


def test_malformed_envelope_notification_is_dropped() -> None:
    """A malformed envelope notification cannot be answered: dropped and audited."""
    a = opened()
    acts = a.receive(enc({"jsonrpc": "2.0", "method": "proxy/successor", "params": {}}), 0.0)
    assert sends(acts) == []
    assert events(acts) == ["notification_dropped"]


def test_envelope_with_duplicate_method_is_refused() -> None:
    """A duplicated method in an envelope's params is ambiguous: refused, never unwrapped."""
    a = opened()
    raw = b'{"jsonrpc":"2.0","id":"c","method":"proxy/successor",'
    raw += b'"params":{"method":"a","method":"b"}}'
    acts = a.receive(raw, 0.0)
    answer = only(acts)
    assert answer["id"] == "c"
    assert answer["error"]["code"] == -32600
    assert events(acts) == ["invalid_message"]
    dropped = a.receive(raw.replace(b'"id":"c",', b""), 0.0)
    assert sends(dropped) == []
    assert events(dropped) == ["notification_dropped"]


def test_ambiguous_response_to_an_envelope_still_answers_the_client() -> None:
    """A response to our envelope with duplicate keys gives the client an error, not a hang."""
    a = opened()
    env = only(a.receive(req(3, "session/list", {}), 0.0))
    raw = b'{"jsonrpc":"2.0","id":' + enc(env["id"]) + b',"result":{},"result":{"x":1}}'
    answer = only(a.receive(raw, 0.0))
    assert answer["id"] == 3
    assert "error" in answer


def test_unparseable_conductor_frame_is_answered_with_a_parse_error() -> None:
    """Garbage from the conductor gets -32700, as from a client."""
    answer = only(adapter().receive(b"{nope", 0.0))
    assert answer["id"] is None
    assert answer["error"]["code"] == -32700


def test_a_conductor_batch_is_refused_whole() -> None:
    """ACP uses no batches: a conductor array gets one -32600 with id null, and nothing in it
    reaches the successor."""
    a = opened()
    batch = b"[" + req(4, "session/list", {}) + b"," + envelope(None, "_vendor/x", {"a": 1}) + b"]"
    frames = out(a.receive(batch, 0.0))
    assert [(f["id"], f["error"]["code"]) for f in frames] == [(None, -32600)]


def test_conductor_closed_answers_everything_in_flight() -> None:
    """When the conductor goes, both sides' pending requests get errors and nothing leaks."""
    a = opened()
    a.receive(req(8, "session/prompt", {"sessionId": "S", "prompt": []}), 0.0)
    a.receive(envelope("c-2", "fs/read_text_file", {"sessionId": "S"}), 0.0)
    acts = a.conductor_closed(1.0)
    answers = {f["id"]: f["error"]["code"] for f in out(acts)}
    assert answers == {"c-2": -32603, 8: -32603}
    s = a.statistics()
    assert s.successor_requests_in_flight == 0
    assert s.conductor_requests_in_flight == 0
    assert events(acts).count("peer_closed") == 2


def test_oversize_and_partial_conductor_frames_are_reported_as_client_frames() -> None:
    """Framer reports from the conductor reach the core as the client's."""
    a = opened()
    answer = only(a.receive(Oversize(10**9, True), 0.0))
    assert answer["error"]["code"] == -32600
    assert events(a.receive(Partial(5), 0.0)) == ["invalid_message"]


def test_unwrap_exposes_the_core_side_of_each_frame() -> None:
    """unwrap maps a conductor frame to (peer, inner frame) without touching the core."""
    a = opened()
    (item,) = a.unwrap(envelope(None, "session/update", {"sessionId": "S"}))
    assert item == ToCore(
        AGENT, b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S"}}'
    )
    (item,) = a.unwrap(req(1, "session/list", {}))
    assert item == ToCore(CLIENT, req(1, "session/list", {}))


# ----------------------------------------------- same as standalone mode


class SyncConductor:
    """Plays the conductor around a ChainAdapter: the client plain, the successor wrapped."""

    def __init__(self, prefix: str) -> None:
        self.adapter = adapter()
        self.prefix = prefix
        self.envelopes: dict[Any, Any] = {}  # our envelope id C -> the successor's own id
        self.client_saw: list[bytes] = []
        self.successor_saw: list[Any] = []

    def client(self, frame: bytes) -> None:
        body = decoded(frame)
        if body.get("method") == "initialize":
            body["method"] = f"{self.prefix}proxy/initialize"
            frame = enc(body)
        self._route(self.adapter.receive(frame, 0.0))

    def successor(self, frame: bytes) -> None:
        body = decoded(frame)
        if "method" not in body:  # answers an envelope: same id on this hop
            self._route(self.adapter.receive(frame, 0.0))
            return
        rid = None
        if "id" in body:
            rid = f"c{len(self.envelopes)}"
            self.envelopes[rid] = body["id"]
        wrapped = envelope(rid, body["method"], body.get("params"), self.prefix, {"hop": 1})
        self._route(self.adapter.receive(wrapped, 0.0))

    def _route(self, actions: list[Action]) -> None:
        for data in sends(actions):
            body = decoded(data)
            if body.get("method") == f"{self.prefix}proxy/successor":
                inner = {k: v for k, v in body.items() if k in ("jsonrpc", "id")}
                inner.update(body["params"])
                self.successor_saw.append(inner)
            elif "method" not in body and body["id"] in self.envelopes:
                self.successor_saw.append({**body, "id": self.envelopes.pop(body["id"])})
            else:
                self.client_saw.append(data)


def scenario(client: Any, successor: Any, last_successor_request: Any) -> None:
    """Initialize, a session with an early update, a child, a refused mutation, dedup."""
    client(req(0, "initialize", {"protocolVersion": 2, "capabilities": {}}))
    successor(resp(last_successor_request(), {"protocolVersion": 2}))
    client(req(1, "session/new", {"cwd": "/", "mcpServers": []}))
    successor(chunk("S", "early"))
    successor(resp(last_successor_request(), {"sessionId": "S"}))
    client(req(2, "session/prompt", {"sessionId": "S", "prompt": []}))
    prompt = last_successor_request()
    successor(chunk("C", "child first"))
    successor(announce("S", "C", title="t", capabilities={}, state={"state": "running"}))
    successor(req("perm", "session/request_permission", {"sessionId": "C", "options": []}))
    client(req(3, "session/prompt", {"sessionId": "C", "prompt": []}))
    client(notif("session/cancel", {"sessionId": "C"}))
    successor(state_update("C", "idle"))
    successor(state_update("C", "idle"))
    successor(resp(prompt, {"stopReason": "end_turn"}))


@pytest.mark.parametrize("prefix", SPELLINGS)
def test_client_sees_the_same_bytes_as_standalone(prefix: str) -> None:
    """After unwrapping, the client-visible frames equal standalone mode's, but for request ids."""
    core = ProxyCore()
    standalone: list[bytes] = []
    agent_saw: list[Any] = []

    def s_client(frame: bytes) -> None:
        for a in core.receive(CLIENT, frame, 0.0):
            if isinstance(a, Send):
                (standalone if a.to is CLIENT else agent_saw).append(a.data)

    def s_agent(frame: bytes) -> None:
        for a in core.receive(AGENT, frame, 0.0):
            if isinstance(a, Send):
                (standalone if a.to is CLIENT else agent_saw).append(a.data)

    scenario(s_client, s_agent, lambda: decoded(agent_saw[-1])["id"])
    chain = SyncConductor(prefix)
    scenario(chain.client, chain.successor, lambda: chain.successor_saw[-1]["id"])

    def norm(frames: list[bytes]) -> list[bytes]:
        # Successor requests reach the client under ids the proxy picks.
        return [
            enc({**decoded(f), "id": "?"}) if "method" in decoded(f) and "id" in decoded(f) else f
            for f in frames
        ]

    assert norm(chain.client_saw) == norm(standalone)
    assert len(standalone) == 9
    assert [m["method"] for m in chain.successor_saw if "method" in m] == [
        decoded(f)["method"] for f in agent_saw if "method" in decoded(f)
    ]


ids = st.sampled_from([1, 2, 3, "1", "c-1", "c-2", None])
conductor_frames = st.one_of(
    st.builds(
        lambda rid, m, p: envelope(rid, m, p),
        ids,
        st.sampled_from(["session/update", "session/request_permission", "$/cancel_request"]),
        st.sampled_from([None, {"sessionId": "S"}, {"sessionId": "X"}, {"requestId": "c-1"}]),
    ),
    st.builds(
        lambda rid, m: req(rid, m, {"sessionId": "S", "prompt": []}),
        st.sampled_from([1, 2, "c-1"]),
        st.sampled_from(["session/prompt", "proxy/initialize", "_proxy/initialize", "initialize"]),
    ),
    st.builds(lambda rid: notif("$/cancel_request", {"requestId": rid}), ids),
    st.builds(lambda rid: resp(rid, {"ok": True}), ids),
    st.builds(lambda rid: err(rid), ids),
    st.sampled_from([b"{", b"[]", b'{"jsonrpc":"2.0","method":"proxy/successor","params":[1]}']),
)


@given(st.lists(conductor_frames, max_size=25))
def test_any_conductor_traffic_is_handled_without_raising(frames: list[bytes]) -> None:
    """Whatever the conductor sends, the adapter answers with values, never an exception."""
    a = opened()
    for i, frame in enumerate(frames):
        out(a.receive(frame, float(i)))
        out(a.handle_timer(float(i)))
    out(a.conductor_closed(100.0))
    s = a.statistics()
    assert s.successor_requests_in_flight == 0
    assert s.conductor_requests_in_flight == 0


def test_reused_envelope_id_does_not_break_the_answers() -> None:
    """A conductor reusing an envelope id in flight still gets both answers."""
    a = opened()
    first = only(a.receive(envelope("c", "fs/read_text_file", {"sessionId": "S"}), 0.0))
    second = only(a.receive(envelope("c", "fs/read_text_file", {"sessionId": "S"}), 0.0))
    assert only(a.receive(resp(first["id"], {}), 0.0))["id"] == "c"
    assert only(a.receive(resp(second["id"], {}), 0.0))["id"] == "c"
