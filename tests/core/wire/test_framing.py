"""LineFramer: newline framing under any chunking, with bounded buffering."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_proxy.core.wire.framing import BOM, LineFramer, Lines, Oversize, Partial

MAX = 16
LS = "\u2028".encode()  # b"\xe2\x80\xa8", LINE SEPARATOR: not a line break for us


def run(chunks: list[bytes], max_message_bytes: int = MAX) -> list[object]:
    """Feeds ``chunks`` in order, then closes; returns every event."""
    f = LineFramer(max_message_bytes)
    out: list[object] = []
    for c in chunks:
        out.extend(f.feed(c))
        assert f.buffered_bytes <= max_message_bytes + 1
    out.extend(f.close())
    return out


def run_runs(chunks: list[bytes], max_message_bytes: int = MAX) -> list[object]:
    """As :func:`run` through ``feed_runs``, each :class:`Lines` expanded to its frames."""
    f = LineFramer(max_message_bytes)
    out: list[object] = []
    for c in chunks:
        for item in f.feed_runs(c):
            if isinstance(item, Lines):
                assert 0 < len(item.data) <= max_message_bytes
                out.extend(item.frames())
            else:
                out.append(item)
        assert f.buffered_bytes <= max_message_bytes + 1
    out.extend(f.close())
    return out


def reference(stream: bytes, max_message_bytes: int = MAX) -> list[object]:
    """What the framer must report for ``stream``, computed the obvious way."""
    if stream.startswith(BOM):
        stream = stream[len(BOM) :]
    *lines, tail = stream.split(b"\n")
    out: list[object] = []
    for line in lines:
        if line.endswith(b"\r"):
            line = line[:-1]
        if len(line) > max_message_bytes:
            out.append(Oversize(len(line), True))
        elif line:
            out.append(line)
    if len(tail) > max_message_bytes + 1:
        out.append(Oversize(len(tail), False))
    elif tail:
        last = tail[:-1] if tail.endswith(b"\r") else tail
        whole = last and len(last) <= max_message_bytes and _is_json(last)
        out.append(last if whole else Partial(len(tail)))
    return out


def _is_json(data: bytes) -> bool:
    try:
        msgspec.json.decode(data)
    except msgspec.DecodeError:
        return False
    return True


def split_at(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    chunks, prev = [], 0
    for p in [*points, len(data)]:
        chunks.append(data[prev:p])
        prev = p
    return chunks


line_bytes = st.lists(
    st.sampled_from([b"a", b"{", b'"', b"\r", LS, b"\xc3\xa9", b"\xf0\x9f\x98\x80", b" ", BOM]),
    max_size=12,
).map(b"".join)


@st.composite
def streams(draw: st.DrawFn) -> bytes:
    bom = draw(st.booleans())
    lines = draw(st.lists(st.tuples(line_bytes, st.sampled_from([b"\n", b"\r\n"])), max_size=8))
    tail = draw(line_bytes)
    return (BOM if bom else b"") + b"".join(body + end for body, end in lines) + tail


@given(stream=streams(), cuts=st.lists(st.integers(min_value=0), max_size=10))
def test_any_split_gives_the_same_events_as_whole(stream: bytes, cuts: list[int]) -> None:
    """Frames, Oversize and Partial reports do not depend on how the stream is chunked."""
    whole = run([stream])
    assert run(split_at(stream, cuts)) == whole
    assert whole == reference(stream)


@given(
    stream=streams(),
    cuts=st.lists(st.integers(min_value=0), max_size=10),
    limit=st.sampled_from([4, MAX, 64, 1 << 20]),
)
def test_feed_runs_gives_the_frames_of_feed(stream: bytes, cuts: list[int], limit: int) -> None:
    """Runs of unsplit lines expand to exactly the frames and reports feed gives."""
    assert run_runs(split_at(stream, cuts), limit) == run([stream], limit)


def test_feed_runs_keeps_the_lines_of_one_read_unsplit() -> None:
    """A line begun in an earlier read comes first; the rest of the read is one run."""
    f = LineFramer(MAX)
    assert f.feed_runs(b"ab") == []
    assert f.feed_runs(b"c\nde\r\n\nfg\nh") == [b"abc", Lines(b"de\r\n\nfg")]
    assert f.feed_runs(b"\n") == [b"h"]
    assert Lines(b"de\r\n\nfg").frames() == [b"de", b"fg"]


def test_feed_runs_splits_a_read_longer_than_the_limit() -> None:
    """A run never exceeds max_message_bytes, so an oversize line is still reported."""
    f = LineFramer(4)
    assert f.feed_runs(b"ab\ncd\n") == [b"ab", b"cd"]
    assert f.feed_runs(b"abcdef\nx\n") == [Oversize(6, True), b"x"]


@given(stream=streams())
def test_one_byte_at_a_time_gives_the_same_events(stream: bytes) -> None:
    """Feeding one byte per call yields exactly what feeding everything at once yields."""
    assert run([stream[i : i + 1] for i in range(len(stream))]) == run([stream])


def test_splits_only_on_newline_not_cr_or_line_separator() -> None:
    """\\r alone and U+2028 are message bytes; only 0x0A ends a frame."""
    data = b'{"a":"x\ry' + LS + b'z"}\n{"b":1}\n'
    assert run([data], 100) == [b'{"a":"x\ry' + LS + b'z"}', b'{"b":1}']


def test_crlf_is_stripped_but_only_one_cr() -> None:
    """A \\r\\n ending loses exactly one \\r; an earlier \\r stays in the frame."""
    assert run([b"one\r\ntwo\r\r\n"], 100) == [b"one", b"two\r"]


def test_blank_lines_yield_nothing() -> None:
    """Empty lines, with or without \\r, carry no message and are skipped."""
    assert run([b"\n\r\n\nx\n\n"], 100) == [b"x"]


def test_bom_at_stream_start_is_stripped() -> None:
    """A UTF-8 BOM opening the stream is not part of the first frame."""
    assert run([BOM + b"{}\n{}\n"], 100) == [b"{}", b"{}"]


def test_bom_split_across_feeds_is_stripped() -> None:
    """A BOM arriving one byte per feed is still recognised and stripped."""
    assert run([b"\xef", b"\xbb", b"\xbf{}\n"], 100) == [b"{}"]
    assert run([b"\xef\xbb", b"\xbf", b"{}\n"], 100) == [b"{}"]


def test_incomplete_bom_prefix_is_data() -> None:
    """Bytes that start like a BOM but are not one are kept as message bytes."""
    assert run([b"\xef", b"\xbbX\n"], 100) == [b"\xef\xbbX"]


def test_bom_not_at_stream_start_is_kept() -> None:
    """Only the stream's first bytes are checked for a BOM; later BOMs stay in their frame."""
    assert run([b"{}\n" + BOM + b"{}\n"], 100) == [b"{}", BOM + b"{}"]
    f = LineFramer(100)
    assert list(f.feed(b"{}\n")) == [b"{}"]
    assert list(f.feed(BOM + b"[]\n")) == [BOM + b"[]"]


