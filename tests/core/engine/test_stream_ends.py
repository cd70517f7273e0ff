"""The ends of a stream (issue 15): an oversize request's own id, a held request's cancel."""

from __future__ import annotations

from typing import Any

import pytest
from support.corekit import (
    AGENT,
    CLIENT,
    assert_accounting,
    decoded,
    enc,
    events,
    notif,
    req,
    resp,
    sends,
)

from acp_proxy.config import Config, HoldConfig
from acp_proxy.core.engine import ProxyCore
from acp_proxy.core.wire.framing import LineFramer, Oversize
from acp_proxy.core.wire.jsonrpc import RawId
from acp_proxy.core.wire.jsonscan import request_id_from_prefix


def _permission(rid: Any, sid: str) -> bytes:
    return req(rid, "session/request_permission", {"sessionId": sid, "options": []})


def _cancel(rid: Any) -> bytes:
    return notif("$/cancel_request", {"requestId": rid})


# ------------------------------------------------------------ oversize request ids


@pytest.mark.parametrize(
    ("prefix", "rid"),
    [
        (b'{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"x":"', 7),
        (b'{ "jsonrpc" : "2.0" , "id" : "a\\"b" , "method" : "m" , "params" : [1, {', 'a"b'),
        (b'{"method":"m","params":{"id":1,"t":"abc', None),  # only a nested id
        (b'{"jsonrpc":"2.0","id":7,"params":{"method":"x","t":"', None),  # no top-level method
        (b'{"jsonrpc":"2.0","id":12', None),  # the id may go on: 123...
        (b'{"id":1,"method":"m","\\u0069d":2,"params":"', None),  # id twice (one escaped)
        (b'{"id":1,"result":{},"method":"m","params":"', None),  # a response
        (b'{"id":1.5,"method":"m","params":"', RawId(b"1.5")),  # untracked: its bytes
        (b'{"id":9007199254740993,"method":"m","params":"', RawId(b"9007199254740993")),
        (b'{"id":' + b"9" * 5000 + b',"method":"m","params":"', RawId(b"9" * 5000)),
        (b'{"id":true,"method":"m","params":"', None),  # a type JSON-RPC does not allow
        (b'{"id":null,"method":"m","params":"', None),
        (b'[{"id":1,"method":"m"},', None),  # a batch
        (b'{"jsonrpc":"2.0","method":"m","params":{"t":"x\\",\\"id\\":5,', None),
        (b'{"method":"m","params":"}}}]]],\\"id\\":3,\\"x\\":\\"', None),  # cut string: no keys
    ],
)
def test_request_id_is_read_from_a_bounded_prefix_only_when_unambiguous(
    prefix: bytes, rid: Any
) -> None:
    """The id of an oversize request is taken from its start only when the prefix shows it whole."""
    assert request_id_from_prefix(prefix) == rid


def test_oversize_client_request_is_answered_with_its_own_id() -> None:
    """The framer keeps the start of an oversize line; the core answers with the id read there."""
    framer = LineFramer(64)
    line = req(5, "session/prompt", {"sessionId": "S", "prompt": "x" * 500})
    (item,) = framer.feed(line + b"\n")
    assert isinstance(item, Oversize)
    core = ProxyCore(Config())
    assert request_id_from_prefix(item.prefix) == 5
    out = core.receive(CLIENT, item, 0.0)
    (answer,) = sends(out, CLIENT)
    assert decoded(answer)["id"] == 5
    assert decoded(answer)["error"]["code"] == -32600
    assert events(out) == ["oversize_message"]
    assert_accounting(core)


def test_oversize_request_reusing_an_id_in_flight_is_answered_with_null() -> None:
    """An id in flight is never answered for an oversize message (a later id could differ)."""
    core = ProxyCore(Config())
    assert sends(core.receive(CLIENT, req(5, "_x/slow", {}), 0.0), AGENT)
    out = core.receive(CLIENT, Oversize(10**6, True, b'{"jsonrpc":"2.0","id":5,"method":"x"'), 0.0)
    (answer,) = sends(out, CLIENT)
    assert decoded(answer)["id"] is None
    assert_accounting(core)


# ------------------------------------------------------- a held request's cancel


def _core(**hold: Any) -> ProxyCore:
    core = ProxyCore(Config(hold=HoldConfig(**hold)))
    out = core.receive(CLIENT, req(1, "session/new", {"cwd": "/", "mcpServers": []}), 0.0)
    assert sends(out, AGENT)
    return core


@pytest.mark.parametrize("together", [False, True], ids=["one_by_one", "one_read"])
def test_cancel_of_a_held_agent_request_is_held_behind_it(together: bool) -> None:
    """An agent $/cancel_request naming a request held for an unknown session waits behind
    that request and is released right after it, in order."""
    core = _core()
    ask, cancel = _permission("p1", "S"), _cancel("p1")
    if together:
        out = core.receive(AGENT, [ask, cancel], 0.1)
    else:
        out = core.receive(AGENT, ask, 0.1) + core.receive(AGENT, cancel, 0.1)
    assert sends(out, CLIENT) == []
    assert core.statistics().held == 2
    answer = resp(1, {"sessionId": "S"})
    out = core.receive(AGENT, answer, 0.2)
    assert sends(out, CLIENT) == [answer, ask, cancel]
    assert_accounting(core)


def test_cancel_of_an_unheld_or_unknown_request_passes_at_once() -> None:
    """A cancel naming a request already delivered (or no request at all) is not held."""
    core = _core()
    answer = resp(1, {"sessionId": "S"})
    core.receive(AGENT, answer, 0.1)
    ask = _permission("p2", "S")
    assert sends(core.receive(AGENT, ask, 0.2), CLIENT) == [ask]
    for cancel in (_cancel("p2"), _cancel("nope"), _cancel({"x": 1})):
        assert sends(core.receive(AGENT, cancel, 0.3), CLIENT) == [cancel]
    assert_accounting(core)


def test_held_request_and_its_cancel_expire_together_under_drop() -> None:
    """With on_expire = drop, the held request is answered to the agent and its cancel dropped
    (audited): the client never sees the cancel without the request."""
    core = _core(timeout_seconds=1.0, on_expire="drop")
    core.receive(AGENT, _permission("p1", "S"), 0.0)
    core.receive(AGENT, _cancel("p1"), 0.0)
    out = core.handle_timer(5.0)
    assert sends(out, CLIENT) == []
    (answer,) = sends(out, AGENT)
    assert decoded(answer)["id"] == "p1"
    assert events(out) == ["hold_expired", "request_dropped", "notification_dropped"]
    assert core.statistics().held == 0
    assert_accounting(core)


def test_cancel_frame_bytes_are_unchanged() -> None:
    """The held cancel is forwarded byte for byte (spacing and key order kept)."""
    core = _core()
    core.receive(AGENT, _permission("p1", "S"), 0.0)
    cancel = b'{ "params": {"requestId":"p1"}, "method":"$/cancel_request", "jsonrpc":"2.0" }'
    assert sends(core.receive(AGENT, cancel, 0.0), CLIENT) == []
    out = core.receive(AGENT, enc({"jsonrpc": "2.0", "id": 1, "result": {"sessionId": "S"}}), 0.1)
    assert sends(out, CLIENT)[-1] == cancel
