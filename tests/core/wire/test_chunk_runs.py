"""The chunk fast path against the general ones: chunk_run and chunk_static.

Every verdict the bulk functions reach must be the one the per-message
predicates reach on the same line (:func:`envelope_uninspected` on the
envelope decode, :func:`uninspected` on the decoded body), whatever the run
holds; chunk_run accepts a line only when the general envelope decode does.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_proxy.core.wire import runs
from acp_proxy.core.wire.passthrough import (
    NEEDS,
    NEEDS_WITH_TOOLS,
    UPDATE_RULES,
    chunk_static,
    envelope_uninspected,
    run_sessions,
    uninspected,
)
from acp_proxy.core.wire.runs import CHUNK_KINDS, chunk_run, envelope_run

KNOWN = {"S", "T"}
_HEAD = b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":'
_TAIL = b"}}"


def _line(update: bytes, head: bytes = _HEAD) -> bytes:
    return head + update + _TAIL


FIRST = _line(b'{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}')
LAST = _line(
    b'{"content":{"type":"text","text":"hi"},"messageId":"m1","sessionUpdate":"agent_thought_chunk"}'
)


def test_no_chunk_kind_is_in_the_rule_table() -> None:
    """A chunk envelope's verdict may ignore its kind only while no table lists one."""
    assert {"agent_message_chunk", "agent_thought_chunk", "user_message_chunk"} == CHUNK_KINDS
    assert CHUNK_KINDS.isdisjoint(UPDATE_RULES)
    assert CHUNK_KINDS.isdisjoint(NEEDS)
    assert CHUNK_KINDS.isdisjoint(NEEDS_WITH_TOOLS)


def test_chunk_run_reads_both_spellings_and_keeps_content_raw() -> None:
    """Kind first (TypeScript SDK) and kind last (Python SDK), alternating: same values."""
    for data in (FIRST, LAST, FIRST + b"\n" + FIRST, LAST + b"\n" + LAST, FIRST, LAST):
        envs = chunk_run(data)
        assert envs is not None
        assert len(envs) == data.count(b"\n") + 1
        env = envs[0]
        assert (env.jsonrpc, env.method, env.params.sessionId) == ("2.0", "session/update", "S")
        assert bytes(env.params.update.content) == b'{"type":"text","text":"hi"}'
        assert env.params.update.sessionUpdate in CHUNK_KINDS


@pytest.mark.parametrize(
    "odd",
    [
        FIRST + b"\n" + LAST,  # one spelling per run (each is exact; a mix goes the general way)
        _line(b'{"sessionUpdate":"tool_call","content":[]}'),  # a kind the table lists
        _line(b'{"sessionUpdate":"plan","content":[]}'),  # another kind
        _line(b'{"sessionUpdate":"agent\\u005fmessage_chunk","content":1}'),  # escaped kind
        _line(b'{"sessionUpdate":"agent_message_chunk"}'),  # no content
        _line(b'{"sessionUpdate":"agent_message_chunk","content":1,"session_id":"C"}'),
        _line(b'{"sessionUpdate":"agent_message_chunk","content":1,"_meta":{}}'),
        _line(b'{"sessionUpdate":"agent_message_chunk","content":1,"content":2}'),
        _line(
            b'{"sessionUpdate":"agent_message_chunk","sessionUpdate":"agent_message_chunk","content":1}'
        ),
        _line(b'{"sessionUpdate":"agent_message_chunk", "content":1}'),
        _line(b'{"sessionUpdate":"agent_message_chunk","content":1,"messageId":7}'),
        _line(b'{"content":1,"sessionUpdate":"agent_message_chunk","messageId":"m"}'),  # order
        _line(b'{"sessionUpdate":"agent_message_chunk","content":"\xff"}'),
        _line(b'{"sessionUpdate":"agent_message_chunk","content":[' + b"7" * 4301 + b"]}"),
        _line(
            b'{"sessionUpdate":"agent_message_chunk","content":' + b"[" * 600 + b"]" * 600 + b"}"
        ),
        FIRST.replace(b'"2.0"', b'"1.0"'),
        FIRST.replace(b"session/update", b"_x/update"),
        FIRST.replace(b'"S"', b'"\\u0053"'),
        FIRST[:-1] + b',"_meta":{}}',
        FIRST[:-1] + b',"sessionId":"C"}',
        FIRST[:-1] + b',"id":1}',
        b"",
    ],
)
def test_chunk_run_refuses_anything_but_exact_chunk_envelopes(odd: bytes) -> None:
    """Any other line, spelling or value the decode does not pin sends the run the general way."""
    assert chunk_run(odd) is None
    assert chunk_run(FIRST + b"\n" + odd) is None


