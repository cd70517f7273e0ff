"""Hostile input against the pure core: parser differentials, bypass attempts, bounds."""

from __future__ import annotations

from functools import partial
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
    one_send_per_message,
    open_session,
    req,
    sends,
    update,
)

from acp_proxy.config import Config, HoldConfig, LimitsConfig
from acp_proxy.core.actions import Send
from acp_proxy.core.engine import ProxyCore
from acp_proxy.core.wire.framing import Lines


def _core_with_child() -> ProxyCore:
    core = ProxyCore()
    open_session(core, "P")
    core.receive(AGENT, announce("P", "C", capabilities=None), 0.0)
    return core


def test_snake_case_session_id_mutation_never_reaches_the_agent() -> None:
    """A mutation naming the child as ``session_id`` (read by pydantic SDKs) is refused."""
    core = _core_with_child()
    out = core.receive(CLIENT, req(1, "session/prompt", {"session_id": "C", "prompt": []}), 0.0)
    assert sends(out, AGENT) == []
    [answer] = sends(out, CLIENT)
    assert decoded(answer)["id"] == 1
    assert "error" in decoded(answer)
    out = core.receive(CLIENT, notif("session/cancel", {"session_id": "C"}), 0.0)
    assert sends(out, AGENT) == []
    assert audits(out, "notification_dropped")
    batch = b"[" + req(2, "session/prompt", {"sessionId": "P", "session_id": "C"}) + b"]"
    assert sends(core.receive(CLIENT, batch, 0.0), AGENT) == []
    assert_accounting(core)


def test_snake_case_session_id_cannot_smuggle_child_traffic_past_the_hold() -> None:
    """Agent traffic naming an unannounced child as ``session_id`` never reaches the client."""
    core = ProxyCore()
    open_session(core, "P")
    smuggled = enc(
        {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {
                "session_id": "C",
                "update": {"session_update": "agent_message_chunk", "content": {}},
            },
        }
    )
    out = core.receive(AGENT, smuggled, 0.0)
    assert sends(out, CLIENT) == []
    out = core.receive(AGENT, update("P", {"sessionUpdate": "x", "sender_session_id": "C"}), 0.0)
    assert sends(out, CLIENT) == []
    # ordinary camelCase traffic and extensions are untouched
    assert sends(core.receive(AGENT, chunk("P", "hi"), 0.0), CLIENT) == [chunk("P", "hi")]
    ext = notif("_vendor/x", {"session_id": "C"})
    assert sends(core.receive(AGENT, ext, 0.0), CLIENT) == [ext]
    assert_accounting(core)


def test_duplicate_content_key_in_announcement_still_registers_the_child() -> None:
    """A subagent_update with a repeated non-decision key (title) is still a child announcement."""
    core = ProxyCore()
    open_session(core, "P")
    raw = (
        b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"P","update":'
        b'{"sessionUpdate":"subagent_update","sessionId":"C","title":"a","title":"b"}}}'
    )
    out = core.receive(AGENT, raw, 0.0)
    assert sends(out, CLIENT) == [raw]  # forwarded byte for byte
    child = core.registry.child("C")
    assert child is not None
    assert child.title == "b"  # last wins, as JSON parsers read it
    out = core.receive(CLIENT, req(1, "session/prompt", {"sessionId": "C", "prompt": []}), 0.0)
    assert sends(out, AGENT) == []
    assert "mutation_rejected" in events(out)


def test_an_agent_batch_is_dropped_and_its_requests_answered() -> None:
    """An agent array reaches nobody: it changes no state, each request element whose id can
    be read is answered -32600 to the agent, and one audit record covers the batch."""
    core = ProxyCore()
    open_session(core, "P")
    elem = (
        b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"P","update":'
        b'{"sessionUpdate":"subagent_update","sessionId":"C"}}}'
    )
    ask = b'{"jsonrpc":"2.0","id":"r1","method":"session/request_permission","params":{}}'
    out = core.receive(AGENT, b"[" + elem + b"," + ask + b"]", 0.0)
    assert core.registry.child("C") is None
    assert sends(out, CLIENT) == []
    [answer] = sends(out, AGENT)
    assert (decoded(answer)["id"], decoded(answer)["error"]["code"]) == ("r1", -32600)
    [rec] = audits(out, "batch_refused")
    assert (rec.fields["count"], rec.fields["answered"]) == (2, 1)
    assert_accounting(core)


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def _at_stack_depth(extra_frames: int, call: Any) -> Any:
    """Runs ``call()`` ``extra_frames`` Python frames deeper (as a deep shell would)."""
    if extra_frames == 0:
        return call()
    return _at_stack_depth(extra_frames - 1, call)


