"""TOML spelling of keys and values in error messages.

Pure text helpers shared by :mod:`acp_proxy.config.model` (validator messages) and
:mod:`acp_proxy.config.io` (loader errors). Writing TOML (the config dump) is
``tomli_w``'s job.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = ["describe", "dotted", "toml_key", "toml_string"]

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")

_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\t": "\\t",
    "\n": "\\n",
    "\f": "\\f",
    "\r": "\\r",
}


def toml_key(key: str) -> str:
    """A key as TOML writes it: bare if it can be, else a quoted string."""
    return key if _BARE_KEY.fullmatch(key) else toml_string(key)


def dotted(path: tuple[str | int, ...]) -> str:
    """A key path as a dotted TOML key; an ``int`` part is a list index (``a.b[1]``)."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += ("." if text else "") + toml_key(part)
    return text


def describe(value: object) -> str:
    """Render a TOML value for an error message (``'abc'``, ``true``, ``a table``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping):
        return "a table"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str | int | float):
        text = repr(value)
        return text if len(text) <= 60 else text[:57] + "..."
    return f"a {type(value).__name__} ({value})"


def toml_string(text: str) -> str:
    """A TOML basic string (double-quoted, escaped) holding ``text``."""
    out = []
    for char in text:
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif char < " " or char == "\x7f":
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'
