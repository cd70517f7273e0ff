"""``parse``'s shortcut for plain requests and notifications gives the table's message.

:func:`~acp_proxy.core.wire.jsonrpc.parse` builds the message of a frame the
decoders found nothing wrong with and that is a request or notification with
nothing to refuse in one function (``_plain_call``, issue 29); every other
frame is classified and judged row by row (``_judged``). Both must build the
same message for every frame: random JSON-RPC-like frames (every kind of id,
``jsonrpc`` and ``method`` value, ``params`` of every type, snake_case and
``_meta`` spellings, session ids too long at every place the table reads,
duplicate keys, whitespace, escapes) are parsed both ways and compared field
by field.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from acp_proxy.core.wire import jsonrpc
from acp_proxy.core.wire.decode import decode
from acp_proxy.core.wire.jsonrpc import Message, Verdict, parse

_LIMIT = 16  # limits.max_session_id_bytes, small enough for ids to pass it
_DENSE, _PER_VALUE, _DEPTH = 2048, 48, 8
_ABSENT: Any = object()

_SIDS = st.sampled_from(["S", "s" * _LIMIT, "s" * (_LIMIT + 1), "é" * 5, 5, None, ["S"]])
_KINDS = st.sampled_from(
    ["state_update", "subagent_update", "session_message", "tool_call", "tool_call_update",
     "agent_message_chunk", "other", 3, None]
)  # fmt: skip
_UPDATE_KEYS = st.sampled_from(
    ["sessionId", "senderSessionId", "recipientSessionId", "session_update", "session_id",
     "field_meta", "_meta", "state", "content", "background", "title"]
)  # fmt: skip
_META_KEYS = st.sampled_from(["session_id", "update", "sessionId", "path", "tool_call", "x"])
_REF = st.one_of(
    _SIDS.map(lambda s: {"type": "session", "sessionId": s}),
    _SIDS.map(lambda s: {"type": "subagent", "sessionId": s}),
    st.just("text"),
)


@st.composite
def _update(draw: st.DrawFn) -> Any:
    upd: dict[str, Any] = {}
    kind = draw(_KINDS)
    if kind is not None:
        upd["sessionUpdate"] = kind
    for key in draw(st.lists(_UPDATE_KEYS, max_size=4)):
        if key in ("content", "background"):
            upd[key] = draw(st.lists(_REF, max_size=3))
        elif key == "_meta":
            upd[key] = {k: 1 for k in draw(st.lists(_META_KEYS, max_size=2))}
        else:
            upd[key] = draw(_SIDS)
    return draw(st.one_of(st.just(upd), st.just([upd]), st.just("u")))


@st.composite
def _params(draw: st.DrawFn) -> Any:
    shape = draw(st.sampled_from(["object", "absent", "null", "list", "string"]))
    if shape != "object":
        return {"absent": _ABSENT, "null": None, "list": [1], "string": "p"}[shape]
    params: dict[str, Any] = {}
    if draw(st.booleans()):
        params["sessionId"] = draw(_SIDS)
    if draw(st.booleans()):
        params["update"] = draw(_update())
    if draw(st.booleans()):
        metas = st.lists(_META_KEYS, max_size=2).map(dict.fromkeys)
        params["_meta"] = draw(st.one_of(st.just(5), metas))
    if draw(st.booleans()):
        params[draw(st.sampled_from(["session_id", "field_meta", "cwd"]))] = "S"
    return params


@st.composite
def frames(draw: st.DrawFn) -> bytes:
    """A JSON-RPC-like frame, often plain, sometimes spelled oddly."""
    body: dict[str, Any] = {}
    members: dict[str, st.SearchStrategy[Any]] = {
        "jsonrpc": st.sampled_from(["2.0", "1.0", 2.0, _ABSENT]),
        "id": st.sampled_from([_ABSENT, 1, -7, "r", None, 2**53, -(2**53), 1.5, True, [1]]),
        "method": st.sampled_from(
            ["session/update", "session/prompt", "_vendor/x", "fs/read_text_file", "", 7, _ABSENT]
        ),
        "params": _params(),
        "result": st.sampled_from([_ABSENT, _ABSENT, _ABSENT, {}, None]),
        "error": st.sampled_from([_ABSENT, _ABSENT, _ABSENT, {"code": 1, "message": "m"}]),
    }
    if draw(st.integers(0, 3)):  # mostly a well-formed call: what the params decide
        members["jsonrpc"] = st.just("2.0")
        members["id"] = st.sampled_from([_ABSENT, 1, "r", 2**53 - 1])
        members["method"] = st.sampled_from(["session/update", "session/prompt", "_vendor/x"])
        members["result"] = members["error"] = st.just(_ABSENT)
        params = members["params"]
        members["params"] = params.filter(lambda p: type(p) is dict)
    order = draw(st.permutations(list(members)))
    for key in order:
        value = draw(members[key])
        if value is not _ABSENT:
            body[key] = value
    raw = json.dumps(body, separators=draw(st.sampled_from([(",", ":"), (", ", ": ")])))
    if draw(st.integers(0, 9)) == 0 and raw.startswith('{"'):  # a repeated member
        key = draw(st.sampled_from(["method", "id", "jsonrpc", "x"]))
        raw = '{"' + key + '":"session/update",' + raw[1:]
    if draw(st.integers(0, 9)) == 0:
        raw = raw.replace("sessionId", "session\\u0049d", 1)
    return raw.encode()


def _fields(m: Message) -> tuple[Any, ...]:
    return (
        m.raw, m.kind, m.body, m.id, m.method, m.params, m.verdict, m.reason,
        m.malformed_error, [_fields(i) for i in m.items], m.elements,
    )  # fmt: skip


def _table(raw: bytes, limit: int = _LIMIT) -> Message:
    facts = decode(raw, _DENSE, _PER_VALUE, _DEPTH)
    return jsonrpc._judged(raw, facts, _DENSE, _PER_VALUE, _DEPTH, limit)


@settings(max_examples=400)
@given(raw=frames())
def test_the_shortcut_builds_the_message_the_table_builds(raw: bytes) -> None:
    """Every frame: the same kind, body, id, method, params, verdict and reason both ways."""
    assert _fields(parse(raw, _DENSE, _PER_VALUE, _DEPTH, _LIMIT)) == _fields(_table(raw))


@settings(max_examples=300)
@given(raw=frames(), slack=st.sampled_from([-40, -8, -1, 0, 1]))
def test_a_frame_within_the_session_id_limit_is_judged_alike(raw: bytes, slack: int) -> None:
    """A frame no longer than ``limits.max_session_id_bytes`` skips the length walk in
    the shortcut (no string in it can be longer than the frame); with the limit just
    above, at and below the frame's length, both ways still agree."""
    limit = max(1, len(raw) + slack)
    fast = parse(raw, _DENSE, _PER_VALUE, _DEPTH, limit)
    assert _fields(fast) == _fields(_table(raw, limit))