def test_empty_feed_does_not_settle_the_bom_check() -> None:
    """An empty first feed leaves the BOM check for the first real bytes."""
    f = LineFramer(100)
    assert list(f.feed(b"")) == []
    assert list(f.feed(BOM + b"x\n")) == [b"x"]


def test_oversize_line_is_skipped_and_reported_and_stream_lives_on() -> None:
    """A too-long line becomes Oversize(size, complete=True); the next frames still come."""
    long = b"x" * (MAX + 5)
    assert run([b"a\n" + long + b"\nb\n"]) == [b"a", Oversize(MAX + 5, True), b"b"]


def test_oversize_split_across_feeds_reports_whole_size() -> None:
    """An oversize line skipped over many feeds reports its full length, \\r excluded."""
    f = LineFramer(4)
    out: list[object] = []
    for c in [b"abcdefgh", b"ijkl", b"mn\r", b"\nok\n"]:
        out.extend(f.feed(c))
    assert out == [Oversize(14, True), b"ok"]


def test_message_of_exactly_max_bytes_passes_with_crlf_split() -> None:
    """A frame of exactly max_message_bytes passes even when its \\r\\n is split."""
    f = LineFramer(4)
    assert list(f.feed(b"abcd\r")) == []
    assert f.buffered_bytes == 5
    assert list(f.feed(b"\n")) == [b"abcd"]
    assert list(f.feed(b"abcde\n")) == [Oversize(5, True)]


