"""Secrets hidden from the trace redaction's patterns, caught where it is cheap (issue 31).

Pure. Used by :func:`acp_proxy.core.trace.redact` (docs/trace-format.md
section 4), which stays a safety net, not a guarantee:

- **Format characters** (Unicode category ``Cf``: U+200B zero width space,
  U+200D, U+2060 word joiner, U+FEFF, U+00AD soft hyphen, bidi controls, tag
  characters): invisible, they break a token apart for a pattern but not for a
  reader or a shell that drops them. Matching runs again on the text without
  them; when that finds a secret, the text without them is what is kept.
- **A bare AWS secret access key**: 40 characters of ``[A-Za-z0-9/+]`` standing
  alone, with upper case, lower case and a digit (a hex digest, all lower
  case or digits, is not one).
- **Known token shapes in base64**: a base64 run (standard or URL-safe) of 24
  to :data:`MAX_BASE64_CHARS` characters is decoded; when the decoded text
  holds a token shape, the whole run is redacted.

A token split across two messages (two ``agent_message_chunk`` updates) is
not caught: each message is redacted on its own.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable

__all__ = ["AWS_SECRET", "FORMAT_CHARACTERS", "MAX_BASE64_CHARS", "base64_secrets"]

#: Every code point of Unicode's ``Cf`` (format) category (Unicode 15.1).
FORMAT_CHARACTERS = re.compile(
    "[\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f"
    "\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd"
    "\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001"
    "\U000e0020-\U000e007f]"
)

#: A bare AWS secret access key (40 base64 characters, mixed case and a digit).
AWS_SECRET = re.compile(
    r"(?<![A-Za-z0-9/+])(?=[A-Za-z0-9/+]{0,39}[A-Z])(?=[A-Za-z0-9/+]{0,39}[a-z])"
    r"(?=[A-Za-z0-9/+]{0,39}[0-9])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"
)

#: Longest base64 run decoded to look for a token in it (characters).
MAX_BASE64_CHARS = 4096
_BASE64_RUN = re.compile(r"(?<![A-Za-z0-9+/_\-])[A-Za-z0-9+/_\-]{24,}={0,2}(?![A-Za-z0-9+/_\-=])")


def base64_secrets(text: str, holds_secret: Callable[[str], bool], replacement: str) -> str:
    """``text`` with every base64 run whose decoded text holds a secret replaced.

    Args:
        text: any text.
        holds_secret: whether a decoded text holds a token shape.
        replacement: what a run becomes (``[REDACTED]``).

    Runs longer than :data:`MAX_BASE64_CHARS` are left (the cost stays linear
    and small); so is a run that does not decode.
    """

    def sub(m: re.Match[str]) -> str:
        run = m.group(0)
        if len(run) > MAX_BASE64_CHARS:
            return run
        data = run.rstrip("=")
        data += "=" * (-len(data) % 4)
        try:
            if "-" in data or "_" in data:
                raw = base64.urlsafe_b64decode(data)
            else:
                raw = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            return run
        decoded = raw.decode("utf-8", "ignore")
        return replacement if decoded and holds_secret(decoded) else run

    return _BASE64_RUN.sub(sub, text)
