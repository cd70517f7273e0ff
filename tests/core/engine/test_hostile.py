"""Hostile input against the pure core: parser differentials, bypass attempts, bounds."""

from __future__ import annotations

import json
from functools import partial
from typing import Any

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
    reports,
    req,
    sends,
    update,
)

from acp_proxy.core.engine import ProxyCore
from acp_proxy.core.engine.agent import MAX_HELD_NESTING
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
    """Two state reports nested 900 deep: the second is a duplicate, the core never raises."""
    core = ProxyCore()
    open_session(core, "S")
    deep = _nested(900)
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


def test_a_recursion_error_inside_the_engine_refuses_the_message(monkeypatch: Any) -> None:
    """Defense in depth: a step that runs out of stack costs one message, not the proxy."""
    core = ProxyCore()
    open_session(core, "S")

    def too_deep(*args: Any) -> None:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(core.client, "handle", too_deep)
    monkeypatch.setattr(core.agent, "handle", too_deep)
    out = core.receive(CLIENT, req(7, "session/prompt", {"sessionId": "S", "prompt": []}), 0.0)
    [answer] = sends(out, CLIENT)
    assert decoded(answer)["id"] == 7
    assert "nested too deeply" in decoded(answer)["error"]["message"]
    out = core.receive(AGENT, req(8, "fs/read_text_file", {"sessionId": "S"}), 0.0)
    assert sends(out) == []
    assert [a.event for a in audits(out)] == ["invalid_message"]
    assert_accounting(core)


def test_a_frame_nested_near_the_limit_gets_one_verdict_on_every_path() -> None:
    """Whatever path and neighbours a deep frame comes with, its verdict is the same.

    The decoders count nesting from the caller's stack depth: every path must
    call them at the same depth, or a frame nested near the limit would be
    forwarded on one path and refused on another (found by a hostile review).
    """
    other = update("S", {"sessionUpdate": "agent_message_chunk"})
    spaced = b'{"jsonrpc": "2.0", "method": "n"}'
    for extra in (0, 37):
        for depth in range(850, 1000):
            deep = _nested(depth)
            for frame in (
                update("S", {"sessionUpdate": "x"})[:-2] + f',"c":{deep}}}}}'.encode(),
                update("U", {"sessionUpdate": "x"})[:-2] + f',"c":{deep}}}}}'.encode(),
                update("S", {"sessionUpdate": "x"})[:-3] + f',"c":{deep}}}}}}}'.encode(),
                f'{{"jsonrpc":"2.0","id":1,"method":"x","params":{{"a":{deep}}}}}'.encode(),
            ):
                for data in (frame, frame + b"\n" + other, frame + b"\n" + spaced):
                    lines = Lines(data)

                    def per_frame(core: ProxyCore, lines: Lines = lines) -> list[Any]:
                        out = []  # a loop, not a comprehension (its own stack frame)
                        for f in lines.frames():
                            out.extend(core.receive(AGENT, f, 0.0))
                        return out

                    results = []
                    for path in (
                        per_frame,
                        lambda c, lines=lines: c.receive(AGENT, lines.frames(), 0.0),
                        lambda c, lines=lines: c.receive(AGENT, lines, 0.0),
                    ):
                        core = ProxyCore()
                        open_session(core, "S")
                        out = _at_stack_depth(extra, partial(path, core))
                        results.append((one_send_per_message(out), core.statistics()))
                    assert results[1] == results[0], (extra, depth, data[:60])
                    assert results[2] == results[0], (extra, depth, data[:60])


def _deep_chunk(session_id: str, depth: int) -> bytes:
    """A session/update nesting ``depth`` levels in all (top, params and update count 3)."""
    inner = _nested(depth - 3)
    return update(session_id, {"sessionUpdate": "x"})[:-3] + f',"c":{inner}}}}}}}'.encode()


def test_only_messages_nested_at_most_the_hold_bound_are_held() -> None:
    """Held traffic is parsed again on release, deeper: deeper messages are refused up front."""
    core = ProxyCore()
    open_session(core, "P")
    at_bound = _deep_chunk("K", MAX_HELD_NESTING)
    too_deep = _deep_chunk("K", MAX_HELD_NESTING + 1)
    request = req(9, "fs/read_text_file", {"sessionId": "K", "x": json.loads(_nested(300))})
    assert events(core.receive(AGENT, at_bound, 0.0)) == ["held"]
    out = core.receive(AGENT, too_deep, 0.0)
    assert sends(out) == []
    assert [r.text for r in reports(out)] == [
        "agent sent a message nested deeper than 200 levels, too deep to hold, refused"
    ]
    assert events(out) == ["invalid_message"]
    out = core.receive(AGENT, request, 0.0)
    [answer] = sends(out, AGENT)
    assert decoded(answer)["id"] == 9
    assert events(out) == ["request_dropped"]
    assert core.pending_requests(AGENT) == 0
    out = core.receive(AGENT, announce("P", "K"), 0.0)
    assert sends(out, CLIENT)[1:] == [at_bound]  # released intact, right after
    assert_accounting(core)


def test_a_recursion_error_while_releasing_costs_only_that_message(monkeypatch: Any) -> None:
    """The announcement and the other released messages still go out, counted once."""
    core = ProxyCore()
    open_session(core, "S")
    held = [announce("G", "H"), chunk("G", "a"), chunk("G", "b")]
    for frame in held:
        core.receive(AGENT, frame, 0.0)
    apply = core.registry.apply

    def apply_or_fail(parent: str, view: Any, now: float) -> Any:
        if view.session_id == "H":
            raise RecursionError("maximum recursion depth exceeded")
        return apply(parent, view, now)

    monkeypatch.setattr(core.registry, "apply", apply_or_fail)
    release = announce("S", "G")
    out = core.receive(AGENT, release, 0.0)
    assert sends(out, CLIENT) == [release, held[1], held[2]]
    assert events(out).count("invalid_message") == 1
    assert_accounting(core)


def test_a_recursion_error_after_tracking_answers_and_forgets_the_request(
    monkeypatch: Any,
) -> None:
    """A request refused by the net is answered once and no longer counted in flight."""
    core = ProxyCore()
    open_session(core, "S")

    def fail_after_tracking(m: Any, now: float, out: list[Any]) -> None:
        core.ledger.track(AGENT, m, out)
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(core.agent, "handle", fail_after_tracking)
    out = core.receive(AGENT, req(8, "fs/read_text_file", {"sessionId": "S"}), 0.0)
    [answer] = sends(out, AGENT)
    assert decoded(answer)["id"] == 8
    assert events(out) == ["request_dropped"]
    assert core.pending_requests(AGENT) == 0

    def client_fails_after_tracking(m: Any, now: float, out: list[Any]) -> None:
        core.ledger.track(CLIENT, m, out)
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(core.client, "handle", client_fails_after_tracking)
    out = core.receive(CLIENT, req(9, "session/prompt", {"sessionId": "S", "prompt": []}), 0.0)
    [answer] = sends(out, CLIENT)
    assert decoded(answer)["id"] == 9
    assert core.pending_requests(CLIENT) == 0
    assert sends(core.peer_closed(AGENT, 1.0, "agent exited"), CLIENT) == []  # no second answer
    assert_accounting(core)
