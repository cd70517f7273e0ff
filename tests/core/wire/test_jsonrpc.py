"""JSON-RPC 2.0 classification of one frame (jsonrpc.parse)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.corekit import enc

from acp_proxy.core.wire.decode import decode
from acp_proxy.core.wire.jsonrpc import Kind, Verdict, canonical, dumps, error_frame, parse


def test_request() -> None:
    """method + id is a request; id, method and object params are exposed."""
    m = parse(b'{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"S"}}')
    assert m.kind is Kind.REQUEST
    assert (m.id, m.method, m.params, m.session_id) == (
        1,
        "session/prompt",
        {"sessionId": "S"},
        "S",
    )
    assert not m.ambiguous
    assert m.reason is None


def test_notification() -> None:
    """method without id is a notification."""
    m = parse(b'{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"S"}}')
    assert m.kind is Kind.NOTIFICATION
    assert m.id is None
    assert m.method == "session/cancel"


def test_array_params_are_valid_but_not_exposed() -> None:
    """Positional params are valid JSON-RPC; params (an object view) stays None."""
    m = parse(b'{"jsonrpc":"2.0","id":"a","method":"x","params":[1,2]}')
    assert m.kind is Kind.REQUEST
    assert m.params is None


@pytest.mark.parametrize("params", ["1", '"s"', "true"])
def test_scalar_params_are_invalid(params: str) -> None:
    """params must be an object or an array."""
    m = parse(b'{"jsonrpc":"2.0","id":1,"method":"x","params":' + params.encode() + b"}")
    assert m.kind is Kind.INVALID
    assert m.id == 1


def test_response() -> None:
    """id + result is a response."""
    m = parse(b'{"jsonrpc":"2.0","id":"r1","result":null}')
    assert m.kind is Kind.RESPONSE
    assert m.id == "r1"


def test_error_response() -> None:
    """id + error is an error response; a well-formed error is not flagged."""
    m = parse(b'{"jsonrpc":"2.0","id":3,"error":{"code":-32000,"message":"x"}}')
    assert m.kind is Kind.ERROR_RESPONSE
    assert m.id == 3
    assert not m.malformed_error


def test_error_response_with_null_id() -> None:
    """An error response may carry id null (answer to an unreadable request)."""
    m = parse(b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}')
    assert m.kind is Kind.ERROR_RESPONSE
    assert m.id is None


def test_result_with_null_id_is_invalid() -> None:
    """A success response must name a real request id."""
    assert parse(b'{"jsonrpc":"2.0","id":null,"result":1}').kind is Kind.INVALID


def test_batch_elements_are_counted_and_only_those_with_an_id_are_read() -> None:
    """A JSON array is a batch: its elements are counted; the object elements with an id
    member (the only ones that can be requests) are classified, each on its own bytes."""
    m = parse(
        b'[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","method":"b"},5,'
        b' {"jsonrpc":"2.0", "i\\u0064":"r,2","method":"c"}, "x,]"]'
    )
    assert m.kind is Kind.BATCH
    assert m.elements == 5
    assert [(i.kind, i.id) for i in m.items] == [(Kind.REQUEST, 1), (Kind.REQUEST, "r,2")]
    assert m.items[0].raw == b'{"jsonrpc":"2.0","id":1,"method":"a"}'
    assert m.items[1].raw == b'{"jsonrpc":"2.0", "i\\u0064":"r,2","method":"c"}'


def test_an_id_inside_an_element_is_not_its_id() -> None:
    """An ``id`` nested in an element (or in a nested array) does not make it a request."""
    m = parse(b'[{"params":{"id":1},"method":"m","jsonrpc":"2.0"},[{"id":2,"method":"m"}],{}]')
    assert (m.kind, m.elements, m.items) == (Kind.BATCH, 3, [])


def test_empty_batch_is_invalid() -> None:
    """[] is an invalid request, not a batch."""
    assert parse(b"[]").kind is Kind.INVALID


def test_nested_batch_element_is_invalid() -> None:
    """An array inside a batch is an invalid element, never a batch of its own."""
    m = parse(b'[[{"jsonrpc":"2.0","id":1,"method":"session/cancel"}]]')
    assert m.kind is Kind.BATCH
    assert (m.elements, m.items) == (1, [])


@pytest.mark.parametrize("raw", [b"1", b'"x"', b"null", b"true"])
def test_non_object_is_invalid(raw: bytes) -> None:
    """A JSON value that is neither object nor array is invalid (but is JSON)."""
    m = parse(raw)
    assert m.kind is Kind.INVALID
    assert not m.parse_error


@pytest.mark.parametrize("rid", [2**53, -(2**53), 2**63, 2**64, 2**80, -(2**80)])
def test_integer_ids_a_javascript_peer_would_round_are_invalid(rid: int) -> None:
    """|id| >= 2**53 is refused: a JavaScript SDK reads 2**53 and 2**53 + 1 as one id, so a
    response to one could end the other request in flight (found by a hostile review)."""
    for raw in (
        enc({"jsonrpc": "2.0", "id": rid, "method": "m"}),
        enc({"jsonrpc": "2.0", "id": rid, "result": {}}),
    ):
        m = parse(raw)
        assert m.kind is Kind.INVALID
        assert "2**53" in (m.reason or "")


@pytest.mark.parametrize(
    "rid",
    ["abc", "", 7, 0, -3, 2**53 - 1, -(2**53) + 1, 2**31],
)
def test_valid_ids_are_kept_exactly(rid: str | int) -> None:
    """String ids and integer ids a JavaScript peer reads exactly stay exact (type, value)."""
    for raw in (
        enc({"jsonrpc": "2.0", "id": rid, "method": "m"}),
        enc({"jsonrpc": "2.0", "id": rid, "result": {}}),
    ):
        m = parse(raw)
        assert m.kind in (Kind.REQUEST, Kind.RESPONSE)
        assert type(m.id) is type(rid)
        assert m.id == rid


@pytest.mark.parametrize("rid", ["1.0", "1.5", "1e3", "true", "false", "null", "[1]", '{"a":1}'])
def test_float_bool_null_and_structured_request_ids_are_invalid(rid: str) -> None:
    """A request id must be a string or an integer; 1.0 and true are not."""
    m = parse(b'{"jsonrpc":"2.0","id":' + rid.encode() + b',"method":"m"}')
    assert m.kind is Kind.INVALID
    assert m.id is None


@pytest.mark.parametrize("rid", ["1.0", "true", "[1]"])
def test_float_bool_response_ids_are_invalid(rid: str) -> None:
    """Responses with float or bool ids are invalid (not matched to id 1)."""
    assert parse(b'{"jsonrpc":"2.0","id":' + rid.encode() + b',"result":1}').kind is Kind.INVALID
    m = parse(b'{"jsonrpc":"2.0","id":' + rid.encode() + b',"error":{"code":1,"message":"m"}}')
    assert m.kind is Kind.INVALID


@pytest.mark.parametrize(
    "raw",
    [
        b'{"id":1,"method":"m"}',
        b'{"jsonrpc":"1.0","id":1,"method":"m"}',
        b'{"jsonrpc":2.0,"id":1,"method":"m"}',
    ],
)
def test_missing_or_wrong_jsonrpc_is_invalid(raw: bytes) -> None:
    """jsonrpc must be exactly "2.0"; the id is still read for the error answer."""
    m = parse(raw)
    assert m.kind is Kind.INVALID
    assert "jsonrpc" in (m.reason or "")
    assert m.id == 1


@pytest.mark.parametrize(
    "raw",
    [
        b'{"jsonrpc":"2.0","id":1,"result":1,"error":{"code":1,"message":"m"}}',
        b'{"jsonrpc":"2.0","id":1}',
        b'{"jsonrpc":"2.0","id":1,"method":"m","result":1}',
        b'{"jsonrpc":"2.0","id":1,"method":"m","error":{"code":1,"message":"m"}}',
        b'{"jsonrpc":"2.0","id":1,"method":5}',
        b'{"jsonrpc":"2.0"}',
    ],
)
def test_shapes_that_are_no_message_are_invalid(raw: bytes) -> None:
    """result+error, neither, method with result/error, non-string method are invalid."""
    assert parse(raw).kind is Kind.INVALID


@pytest.mark.parametrize(
    "raw",
    [
        b'{"jsonrpc":"2.0","method":"a","method":"b"}',
        b'{"jsonrpc":"2.0","id":1,"id":2,"method":"a"}',
        b'{"jsonrpc":"2.0","id":1,"method":"a","params":{},"params":{}}',
        b'{"jsonrpc":"2.0","method":"a","params":{"sessionId":"A","sessionId":"B"}}',
        b'{"jsonrpc":"2.0","method":"a","params":{"sessionId":"A","update":{},"update":{}}}',
        b'{"jsonrpc":"2.0","method":"a","params":{"update":{"sessionUpdate":"x","sessionUpdate":"y"}}}',
        b'{"jsonrpc":"2.0","id":1,"result":1,"id":2}',
        b'{"jsonrpc":"2.0","\\u006dethod":"a","method":"b"}',
        b'{"jsonrpc":"2.0","method":"a","\\u006d\\u0065thod":"b"}',
        b'{"jsonrpc":"2.0","i\\u0064":1,"id":2,"method":"a"}',
        b'{"jsonrpc":"2.0","method":"a","params":{"session\\u0049d":"A","sessionId":"B"}}',
        b'{"jsonrpc":"2.0","method":"a","params":{"sessionId":"A","\\u0075pdate":{},"update":{}}}',
    ],
)
def test_duplicate_decision_keys_are_ambiguous(raw: bytes) -> None:
    """A duplicated method/id/params/sessionId/update key, even behind \\u escapes, is ambiguous."""
    assert parse(raw).ambiguous


@pytest.mark.parametrize(
    "raw",
    [
        b'{"jsonrpc":"2.0","method":"a","params":{"sessionId":"S","update":{"content":'
        b'{"text":"x","text":"y"}}}}',
        b'{"jsonrpc":"2.0","id":1,"method":"a","params":{"prompt":[{"sessionId":1,"sessionId":2}]}}',
        b'{"jsonrpc":"2.0","id":1,"result":{"sessionId":"a","sessionId":"b"}}',
        b'{"jsonrpc":"2.0","method":"a","params":{"x":{"method":1,"method":2}}}',
        b'{"jsonrpc":"2.0","method":"\\u0061","params":{"sessionId":"S"}}',
    ],
)
def test_duplicates_deep_in_content_are_not_ambiguous(raw: bytes) -> None:
    """Duplicate keys below params.update (or in results) do not make a frame ambiguous."""
    m = parse(raw)
    assert m.kind is not Kind.INVALID
    assert not m.ambiguous


def test_escaped_method_value_is_decoded() -> None:
    """A method spelled with \\u escapes is read as the method it decodes to."""
    m = parse(b'{"jsonrpc":"2.0","method":"session\\/cancel","params":{"sessionId":"\\u0043"}}')
    assert (m.method, m.session_id) == ("session/cancel", "C")


def test_ambiguous_batch_element_is_flagged() -> None:
    """Inside a batch, each element with duplicate decision keys is flagged on its own."""
    m = parse(
        b'[{"jsonrpc":"2.0","id":1,"method":"a","method":"b"},{"jsonrpc":"2.0","id":2,"method":"c"}]'
    )
    assert [i.ambiguous for i in m.items] == [True, False]


@pytest.mark.parametrize(
    "raw",
    [b"", b"{", b"not json", b'{"a":}', b"\xff\xfe", b'{"a":"\xc3"}', b"{}{}"],
)
def test_non_json_is_a_parse_error(raw: bytes) -> None:
    """Bytes that are not one JSON text are INVALID with parse_error set."""
    m = parse(raw)
    assert m.kind is Kind.INVALID
    assert m.parse_error
    assert m.raw == raw


@pytest.mark.parametrize("const", [b"NaN", b"Infinity", b"-Infinity"])
def test_nan_and_infinity_are_rejected(const: bytes) -> None:
    """NaN / Infinity are not JSON, wherever they appear."""
    m = parse(b'{"jsonrpc":"2.0","method":"m","params":{"x":' + const + b"}}")
    assert m.kind is Kind.INVALID
    assert m.parse_error


def test_deep_nesting_is_a_parse_error_not_a_crash() -> None:
    """Pathologically deep nesting is refused as a value, never raised."""
    m = parse(b"[" * 100_000 + b"]" * 100_000)
    assert m.kind is Kind.INVALID


@pytest.mark.parametrize(
    "error",
    [
        '"boom"',
        "null",
        "{}",
        '{"code":1}',
        '{"message":"m"}',
        '{"code":"1","message":"m"}',
        '{"code":1.0,"message":"m"}',
        '{"code":true,"message":"m"}',
        '{"code":1,"message":2}',
    ],
)
def test_malformed_error_object_is_flagged(error: str) -> None:
    """An error without an integer code and a string message is flagged malformed_error."""
    m = parse(b'{"jsonrpc":"2.0","id":1,"error":' + error.encode() + b"}")
    assert m.kind is Kind.ERROR_RESPONSE
    assert m.malformed_error


def test_session_id_is_only_a_string() -> None:
    """session_id is params.sessionId only when it is a string."""
    assert parse(b'{"jsonrpc":"2.0","method":"m","params":{"sessionId":7}}').session_id is None
    assert parse(b'{"jsonrpc":"2.0","method":"m","params":[]}').session_id is None


def test_raw_is_kept_byte_for_byte() -> None:
    """The original bytes, spacing and escapes included, are kept as raw."""
    raw = b'{ "jsonrpc" : "2.0",\t"method":"\\u0078" , "params":{"v":1.50}}'
    assert parse(raw).raw == raw


def test_error_frame_shape() -> None:
    """error_frame builds a JSON-RPC error with the given id; data only when given."""
    assert json.loads(error_frame(2**80, -32601, "no")) == {
        "jsonrpc": "2.0",
        "id": 2**80,
        "error": {"code": -32601, "message": "no"},
    }
    assert json.loads(error_frame(None, -32700, "x", {"k": 1}))["error"]["data"] == {"k": 1}


def test_dumps_is_compact_and_survives_lone_surrogates() -> None:
    """dumps writes compact UTF-8 and falls back to escapes for lone surrogates."""
    assert dumps({"a": [1, "é"]}) == '{"a":[1,"é"]}'.encode()
    out = dumps({"s": "\ud800"})
    assert json.loads(out) == {"s": "\ud800"}


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**90), max_value=2**90)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)


@given(
    value=json_values,
    rid=st.one_of(st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1), st.text(max_size=5)),
    ascii_only=st.booleans(),
)
def test_decoded_body_equals_the_exact_decode(value: Any, rid: int | str, ascii_only: bool) -> None:
    """Whatever path parse takes, the decoded body is exactly what the JSON text says."""
    body = {"jsonrpc": "2.0", "id": rid, "method": "m", "params": {"v": value, "sessionId": "S"}}
    raw = json.dumps(body, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    m = parse(raw)
    if not m.parse_error:
        exact = json.loads(raw)
        assert m.body == exact
        assert [type(x) for x in _leaves(m.body)] == [type(x) for x in _leaves(exact)]
        assert m.kind is Kind.REQUEST
        assert m.id == rid
        assert not m.ambiguous


def _leaves(v: Any) -> list[Any]:
    if isinstance(v, dict):
        return [x for k in v for x in _leaves(v[k])]
    if isinstance(v, list):
        return [x for i in v for x in _leaves(i)]
    return [v]


@pytest.mark.parametrize(
    "raw",
    [
        b'{"jsonrpc":"2.0","method":"a","foo":1,"foo":2}',
        b'{"jsonrpc":"2.0","method":"a","params":{"x":1,"x":2}}',
        b'{"jsonrpc":"2.0","method":"a","params":{"update":{"content":1,"content":2}}}',
    ],
)
def test_non_decision_duplicates_give_the_same_verdict_on_either_decoder(raw: bytes) -> None:
    """A duplicate content key is not ambiguous, whichever decoder reads the frame."""
    escaped = raw[:-1] + b',"pad":"\\u0041"}'
    assert parse(raw).ambiguous is False
    assert parse(escaped).ambiguous is False


@pytest.mark.parametrize(
    "update",
    [
        b'{"sessionUpdate":"state_update","state":"idle","state":"running"}',
        b'{"sessionUpdate":"subagent_update","sessionId":"C","capabilities":{},"capabilities":null}',
        b'{"sessionUpdate":"session_message","senderSessionId":"A","senderSessionId":"B"}',
    ],
)
def test_duplicate_keys_the_proxy_decides_on_in_update_are_ambiguous(update: bytes) -> None:
    """Duplicated state / capabilities / sender keys in params.update are ambiguous."""
    raw = b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":'
    assert parse(raw + update + b"}}").ambiguous


_decision_key = st.sampled_from(["method", "id", "params", "jsonrpc", "sessionId", "update"])
_json_scalar = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8))


@given(
    key=_decision_key,
    first=_json_scalar,
    second=_json_scalar,
    level=st.sampled_from(["top", "params", "update"]),
)
def test_compact_frames_with_a_repeated_decision_key_are_always_ambiguous(
    key: str, first: Any, second: Any, level: str
) -> None:
    """The compact-encoding shortcut never hides a repeated decision key, at any level:
    the decoders report it, and the frame is refused (ambiguous, or invalid or a bad
    session id when it is that too: those rows come first)."""
    inner = json.dumps({key: first}, separators=(",", ":"))[1:-1]
    again = json.dumps({key: second}, separators=(",", ":"))[1:-1]
    members = f"{inner},{again}"
    if level == "top":
        if key not in ("method", "id", "params", "jsonrpc"):
            return  # sessionId and update decide only inside params
        text = '{"jsonrpc":"2.0","method":"session/update",' + members + "}"
        if key in ("jsonrpc", "method"):
            text = '{"params":{},' + members + "}"
    elif level == "params":
        key_ok = key in ("sessionId", "update")
        text = '{"jsonrpc":"2.0","method":"m","params":{' + members + "}}"
        if not key_ok:
            return  # only sessionId and update decide inside params
    else:
        if key not in ("sessionId",):
            return
        text = (
            '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s",'
            '"update":{"sessionUpdate":"x",' + members + "}}}"
        )
    raw = text.encode()
    assert decode(raw, len(raw), 48, 512).repeated is not None
    assert parse(raw).verdict in (Verdict.AMBIGUOUS, Verdict.BAD_SESSION_ID, Verdict.INVALID)


@given(
    text=st.text(max_size=40),
    number=st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1),
    sid=st.text(min_size=1, max_size=8),
)
def test_compact_frames_without_repeats_classify_as_the_strict_parser_does(
    text: str, number: int, sid: str
) -> None:
    """A compact frame taking the shortcut gets the same body and verdict as a strict parse."""
    body = {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": sid, "update": {"sessionUpdate": "x", "t": text, "n": number}},
    }
    raw = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
    m = parse(raw)
    assert not m.ambiguous
    assert m.body == json.loads(raw)
    assert m.session_id == sid


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        (b'{"jsonrpc":"2.0","method":"n","params":{"sessionId":"S"}}', "same"),
        (b'{"a":[1,{"b":"\xc3\xa9"}]}', "same"),
        (b'[1,{"a":"\xc3\xa9"}]', None),  # not an object: parse reads it (a batch)
        (b'{"a":1,"a":2}', None),
        (b'{"\\u0061":1}', None),
        (b'{"a": 1}', None),
        (b'{"a":1.50}', None),
        (b'{"a":"\\u00e9"}', None),
        (b"{", None),
    ],
)
def test_canonical_accepts_only_the_compact_encoding_of_the_value(
    raw: bytes, value: str | None
) -> None:
    """Repeated or escaped keys, whitespace and other spellings are not canonical."""
    assert canonical(raw) == (json.loads(raw) if value == "same" else None)
