"""Runs of lines decided in one decode: envelope_run, plain_run, update_kind."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_proxy.core.wire import runs
from acp_proxy.core.wire.runs import envelope_run, plain_run, update_kind

_ENV = b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{%s}}}'


def test_envelope_run_keeps_update_values_raw_and_the_bytes_identical() -> None:
    """Content inside the update is validated, not decoded; the run re-encodes byte for byte."""
    line = _ENV % b'"sessionUpdate":"agent_message_chunk","content":{"a" : [1, 2],"a":"\xc3\xa9"}'
    envs = envelope_run(line + b"\n" + line)
    assert envs is not None
    assert len(envs) == 2
    env = envs[0]
    assert (env.jsonrpc, env.method, env.params.sessionId) == ("2.0", "session/update", "S")
    assert bytes(env.params.update["content"]) == b'{"a" : [1, 2],"a":"\xc3\xa9"}'
    assert update_kind(env.params.update["sessionUpdate"]) == "agent_message_chunk"


@pytest.mark.parametrize(
    "odd",
    [
        _ENV % b'"sessionUpdate":"x","content":"\xff"',  # not UTF-8
        _ENV % b'"sessionUpdate":"x","content":"\xed\xa0\x80"',  # UTF-8 of a surrogate
        _ENV % b'"sessionUpdate":"x","sessionUpdate":"y"',  # repeated update key
        _ENV % b'"session\\u0055pdate":"x"',  # escaped update key
        _ENV % b'"sessionUpdate" :"x"',  # whitespace between keys
        _ENV % b'"sessionUpdate":"x","content":[1,]',  # invalid content
        b'{"jsonrpc":"2.0","method":"n","params":{"sessionId":"\\u0053","update":{}}}',
        b'{"jsonrpc":"2.0","method":"n","params":{"sessionId":"S","update":{}},"id":1}',
        b'{"jsonrpc":"2.0","method":"n","params":{"sessionId":"S","update":{},"x":1}}',
        b'{"jsonrpc":"2.0","method":"n","params":{"update":{},"sessionId":"S"}}',
        b'{"jsonrpc":"2.0","method":"n","method":"m","params":{"sessionId":"S","update":{}}}',
        b'{"jsonrpc":"2.0","id":1,"result":{}}',
        b'{"jsonrpc":"2.0","method":"n","params":{"sessionId":"S","update":[]}}',
        b"",
        # Integers past Python's 4300-digit limit: the frame-by-frame path refuses them.
        _ENV % (b'"sessionUpdate":"x","content":[' + b"7" * 4301 + b"]"),
        _ENV % (b'"sessionUpdate":-' + b"7" * 4301),
        b'{"jsonrpc":"2.0","method":"n","params":{"sessionId":"S","update":{},"_meta":{"n":'
        + b"7" * 4301
        + b"}}}",
    ],
)
def test_envelope_run_refuses_a_run_with_any_other_line(odd: bytes) -> None:
    """Any line not written exactly as its envelope re-encodes sends the run the slow way."""
    good = _ENV % b'"sessionUpdate":"x"'
    assert envelope_run(good) is not None
    for data in (odd, good + b"\n" + odd, odd + b"\n" + good):
        assert envelope_run(data) is None


def test_envelope_run_accepts_long_values_that_are_valid_json() -> None:
    """A long string or a long run of short numbers is not a big integer."""
    for value in (b'"' + b"7" * 9000 + b'"', b"[" + b",".join([b"7" * 40] * 300) + b"]"):
        assert envelope_run(_ENV % (b'"sessionUpdate":"x","content":' + value)) is not None


def test_update_kind_decodes_escapes_and_keeps_a_bounded_memo() -> None:
    """An escaped kind is read as every parser reads it; the memo never exceeds its bound."""
    [env] = envelope_run(_ENV % b'"sessionUpdate":"subagent\\u005fupdate"') or [None]
    assert env is not None
    assert update_kind(env.params.update["sessionUpdate"]) == "subagent_update"
    for i in range(runs._MAX_KINDS + 10):
        [e] = envelope_run(_ENV % (b'"sessionUpdate":"k%d"' % i)) or [None]
        assert e is not None
        assert update_kind(e.params.update["sessionUpdate"]) == f"k{i}"
        assert len(runs._KINDS) <= runs._MAX_KINDS
    [e] = envelope_run(_ENV % b'"sessionUpdate":[1]') or [None]
    assert e is not None
    assert update_kind(e.params.update["sessionUpdate"]) is None
    long_kind = "k" * 1000
    [e] = envelope_run(_ENV % b'"sessionUpdate":"%s"' % long_kind.encode()) or [None]
    assert e is not None
    assert update_kind(e.params.update["sessionUpdate"]) == long_kind
    assert all(len(key) <= runs._MAX_KIND_BYTES for key in runs._KINDS)


_CANONICAL = b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S"}}'


@pytest.mark.parametrize(
    "odd",
    [
        b'{"jsonrpc":"2.0","method":"n","params":{"sessionId":"S","sessionId":"U"}}',
        b'{"jsonrpc":"2.0","method":"n","params":{"session\\u0049d":"S"}}',
        b'{"jsonrpc": "2.0","method":"n"}',
        b'{"jsonrpc":"2.0","method":"n"}\r',
        b"",
        b'{"jsonrpc":"2.0","method":"n","params":{"v":1e5}}',
        b"not json",
    ],
)
def test_plain_run_refuses_a_run_with_any_non_canonical_line(odd: bytes) -> None:
    """One repeated or escaped key, whitespace, blank line or bad line anywhere: None."""
    assert plain_run(_CANONICAL) == [json.loads(_CANONICAL)]
    for data in (odd, _CANONICAL + b"\n" + odd, odd + b"\n" + _CANONICAL):
        assert plain_run(data) is None


@given(values=st.lists(st.dictionaries(st.text(max_size=4), st.integers() | st.text(max_size=4))))
def test_plain_run_decodes_canonical_lines_in_order(values: list[dict[str, Any]]) -> None:
    """Compact, UTF-8 JSON lines (as msgspec or JSON.stringify write them) decode in one call."""
    lines = [json.dumps(v, separators=(",", ":"), ensure_ascii=False).encode() for v in values]
    data = b"\n".join(lines)
    canonical = all(
        line == json.dumps(json.loads(line), separators=(",", ":"), ensure_ascii=False).encode()
        for line in lines
    )
    got = plain_run(data)
    if values and canonical:
        assert got == values
    else:
        assert got is None or got == values


_MEMBER = st.sampled_from(
    ['"x"', "[]", "[[1]]", "[[[[[[[1]]]]]]]", '{"a":{"b":{"c":{"d":{"e":{"f":1}}}}}}',
     "1" * 12, '"' + "y" * 20 + '"', "[" + "2" * 30 + "]"]
)  # fmt: skip


def _fits_all(values: list[bytes], max_depth: int) -> bool:
    """Every value too long to skip decodes, nested at most three levels less deep."""
    inner, long_value = runs._member_bounds(max_depth)
    for value in values:
        if len(value) <= long_value:
            continue
        try:
            decoded = json.loads(value)
        except ValueError:
            return False
        if runs.nested_deeper_than(decoded, inner):
            return False
    return True


@settings(max_examples=300)
@given(
    lines=st.lists(
        st.tuples(
            st.lists(st.tuples(st.sampled_from(["content", "a", "b"]), _MEMBER), max_size=3),
            st.one_of(st.none(), st.lists(_MEMBER, max_size=2)),
        ),
        min_size=1,
        max_size=6,
    ),
    max_depth=st.sampled_from([8, 10, 512]),
)
def test_envelope_run_refuses_exactly_the_runs_with_a_member_too_long_to_trust(
    lines: list[tuple[list[tuple[str, str]], list[str] | None]], max_depth: int
) -> None:
    """A run is refused when a member of an update or of ``_meta``, longer than a value
    that is surely within the limits, nests too deep for its level (issue 29: the
    longest member found in one C pass; each line checked as before)."""
    raws, values = [], []
    for members, meta in lines:
        upd = ",".join(f'"{k}{i}":{v}' for i, (k, v) in enumerate(members))
        params = '"sessionId":"S","update":{' + upd + "}"
        if meta is not None:
            params += ',"_meta":{' + ",".join(f'"m{i}":{v}' for i, v in enumerate(meta)) + "}"
        raws.append('{"jsonrpc":"2.0","method":"session/update","params":{' + params + "}}")
        values += [v.encode() for _, v in members] + [v.encode() for v in meta or []]
    got = envelope_run("\n".join(raws).encode(), max_depth)
    assert (got is not None) == _fits_all(values, max_depth)


@pytest.mark.parametrize("max_depth", [8, 9, 512])
def test_a_line_just_long_enough_to_hold_a_too_deep_member_is_checked(max_depth: int) -> None:
    """The shortest line that can hold a member too long to skip (empty strings, an
    empty key) still has it checked, in ``update`` and in ``_meta``: the bound on the
    line's length (``runs._MIN_ENVELOPE_BYTES``) is exact."""
    inner, long_value = runs._member_bounds(max_depth)
    deep = b"[" * (inner + 1) + b"]" * (inner + 1)  # nests one level too deep
    assert len(deep) == long_value + 1
    fine = b'"' + b"x" * (len(deep) - 2) + b'"'
    for value, ok in ((deep, False), (fine, True)):
        line = b'{"jsonrpc":"","method":"","params":{"sessionId":"","update":{"":%s}}}' % value
        assert len(line) == long_value + 1 + runs._MIN_ENVELOPE_BYTES
        assert (envelope_run(line, max_depth) is not None) is ok
        meta = b'{"jsonrpc":"","method":"","params":{"sessionId":"","update":{},"_meta":{"":%s}}}'
        assert (envelope_run(meta % value, max_depth) is not None) is ok