@given(chunks=st.lists(st.binary(min_size=1, max_size=40), min_size=1, max_size=30))
def test_never_ending_line_keeps_the_buffer_bounded(chunks: list[bytes]) -> None:
    """However a newline-free line trickles in, at most max_message_bytes + 1 bytes are kept."""
    chunks = [c.replace(b"\n", b"x").replace(b"\r", b"x") for c in chunks]
    f = LineFramer(MAX)
    assert list(f.feed(b"{}\n")) == [b"{}"]
    total = 0
    for c in chunks:
        assert list(f.feed(c)) == []
        total += len(c)
        assert f.buffered_bytes <= MAX + 1
        assert f.buffered_bytes == (total if total <= MAX + 1 else 0)
    out = list(f.feed(b"\n[]\n"))
    if total > MAX:
        assert out == [Oversize(total, True), b"[]"]
    else:
        assert out == [b"".join(chunks), b"[]"]


def test_never_ending_line_reported_incomplete_on_close() -> None:
    """An oversize line with no newline at end of stream is Oversize(complete=False)."""
    f = LineFramer(4)
    assert list(f.feed(b"abcdefg")) == []
    assert list(f.feed(b"hij")) == []
    assert f.buffered_bytes == 0
    assert list(f.close()) == [Oversize(10, False)]


def test_close_reports_partial_last_line() -> None:
    """A half-written last line is reported as Partial with its size, never as a frame."""
    f = LineFramer(100)
    assert list(f.feed(b'{"a":1}\n{"b"')) == [b'{"a":1}']
    assert list(f.close()) == [Partial(4)]
    assert f.buffered_bytes == 0


@pytest.mark.parametrize(
    ("tail", "frame"),
    [(b'{"a":1}', b'{"a":1}'), (b'{"a":1}\r', b'{"a":1}'), (b' [1, "x"] ', b' [1, "x"] ')],
)
def test_close_delivers_a_complete_json_last_line(tail: bytes, frame: bytes) -> None:
    """A last line without its newline that is one complete JSON value is a frame."""
    f = LineFramer(100)
    assert list(f.feed(b'{"b":2}\n' + tail)) == [b'{"b":2}']
    assert list(f.close()) == [frame]


@pytest.mark.parametrize("tail", [b'{"a":1', b'{"a":1}{', b'{"a":1} x', b'"abc'])
def test_close_reports_an_incomplete_or_extra_last_line(tail: bytes) -> None:
    """A truncated value, or one followed by more than whitespace, is still a Partial."""
    f = LineFramer(100)
    assert list(f.feed(tail)) == []
    assert list(f.close()) == [Partial(len(tail))]


def test_close_reports_a_complete_json_over_the_limit_as_partial() -> None:
    """A complete last value longer than the limit (room kept for a \\r) is not delivered."""
    f = LineFramer(4)
    assert list(f.feed(b"12345")) == []
    assert list(f.close()) == [Partial(5)]


@pytest.mark.parametrize("split", [1, 3, 5000, 9000])
def test_oversize_reports_carry_the_bounded_prefix(split: int) -> None:
    """Every way an oversize message is seen keeps its first OVERSIZE_PREFIX_BYTES."""
    from acp_proxy.core.wire.framing import OVERSIZE_PREFIX_BYTES

    msg = b'{"jsonrpc":"2.0","id":7,"method":"m","params":"' + b"x" * 10000 + b'"}'
    for framer_feed in ("feed", "feed_runs"):
        f = LineFramer(100)
        out = [*getattr(f, framer_feed)(msg[:split]), *getattr(f, framer_feed)(msg[split:] + b"\n")]
        assert out == [Oversize(len(msg), True)]
        assert out[0].prefix == msg[:OVERSIZE_PREFIX_BYTES]
    f = LineFramer(100)
    assert [*f.feed(msg[:split]), *f.feed(msg[split:])] == []
    (tail,) = f.close()
    assert tail == Oversize(len(msg), False)
    assert tail.prefix == msg[:OVERSIZE_PREFIX_BYTES]


def test_close_after_clean_end_reports_nothing() -> None:
    """A stream ending with a newline closes without reports."""
    f = LineFramer(100)
    assert list(f.feed(b"{}\n")) == [b"{}"]
    assert list(f.close()) == []


@pytest.mark.parametrize("text", ["é", "€", "😀", "añ€😀z"])
def test_multibyte_utf8_split_across_reads(text: str) -> None:
    """A UTF-8 character cut between reads arrives intact in one frame."""
    data = ('{"t":"' + text + '"}\n').encode()
    for cut in range(1, len(data)):
        assert run([data[:cut], data[cut:]], 100) == [data[:-1]]


def test_max_message_bytes_must_be_positive() -> None:
    """LineFramer refuses a limit below one byte."""
    with pytest.raises(ValueError, match="max_message_bytes"):
        LineFramer(0)
