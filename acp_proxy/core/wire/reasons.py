"""Why the wire refuses a frame: every reason string the parse gives, in one table.

A reason is what the audit record and the error message say; the verdict it
goes with is :class:`~acp_proxy.core.wire.verdict.Verdict`. Reasons name what
a peer could read differently, or the limit that was passed (with its
``limits.*`` key).
"""

from __future__ import annotations

__all__ = [
    "BATCH",
    "DEEP",
    "DUPLICATE_REASON",
    "EMPTY_BATCH",
    "ERROR_ID_REASON",
    "GOVERNED_META_REASON",
    "GOVERNED_SNAKE_REASON",
    "ID_REASON",
    "LONG_INTEGER",
    "LONG_INTEGER_NOT_JSON",
    "META_REASON",
    "METHOD_NOT_STRING",
    "NOT_AN_OBJECT",
    "NO_JSONRPC",
    "NO_KIND",
    "PARAMS_TYPE",
    "REPEATED_KEY",
    "REQUEST_WITH_RESULT",
    "RESULT_XOR_ERROR",
    "SNAKE_CASE_REASON",
    "SURROGATE_REASON",
    "__all__",
    "dense_reason",
    "oversize_meta_reason",
    "session_id_reason",
    "too_deep_reason",
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


def too_deep_reason(max_depth: int) -> str:
    """The reason for a frame nested deeper than ``max_depth`` (``Verdict.TOO_DEEP``)."""
    return f"{DEEP}{max_depth} levels (limits.max_nesting_depth)"


def oversize_meta_reason(field_bytes: int) -> str:
    """The reason for a large frame whose ``params._meta`` is over ``field_bytes``."""
    return (
        f"params._meta over {field_bytes} bytes in a large message: too large to check for "
        "decision keys"
    )


def session_id_reason(sid: object, max_session_id_bytes: int) -> str:
    """The reason for ``Verdict.BAD_SESSION_ID`` (``sid``: ``params.sessionId``)."""
    if type(sid) is str:
        return f"session id longer than limits.max_session_id_bytes ({max_session_id_bytes})"
    return "params.sessionId must be a string"


LONG_INTEGER = "an integer of more than 4300 digits (peers read it differently)"
LONG_INTEGER_NOT_JSON = "not valid JSON: an integer of more than 4300 digits"
NOT_AN_OBJECT = "not a JSON object"
EMPTY_BATCH = "empty batch"
NO_JSONRPC = 'missing or wrong "jsonrpc" (must be "2.0")'
METHOD_NOT_STRING = '"method" must be a string'
REQUEST_WITH_RESULT = "a request must not carry result or error"
PARAMS_TYPE = '"params" must be an object or an array'
NO_KIND = "neither a request, a notification nor a response"
RESULT_XOR_ERROR = "a response needs exactly one of result and error"
ERROR_ID_REASON = '"id" must be a string, an integer or null'
#: Why a small frame (decoded whole, duplicates recorded) is ambiguous.
REPEATED_KEY = "duplicate keys in decision fields (method, id, params, sessionId, update)"

# The engine's refusals (:mod:`~acp_proxy.core.engine.refusals`).
BATCH = "ACP does not use JSON-RPC batches"