def test_deeply_nested_state_reports_are_compared_without_recursion() -> None:
    """Two state reports nested near the limit: the second is a duplicate, the core never raises."""
    core = ProxyCore()
    open_session(core, "S")
    deep = _nested(500)
    raw = (
        '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":'
        f'{{"sessionUpdate":"state_update","state":{{"state":"running","x":{deep}}}}}}}}}'
    ).encode()
    assert sends(core.receive(AGENT, raw, 0.0)) == [raw]
    out = core.receive(AGENT, raw, 0.0)
    assert sends(out) == []
    assert [a.event for a in audits(out)] == ["duplicate_dropped"]
    assert_accounting(core)


def test_deep_batch_elements_and_meta_never_crash_the_core_at_any_stack_depth() -> None:
    """Nesting near the decoder's limit, from a deeper stack: refused or forwarded, never raised.

    msgspec accepts the frame, the standard library (a few frames deeper) may not:
    a batch element is then refused as too deep, a re-announcement keeps its bytes.
    """
    for depth in range(800, 1000):
        core = ProxyCore()
        open_session(core, "P")
        deep = _nested(depth)
        batch = f'[{{"jsonrpc":"2.0","method":"n","params":{{"a":{deep}}}}}]'.encode()
        first = announce("P", "K", state={"state": "running"})
        again = (
            update(
                "P",
                {
                    "sessionUpdate": "subagent_update",
                    "sessionId": "K",
                    "state": {"state": "running"},
                },
            )[:-3]
            + f',"_meta":{deep}}}}}}}'.encode()
        )
        for frame in (batch, first, again):
            for who in (AGENT, CLIENT):
                _at_stack_depth(100, partial(core.receive, who, frame, 0.0))
        assert_accounting(core)


def _deep_chunk(session_id: str, depth: int) -> bytes:
    """A session/update nesting ``depth`` levels in all (top, params and update count 3)."""
    inner = _nested(depth - 3)
    return update(session_id, {"sessionUpdate": "x"})[:-3] + f',"c":{inner}}}}}}}'.encode()


LIMIT = 512  # limits.max_nesting_depth by default


def _frames_nested(depth: int) -> list[bytes]:
    """Agent frames whose nesting is exactly ``depth``, in the shapes each decoder path takes."""
    return [
        _deep_chunk("S", depth),  # an envelope (a run member three levels down)
        _deep_chunk("U", depth),  # held: an unknown session
        update("S", {"sessionUpdate": "x"})[:-2] + f',"c":{_nested(depth - 2)}}}}}'.encode(),
        f'{{"jsonrpc":"2.0","method":"n","params":{{"a":{_nested(depth - 2)}}}}}'.encode(),
        f'{{"jsonrpc":"2.0","id":1,"method":"x","params":{{"a":{_nested(depth - 2)}}}}}'.encode(),
        f'{{"jsonrpc": "2.0", "method": "n", "params": {{"a": {_nested(depth - 2)}}}}}'.encode(),
    ]


def _verdicts(data: bytes, extra: int) -> list[Any]:
    """(sends, statistics) of ``data`` (lines) on every entry path, ``extra`` frames deep."""
    lines = Lines(data)

    def per_frame(core: ProxyCore) -> list[Any]:
        out = []
        for f in lines.frames():
            out.extend(core.receive(AGENT, f, 0.0))
        return out

    results = []
    for path in (
        per_frame,
        lambda c: c.receive(AGENT, lines.frames(), 0.0),
        lambda c: c.receive(AGENT, lines, 0.0),
    ):
        core = ProxyCore()
        open_session(core, "S")
        out = _at_stack_depth(extra, partial(path, core))
        results.append((one_send_per_message(out), core.statistics(), events(out)))
    return results


