"""Refusals answer under the id whenever it can be read, spelled as it came (JSON-RPC 2.0 s. 5).

Only a frame whose id cannot be read unambiguously, or whose id has a type
JSON-RPC does not allow (a boolean, an array, an object), is answered under
``null`` toward the client. Toward the agent, a request the proxy will not
carry is answered under its id's bytes whatever they are: it waits for them.
Each test asserts the exact bytes of the reply's id.
"""

from __future__ import annotations

import re

import pytest
from support.corekit import AGENT, CLIENT, assert_accounting, open_session, sends

from acp_proxy.core.actions import Peer
from acp_proxy.core.engine import ProxyCore
from acp_proxy.core.wire.framing import LineFramer, Lines, Oversize
from acp_proxy.core.wire.jsonrpc import INVALID_PARAMS, INVALID_REQUEST, RawId, parse, reply_id

LONG_STRING = b'"' + b"x" * 5000 + b'"'
BIG = b"9007199254740993"  # 2**53 + 1: a JavaScript peer reads it as 2**53
HUGE = b"18446744073709551617"  # 2**64 + 1
DIGITS = b"7" * 5000  # past Python's 4300-digit int limit
_REPLY = re.compile(rb'^\{"jsonrpc":"2\.0","id":(.*),"error":\{"code":(-?\d+),')


def reply(out: list[object], to: Peer) -> tuple[bytes, int]:
    """The one error frame sent to ``to``: (its id's exact bytes, its code)."""
    (frame,) = sends(out, to)  # type: ignore[arg-type]
    match = _REPLY.match(frame)
    assert match is not None, frame[:200]
    return match.group(1), int(match.group(2))


def core() -> ProxyCore:
    c = ProxyCore()
    open_session(c, "S")
    return c


def client_request(rid: bytes, params: bytes = b'{"sessionId":"S","prompt":[]}') -> bytes:
    return b'{"jsonrpc":"2.0","id":' + rid + b',"method":"session/prompt","params":' + params + b"}"


def agent_request(rid: bytes, params: bytes = b'{"sessionId":"S","path":"/w/a"}') -> bytes:
    return (
        b'{"jsonrpc":"2.0","id":' + rid + b',"method":"fs/read_text_file","params":' + params + b"}"
    )


def refused(source: Peer, frame: object) -> tuple[bytes, int]:
    c = core()
    out = c.receive(source, frame, 0.0)  # type: ignore[arg-type]
    assert sends(out, source.other) == []  # type: ignore[arg-type]
    assert_accounting(c)
    assert c.statistics().answered == 1
    return reply(out, source)


# ------------------------------------------------------------ toward the client


@pytest.mark.parametrize(
    "rid",
    [b"1.5", b"1e2", b"-0.0", BIG, HUGE, b"-" + HUGE, DIGITS],
    ids=[
        "fraction",
        "exponent",
        "negative-zero-float",
        "2**53+1",
        "2**64+1",
        "-2**64-1",
        "5000-digits",
    ],
)
def test_an_untracked_client_id_is_answered_under_its_bytes(rid: bytes) -> None:
    """JSON-RPC allows any number: not tracked, so refused -32600 under the id as it came."""
    assert refused(CLIENT, client_request(rid)) == (rid, INVALID_REQUEST)


@pytest.mark.parametrize("rid", [b"true", b"false", b"[1]", b'{"a":1}'])
def test_a_client_id_of_a_type_json_rpc_forbids_is_answered_under_null(rid: bytes) -> None:
    assert refused(CLIENT, client_request(rid)) == (b"null", INVALID_REQUEST)


def test_a_client_id_given_twice_is_answered_under_null() -> None:
    """Which id a peer reads depends on its parser: the id cannot be read unambiguously."""
    frame = b'{"jsonrpc":"2.0","id":1,"id":2,"method":"session/prompt","params":{"sessionId":"S"}}'
    assert refused(CLIENT, frame) == (b"null", INVALID_REQUEST)
    escaped = frame.replace(b'"id":2', b'"\\u0069d":2.5')
    assert refused(CLIENT, escaped) == (b"null", INVALID_REQUEST)


def test_a_too_dense_client_request_is_answered_under_its_id() -> None:
    """3 MiB of small keys, its top level not compact: refused before any tree is built,
    and its id read from the bytes."""
    keys = b",".join(b'"k%d":1' % i for i in range(330_000))
    for rid in (b"7", b"1.5", LONG_STRING):
        frame = (
            b'{"jsonrpc": "2.0", "id": ' + rid + b', "method": "session/prompt", '
            b'"params": {"sessionId": "S", "prompt": [], "a": "method", ' + keys + b"}}"
        )
        assert len(frame) > 3 * 1024 * 1024
        assert "too dense" in (parse(frame).reason or "")
        assert refused(CLIENT, frame) == (rid, INVALID_REQUEST)


