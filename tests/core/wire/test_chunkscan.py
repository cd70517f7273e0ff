"""The compiled scanner of content-chunk lines (``_chunkscan.fast_stretch``) against
the pure-Python run path it shortens (issue 29).

Its contract: a line it passes is one :func:`~acp_proxy.core.wire.runs.chunk_run`
accepts, of a session in ``known``, with a content-chunk kind (so the engine would
forward it unchanged); it may refuse more. Held here three ways: every line it
passes is checked against ``chunk_run`` (hostile spellings and byte mutations
included); the clean lines real SDKs write are passed (else the fast path would
be dead code); and its offsets over a run agree with a model built from
``chunk_run``. ``tests/core/engine/test_compiled_run_path.py`` holds the two run
paths of the engine together.
"""

from __future__ import annotations

import binascii
import gc
import json
import shutil
import sys
import sysconfig
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import acp_proxy
from acp_proxy.core.wire import runs
from acp_proxy.core.wire.nesting import MAX_NESTING_DEPTH
from acp_proxy.core.wire.passthrough import NEEDS, chunk_uninspected
from acp_proxy.core.wire.runs import CHUNK_KINDS, chunk_depth, chunk_run

WIRE = Path(runs.__file__).parent


def _compiler_present() -> bool:
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    headers = Path(sysconfig.get_paths()["include"]) / "Python.h"
    return shutil.which(cc) is not None and headers.exists()


def test_the_extension_is_built_wherever_a_compiler_is() -> None:
    """An install with a C compiler and Python's headers builds the scanner (else the
    suite would pass on the pure-Python path alone, the compiled one untested)."""
    assert _compiler_present(), "no C compiler: the tests of the scanner below fail too"
    from acp_proxy.core.wire import _chunkscan

    if acp_proxy.PURE_PYTHON:  # ACP_PROXY_PURE_PYTHON set: the built scanner is unused
        assert runs.fast_stretch is None
    else:
        assert runs.fast_stretch is _chunkscan.fast_stretch


def test_the_built_extension_is_of_this_source() -> None:
    """A build older than ``_chunkscan.c`` is caught (rebuild: ``pip install -e .``)."""
    from acp_proxy.core.wire import _chunkscan

    crc = f"{binascii.crc32((WIRE / '_chunkscan.c').read_bytes()):08x}"
    assert crc == _chunkscan.SOURCE_CRC32, "stale build: run `pip install -e .`"