def test_long_content_that_is_valid_json_stays_on_the_chunk_path() -> None:
    """A long string or a long run of short numbers is neither a big integer nor deep."""
    for value in (b'"' + b"7" * 9000 + b'"', b"[" + b",".join([b"7" * 40] * 300) + b"]"):
        data = _line(b'{"sessionUpdate":"agent_message_chunk","content":' + value + b"}")
        assert chunk_run(data) is not None
        assert chunk_run(data, max_depth=4) is not None
    deep = b"[" * 40 + b"]" * 40
    data = _line(b'{"sessionUpdate":"agent_message_chunk","content":' + deep + b"}")
    data = b"\n".join([data] * 40)  # long enough that no length bound clears it
    assert chunk_run(data, max_depth=64) is not None
    assert chunk_run(data, max_depth=40) is None  # 40 levels in a member 3 levels down


# --- the differential property: bulk verdicts equal per-line verdicts -----------------

_KINDS = sorted(CHUNK_KINDS) + sorted(UPDATE_RULES) + ["plan", "x"]
_SIDS = ["S", "T", "U", "C"]


@st.composite
def update_obj(draw: st.DrawFn) -> dict[str, Any]:
    """An update: usually chunk-shaped (either order), sometimes with other members."""
    kind = draw(st.sampled_from(_KINDS))
    content = draw(st.sampled_from([{"type": "text", "text": "a"}, [], 1, "s", None]))
    pairs: list[tuple[str, Any]] = [("sessionUpdate", kind), ("content", content)]
    if draw(st.booleans()):
        pairs.append(("messageId", draw(st.sampled_from(["m", None, 3]))))
    extra = draw(st.sampled_from([None, "sessionId", "session_id", "_meta", "background", "x"]))
    if extra is not None and draw(st.integers(0, 3)) == 0:
        pairs.append((extra, draw(st.sampled_from(["C", {"a": 1}, 2]))))
    if draw(st.booleans()):
        pairs.reverse()  # kind last, as pydantic writes it
    return dict(pairs)


@st.composite
def chunkish_line(draw: st.DrawFn) -> bytes:
    """A canonical ``session/update`` line, or one with another method or ``_meta``."""
    params: dict[str, Any] = {
        "sessionId": draw(st.sampled_from(_SIDS)),
        "update": draw(update_obj()),
    }
    if draw(st.integers(0, 5)) == 0:
        params["_meta"] = draw(st.sampled_from([{}, {"update": 1}, {"k": [1]}]))
    method = draw(st.sampled_from(["session/update"] * 4 + ["_x/y", "session/cancel"]))
    body = {
        "jsonrpc": draw(st.sampled_from(["2.0"] * 6 + ["1.0"])),
        "method": method,
        "params": params,
    }
    return json.dumps(body, separators=(",", ":")).encode()


@given(
    lines=st.lists(chunkish_line(), min_size=1, max_size=10),
    same=st.booleans(),
    tools=st.booleans(),
)
def test_bulk_verdicts_equal_the_per_line_predicates(
    lines: list[bytes], same: bool, tools: bool
) -> None:
    """chunk_static with the known sessions flags exactly the lines the per-line predicates do."""
    if same:
        lines = [lines[0]] * len(lines)  # whole runs of one spelling reach the chunk path
    needs = NEEDS_WITH_TOOLS if tools else NEEDS
    data = b"\n".join(lines)
    expected = [
        j for j, line in enumerate(lines) if not uninspected(json.loads(line), KNOWN, needs)
    ]
    envs = envelope_run(data)
    if envs is not None:
        per_env = [j for j, e in enumerate(envs) if not envelope_uninspected(e, KNOWN, needs)]
        assert per_env == expected
    chunks = chunk_run(data)
    if chunks is not None:
        assert envs is not None  # nothing the general decode refuses
        assert run_sessions(chunks) == run_sessions(envs)
        assert _inspected(chunk_static(chunks, needs), run_sessions(chunks)) == expected


def _inspected(static: list[bool] | None, sids: list[str], known: set[str] = KNOWN) -> list[int]:
    """The lines a static verdict and the known sessions send to the engine, as ProxyCore._run."""
    return [j for j, sid in enumerate(sids) if not ((static is None or static[j]) and sid in known)]


def test_a_table_listing_a_chunk_kind_is_still_obeyed() -> None:
    """chunk_static judges each line when ``needs`` lists a chunk kind."""
    data = b"\n".join([FIRST, FIRST.replace(b'"S"', b'"T"')])
    envs = chunk_run(data)
    assert envs is not None
    sids = run_sessions(envs)
    assert chunk_static(envs) is None
    assert chunk_static(envs, {"agent_message_chunk": None}) == [False, False]
    assert chunk_static(envs, {"agent_message_chunk": "content"}) == [False, False]
    assert chunk_static(envs, {"agent_message_chunk": "messageId"}) == [True, True]
    assert _inspected(None, sids, {"T"}) == [0]


def test_the_spelling_hint_never_changes_a_verdict() -> None:
    """Whichever spelling was tried first, the same runs are accepted and refused."""
    seen = []
    for data in (FIRST, LAST, LAST, FIRST, FIRST + b"\n" + LAST, LAST):
        seen.append(chunk_run(data) is not None)
        runs._CHUNK_DECODERS.reverse()
        assert (chunk_run(data) is not None) == seen[-1]
    assert seen == [True, True, True, True, False, True]
