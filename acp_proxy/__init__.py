"""acp-proxy: a transparent ACP (Agent Client Protocol) proxy.

Relays JSON-RPC 2.0 between an editor (client) and a coding agent, keeps a
shadow registry of subagent child sessions, enforces their capabilities on
client mutations, holds agent traffic for sessions the client cannot know yet,
and removes duplicate state reports.
"""

__version__ = "0.1.0"

import os as _os

#: ``ACP_PROXY_PURE_PYTHON`` set (to anything but empty, ``0``, ``false``, ``no``
#: or ``off``): the compiled run path (``acp_proxy.core.wire._chunkscan``, built
#: at install where a C compiler is found) is not used, and the pure-Python path,
#: its reference, decides every run (docs/PERFORMANCE.md). Read once, when the
#: package is imported. At build time (``setup.py``) it builds no extension.
PURE_PYTHON = _os.environ.get("ACP_PROXY_PURE_PYTHON", "").strip().lower() not in {
    "",
    "0",
    "false",
    "no",
    "off",
}


def source_crc32(name: str) -> str | None:
    """The CRC-32 (8 hex digits) of the package file ``name`` (a path relative to
    this directory), or ``None`` when it is not there. The build check of the
    compiled run path (``acp_proxy.core.wire.runs``): the file is read here, as the
    sans-IO core does no OS access (docs/design.md section 1)."""
    import binascii

    try:
        with open(_os.path.join(_os.path.dirname(__file__), name), "rb") as f:
            return f"{binascii.crc32(f.read()):08x}"
    except OSError:
        return None
