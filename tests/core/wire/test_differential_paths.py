"""Differential suite against the core: no spelling lets a peer read what the proxy did not judge.

Frames are generated as bytes (duplicate keys, ``\\u`` escapes in keys and
values, snake_case aliases, ``_meta`` / ``field_meta`` carriers, whitespace,
invalid UTF-8 and encoded surrogates, ids of every type). Each is read the way
the official SDKs read it (:func:`py_sids`: ``json.loads`` of the bytes,
pydantic ``populate_by_name`` aliases, the router spreading ``_meta`` into the
handler's arguments; :func:`js_sids`: a non-fatal ``TextDecoder``, ``trim``,
``JSON.parse``, zod reading ``params.sessionId``) and must never reach the
peer when some reader finds the protected session in it. The verdict is the
same on every path into ``receive`` (a frame, a list of frames, a run of lines).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from acp.agent.router import build_agent_router
from acp.client.router import build_client_router
from hypothesis import given
from hypothesis import strategies as st
from support.corekit import (
    AGENT,
    CLIENT,
    announce,
    assert_accounting,
    chunk,
    one_send_per_message,
    open_session,
    sends,
)

from acp_proxy.core.actions import Send
from acp_proxy.core.engine import ProxyCore
from acp_proxy.core.wire.framing import Lines

# Children without grants, by the name the agent announced: plain, and the
# names a JavaScript reader makes of invalid bytes (U+FFFD).
CHILDREN = ("C", "C\ufffd", "\ufffd\ufffd\ufffd")
# What a frame writes for each child's id in place of the plain spelling.
SPELLINGS: dict[str, tuple[bytes, ...]] = {
    "C": (b'"C"', b'"\\u0043"', b'"\\u0043\\ud800"'),
    "C\ufffd": (b'"C\xff"', b'"C\xc0"', b'"C\\ufffd"'),
    "\ufffd\ufffd\ufffd": (
        b'"\xed\xa0\x80"',
        b'"\\ud800"',
        b'"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"',
    ),
}
SID_KEYS = (
    b'"sessionId"',
    b'"session\\u0049d"',
    b'"session_id"',
    b'"\\u0073ession_id"',
    b'"SESSION_ID"',
)


def _members(choices: list[tuple[bytes, bytes]]) -> bytes:
    return b",".join(k + b":" + v for k, v in choices)


@st.composite
def smuggled_params(draw: st.DrawFn) -> bytes:
    """``params`` object text naming a child through some carrier, beside the parent ``P``."""
    child = draw(st.sampled_from(CHILDREN))
    value = draw(st.sampled_from(SPELLINGS[child]))
    carrier = draw(st.sampled_from(("params", "meta", "field_meta", "dup_first", "dup_last")))
    key = draw(st.sampled_from(SID_KEYS))
    members: list[tuple[bytes, bytes]]
    if carrier == "params":
        members = [(key, value)]
        if key not in (b'"sessionId"', b'"session\\u0049d"'):
            members.insert(draw(st.integers(0, 1)), (b'"sessionId"', b'"P"'))
    elif carrier in ("meta", "field_meta"):
        meta_key = b'"_meta"' if carrier == "meta" else b'"field_meta"'
        inner = b"{" + _members([(key, value)]) + b"}"
        members = [(b'"sessionId"', b'"P"'), (meta_key, inner)]
    else:  # the same decision key twice
        pair = [(b'"sessionId"', b'"P"'), (key, value)]
        members = pair if carrier == "dup_last" else pair[::-1]
    members.append((b'"prompt"', b"[]"))
    sep = draw(st.sampled_from((b",", b" , ", b",\t", b",\r")))
    return b"{" + sep.join(k + b":" + v for k, v in members) + b"}"


@st.composite
def client_mutations(draw: st.DrawFn) -> bytes:
    params = draw(smuggled_params())
    method = draw(
        st.sampled_from((b'"session/prompt"', b'"session/cancel"', b'"session/c\\u0061ncel"'))
    )
    rid = draw(
        st.sampled_from((None, b"1", b'"x"', b"1.0", b"null", b"9007199254740993", b'"\\ud800"'))
    )
    head = b'{"jsonrpc":"2.0",'
    if rid is not None:
        head += b'"id":' + rid + b","
    return head + b'"method":' + method + b',"params":' + params + b"}"


def _json_reads(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _sids(body: Any, *, spread_meta: bool) -> set[str]:
    """Session ids an SDK handler could receive from ``body``'s params."""
    if not isinstance(body, dict) or not isinstance(body.get("params"), dict):
        return set()
    params = body["params"]
    out: set[str] = set()
    for key in ("sessionId", "session_id"):  # pydantic populate_by_name
        if isinstance(params.get(key), str):
            out.add(params[key])
    if spread_meta:  # router: kwargs.update(_meta) then func(**kwargs)
        for mkey in ("_meta", "field_meta"):
            meta = params.get(mkey)
            # only the exact Python name replaces the parameter; any other spelling
            # (sessionId, SESSION_ID) lands in the handler's **kwargs
            if isinstance(meta, dict) and isinstance(meta.get("session_id"), str):
                out.add(meta["session_id"])
    return out


