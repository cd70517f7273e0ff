"""The engine's two run paths give the same result (issue 29).

``ProxyCore._run`` reads the content-chunk lines of a run with the compiled scanner
(``runs.fast_stretch``) where it is built, and decides the lines between them with
the pure-Python path (``_run_decoded``); without the scanner, ``_run_decoded`` decides
the whole run. Two cores, one of each, take the same runs here and must give the
same actions (every byte sent, every audit record), counters and registry; each is
also held to the frames one by one. ``tests/core/wire/test_chunkscan.py`` holds
the scanner to ``chunk_run`` line by line.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from support.corekit import (
    AGENT,
    CLIENT,
    announce,
    assert_accounting,
    chunk,
    one_send_per_message,
    open_session,
    req,
    resp,
    state_update,
    update,
)

import acp_proxy
from acp_proxy.config import Config, DedupConfig, LimitsConfig
from acp_proxy.core.engine import ProxyCore
from acp_proxy.core.wire import runs
from acp_proxy.core.wire.framing import Lines


@contextmanager
def _pure_python() -> Iterator[None]:
    """Cores built inside have no compiled scanner (as an install without a compiler)."""
    saved = runs.fast_stretch
    runs.fast_stretch = None
    try:
        yield
    finally:
        runs.fast_stretch = saved


def _open(core: ProxyCore) -> ProxyCore:
    open_session(core, "A")
    core.receive(CLIENT, req("new-B", "session/new", {"cwd": "/", "mcpServers": []}), 0.0)
    return core


def _cores(config: Config) -> tuple[ProxyCore, ProxyCore, ProxyCore]:
    """(compiled, pure Python, frame by frame) cores past ``session/new`` of A."""
    compiled = _open(ProxyCore(config))
    with _pure_python():
        pure = _open(ProxyCore(config))
        frames = _open(ProxyCore(config))
    return compiled, pure, frames


def _registry(core: ProxyCore) -> Any:
    return sorted(core.registry.known), core.statistics()


def test_the_compiled_path_is_the_one_taken() -> None:
    """The two cores below do differ in path (else the comparison proves nothing)."""
    compiled, pure, _ = _cores(Config())
    if acp_proxy.PURE_PYTHON:  # ACP_PROXY_PURE_PYTHON set: no core takes the scanner
        assert runs.fast_stretch is None
        assert compiled._stretch is None
        return
    assert runs.fast_stretch is not None
    assert compiled._stretch is runs.fast_stretch
    assert pure._stretch is None


_FRAMES = [
    chunk("A", "a"),
    chunk("B", "b"),
    chunk("K", "k"),
    chunk("L", "l"),
    announce("A", "K"),
    announce("K", "L"),
    announce("A", "K", state={"state": "idle"}),
    update("A", {"content": {"type": "text", "text": "t"}, "sessionUpdate": "agent_message_chunk"}),
    update("A", {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "x"}),
    update("A", {"sessionUpdate": "agent_thought_chunk", "content": [], "messageId": "m"}),
    update("K", {"sessionUpdate": "user_message_chunk", "content": {"a": [1, {"b": None}]}}),
    update("A", {"sessionUpdate": "agent_message_chunk", "content": "x", "_meta": {"k": 1}}),
    state_update("A", "running"),
    state_update("K", "running"),
    state_update("K", "idle"),
    resp("new-B", {"sessionId": "B"}),
    req(7, "session/request_permission", {"sessionId": "A", "toolCall": {"toolCallId": "t1"},
        "options": [{"optionId": "ok", "name": "OK", "kind": "allow_once"}]}),
    chunk("A", "crlf") + b"\r",
    b"",
    b"not json",
    b'[{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"A"}}]',
    chunk("A", "e\u00e9\U0001f600"),
    chunk("A", "x").replace(b'"x"', b'"\\ud800"'),
]  # fmt: skip


@settings(max_examples=400)
@given(
    runs_=st.lists(st.lists(st.sampled_from(_FRAMES), min_size=1, max_size=12), max_size=4),
    limits=st.sampled_from([{}, {"max_sessions": 2}, {"max_nesting_depth": 8}]),
    dedup=st.booleans(),
)
def test_any_runs_give_the_same_on_both_paths_and_frame_by_frame(
    runs_: list[list[bytes]], limits: dict[str, int], dedup: bool
) -> None:
    """Chunks of known, unknown and announced sessions, state reports, tool calls,
    requests, blank, broken and CRLF lines in any order, over several reads."""
    config = Config(limits=LimitsConfig(**limits), dedup=DedupConfig(state_reports=dedup))
    compiled, pure, frames = _cores(config)
    for t, lines in enumerate(runs_):
        data = Lines(b"\n".join(lines))
        now = 1.0 + t
        got = one_send_per_message(compiled.receive(AGENT, data, now))
        assert got == one_send_per_message(pure.receive(AGENT, data, now))
        expected: list[Any] = []
        for raw in data.frames():
            expected.extend(frames.receive(AGENT, raw, now))
        assert got == expected
        assert _registry(compiled) == _registry(pure) == _registry(frames)
    assert_accounting(compiled)


def test_a_long_chunk_stream_leaves_as_one_write_of_its_bytes() -> None:
    """The plain stream: every line a chunk of a known session, one send, unchanged."""
    compiled, _, _ = _cores(Config())
    compiled.receive(AGENT, resp("new-B", {"sessionId": "B"}), 0.0)
    data = b"\n".join(chunk("A" if i % 3 else "B", f"w{i}") for i in range(200))
    before = compiled.statistics().forwarded
    [send] = compiled.receive(AGENT, Lines(data), 0.0)
    assert send.data == data  # type: ignore[attr-defined]
    assert compiled.statistics().forwarded == before + 200
