"""Differential tests: the optimized parser, core and framer against frozen reference copies.

``_ref_jsonrpc`` / ``_ref_hold`` / ``_ref_engine`` / ``_ref_framing`` are the implementations of
commit 7c37d17, before the hot-path optimizations. Every frame must classify
to the same verdict (kind, id, method, params, reason, parse error,
ambiguity, malformed error, decoded body and its duplicate-key record, batch
items), and every event sequence must produce the same actions and counters.
"""

from __future__ import annotations

import itertools
import json
import random
from typing import Any

import _ref_engine
import _ref_framing
import _ref_jsonrpc
import attrs
from corekit import AGENT, CLIENT, open_session
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_engine import events_st, inputs, messages, render

from acp_proxy.config import Config, HoldConfig
from acp_proxy.core import jsonrpc
from acp_proxy.core.actions import Peer
from acp_proxy.core.engine import ProxyCore
from acp_proxy.core.framing import BOM, LineFramer

# ------------------------------------------------------------------ frame corpus

_DECISION = [
    "jsonrpc",
    "method",
    "id",
    "params",
    "result",
    "error",
    "sessionId",
    "update",
    "sessionUpdate",
    "state",
    "capabilities",
    "senderSessionId",
    "recipientSessionId",
]
_SNAKE = ["session_id", "session_update", "sender_session_id", "recipient_session_id"]
_OTHER = ["content", "text", "type", "_meta", "title", "x", ""]
_METHODS = ["session/update", "session/prompt", "session/new", "initialize", "_x/y", "", "a"]
_UPDATES = ["agent_message_chunk", "subagent_update", "state_update", "session_message", "x"]


def _leaf(rnd: random.Random) -> Any:
    return rnd.choice(
        [
            None,
            True,
            False,
            0,
            -1,
            2**70,
            1.5,
            "",
            "s0",
            "id",
            "state",
            '"id"',
            rnd.choice(_DECISION),
            rnd.randint(-5, 5),
        ]
    )


def _value(rnd: random.Random, depth: int) -> Any:
    r = rnd.random()
    if depth > 3 or r < 0.5:
        return _leaf(rnd)
    if r < 0.65:
        return [_value(rnd, depth + 1) for _ in range(rnd.randint(0, 3))]
    return _obj(rnd, depth + 1, _DECISION + _SNAKE + _OTHER)


def _obj(rnd: random.Random, depth: int, keys: list[str]) -> dict[str, Any]:
    return {rnd.choice(keys): _value(rnd, depth) for _ in range(rnd.randint(0, 4))}


def _message(rnd: random.Random) -> dict[str, Any]:
    msg: dict[str, Any] = {}
    if rnd.random() < 0.9:
        msg["jsonrpc"] = rnd.choice(["2.0", "2.0", "2.0", "1.0", 2])
    shape = rnd.random()
    if shape < 0.6:
        msg["method"] = rnd.choice([*_METHODS, 7, None])
        if rnd.random() < 0.5:
            msg["id"] = rnd.choice([1, "a", 2**80, None, 1.5, True, [1]])
        params: dict[str, Any] = {}
        if rnd.random() < 0.8:
            params["sessionId"] = rnd.choice(["s0", "c1", 3, None])
        if rnd.random() < 0.7:
            update: dict[str, Any] = {"sessionUpdate": rnd.choice([*_UPDATES, 7])}
            for key in rnd.sample(_DECISION + _SNAKE + _OTHER, rnd.randint(0, 4)):
                update[key] = _value(rnd, 3)
            params["update"] = update
        for key in rnd.sample(_SNAKE + _OTHER, rnd.randint(0, 2)):
            params[key] = _value(rnd, 2)
        msg["params"] = rnd.choice([params, params, params, [1], None, "x", 3])
    else:
        msg["id"] = rnd.choice([1, "a", 2**80, None, 1.5, True])
        if rnd.random() < 0.6:
            msg["result"] = _value(rnd, 1)
        if rnd.random() < 0.5:
            msg["error"] = rnd.choice(
                [{"code": 1, "message": "m"}, {"code": "1", "message": "m"}, {}, 3]
            )
    for key in rnd.sample(_OTHER + _DECISION, rnd.randint(0, 2)):
        msg.setdefault(key, _value(rnd, 1))
    return msg