def test_a_too_dense_client_request_naming_its_id_twice_is_answered_under_null() -> None:
    keys = b",".join(b'"k%d":1' % i for i in range(330_000))
    frame = (
        b'{"jsonrpc": "2.0", "id": 7, "method": "session/prompt", "\\u0069d": 8, '
        b'"params": {"sessionId": "S", "prompt": [], "a": "method", ' + keys + b"}}"
    )
    assert refused(CLIENT, frame) == (b"null", INVALID_REQUEST)


@pytest.mark.parametrize("rid", [b"5", b"1.5", BIG, DIGITS[:4000]])
def test_a_too_long_client_request_is_answered_under_its_id(rid: bytes) -> None:
    framer = LineFramer(64)
    (item,) = framer.feed(
        client_request(rid, b'{"sessionId":"S","prompt":"' + b"x" * 500 + b'"}') + b"\n"
    )
    assert isinstance(item, Oversize)
    assert refused(CLIENT, item) == (rid, INVALID_REQUEST)


def test_a_client_request_with_an_ambiguous_key_is_answered_under_its_id() -> None:
    """A decision key other than the id given twice (or a snake_case alias): under the id."""
    dup = client_request(LONG_STRING, b'{"sessionId":"S","sessionId":"T"}')
    assert refused(CLIENT, dup) == (LONG_STRING, INVALID_REQUEST)
    alias = client_request(BIG, b'{"sessionId":"S","session_id":"T"}')
    assert refused(CLIENT, alias) == (BIG, INVALID_REQUEST)


@pytest.mark.parametrize("rid", [b"3", LONG_STRING, b"1.5"])
def test_a_client_request_with_a_bad_session_id_is_answered_under_its_id(rid: bytes) -> None:
    got = refused(CLIENT, client_request(rid, b'{"sessionId":5,"prompt":[]}'))
    assert got == (rid, INVALID_PARAMS if rid != b"1.5" else INVALID_REQUEST)


def test_a_client_frame_with_an_integer_past_the_digit_limit_is_answered_under_its_id() -> None:
    """Python peers cannot read a 5000-digit integer (TypeScript reads a float): refused
    under the id, on the whole-frame path and on the large-frame path."""
    small = client_request(b'"q"', b'{"sessionId":"S","prompt":[],"n":' + DIGITS + b"}")
    assert refused(CLIENT, small) == (b'"q"', INVALID_REQUEST)
    large = client_request(
        b"4", b'{"sessionId":"S","prompt":[],"t":"' + b"x" * (2 << 20) + b'","n":' + DIGITS + b"}"
    )
    assert refused(CLIENT, large) == (b"4", INVALID_REQUEST)


def test_an_untracked_id_is_never_mistaken_for_one_in_flight() -> None:
    """A dense frame reusing a tracked id in flight is not answered a second time under it."""
    c = core()
    assert sends(c.receive(CLIENT, client_request(b"7"), 0.0), AGENT)
    keys = b",".join(b'"k%d":1' % i for i in range(330_000))
    frame = (
        b'{"jsonrpc": "2.0", "id": 7, "method": "session/prompt", '
        b'"params": {"sessionId": "S", "prompt": [], "a": "method", ' + keys + b"}}"
    )
    out = c.receive(CLIENT, frame, 0.0)
    assert sends(out, CLIENT) == []  # the id in flight gets one answer, the agent's
    assert c.statistics().dropped == 1
    assert_accounting(c)


# ------------------------------------------------------------ toward the agent


@pytest.mark.parametrize(
    "rid",
    [b"1.5", b"true", BIG, HUGE, b"[1]", b'{"a":[1]}', b"null", DIGITS],
    ids=["fraction", "true", "2**53+1", "2**64+1", "array", "object", "null", "5000-digits"],
)
def test_an_agent_request_the_proxy_will_not_carry_is_answered_under_its_id(rid: bytes) -> None:
    """Dropped before, so the agent waited forever: now -32600 under the id it wrote."""
    for frame in (agent_request(rid), [agent_request(rid)], Lines(agent_request(rid))):
        assert refused(AGENT, frame) == (rid, INVALID_REQUEST)


def test_an_agent_request_with_a_bad_session_id_is_answered_under_its_id() -> None:
    """A 5000-character string id is carried; refused for its session id, answered under it."""
    got = refused(AGENT, agent_request(LONG_STRING, b'{"sessionId":["S"],"path":"/w/a"}'))
    assert got == (LONG_STRING, INVALID_PARAMS)


def test_an_agent_request_with_an_invalid_shape_is_answered_under_its_id() -> None:
    frame = b'{"jsonrpc":"2.0","id":' + LONG_STRING + b',"method":"fs/read_text_file","params":7}'
    assert refused(AGENT, frame) == (LONG_STRING, INVALID_REQUEST)


