"""The page of a trace: one self-contained HTML file (README "See what it does").

The page's style and script are package data beside this module
(``page.html``, ``page.css``, ``page.js``) and are put inside the HTML; the
trace's records go in a ``<script type="application/json">`` element, as JSON
with ``<``, ``>``, ``&``, U+2028 and U+2029 escaped, so no record can end the
element or be read as markup. The script shows every value as text
(``textContent``), never as markup. A Content-Security-Policy ``<meta>``
allows only the page's own style and script (by their SHA-256 hashes) and,
when served, requests to its own origin: a page written to a file makes no
request at all.
"""

from __future__ import annotations

import base64
import hashlib
import json
from importlib import resources
from typing import Any

import msgspec

__all__ = ["TraceChunk", "embed_json", "read_records", "render_page"]

_DECODER = msgspec.json.Decoder()

#: bytes that must not appear raw inside the data element, and their JSON escapes
_ESCAPES = (
    (b"&", b"\\u0026"),
    (b"<", b"\\u003c"),
    (b">", b"\\u003e"),
    ("\u2028".encode(), b"\\u2028"),
    ("\u2029".encode(), b"\\u2029"),
)


class TraceChunk(msgspec.Struct, frozen=True):
    """Whole records read from a trace file.

    Attributes:
        lines: each record's JSON text (compact, as the file holds it), in order.
        offset: the byte offset just after the last whole line read.
        unreadable: lines that were not a JSON object (skipped).
    """

    lines: list[bytes]
    offset: int
    unreadable: int


def read_records(path: str, offset: int = 0, max_bytes: int | None = None) -> TraceChunk:
    """The whole lines of the trace at ``path`` from byte ``offset`` on.

    A last line without its newline (a live proxy writing it) is left for the
    next read. A line that is not a JSON object is counted, not returned.

    Args:
        path: the trace file.
        offset: where to start, bytes (a previous chunk's ``offset``).
        max_bytes: read at most about this many bytes (``None``: to the end).

    Raises:
        OSError: the file cannot be read.
    """
    with open(path, "rb") as file:
        file.seek(offset)
        data = file.read() if max_bytes is None else file.read(max_bytes)
        if max_bytes is not None and len(data) == max_bytes and b"\n" not in data:
            data += file.readline()  # one line longer than max_bytes: read it whole
    end = data.rfind(b"\n") + 1
    lines: list[bytes] = []
    unreadable = 0
    for line in data[:end].split(b"\n"):
        line = line.strip()
        if not line:
            continue
        try:
            value = _DECODER.decode(line)
            line.decode("utf-8")
        except (msgspec.DecodeError, UnicodeDecodeError):
            unreadable += 1
            continue
        if type(value) is not dict:
            unreadable += 1
            continue
        lines.append(line)
    return TraceChunk(lines, offset + end, unreadable)


def embed_json(lines: list[bytes]) -> bytes:
    """The records as one JSON array, safe inside a ``<script>`` element.

    Every line is valid JSON (:func:`read_records` checked it), so ``<``, ``>``
    and ``&`` can only stand inside a string, where their ``\\uXXXX`` escapes
    mean the same; U+2028 and U+2029 are escaped too (old JavaScript parsers
    end a line at them).
    """
    out = b"[" + b",".join(lines) + b"]"
    for raw, escaped in _ESCAPES:
        out = out.replace(raw, escaped)
    return out


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def render_page(chunk: TraceChunk, *, title: str, live: bool = False) -> bytes:
    """The HTML page of the records of ``chunk``.

    Args:
        chunk: the records (:func:`read_records`).
        title: the page's title (the trace's file name), shown as text.
        live: the page polls ``records?offset=N`` on its own origin for records
            written after ``chunk`` (``acp-proxy view`` without ``-o``).

    Returns:
        UTF-8 HTML, about the size of the records plus 32 KiB.
    """
    style = _asset("page.css")
    script = _asset("page.js")
    connect = "'self'" if live else "'none'"
    policy = (
        f"default-src 'none'; style-src {_sha256(style)}; script-src {_sha256(script)}; "
        f"connect-src {connect}; img-src 'none'; base-uri 'none'; form-action 'none'"
    )
    config: dict[str, Any] = {
        "title": title,
        "live": live,
        "offset": chunk.offset,
        "unreadable": chunk.unreadable,
    }
    page = _asset("page.html").replace("{{POLICY}}", policy)
    head, _, tail = page.partition("<!--DATA-->")
    parts = [
        head.replace("{{STYLE}}", style).encode(),
        b'<script type="application/json" id="trace-config">',
        embed_json([json.dumps(config, ensure_ascii=False).encode()])[1:-1],
        b'</script>\n<script type="application/json" id="trace-data">',
        embed_json(chunk.lines),
        b"</script>",
        tail.replace("{{SCRIPT}}", script).encode(),
    ]
    return b"".join(parts)