def _duplicate_a_key(raw: bytes, rnd: random.Random) -> bytes:
    """Repeats one ``"key":`` member right after an object's opening brace."""
    opens = [i for i, b in enumerate(raw) if b == ord("{")]
    if not opens:
        return raw
    at = rnd.choice(opens) + 1
    key = rnd.choice(_DECISION + _SNAKE + _OTHER)
    if rnd.random() < 0.2:  # a key hiding behind an escape
        key = "\\u00" + format(ord(key[0]), "02x") + key[1:] if key else key
    member = f'"{key}":{json.dumps(_leaf(rnd))}'.encode()
    sep = b"" if raw[at : at + 1] == b"}" else b","
    return raw[:at] + member + sep + raw[at:]


def corpus_frame(rnd: random.Random) -> bytes:
    """One frame: a generated message, batch or oddity, often with a duplicated key."""
    r = rnd.random()
    if r < 0.1:
        value: Any = [_message(rnd) for _ in range(rnd.randint(0, 3))]
    elif r < 0.13:
        value = _value(rnd, 0)
    else:
        value = _message(rnd)
    if rnd.random() < 0.3:
        raw = render(value, rnd).encode("utf-8")
    else:
        raw = json.dumps(value, separators=(",", ":")).encode()
    for _ in range(rnd.choice([0, 0, 1, 1, 2])):
        raw = _duplicate_a_key(raw, rnd)
    r = rnd.random()
    if r < 0.03:
        raw = raw.replace(b"1.5", b"1e400", 1)
    elif r < 0.06 and raw:
        cut = rnd.randrange(len(raw))
        raw = raw[:cut] + raw[cut + 1 :]
    elif r < 0.08:
        raw = raw.replace(b"2.0", b"2.0\\ud800", 1)
    return raw


# ------------------------------------------------------------------ comparison


def _same_value(a: Any, b: Any) -> bool:
    if type(a).__name__ != type(b).__name__:
        return False
    if isinstance(a, dict):
        return (
            list(a) == list(b)
            and getattr(a, "dups", None) == getattr(b, "dups", None)
            and all(_same_value(a[k], b[k]) for k in a)
        )
    if isinstance(a, list):
        return len(a) == len(b) and all(map(_same_value, a, b))
    return bool(a == b) or (a != a and b != b)


def _verdict(m: Any) -> tuple[Any, ...]:
    return (
        m.raw,
        m.kind.value,
        type(m.id).__name__,
        m.id,
        m.method,
        m.reason,
        m.parse_error,
        m.ambiguous,
        m.malformed_error,
        m.session_id,
        [_verdict(i) for i in m.items],
    )


def assert_same_parse(raw: bytes) -> None:
    new = jsonrpc.parse(raw)
    ref = _ref_jsonrpc.parse(raw)
    assert _verdict(new) == _verdict(ref), raw
    assert _same_value(new.body, ref.body), raw
    assert _same_value(new.params, ref.params), raw


def test_parse_matches_the_reference_on_a_large_generated_corpus() -> None:
    """60,000 generated frames (a third with duplicated, escaped or snake_case keys)."""
    rnd = random.Random(20261130)
    ambiguous = 0
    for _ in range(60_000):
        raw = corpus_frame(rnd)
        assert_same_parse(raw)
        ambiguous += _ref_jsonrpc.parse(raw).ambiguous
    assert ambiguous > 1_000  # the corpus does exercise the guard


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=inputs)
def test_parse_matches_the_reference_on_fuzzed_input(raw: bytes) -> None:
    assert_same_parse(raw)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(msg=messages, rnd=st.randoms(use_true_random=False))
def test_parse_matches_the_reference_with_odd_spelling(msg: dict[str, Any], rnd: Any) -> None:
    raw = render(msg, rnd).encode("utf-8")
    assert_same_parse(raw)
    assert_same_parse(_duplicate_a_key(raw, rnd))


# ------------------------------------------------------------------ engine


