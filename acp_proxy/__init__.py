"""acp-proxy: a transparent ACP (Agent Client Protocol) proxy.

Relays JSON-RPC 2.0 between an editor (client) and a coding agent, keeps a
shadow registry of subagent child sessions, enforces their capabilities on
client mutations, holds agent traffic for sessions the client cannot know yet,
and removes duplicate state reports.
"""

__version__ = "0.1.0"

import os as _os

#: ``ACP_PROXY_PURE_PYTHON`` set to a non-empty value: the compiled run path
#: (``acp_proxy.core.wire._chunkscan``, built at install where a C compiler is
#: found) is not used, and the pure-Python path, its reference, decides every
#: run (docs/PERFORMANCE.md). Read once, when the package is imported.
PURE_PYTHON = bool(_os.environ.get("ACP_PROXY_PURE_PYTHON"))
