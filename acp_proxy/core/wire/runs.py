"""Runs of complete lines decided with one decode and one encode (the agent's hot path).

A run is what :meth:`~acp_proxy.core.wire.framing.LineFramer.feed_runs` gives: the
complete lines of one read, joined by ``b"\\n"``. Both functions here decode a
whole run in one msgspec call, re-encode it in one call and accept it only
when the bytes come back identical; otherwise they return ``None`` and the
caller handles the lines one by one with :func:`~acp_proxy.core.wire.jsonrpc.parse`
(``None`` never means "invalid").

- :func:`envelope_run`: every line is a notification envelope
  ``{"jsonrpc","method","params":{"sessionId","update":{...}[,"_meta"]}}``
  (the shape of ``session/update``), in that key order. Only those keys are
  decoded; every value inside ``update`` stays raw bytes, so the content is
  validated but never turned into Python objects.
- :func:`plain_run`: every line is canonical JSON of any shape (each line is
  the compact encoding of its decoded value).

Why identical bytes are enough for the parser-differential guarantee
(docs/design.md section 4): at every level the proxy decides on (top-level,
``params``, ``params.update``), re-encoding writes each key once, unescaped,
with no whitespace; a line that repeats a key, escapes one or spaces them out
cannot come back unchanged. So every JSON parser reads the decision keys of an
accepted line the way the proxy does.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Collection
from itertools import chain
from operator import attrgetter
from typing import Any, Literal, get_args

import msgspec

from acp_proxy import PURE_PYTHON, source_crc32
from acp_proxy.core.wire.nesting import MAX_NESTING_DEPTH, nested_deeper_than

__all__ = [
    "CHUNK_KINDS",
    "RUN_PATH",
    "Chunk",
    "ChunkEnvelope",
    "ChunkFirst",
    "ChunkKind",
    "ChunkLast",
    "Envelope",
    "EnvelopeParams",
    "chunk_depth",
    "chunk_run",
    "envelope_lines",
    "envelope_run",
    "fast_stretch",
    "plain_run",
    "update_kind",
]


class EnvelopeParams(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """``params`` of an :class:`Envelope`.

    Attributes:
        sessionId: the session the notification is about.
        update: the update object, each member's value as raw JSON bytes.
        meta: ``_meta`` if present: ``None``, or its keys (decoded: the
            Python SDK spreads them into the handler's arguments, so the
            engine checks them) with raw values.
    """

    sessionId: str
    update: dict[str, msgspec.Raw]
    meta: dict[str, msgspec.Raw] | None | msgspec.UnsetType = msgspec.field(
        name="_meta", default=msgspec.UNSET
    )


class Envelope(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """One line of an :func:`envelope_run`: a notification without ``id``.

    Attributes:
        jsonrpc: the version string (the caller checks it is ``"2.0"``).
        method: the method name.
        params: the session and update.
    """

    jsonrpc: str
    method: str
    params: EnvelopeParams


_ENCODER = msgspec.json.Encoder()
_encode_lines = _ENCODER.encode_lines
_decode_lines = msgspec.json.Decoder().decode_lines
_decode_envelopes = msgspec.json.Decoder(Envelope).decode_lines
_decode = msgspec.json.Decoder().decode


def _same_bytes(encoded: bytes, data: bytes) -> bool:
    # encode_lines ends every line with a newline; ``data`` lacks the last one.
    return len(encoded) == len(data) + 1 and encoded.startswith(data)


def _utf8(data: bytes) -> bool:
    """``data`` is valid UTF-8 (msgspec skips raw values without checking it)."""
    if data.isascii():
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def envelope_run(data: bytes, max_depth: int = MAX_NESTING_DEPTH) -> list[Envelope] | None:
    """The envelopes of ``data`` when every line is one, written exactly as re-encoded.

    Valid UTF-8 is checked for the whole run first: msgspec skips raw values
    without checking their encoding, and a line that is not UTF-8 must be
    decided by :func:`~acp_proxy.core.wire.jsonrpc.parse`, as it would be alone.

    Args:
        data: lines joined by ``b"\\n"``, without the last newline.

    Returns:
        One :class:`Envelope` per line, in order, or ``None``.
    """
    found = envelope_lines(data, max_depth)
    return None if found is None else found[0]


def envelope_lines(
    data: bytes, max_depth: int = MAX_NESTING_DEPTH
) -> tuple[list[Envelope], list[bytes]] | None:
    """:func:`envelope_run`, with each line's bytes: ``(envelopes, lines)``, or ``None``.

    Each envelope is re-encoded alone, and the run is accepted when the
    encodings joined by newlines are ``data``: so ``lines[j]`` is line ``j``
    of ``data``, byte for byte (issue 29: the caller slices no line out of
    the run, and finds no newline).
    """
    if not _utf8(data):
        return None
    try:
        envelopes: list[Envelope] = _decode_envelopes(data)
    except (msgspec.DecodeError, RecursionError):  # ValidationError is a DecodeError
        return None
    lines = list(map(_encode_one, envelopes))
    if not lines or b"\n".join(lines) != data:
        return None
    # Raw values are skipped without converting numbers or measuring nesting:
    # one long enough to hold an integer past Python's digit limit, or to nest
    # deeper than a member may (it sits three levels down), must pass the full
    # decoder, as it would on the frame-by-frame path (which refuses both).
    inner, long_value = _member_bounds(max_depth)
    if max(map(len, lines)) <= long_value + _MIN_ENVELOPE_BYTES:
        return envelopes, lines  # no line long enough to hold a value that long
    # the longest update value in one C pass; the Python loop only past the bound
    values = chain.from_iterable(map(dict.values, map(_update, envelopes)))
    if max(map(len, values), default=0) > long_value:
        for env in envelopes:
            for value in env.params.update.values():
                if len(value) > long_value and not _fits(value, inner):
                    return None
    for meta in filter(None, map(_meta, envelopes)):  # a non-empty dict (UNSET, None: falsy)
        for value in meta.values():
            if len(value) > long_value and not _fits(value, inner):
                return None
    return envelopes, lines


#: The shortest line of an envelope run holding one member in its update, less the
#: member's value: every value of a line is at most the line's length less this
#: (a ``_meta`` member sits in a longer frame).
_MIN_ENVELOPE_BYTES = len(b'{"jsonrpc":"","method":"","params":{"sessionId":"","update":{"":}}}')
_encode_one = _ENCODER.encode


_update = attrgetter("params.update")
_meta = attrgetter("params.meta")


def _member_bounds(max_depth: int) -> tuple[int, int]:
    """(the nesting a raw member three levels down may have, the length in bytes
    above which a raw value may hold a too-long integer or nest deeper than that)."""
    inner = max_depth - 3
    return inner, min(sys.get_int_max_str_digits() or 1 << 62, 2 * (inner + 1) - 1)


def _fits(value: msgspec.Raw, max_depth: int) -> bool:
    """The raw value decodes, nested at most ``max_depth`` deep."""
    try:
        decoded = _decode(value)
    except (msgspec.DecodeError, RecursionError):
        return False
    return not nested_deeper_than(decoded, max_depth)


# --- content chunks: the agent's plain stream, decoded into fixed fields -------------
#
# The update of ``agent_message_chunk`` and its kin holds ``sessionUpdate``,
# ``content`` and maybe ``messageId``. Decoded into Structs whose types pin
# ``jsonrpc`` to ``"2.0"``, ``method`` to ``session/update`` and the kind to
# :data:`ChunkKind` (no dict, no key strings), a line costs the decoder less
# and its verdict depends on its session alone: one C pass over the run. Any
# other key, kind or method, a ``_meta`` anywhere at the decision levels, a
# missing member or another type fails the decode, and the run goes to
# :func:`envelope_run`.
# Structs re-encode their fields in declaration order, so each spelling an SDK
# writes has its own class (the TypeScript SDK writes the kind first, the
# Python SDK's pydantic models last); the identical-bytes argument above holds
# for each, at every decision level.


#: The kinds a :class:`ChunkFirst` / :class:`ChunkLast` may have (ACP's content
#: chunks; none is in ``passthrough.UPDATE_RULES``, a test checks).
ChunkKind = Literal["agent_message_chunk", "agent_thought_chunk", "user_message_chunk"]
#: :data:`ChunkKind`'s values.
CHUNK_KINDS: frozenset[str] = frozenset(get_args(ChunkKind))


class ChunkFirst(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True, gc=False):
    """A content chunk update written kind first: ``{"sessionUpdate","content"[,"messageId"]}``.

    Attributes:
        sessionUpdate: the kind, one of :data:`ChunkKind`.
        content: the content block, raw JSON bytes.
        messageId: the message the chunk belongs to, if given.
    """

    sessionUpdate: ChunkKind
    content: msgspec.Raw
    messageId: str | None | msgspec.UnsetType = msgspec.UNSET


class ChunkLast(
    msgspec.Struct, kw_only=True, forbid_unknown_fields=True, omit_defaults=True, gc=False
):
    """:class:`ChunkFirst` written kind last: ``{"content"[,"messageId"],"sessionUpdate"}``."""

    content: msgspec.Raw
    messageId: str | None | msgspec.UnsetType = msgspec.UNSET
    sessionUpdate: ChunkKind


#: The update of a :class:`ChunkEnvelope`.
Chunk = ChunkFirst | ChunkLast


class _ChunkParamsFirst(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    sessionId: str
    update: ChunkFirst


class _ChunkParamsLast(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    sessionId: str
    update: ChunkLast


class _ChunkEnvelopeFirst(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    jsonrpc: Literal["2.0"]
    method: Literal["session/update"]
    params: _ChunkParamsFirst


class _ChunkEnvelopeLast(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    jsonrpc: Literal["2.0"]
    method: Literal["session/update"]
    params: _ChunkParamsLast


#: One line of a :func:`chunk_run`: ``{"jsonrpc":"2.0","method","params":{"sessionId","update"}}``
#: with a :data:`Chunk` update (attributes as :class:`Envelope`'s).
ChunkEnvelope = _ChunkEnvelopeFirst | _ChunkEnvelopeLast

_CHUNK_DECODERS: list[Callable[[bytes], list[Any]]] = [
    msgspec.json.Decoder(_ChunkEnvelopeFirst).decode_lines,
    msgspec.json.Decoder(_ChunkEnvelopeLast).decode_lines,
]
_content = attrgetter("params.update.content")


def chunk_run(data: bytes, max_depth: int = MAX_NESTING_DEPTH) -> list[ChunkEnvelope] | None:
    """The chunk envelopes of ``data`` when every line is one, written exactly as re-encoded.

    As :func:`envelope_run`, for lines whose update is a :data:`Chunk` (one
    spelling for the whole run). The spelling that decoded the last run is
    tried first: a hint for speed, never for the verdict (each is exact).

    Args:
        data: lines joined by ``b"\\n"``, without the last newline.

    Returns:
        One envelope per line, in order, or ``None`` (the caller tries
        :func:`envelope_run`).
    """
    if not _utf8(data):
        return None
    try:
        envelopes: list[Any] = _CHUNK_DECODERS[0](data)
    except (msgspec.DecodeError, RecursionError):  # ValidationError is a DecodeError
        return None  # the other spelling has the same members: it fails alike
    encoded = _encode_lines(envelopes)
    if not _same_bytes(encoded, data):
        if len(encoded) != len(data) + 1:
            return None  # not a matter of order: the other spelling encodes as long
        try:
            envelopes = _CHUNK_DECODERS[1](data)  # the same members: decodes alike
        except (msgspec.DecodeError, RecursionError):
            return None
        if not _same_bytes(_encode_lines(envelopes), data):
            return None
        _CHUNK_DECODERS.reverse()  # this spelling first next time
    inner, long_value = _member_bounds(max_depth)
    if len(data) > long_value and max(map(len, map(_content, envelopes))) > long_value:
        for env in envelopes:
            value = env.params.update.content
            if len(value) > long_value and not _fits(value, inner):
                return None
    return envelopes


# --- the compiled scanner of content-chunk lines (optional) ----------------------------

#: ``fast_stretch(data, pos, known, max_depth) -> (count, stop, next)``: the
#: stretch of content-chunk lines of known sessions from byte ``pos`` of a run,
#: read on the bytes by the C extension ``_chunkscan`` (its docstring; never more
#: lenient than :func:`chunk_run`, which the tests hold it to). ``None`` when the
#: extension was not built (no C compiler at install) or
#: :data:`acp_proxy.PURE_PYTHON` is set: the pure-Python run path then decides every run.
_Stretch = Callable[[bytes, int, Collection[str], int], tuple[int, int, int]]


_SOURCE = "core/wire/_chunkscan.c"  # in a clone and in the wheel


def _compiled_scanner(source: str = _SOURCE) -> tuple[_Stretch | None, str]:
    """The scanner and what :data:`RUN_PATH` says of it. The build is used only if
    it is of ``source`` (its CRC-32; a path in the package: ``_chunkscan.c``
    beside this module by default; absent, the build is trusted)."""
    if PURE_PYTHON:
        return None, "pure Python (ACP_PROXY_PURE_PYTHON is set)"
    try:
        from acp_proxy.core.wire import _chunkscan
    except ImportError:  # not built: the pure-Python path
        return None, "pure Python (the C extension is not built: no C compiler at install)"
    crc = source_crc32(source)  # None: no source beside it, the build is the one installed
    if crc is not None and crc != _chunkscan.SOURCE_CRC32:  # a build of another source
        return None, f"pure Python (the C extension is not of acp_proxy/{source}: reinstall)"
    return _chunkscan.fast_stretch, "compiled (acp_proxy.core.wire._chunkscan)"


fast_stretch: _Stretch | None
#: Which run path :data:`fast_stretch` gives, and why (logged at debug level at start).
RUN_PATH: str
fast_stretch, RUN_PATH = _compiled_scanner()


def chunk_depth(max_depth: int) -> int:
    """The containers a chunk's ``content`` may nest in a frame nested at most
    ``max_depth`` deep (it sits three levels down), as :func:`chunk_run` bounds it;
    the ``max_depth`` argument of :data:`fast_stretch`."""
    return max(_member_bounds(max_depth)[0], 0)


def _may_hold_a_batch(data: bytes) -> bool:
    """True when a line of ``data`` may be a JSON array (starts with ``[``, or with
    whitespace, which no canonical line does): a few byte searches, no decode."""
    return (
        (data[:1] != b"" and data[:1] in b"[ \t\r")
        or b"\n[" in data
        or b"\n " in data
        or b"\n\t" in data
        or b"\n\r" in data
    )


def plain_run(data: bytes, max_depth: int = MAX_NESTING_DEPTH) -> list[Any] | None:
    """The decoded lines of ``data`` when every one is exactly canonical JSON.

    Canonical: each line is the compact encoding of its decoded value, so no
    line repeats or escapes a key, and there is no blank line, ``\\r`` or other
    whitespace (:func:`~acp_proxy.core.wire.jsonrpc.canonical` for a whole run).

    Args:
        data: lines joined by ``b"\\n"``, without the last newline.

    Returns:
        One value per line, in order, or ``None`` (also when a line nests
        deeper than ``max_depth``: :func:`~acp_proxy.core.wire.jsonrpc.parse` refuses it).
    """
    if _may_hold_a_batch(data):
        return None  # parse reads a batch without building it; a run decode would
    try:
        bodies: list[Any] = _decode_lines(data)
    except (msgspec.DecodeError, RecursionError):
        return None
    if not _same_bytes(_encode_lines(bodies), data):
        return None
    shallow = 2 * (max_depth + 1)  # a shorter line cannot nest deeper
    if len(data) >= shallow:
        for line, body in zip(data.split(b"\n"), bodies, strict=True):
            if len(line) >= shallow and nested_deeper_than(body, max_depth):
                return None
    return bodies


_KINDS: dict[bytes, str | None] = {}
_MAX_KINDS = 256
_MAX_KIND_BYTES = 64


def update_kind(raw: msgspec.Raw | bytes) -> str | None:
    """The value of a raw ``sessionUpdate`` member when it is a string, else ``None``.

    Decoded properly (``"subagent\\u005fupdate"`` is ``"subagent_update"``);
    the few short spellings a stream uses are remembered (at most 256 of at
    most 64 bytes each: 16 KiB).
    """
    key = bytes(raw)
    if key in _KINDS:
        return _KINDS[key]
    try:
        value = _decode(key)
    except (msgspec.DecodeError, RecursionError):
        value = None
    kind = value if type(value) is str else None
    if len(key) <= _MAX_KIND_BYTES:
        if len(_KINDS) >= _MAX_KINDS:
            _KINDS.clear()
        _KINDS[key] = kind
    return kind