def _run_both(
    evs: list[tuple[str, Peer, bytes]], on_expire: str
) -> None:  # pragma: no cover - helper
    cfg = Config(
        hold=HoldConfig(on_expire=on_expire, timeout_seconds=3.0, max_messages_per_session=3)
    )
    new, ref = ProxyCore(cfg), _ref_engine.ProxyCore(cfg)
    assert open_session(new, "P") == open_session(ref, "P")  # type: ignore[arg-type]
    for k, (kind, peer, raw) in enumerate(evs):
        now = float(k)
        if kind == "receive":
            a, b = new.receive(peer, raw, now), ref.receive(peer, raw, now)
        elif kind == "timer":
            a, b = new.handle_timer(now), ref.handle_timer(now)
        elif kind == "close":
            a, b = new.peer_closed(peer, now, "gone"), ref.peer_closed(peer, now, "gone")
        else:
            a, b = new.oversize(peer, 99, True, now), ref.oversize(peer, 99, True, now)
        assert a == b, (kind, peer, raw)
        assert attrs.asdict(new.statistics()) == attrs.asdict(ref.statistics())
        assert new.get_timer() == ref.get_timer()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(evs=st.lists(events_st, max_size=25), on_expire=st.sampled_from(["release", "drop"]))
def test_core_matches_the_reference(evs: list[tuple[str, Peer, bytes]], on_expire: str) -> None:
    """Same actions, counters and timer after every event."""
    _run_both(evs, on_expire)


def test_core_matches_the_reference_on_generated_traffic() -> None:
    """Long generated sessions: both peers, duplicates, subagents, holds, expiry."""
    rnd = random.Random(7)
    for _ in range(300):
        evs: list[tuple[str, Peer, bytes]] = []
        for _ in range(40):
            r = rnd.random()
            if r < 0.9:
                raw = corpus_frame(rnd)
                if rnd.random() < 0.5:
                    raw = raw.replace(b'"c1"', b'"P"').replace(
                        b'"s0"', rnd.choice([b'"P"', b'"C"'])
                    )
                evs.append(("receive", rnd.choice([CLIENT, AGENT, AGENT]), raw))
            elif r < 0.96:
                evs.append(("timer", CLIENT, b""))
            elif r < 0.98:
                evs.append(("oversize", rnd.choice([CLIENT, AGENT]), b""))
            else:
                evs.append(("close", rnd.choice([CLIENT, AGENT]), b""))
        _run_both(evs, rnd.choice(["release", "drop"]))


# ------------------------------------------------------------------ framer

_PIECES = [b"{}", b"\n", b"\r", b"\r\n", b"x", b"abcdefgh", BOM, b"\xef", b"\n\n", b"0123456789"]


@settings(max_examples=500, deadline=None)
@given(
    pieces=st.lists(st.sampled_from(_PIECES), max_size=30),
    cuts=st.lists(st.integers(0, 40), max_size=10),
    limit=st.integers(1, 12),
    bytearrays=st.booleans(),
)
def test_framer_matches_the_reference(
    pieces: list[bytes], cuts: list[int], limit: int, bytearrays: bool
) -> None:
    """Same frames (exact type), reports and buffered size after every chunk."""
    stream = b"".join(pieces)
    bounds = sorted({0, len(stream), *(c for c in cuts if c < len(stream))})
    new, ref = LineFramer(limit), _ref_framing.LineFramer(limit)
    for lo, hi in itertools.pairwise(bounds):
        chunk: bytes | bytearray = stream[lo:hi]
        if bytearrays:
            chunk = bytearray(chunk)
        got, want = new.feed(chunk), list(ref.feed(chunk))
        assert [(type(x).__name__, _attrs_or_bytes(x)) for x in got] == [
            (type(x).__name__, _attrs_or_bytes(x)) for x in want
        ]
        assert new.buffered_bytes == ref.buffered_bytes
    end_new, end_ref = list(new.close()), list(ref.close())
    assert [_attrs_or_bytes(x) for x in end_new] == [_attrs_or_bytes(x) for x in end_ref]


def _attrs_or_bytes(x: Any) -> Any:
    return x if isinstance(x, bytes) else attrs.asdict(x)