def test_a_too_long_agent_request_is_answered_under_its_id() -> None:
    framer = LineFramer(64)
    line = agent_request(b"1.5", b'{"sessionId":"S","path":"' + b"x" * 500 + b'"}')
    (item,) = framer.feed(line + b"\n")
    assert isinstance(item, Oversize)
    assert refused(AGENT, item) == (b"1.5", INVALID_REQUEST)


def test_a_too_dense_agent_request_is_answered_under_its_id() -> None:
    keys = b",".join(b'"k%d":1' % i for i in range(330_000))
    frame = (
        b'{"jsonrpc": "2.0", "id": ' + BIG + b', "method": "fs/read_text_file", '
        b'"params": {"sessionId": "S", "path": "/w/a", "a": "method", ' + keys + b"}}"
    )
    assert refused(AGENT, frame) == (BIG, INVALID_REQUEST)


def test_agent_frames_that_are_not_requests_are_still_dropped() -> None:
    """A notification or a response has no one waiting: dropped, audited, never answered."""
    for frame in (
        b'{"jsonrpc":"2.0","method":"session/update","params":7}',
        b'{"jsonrpc":"2.0","id":1.5,"result":{}}',
        b'{"jsonrpc":"2.0","id":1,"method":"x"',  # not JSON: whose id is it?
    ):
        c = core()
        out = c.receive(AGENT, frame, 0.0)
        assert sends(out) == []
        assert c.statistics().dropped == 1
        assert_accounting(c)


def test_reply_id_keeps_tracked_ids_as_values() -> None:
    """An id read from the bytes that the proxy tracks comes back as its value (so the
    in-flight checks see it); others as their bytes."""
    dense = parse(b'{"jsonrpc":"2.0","id":"\\u0041","method":"m","params":{"n":' + DIGITS + b"}}")
    assert reply_id(dense) == "A"
    assert reply_id(parse(client_request(b"1.50"))) == RawId(b"1.50")
    assert reply_id(parse(client_request(b"true"))) is None
    assert reply_id(parse(client_request(b"true")), any_type=True) == RawId(b"true")


def test_a_large_client_request_naming_its_id_twice_is_answered_under_null() -> None:
    """Read through a view (over limits.dense_message_bytes): the repeated id is read as
    neither copy, and the request is still answered, under null."""
    text = b"x" * (2 << 20)
    for second in (b'"\\u0069d":2', b'"id":2'):
        frame = (
            b'{"jsonrpc":"2.0","id":1,"method":"session/prompt",' + second + b","
            b'"params":{"sessionId":"S","prompt":[{"type":"text","text":"' + text + b'"}]}}'
        )
        assert refused(CLIENT, frame) == (b"null", INVALID_REQUEST)
    once = b'{"jsonrpc":"2.0","id":1.5,"method":"session/prompt","params":{"sessionId":"S","t":"'
    assert refused(CLIENT, once + text + b'"}}') == (b"1.5", INVALID_REQUEST)


# ------------------------------------- ids read where the decoders could not help

DEEP = b"[" * 600 + b"]" * 600  # past limits.max_nesting_depth (512)


def test_a_client_request_nested_too_deep_is_answered_under_its_id() -> None:
    """Refused for a limit, like a too dense one: its top-level id is read from the
    bytes (a scan, whatever the nesting), not answered under null."""
    for rid in (b"5", b'"q"', BIG):
        frame = client_request(rid, b'{"sessionId":"S","prompt":' + DEEP + b"}")
        assert "nested deeper" in (parse(frame).reason or "")
        assert refused(CLIENT, frame) == (rid, INVALID_REQUEST)
    last = b'{"jsonrpc":"2.0","method":"session/prompt","params":{"a":' + DEEP + b'},"id":9}'
    assert refused(CLIENT, last) == (b"9", INVALID_REQUEST)
    twice = b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":' + DEEP + b'},"\\u0069d":2}'
    assert refused(CLIENT, twice) == (b"null", INVALID_REQUEST)


def test_an_agent_request_nested_too_deep_is_answered_under_its_id() -> None:
    """Dropped before, so the agent waited forever for its answer."""
    for rid in (b"7", b"1.5", b"true"):
        frame = agent_request(rid, b'{"sessionId":"S","path":"/w/a","x":' + DEEP + b"}")
        assert refused(AGENT, frame) == (rid, INVALID_REQUEST)


def test_an_untracked_id_in_a_frame_msgspec_refuses_is_read() -> None:
    """A lone surrogate escape in content (valid JSON; msgspec refuses it, the standard
    library decodes it): the untracked id is still read, toward either peer."""
    text = b'[{"type":"text","text":"\\ud800"}]'
    frame = client_request(BIG, b'{"sessionId":"S","prompt":' + text + b"}")
    assert refused(CLIENT, frame) == (BIG, INVALID_REQUEST)
    for rid in (b"1.5", HUGE, b"true"):
        frame = agent_request(rid, b'{"sessionId":"S","path":"/w/\\ud800"}')
        assert refused(AGENT, frame) == (rid, INVALID_REQUEST)
