"""Strict UTF-8: the only text encoding the proxy reads (docs/protocol.md section 8).

A frame that is not strict UTF-8 (encoded surrogates included) is not JSON for
the proxy, whichever decoder reads it.
"""

from __future__ import annotations

import codecs

__all__ = ["strict_text", "strict_utf8"]

_CHUNK = 1 << 20


def strict_utf8(raw: bytes) -> bool:
    """True when ``raw`` is strict UTF-8 (checked in 1 MiB steps: constant memory)."""
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    view = memoryview(raw)
    try:
        for start in range(0, len(raw), _CHUNK):
            decoder.decode(view[start : start + _CHUNK])
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    return True


def strict_text(raw: bytes) -> str:
    """``raw`` decoded as strict UTF-8.

    ``json.loads(bytes)`` would decode with ``surrogatepass`` (reading the
    encoded surrogate ``\\xed\\xa0\\x80`` as U+D800, where a JavaScript
    ``TextDecoder`` reads three U+FFFD), detect UTF-16/32 and accept a BOM:
    the proxy reads only strict UTF-8, so no peer can read other characters.

    Raises:
        ValueError: (``UnicodeDecodeError``) when ``raw`` is not strict UTF-8.
    """
    return raw.decode("utf-8")