@pytest.mark.parametrize("extra", [0, 150, 300])
def test_nesting_limit_verdicts_never_depend_on_the_path_or_the_stack(extra: int) -> None:
    """limits.max_nesting_depth, not the call stack, decides: a frame nested exactly the
    limit passes, one level more is refused, and the same on every path, alone or in a
    run, whatever the stack depth the shell calls from (was: stack-depth arithmetic)."""
    other = update("S", {"sessionUpdate": "agent_message_chunk"})
    for depth in (LIMIT, LIMIT + 1, 700, 990, 5000):
        for frame in _frames_nested(depth):
            for data in (frame, frame + b"\n" + other):
                results = _verdicts(data, extra)
                assert results[1] == results[0], (extra, depth, data[:60])
                assert results[2] == results[0], (extra, depth, data[:60])
                sends_, stats, evs = results[0]
                if depth == LIMIT:
                    assert stats.invalid == 0, (depth, data[:60])
                else:
                    assert stats.invalid == 1, (depth, data[:60])
                    assert "invalid_message" in evs
                    assert frame not in sends_


@pytest.mark.parametrize("extra", [0, 300])
def test_a_client_request_nested_too_deep_gets_one_answer_at_any_depth(extra: int) -> None:
    """Found by decoding, by a decoder out of stack, or by scanning invalid bytes: the same
    answer (-32600 under the request's id, read by a scan at any depth, naming the limit)."""
    answers = set()
    for depth in (LIMIT + 1, 980, 3000):
        deep = _nested(depth - 2)
        for frame in (
            f'{{"jsonrpc":"2.0","id":7,"method":"x","params":{{"a":{deep}}}}}'.encode(),
            f'{{"jsonrpc":"2.0","id":7,"method":"x","params":{{"a":{deep[:-1]}}}}}'.encode(),
        ):
            core = ProxyCore()
            out = _at_stack_depth(extra, partial(core.receive, CLIENT, frame, 0.0))
            [answer] = sends(out, CLIENT)
            err = decoded(answer)
            assert err["id"] == 7
            assert err["error"]["code"] == -32600
            answers.add(err["error"]["message"])
            assert_accounting(core)
    assert answers == {"acp-proxy: nested deeper than 512 levels (limits.max_nesting_depth)"}


def test_a_lower_limit_applies_to_runs_and_held_messages() -> None:
    """max_nesting_depth from the config: a run member nested one level over it sends the
    run down the per-line path, which refuses that line only; held traffic within the
    limit is released intact."""
    core = ProxyCore(Config(limits=LimitsConfig(max_nesting_depth=16)))
    open_session(core, "P")
    ok, deep = _deep_chunk("P", 16), _deep_chunk("P", 17)
    chunk_ = update("P", {"sessionUpdate": "agent_message_chunk"})
    out = core.receive(AGENT, Lines(b"\n".join([chunk_, deep, ok])), 0.0)
    assert [a.data for a in one_send_per_message(out) if isinstance(a, Send)] == [chunk_, ok]
    assert events(out) == ["invalid_message"]
    held = _deep_chunk("K", 16)
    assert events(core.receive(AGENT, held, 0.0)) == ["held"]
    out = core.receive(AGENT, announce("P", "K"), 0.0)
    assert sends(out, CLIENT)[1:] == [held]
    assert_accounting(core)


