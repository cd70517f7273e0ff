"""acp-proxy: a transparent ACP (Agent Client Protocol) proxy.

Relays JSON-RPC 2.0 between an editor (client) and a coding agent, keeps a
shadow registry of subagent child sessions, enforces their capabilities on
client mutations, holds agent traffic for sessions the client cannot know yet,
and removes duplicate state reports.
"""

__version__ = "0.1.0"