def test_a_long_id_in_a_frame_just_over_the_limit_is_still_refused() -> None:
    """The walk is skipped only at or under the limit: one byte over, a session id
    of ``limit`` + 1 bytes (escapes decoded: ``\\u00e9`` is two bytes) is refused."""
    sid = "\\u00e9" * 9  # 18 bytes decoded, 54 spelled
    raw = b'{"jsonrpc":"2.0","method":"m","params":{"sessionId":"' + sid.encode() + b'"}}'
    assert parse(raw, _DENSE, _PER_VALUE, _DEPTH, 17).verdict is Verdict.BAD_SESSION_ID
    assert parse(raw, _DENSE, _PER_VALUE, _DEPTH, 18).verdict is Verdict.OK
    short = b'{"jsonrpc":"2.0","method":"m","params":{"sessionId":"' + b"s" * 20 + b'"}}'
    assert parse(short, _DENSE, _PER_VALUE, _DEPTH, len(short)).verdict is Verdict.OK
    assert parse(short, _DENSE, _PER_VALUE, _DEPTH, 19).verdict is Verdict.BAD_SESSION_ID
    bad = b'{"jsonrpc":"2.0","method":"m","params":{"sessionId":5}}'
    assert parse(bad, _DENSE, _PER_VALUE, _DEPTH, 1024).verdict is Verdict.BAD_SESSION_ID


def test_the_shortcut_takes_plain_frames_and_only_those() -> None:
    """A plain notification and request take it; anything the table refuses does not."""
    sid = b'"sessionId":"S"'
    plain = [
        b'{"jsonrpc":"2.0","method":"session/update","params":{' + sid + b',"update":{}}}',
        b'{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{' + sid + b"}}",
        b'{"jsonrpc":"2.0","id":"r","method":"m"}',
    ]
    refused = [
        b'{"jsonrpc":"2.0","id":1.5,"method":"m"}',  # an id the proxy does not track
        b'{"jsonrpc":"2.0","method":"m","params":{"sessionId":5}}',
        b'{"jsonrpc":"2.0","method":"m","params":{"session_id":"S"}}',
        b'{"jsonrpc":"2.0","method":"session/update","params":{"update":'
        b'{"sessionUpdate":"subagent_update","sessionId":"' + b"c" * (_LIMIT + 1) + b'"}}}',
    ]
    for raw in plain:
        body = decode(raw, _DENSE, _PER_VALUE, _DEPTH).body
        m = jsonrpc._plain_call(raw, body, _LIMIT)
        assert m is not None
        assert m.verdict is Verdict.OK
    for raw in refused:
        body = decode(raw, _DENSE, _PER_VALUE, _DEPTH).body
        assert jsonrpc._plain_call(raw, body, _LIMIT) is None
        assert parse(raw, _DENSE, _PER_VALUE, _DEPTH, _LIMIT).verdict is not Verdict.OK