@pytest.mark.parametrize(
    ("value", "pure"),
    [("", False), ("0", False), ("false", False), (" Off ", False), ("1", True), ("yes", True)],
)
def test_the_kill_switch_reads_its_value(value: str, pure: bool) -> None:
    """``ACP_PROXY_PURE_PYTHON=0`` (or false, no, off, empty) keeps the compiled path."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, ACP_PROXY_PURE_PYTHON=value)
    code = "import acp_proxy; print(acp_proxy.PURE_PYTHON)"
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.stdout.strip() == str(pure)


def test_a_build_of_another_source_is_not_used() -> None:
    """A build whose CRC-32 is not its source's (an edited ``.c`` not rebuilt, or an
    old build left in ``build/``) gives the pure-Python path, and says why."""
    if acp_proxy.PURE_PYTHON:
        assert runs._compiled_scanner() == (None, "pure Python (ACP_PROXY_PURE_PYTHON is set)")
        return
    from acp_proxy.core.wire import _chunkscan

    assert acp_proxy.source_crc32("core/wire/_chunkscan.c") == _chunkscan.SOURCE_CRC32
    assert runs._compiled_scanner()[0] is _chunkscan.fast_stretch
    assert runs._compiled_scanner("core/wire/absent.c")[0] is _chunkscan.fast_stretch
    other = "core/wire/runs.py"  # a file that is there, of another CRC-32
    scanner, why = runs._compiled_scanner(other)
    assert scanner is None
    assert why == f"pure Python (the C extension is not of acp_proxy/{other}: reinstall)"
    assert runs.RUN_PATH == "compiled (acp_proxy.core.wire._chunkscan)"


def _scanner() -> Any:
    """The compiled scanner: the tests below need it built (``pip install -e .`` with a
    C compiler, as ``.ci/run`` has; the pure-Python path is tested by the rest of the
    suite and ``test_compiled_run_path.py``)."""
    from acp_proxy.core.wire import _chunkscan

    return _chunkscan.fast_stretch


PREFIX = b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":'


def _line(sid: bytes, members: list[tuple[bytes, bytes]], prefix: bytes = PREFIX) -> bytes:
    body = b",".join(k + b":" + v for k, v in members)
    return prefix + sid + b',"update":{' + body + b"}}}"


def _chunk(sid: str, content: Any, kind: str = "agent_message_chunk", **extra: Any) -> bytes:
    """A chunk line as the TypeScript SDK writes it (kind first)."""
    update = {"sessionUpdate": kind, "content": content, **extra}
    return msgspec.json.encode(
        {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {"sessionId": sid, "update": update},
        }
    )


def _passes(line: bytes, known: set[str], max_depth: int = MAX_NESTING_DEPTH) -> bool:
    count, stop, _ = _scanner()(line, 0, known, chunk_depth(max_depth))
    assert (count == 1) == (stop == len(line) + 1)
    return count == 1


def _assert_sound(line: bytes, max_depth: int = MAX_NESTING_DEPTH) -> None:
    """Whatever the scanner passes, chunk_run accepts, with that session."""
    envs = chunk_run(line, max_depth)
    sid = envs[0].params.sessionId if envs else "s"
    known = {sid}
    assert not _passes(line, set(), max_depth)  # no session known: nothing passes
    if _passes(line, known, max_depth):
        assert envs is not None, line
        assert len(envs) == 1
        assert envs[0].params.update.sessionUpdate in CHUNK_KINDS
        assert chunk_uninspected(envs[0], known, NEEDS)
        assert not _passes(line, {sid + "x"}, max_depth)  # it is this session that passed


# --- strategies: JSON values, their spellings, and chunk lines around the template ---

_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(10**30), 10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
_values = st.recursive(
    _scalars,
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4), c, max_size=3),
    max_leaves=10,
)


def _spell(value: Any, how: int) -> bytes:
    if how == 0:
        return msgspec.json.encode(value)
    if how == 1:
        return json.dumps(value).encode()  # ", " and ": " between tokens, \\u escapes
    return json.dumps(value, ensure_ascii=False, separators=(" , ", " :\t")).encode()


_sid_text = st.text(max_size=6) | st.sampled_from(
    ["s0", "", "a b", 'q"', "\\", "\u00e9", "\U0001f600"]
)
_kinds = st.sampled_from(sorted(CHUNK_KINDS)) | st.sampled_from(
    ["tool_call", "agent_message", "Agent_message_chunk", "agent_message_chunk "]
)
_keys = st.sampled_from(
    [b'"sessionUpdate"', b'"content"', b'"messageId"', b'"_meta"', b'"session\\u0055pdate"',
     b'"content" ', b'"contents"']
)  # fmt: skip
_prefixes = st.sampled_from(
    [PREFIX, PREFIX.replace(b'"2.0"', b'"2.1"'), PREFIX.replace(b"update", b"updatE", 1),
     PREFIX.replace(b":", b": ", 1), b'{"jsonrpc":"2.0","id":1,"method":"session/update",'
     b'"params":{"sessionId":', PREFIX.replace(b'"sessionId"', b'"session_id"')]
)  # fmt: skip


#: a string spelled with escapes, good and bad: surrogates alone, in pairs, reversed
_escaped = st.lists(
    st.sampled_from(
        [b"\\ud800", b"\\udbff", b"\\udc00", b"\\udfff", b"\\u0000", b"\\u00e9", b"\\uD83D",
         b"\\uDE00", b"\\uzzzz", b"\\u12", b"\\x41", b"\\/", b"\\n", b"\\\\", b'\\"', b"a",
         b"\xc3\xa9", b"\xed\xbf\xbf", b"\x7f", b"\t"]
    ),
    max_size=5,
).map(lambda parts: b'"' + b"".join(parts) + b'"')  # fmt: skip


@st.composite
def _lines(draw: st.DrawFn) -> bytes:
    """A chunk line, often exact, often spelled or built a little differently."""
    sid = (
        msgspec.json.encode(draw(_sid_text))
        if draw(st.booleans())
        else json.dumps(draw(_sid_text)).encode()
    )
    kind = msgspec.json.encode(draw(_kinds))
    how = draw(st.integers(0, 3))
    content = draw(_escaped) if how == 3 else _spell(draw(_values), how)
    members = [(b'"sessionUpdate"', kind), (b'"content"', content)]
    if draw(st.booleans()):
        mid = draw(st.sampled_from([b"null", b'"m1"', b"1", b'"m\\n"', b'""', b'"\xc3\xa9"']))
        members.append((b'"messageId"', mid))
    if draw(st.booleans()):
        members.append(members.pop(0))  # kind last, as the Python SDK writes it
    if draw(st.integers(0, 4)) == 0:
        members.insert(draw(st.integers(0, len(members))), (draw(_keys), content))
    if draw(st.integers(0, 4)) == 0:
        members = draw(st.permutations(members))
    line = _line(sid, members, draw(_prefixes) if draw(st.integers(0, 3)) == 0 else PREFIX)
    for _ in range(max(draw(st.integers(-3, 2)), 0)):  # byte mutations, in 2 lines of 6
        at = draw(st.integers(0, len(line)))
        byte = bytes([draw(st.integers(0, 255))])
        how = draw(st.integers(0, 2))
        line = (
            line[:at] + byte + line[at + 1 :]
            if how == 0
            else line[:at] + byte + line[at:]
            if how == 1
            else line[:at] + line[at + 1 :]
        )
    return line.replace(b"\n", b" ")  # one line


@settings(max_examples=3000, suppress_health_check=[HealthCheck.too_slow])
@given(_lines())
@example(_chunk("s", "x").replace(b'"x"', b'"\\ud800"'))  # a lone surrogate escape
@example(_chunk("s", "x").replace(b'"x"', b'"\\udc00\\ud800"'))  # in the wrong order
@example(_chunk("s", "x").replace(b'"x"', b'"\\udc00"'))  # a lone low one
@example(_chunk("s", "x").replace(b'"x"', b'"\\ud800\\u0041"'))  # a high one, then no low one
@example(_chunk("s", "x").replace(b'"x"', b'"\\x41"'))  # an escape JSON does not have
@example(_chunk("s", "x").replace(b'"x"', b'"\xe0\x80\xaf"'))  # an overlong three-byte form
@example(_chunk("s", "x").replace(b'"x"', b'"\xed\xa0\x80"'))  # a surrogate in UTF-8
@example(_chunk("s", "x").replace(b'"x"', b'"\xc0\xaf"'))  # an overlong form
@example(_chunk("s", "x").replace(b'"x"', b'"\xf4\x90\x80\x80"'))  # past U+10FFFF
@example(_chunk("s", "x").replace(b'"x"', b"1e999"))  # past the double range
@example(_chunk("s", ["x" * 1100, 1]).replace(b",1]", b",1e999]"))  # in a long value: decoded
@example(_chunk("s", "x").replace(b'"x"', b"1" * 5000))  # past the integer digit limit
@example(_chunk("s", "x").replace(b'"x"', b"[1,]"))  # a trailing comma
@example(_chunk("s", "x").replace(b'"x"', b"01"))  # a leading zero
@example(_chunk("s", "x").replace(b'"x"', b' "x"'))  # whitespace before the value
@example(_chunk("s", "x").replace(b'"x"', b'"x" '))  # and after it
@example(_line(b'"s"', [(b'"content"', b' "x"'), (b'"sessionUpdate"', b'"agent_message_chunk"')]))
@example(_chunk("s", "x").replace(b'"x"', b'"a\x01"'))  # a control character
@example(_chunk("s", "x") + b"\r")  # a carriage return after the line
@example(_chunk("s\u00e9", "x").replace(b"s\xc3\xa9", b"s\xc3"))  # a cut UTF-8 sequence
@example(_chunk("s", "x").replace(b'"s"', b'"s\\u0000"'))  # an escape in the session
def test_every_line_the_scanner_passes_chunk_run_accepts(line: bytes) -> None:
    """Soundness: over hostile spellings, escapes, UTF-8 and byte mutations."""
    _assert_sound(line)


@settings(max_examples=1000)
@given(st.binary(max_size=300), st.integers(0, 40))
def test_arbitrary_bytes_never_pass_unless_chunk_run_accepts(data: bytes, depth: int) -> None:
    """Random bytes (the prefix given half the time) neither crash it nor pass wrongly."""
    line = (PREFIX + data if depth % 2 else data).replace(b"\n", b"")
    _assert_sound(line, depth)


def _nested(depth: int, leaf: Any = 1) -> Any:
    for i in range(depth):
        leaf = [leaf] if i % 2 else {"k": leaf}
    return leaf


@pytest.mark.parametrize("max_depth", [3, 4, 5, 9, 16, MAX_NESTING_DEPTH])
def test_the_nesting_bound_is_chunk_runs_at_its_edge(max_depth: int) -> None:
    """Content nested exactly as deep as chunk_run allows passes; one more does not."""
    inner = chunk_depth(max_depth)
    for depth in range(max(inner - 2, 0), inner + 3):
        line = _chunk("s", _nested(depth))
        accepted = chunk_run(line, max_depth) is not None
        assert accepted == (depth <= inner)
        assert _passes(line, {"s"}, max_depth) == accepted
        _assert_sound(line, max_depth)


_clean_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**20), 10**20) | st.text(max_size=12),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3),
    max_leaves=12,
)
_clean_sids = st.text(
    st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters='"\\'),
    min_size=1,
    max_size=40,
)


@settings(max_examples=500)
@given(
    _clean_sids,
    _clean_values,
    st.sampled_from(sorted(CHUNK_KINDS)),
    st.sampled_from([None, "msg_0", "m\u00e9"]),
    st.booleans(),
    st.integers(0, 2),
)
def test_the_lines_real_sdks_write_pass(
    sid: str, content: Any, kind: str, mid: str | None, kind_last: bool, how: int
) -> None:
    """Completeness where it matters: a chunk line as the TypeScript SDK (kind first,
    ``messageId`` last) or the Python SDK (kind last) writes it, with content spelled
    compactly, with spaces or with ``\\u`` escapes, passes."""
    members = [
        (b'"sessionUpdate"', msgspec.json.encode(kind)),
        (b'"content"', _spell(content, how)),
    ]
    if mid is not None:
        members.append((b'"messageId"', msgspec.json.encode(mid)))
    if kind_last:
        members.append(members.pop(0))
    line = _line(msgspec.json.encode(sid), members)
    assert chunk_run(line) is not None
    assert _passes(line, {sid})


def test_the_corpus_chunk_lines_pass() -> None:
    """Every content-chunk line of the real agents' transcripts that chunk_run accepts
    passes (fast-agent's with ``_meta`` do not: chunk_run refuses them too)."""
    corpus = Path(__file__).parents[2] / "fixtures" / "corpus"
    passed = refused = 0
    for path in sorted(corpus.glob("*.jsonl")):
        for rec in map(json.loads, path.read_text().splitlines()):
            line = rec["line"].encode()
            if rec["dir"] != "agent->client" or b"_chunk" not in line:
                continue
            envs = chunk_run(line)
            sid = json.loads(line)["params"]["sessionId"]
            assert _passes(line, {sid}) == (envs is not None)
            passed += envs is not None
            refused += envs is None
    assert passed > 100
    assert refused > 0


# --- a run: the offsets it gives, against a model built from chunk_run -------------

_POOL = [
    _chunk("A", {"type": "text", "text": "a"}),
    _chunk("B", {"type": "text", "text": "b"}, messageId="m"),
    _line(b'"C"', [(b'"content"', b"[]"), (b'"sessionUpdate"', b'"agent_thought_chunk"')]),
    _chunk("A", "x", kind="tool_call"),
    b'{"jsonrpc":"2.0","id":3,"method":"fs/read_text_file","params":{"sessionId":"A"}}',
    b"not json",
    b"",
    _chunk("A", "x") + b"\r",
]


def _model(lines: list[bytes], first: int, known: set[str]) -> tuple[int, int, int]:
    starts, at = [], 0
    for ln in lines:
        starts.append(at)
        at += len(ln) + 1
    end = at  # len(data) + 1

    def chunk_sid(ln: bytes) -> str | None:
        envs = chunk_run(ln)
        return None if envs is None else envs[0].params.sessionId

    j = first
    while j < len(lines) and chunk_sid(lines[j]) in known:
        j += 1
    count, stop = j - first, starts[j] if j < len(lines) else end
    k = j + 1
    while k < len(lines) and chunk_sid(lines[k]) is None:
        k += 1
    return count, stop, starts[k] if k < len(lines) else end


@settings(max_examples=500)
@given(
    st.lists(st.sampled_from(_POOL), min_size=1, max_size=12),
    st.sets(st.sampled_from(["A", "B", "C"])),
    st.data(),
)
def test_the_offsets_over_a_run_are_the_models(
    lines: list[bytes], known: set[str], data: st.DataObject
) -> None:
    """(count, stop, next) from any line of a run: the chunk lines of known sessions
    from there, the first line that is not one, and the next chunk line after it."""
    first = data.draw(st.integers(0, len(lines) - 1))
    run = b"\n".join(lines)
    pos = sum(len(ln) + 1 for ln in lines[:first])
    assert _scanner()(run, pos, known, chunk_depth(MAX_NESTING_DEPTH)) == _model(
        lines, first, known
    )


def test_bad_arguments_raise_clear_errors() -> None:
    line = _chunk("A", "x")
    with pytest.raises(ValueError, match="pos out of range"):
        _scanner()(line, len(line) + 1, {"A"}, 5)
    with pytest.raises(ValueError, match="pos out of range"):
        _scanner()(line, -1, {"A"}, 5)
    with pytest.raises(ValueError, match="max_depth out of range"):
        _scanner()(line, 0, {"A"}, 5000)
    with pytest.raises(TypeError, match="data must be bytes"):
        _scanner()(bytearray(line), 0, {"A"}, 5)  # type: ignore[arg-type]
    assert _scanner()(b"", 0, {"A"}, 5) == (0, 0, 1)  # an empty run: one blank line, not passed


class _Forgetful(set[str]):
    """Sessions each forgotten once asked about: ``in`` runs Python code whose answer
    changes while a run is read (as a subclass's ``__contains__`` or an element's
    ``__eq__`` may)."""

    def __contains__(self, sid: object) -> bool:
        found = set.__contains__(self, sid)
        self.discard(sid)
        return found


def test_known_is_asked_about_every_line() -> None:
    """A line passes on the answer ``known`` gives for it, not on one remembered from
    the line before (the model asks ``in`` line by line, as chunk_run's caller does)."""
    a = _chunk("A", "x")
    run = b"\n".join([a, a, a])
    size = len(run)
    assert _scanner()(run, 0, {"A"}, 5) == (3, size + 1, size + 1)
    # the second line of A is asked about again, and A is no longer known
    assert _scanner()(run, 0, _Forgetful({"A"}), 5) == (1, len(a) + 1, 2 * len(a) + 2)


def test_pos_is_a_lines_start() -> None:
    """``pos`` inside a line is refused: the scanner would read the rest of the line as
    a line of its own and pass a chunk written after any bytes (``{"x":`` here)."""
    line = _chunk("A", "x")
    run = b'{"x":' + line + b"}"  # one line: not a chunk line
    assert _scanner()(run, 0, {"A"}, 5) == (0, 0, len(run) + 1)
    with pytest.raises(ValueError, match="pos is not a line's start"):
        _scanner()(run[:-1], 5, {"A"}, 5)
    with pytest.raises(ValueError, match="pos is not a line's start"):
        _scanner()(b"x\n" + line, 1, {"A"}, 5)  # at the newline, not after it
    assert _scanner()(b"x\n" + line, 2, {"A"}, 5) == (1, len(line) + 3, len(line) + 3)
    assert _scanner()(b"x\n", 2, {"A"}, 5) == (0, 2, 3)  # the blank line after the newline


class _Refusing(set[str]):
    def __contains__(self, sid: object) -> bool:
        raise LookupError(sid)


def test_no_reference_is_left_behind() -> None:
    """Every path (a stretch, the line after it, an error in ``in``, bad arguments)
    gives back the references it took: the run, ``known`` and its sessions keep
    their counts, and no object is left allocated (the session strings it decodes)."""
    a, b = "session-A-" + "a" * 20, "session-B-" + "b" * 20  # neither interned
    line_a, line_b = _chunk(a, "x"), _chunk(b, [1, {"k": None}], messageId="m")
    run = b"\n".join([line_a, line_a, line_b, b"not json", line_a, line_b])
    known, refusing = {a, b}, _Refusing({a})
    stop = 2 * len(line_a) + 2  # line_b's start; then line_a's after "not json"
    bad = [(run, 0, refusing, 5), (run, len(run) + 1, known, 5), (run, 0, known, -1),
           (run, 0, 7, 5), (run, 2**70, known, 5)]  # fmt: skip

    def calls(n: int) -> None:
        for _ in range(n):
            assert _scanner()(run, 0, known, 5)[0] == 3
            assert _scanner()(run, 0, {a}, 5) == (2, stop, stop + len(line_b) + 10)
            for args in bad:
                with pytest.raises((LookupError, ValueError, TypeError, OverflowError)):
                    _scanner()(*args)

    calls(10)  # free lists and caches filled
    watched = [run, known, refusing, a, b]
    gc.collect()
    refs, blocks = [sys.getrefcount(x) for x in watched], sys.getallocatedblocks()
    calls(300)  # each decodes 4 session strings
    gc.collect()
    assert [sys.getrefcount(x) for x in watched] == refs
    assert sys.getallocatedblocks() - blocks < 100, sys.getallocatedblocks() - blocks