@pytest.mark.parametrize("extra", [0, 300])
def test_a_large_frame_gets_the_nesting_verdict_a_small_one_gets(extra: int) -> None:
    """Padded past limits.dense_message_bytes (read through a view), a frame nested over the
    limit is still refused, and one at the limit still forwarded (found by a hostile review:
    a 600-deep prompt padded past 1 MiB reached the agent)."""
    pad = "A" * (1100 * 1024)
    for depth, refused in ((LIMIT, False), (LIMIT + 1, True), (600, True), (5000, True)):
        inner = _nested(depth - 2)
        for rid in (None, 5):
            head = '{"jsonrpc":"2.0",' + ("" if rid is None else f'"id":{rid},')
            frame = (head + f'"method":"x","params":{{"pad":"{pad}","a":{inner}}}}}').encode()
            core = ProxyCore()
            out = _at_stack_depth(extra, partial(core.receive, CLIENT, frame, 0.0))
            assert (sends(out, AGENT) == []) is refused, (depth, rid)
            if refused and rid is not None:
                [answer] = sends(out, CLIENT)
                assert "limits.max_nesting_depth" in decoded(answer)["error"]["message"]
            assert_accounting(core)


@pytest.mark.parametrize("kind", ["[1]", "{}", "7", "null", "true"])
def test_a_session_update_kind_that_is_not_a_string_never_raises(kind: str) -> None:
    """A non-string sessionUpdate sent down the full path (here by params._meta) is forwarded,
    held or dropped, never an exception out of the core (hostile review: TypeError,
    unhashable list, killed the proxy)."""
    core = ProxyCore()
    open_session(core, "S")
    for sid in ("S", "U"):
        frame = (
            f'{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"{sid}",'
            f'"_meta":{{}},"update":{{"sessionUpdate":{kind}}}}}}}'
        ).encode()
        core.receive(AGENT, frame, 0.0)
        core.receive(AGENT, [frame, frame], 0.0)
        core.receive(AGENT, Lines(frame + b"\n" + frame), 0.0)
    core.receive(AGENT, announce("S", "U"), 1.0)
    assert_accounting(core)


def test_session_ids_the_fast_path_forwards_are_not_refused_on_the_full_path() -> None:
    """A long id in a member the table does not name for that update kind is forwarded on
    every path; in a member it names, refused on every path (was: forwarded alone, dropped
    when the full path was forced)."""
    long = "X" * 2000
    ignored = [
        update("S", {"sessionUpdate": "agent_message_chunk", "sessionId": long}),
        update("S", {"sessionUpdate": "plan", "senderSessionId": long}),
        update("S", {"sessionUpdate": "plan", "content": [{"type": "session", "sessionId": long}]}),
    ]
    keyed = [
        update("S", {"sessionUpdate": "session_message", "senderSessionId": long}),
        update("S", {"sessionUpdate": "tool_call", "content": [{"sessionId": long}]}),
    ]
    for frames, forwarded in ((ignored, True), (keyed, False)):
        for frame in frames:
            meta = frame[:-2] + b',"_meta":{"x":1}}}'  # forces the full path
            for variant in (frame, meta):
                core = ProxyCore()
                open_session(core, "S")
                out = core.receive(AGENT, variant, 0.0)
                assert (sends(out, CLIENT) == [variant]) is forwarded, variant[:90]
                assert_accounting(core)


def test_a_forgotten_provisional_session_stays_refused() -> None:
    """An id released by hold expiry (never established) that the registry forgets when
    more expire is denied, not treated as unknown (hostile review: the client's prompt on it
    then reached the agent)."""
    core = ProxyCore(
        Config(limits=LimitsConfig(max_children=2), hold=HoldConfig(timeout_seconds=1))
    )
    open_session(core, "S")
    prompt = req(50, "session/prompt", {"sessionId": "C9", "prompt": []})
    core.receive(AGENT, chunk("C9", "a"), 0.0)
    core.handle_timer(5.0)  # released: provisional
    assert sends(core.receive(CLIENT, prompt, 6.0), AGENT) == []
    for i in range(5):  # more provisional ids push C9 out
        core.receive(AGENT, chunk(f"Z{i}", "a"), 10.0 + i)
        core.handle_timer(20.0 + i)
    again = req(51, "session/prompt", {"sessionId": "C9", "prompt": []})
    out = core.receive(CLIENT, again, 30.0)
    assert sends(out, AGENT) == []
    assert "mutation_rejected" in events(out)
    assert_accounting(core)
