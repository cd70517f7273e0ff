"""Why the wire refuses a frame: every reason string the parse gives, in one table.

A reason is what the audit record and the error message say; the verdict it
goes with is :class:`~acp_proxy.core.wire.verdict.Verdict`. Reasons name what
a peer could read differently, or the limit that was passed (with its
``limits.*`` key).
"""

from __future__ import annotations

__all__ = [
    "DEEP",
    "DUPLICATE_REASON",
    "GOVERNED_META_REASON",
    "GOVERNED_SNAKE_REASON",
    "ID_REASON",
    "META_REASON",
    "NOT_STRICT_UTF8",
    "SNAKE_CASE_REASON",
    "SURROGATE_REASON",
    "dense_reason",
]

# Parser-differential guard (:mod:`~acp_proxy.core.wire.guard`).
SNAKE_CASE_REASON = "snake_case spelling of a decision key (session_id, session_update, ...)"
META_REASON = (
    "params._meta names a parameter the proxy decides on (session_id, or update of "
    "session/update): the Python SDK passes it to the handler in place of the field"
)
SURROGATE_REASON = "lone surrogate escape in a decision value (method, sessionId, ...)"
GOVERNED_META_REASON = (
    "params._meta names a field of this governed request the rules read (path, cwd, "
    "command, args, tool_call, options, subject): the Python SDK passes it to the "
    "handler in place of the field"
)
GOVERNED_SNAKE_REASON = (
    "snake_case spelling of a field of this governed request (tool_call, raw_input, "
    "tool_call_id, option_id, ...): pydantic peers read it as the camelCase field"
)

#: Why a view is ambiguous: a decision key occurs twice in one decision level.
DUPLICATE_REASON = (
    "a decision key occurs twice in one object (first-wins and last-wins readers differ)"
)

# JSON-RPC shape and limits (:mod:`~acp_proxy.core.wire.jsonrpc`).
ID_REASON = '"id" must be a string or an integer between -(2**53 - 1) and 2**53 - 1'
DEEP = "nested deeper than "
NOT_STRICT_UTF8 = "not valid JSON: not strict UTF-8"


def dense_reason(dense_bytes: int, min_bytes_per_value: int) -> str:
    """The refusal reason for a frame :func:`~acp_proxy.core.wire.views.too_dense` refused."""
    return (
        f"a message over {dense_bytes} bytes (limits.dense_message_bytes) with more than "
        f"one JSON value per {min_bytes_per_value} bytes (limits.min_bytes_per_value): "
        "too dense to inspect within the memory bound"
    )