def py_sids(raw: bytes) -> set[str]:
    """What the Python SDK reads: ``json.loads`` of bytes (surrogatepass), aliases, ``_meta``."""
    try:
        body = json.loads(raw)
    except ValueError:
        return set()
    return _sids(body, spread_meta=True)


def js_sids(raw: bytes) -> set[str]:
    """What the TypeScript SDK reads: non-fatal TextDecoder, trim, JSON.parse, ``params.sessionId``.

    A lone surrogate read from an escape is also counted as U+FFFD (what a
    JavaScript ``TextEncoder`` or ``Buffer`` round trip makes of it).
    """
    body = _json_reads(raw.decode("utf-8", "replace").strip())
    if not isinstance(body, dict) or not isinstance(body.get("params"), dict):
        return set()
    sid = body["params"].get("sessionId")
    if not isinstance(sid, str):
        return set()
    return {sid, sid.encode("utf-16", "surrogatepass").decode("utf-16", "replace")}


class _RecordingAgent:
    """An agent for the real Python SDK router: records the session each handler gets."""

    def __init__(self) -> None:
        self.seen: list[Any] = []

    async def cancel(self, session_id: Any, **_: Any) -> None:
        self.seen.append(session_id)

    async def prompt(self, prompt: Any, session_id: Any, **_: Any) -> dict[str, str]:
        self.seen.append(session_id)
        return {"stopReason": "end_turn"}


def _dispatch(raw: bytes, router: Any) -> None:
    """Hands the line ``raw`` to a real Python SDK router (validation errors: nothing)."""
    try:
        msg = json.loads(raw)  # what acp's stdio transport does with a line
    except ValueError:
        return

    async def run() -> None:
        with contextlib.suppress(Exception):  # a validation error: nothing dispatched
            await router(msg["method"], msg.get("params"), "id" not in msg)

    asyncio.run(run())


def sdk_sids(raw: bytes) -> list[Any]:
    """The session ids the real Python SDK (``acp`` 0.12.1) router hands its handlers."""
    agent = _RecordingAgent()
    _dispatch(raw, build_agent_router(agent))  # type: ignore[arg-type]
    return agent.seen


class _RecordingClient:
    """A client for the real Python SDK router: records the session ``session_update`` gets."""

    def __init__(self) -> None:
        self.seen: list[Any] = []

    async def session_update(self, session_id: Any, update: Any, **_: Any) -> None:
        self.seen.append(session_id)


def sdk_client_sids(raw: bytes) -> list[Any]:
    """Session ids the real Python SDK (``acp`` 0.12.1) client router gives ``session_update``."""
    client = _RecordingClient()
    _dispatch(raw, build_client_router(client))  # type: ignore[arg-type]
    return client.seen


def _core() -> ProxyCore:
    core = ProxyCore()
    open_session(core, "P")
    for child in CHILDREN:
        core.receive(AGENT, announce("P", child, capabilities=None), 0.0)
    return core


def _paths(source: Any, frame: bytes) -> list[tuple[list[Any], Any]]:
    """The actions and statistics of ``frame`` (beside an ordinary message) on each entry point."""
    other = chunk("P", "x") if source is AGENT else b'{"jsonrpc":"2.0","method":"_x"}'
    data = frame + b"\n" + other
    results = []
    for path in ("receive", "frames", "lines"):
        core = _core()
        out: list[Any] = []
        if path == "receive":
            for f in Lines(data).frames():
                out.extend(core.receive(source, f, 0.0))
        elif path == "frames":
            out = core.receive(source, Lines(data).frames(), 0.0)
        else:
            out = core.receive(source, Lines(data), 0.0)
        parts = one_send_per_message(out)
        assert_accounting(core)
        results.append((parts, core.statistics()))
    return results


@given(frame=client_mutations())
def test_no_client_spelling_of_a_child_mutation_reaches_the_agent(frame: bytes) -> None:
    """Whatever the spelling, no SDK reader finds a child in what the proxy forwards."""
    results = _paths(CLIENT, frame)
    assert results[1] == results[0]
    assert results[2] == results[0]
    for to_agent in sends([a for a in results[0][0] if isinstance(a, Send)], AGENT):
        readers = py_sids(to_agent) | js_sids(to_agent)
        assert not readers & set(CHILDREN), (frame, to_agent, readers)
        assert not set(sdk_sids(to_agent)) & set(CHILDREN), (frame, to_agent)
    # the proxy answered or dropped the frame: it is not lost silently
    stats = results[0][1]
    assert stats.forwarded + stats.answered + stats.dropped == stats.accepted


@st.composite
def agent_smuggles(draw: st.DrawFn) -> bytes:
    """Agent traffic naming an unannounced session ``C`` (or its U+FFFD twins) through a carrier."""
    params = draw(smuggled_params())
    update = b'{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}'
    params = params[:-1] + b',"update":' + update + b"}"
    return b'{"jsonrpc":"2.0","method":"session/update","params":' + params + b"}"


def _agent_core() -> ProxyCore:
    core = ProxyCore()
    open_session(core, "P")
    return core


@given(frame=agent_smuggles())
def test_no_agent_spelling_delivers_unannounced_child_traffic(frame: bytes) -> None:
    """Traffic a client SDK would read as an unannounced session's is never forwarded."""
    results = []
    for path in ("receive", "frames", "lines"):
        core = _agent_core()
        data = frame + b"\n" + chunk("P", "x")
        if path == "receive":
            out = [a for f in Lines(data).frames() for a in core.receive(AGENT, f, 0.0)]
        elif path == "frames":
            out = core.receive(AGENT, Lines(data).frames(), 0.0)
        else:
            out = core.receive(AGENT, Lines(data), 0.0)
        to_client = [p for s in sends(out, CLIENT) for p in s.split(b"\n")]
        results.append((to_client, core.statistics()))
        for sent in to_client:
            readers = py_sids(sent) | js_sids(sent)
            assert readers <= {"P"}, (frame, sent, readers)
            assert set(sdk_client_sids(sent)) <= {"P"}, (frame, sent)
    assert results[1] == results[0]
    assert results[2] == results[0]


def test_meta_session_id_carrier_is_refused_on_every_path() -> None:
    """The review's attack: ``_meta.session_id`` routes to the child in the Python SDK."""
    frame = (
        b'{"jsonrpc":"2.0","id":7,"method":"session/prompt",'
        b'"params":{"sessionId":"P","_meta":{"session_id":"C"},"prompt":[]}}'
    )
    for parts, _ in _paths(CLIENT, frame):
        to_agent = [a.data for a in parts if isinstance(a, Send) and a.to is AGENT]
        assert frame not in to_agent
        answer = [json.loads(a.data) for a in parts if isinstance(a, Send) and a.to is CLIENT]
        assert answer[0]["id"] == 7
        assert answer[0]["error"]["code"] == -32600
    # an extension method's params are its own business: forwarded untouched
    ext = b'{"jsonrpc":"2.0","method":"_vendor/x","params":{"_meta":{"session_id":"C"}}}'
    core = _core()
    assert sends(core.receive(CLIENT, ext, 0.0), AGENT) == [ext]
    # vendor _meta keys stay ordinary content, also on the agent's fast paths
    ok = (
        b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"P","update":'
        b'{"sessionUpdate":"agent_message_chunk"},"_meta":{"vendor.x":1,"traceparent":"t"}}}'
    )
    for parts, _ in _paths(AGENT, ok):
        assert Send(CLIENT, ok) in parts


def test_non_utf8_client_frames_are_parse_errors_and_agent_lines_are_dropped() -> None:
    """Invalid UTF-8, encoded surrogates and a per-line BOM are never decided on."""
    bad = (
        b'{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"\xed\xa0\x80"}}',
        b'{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"C\xff"}}',
        b'\xef\xbb\xbf{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"P"}}',
        '{"jsonrpc":"2.0","method":"n"}'.encode("utf-16-le"),
    )
    for frame in bad:
        for parts, stats in _paths(CLIENT, frame):
            assert frame not in [a.data for a in parts if isinstance(a, Send)]
            answers = [json.loads(a.data) for a in parts if isinstance(a, Send) and a.to is CLIENT]
            assert answers
            assert answers[0]["error"]["code"] == -32700
            assert answers[0]["id"] is None
            assert stats.invalid == 1
        for parts, stats in _paths(AGENT, frame):
            assert frame not in [a.data for a in parts if isinstance(a, Send)]
            assert stats.non_json_agent_lines == 1
            assert stats.dropped == 1


def test_lone_surrogate_escape_in_decision_fields_is_refused_in_content_forwarded() -> None:
    """``"\\ud800"`` is valid JSON: refused in a session id or method, forwarded in content."""
    refused = (
        b'{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"C\\udc00"}}',
        b'{"jsonrpc":"2.0","id":1,"method":"session/pro\\ud800mpt","params":{"sessionId":"P"}}',
    )
    for frame in refused:
        for parts, _ in _paths(CLIENT, frame):
            assert frame not in [a.data for a in parts if isinstance(a, Send)]
    content = (
        b'{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":'
        b'{"sessionId":"P","prompt":[{"type":"text","text":"\\ud800"}]}}'
    )
    for parts, _ in _paths(CLIENT, content):
        assert Send(AGENT, content) in parts
