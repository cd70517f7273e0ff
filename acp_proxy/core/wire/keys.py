"""The keys the proxy decides on, per level, written once (docs/protocol.md section 8).

Every part of the wire that asks "is this a decision key?" reads these sets:
the byte pre-check and the duplicate guard (:mod:`~acp_proxy.core.wire.guard`),
the views of large frames (:mod:`~acp_proxy.core.wire.views`) and the
pass-through fast path. Which SDK reading each row closes is the table in
:mod:`~acp_proxy.core.wire.guard`.
"""

from __future__ import annotations

__all__ = [
    "CAPABILITY_KEYS",
    "DECISION_KEYS",
    "DECISION_LITERALS",
    "GOVERNED_META_PARAMS",
    "GOVERNED_SNAKE",
    "META_SESSION_PARAMS",
    "META_UPDATE_PARAMS",
    "PARAMS_VALUES",
    "SNAKE_PARAMS_KEY",
    "SNAKE_PARAMS_KEYS",
    "SNAKE_UPDATE_KEYS",
    "TOP_VALUES",
    "UPDATE_VALUES",
    "VIEW_ERROR",
    "VIEW_FIELDS",
    "VIEW_PARAMS",
    "VIEW_REF_LISTS",
    "VIEW_RESULT",
    "VIEW_TOP",
    "VIEW_UPDATE",
]

# Keys the proxy makes decisions on. A frame in which one of these literals
# occurs twice, or which contains a \u escape (a key could hide behind it),
# is re-parsed with duplicate detection.
DECISION_LITERALS = (
    b'"method"',
    b'"id"',
    b'"params"',
    b'"jsonrpc"',
    b'"result"',
    b'"error"',
    b'"sessionId"',
    b'"update"',
    b'"sessionUpdate"',
    b'"state"',
    b'"capabilities"',
    b'"senderSessionId"',
    b'"recipientSessionId"',
    b'"_meta"',
    b'"cancel"',
)

# Decision keys per level: top-level object, ``params``, ``params.update``.
DECISION_KEYS = (
    frozenset({"jsonrpc", "method", "id", "params", "result", "error"}),
    frozenset({"sessionId", "update", "_meta"}),
    frozenset(
        {
            "sessionUpdate",
            "sessionId",
            "state",
            "capabilities",
            "senderSessionId",
            "recipientSessionId",
            "_meta",
        }
    ),
)
# ``update.capabilities`` grants: its keys decide too (``cancel``).
CAPABILITY_KEYS = frozenset({"cancel", "_meta"})

# snake_case spellings that pydantic peers (populate_by_name) read as decision
# keys: in ``params`` and in ``params.update`` (``field_meta`` is ``_meta``).
SNAKE_PARAMS_KEY = "session_id"
SNAKE_PARAMS_KEYS = frozenset({"session_id", "field_meta"})
SNAKE_UPDATE_KEYS = frozenset(
    {"session_update", "session_id", "sender_session_id", "recipient_session_id", "field_meta"}
)

#: ``params._meta`` keys the Python SDK router hands a handler as a parameter the
#: proxy's decision reads (the session id; for ``session/update`` also the update).
#: The router builds the handler's keyword arguments from the model's Python
#: field names, then ``kwargs.update(_meta)`` and ``handler(**kwargs)``: only a
#: key *equal* to a field's Python name replaces that parameter. Every other key
#: (``sessionId``, ``SESSION_ID``, ``field_meta``, ``session_update``, vendor
#: keys such as ``openhands.dev/metrics`` or ``zed.dev/...``) lands in the
#: handler's ``**kwargs``: content, never a decision key.
META_SESSION_PARAMS = frozenset({"session_id"})
#: :data:`META_SESSION_PARAMS` of ``session/update`` (``SessionNotification``:
#: ``session_id``, ``update``): ``_meta.update`` replaces the update the client reads.
META_UPDATE_PARAMS = frozenset({"session_id", "update"})

#: ``params._meta`` keys of each governed request that the Python SDK router hands
#: the client's handler in place of a field the permission rules read (exact
#: Python parameter names of the method's model, as :data:`META_SESSION_PARAMS`):
#: ``_meta.path`` replaces the ``path`` of ``fs/write_text_file``,
#: ``_meta.tool_call`` the ``tool_call`` of ``session/request_permission``.
#: ``subject`` is the v2 field (not in SDK 0.12.1's model; fail closed for the
#: SDK version that has it). Fields no rule reads (``line``, ``limit``,
#: ``content``, ``env``, ``output_byte_limit``) and fields of the tool call (the
#: router spreads ``_meta`` over the params only) are not listed.
GOVERNED_META_PARAMS: dict[str, frozenset[str]] = {
    "session/request_permission": frozenset({"session_id", "tool_call", "options", "subject"}),
    "fs/read_text_file": frozenset({"session_id", "path"}),
    "fs/write_text_file": frozenset({"session_id", "path"}),
    "terminal/create": frozenset({"session_id", "command", "args", "cwd"}),
}
#: Multi-word fields of governed requests that the rules or the proxy's own answer
#: read, whose snake_case spelling pydantic peers (``populate_by_name``) accept as
#: the camelCase key, compared without underscores: the tool call, its id and
#: ``rawInput`` (rules), an option's id (the proxy's answer). Fields nothing
#: decides on (``outputByteLimit``, ``rawOutput``) are content, whatever the spelling.
GOVERNED_SNAKE = frozenset({"toolcall", "toolcallid", "rawinput", "optionid"})

# Decision values (a lone surrogate in one is ambiguous): top level, params, update.
TOP_VALUES = ("method",)
PARAMS_VALUES = ("sessionId",)
UPDATE_VALUES = ("sessionUpdate", "sessionId", "senderSessionId", "recipientSessionId")

# Members each view level reads (docs/design.md section 2): the decision keys of
# the level and their snake_case aliases, plus the fields the registry, the hold
# buffer and the engine read.
#: Registry fields: decoded up to ``views.FIELD_BYTES``, else a stand-in.
VIEW_FIELDS = frozenset(
    {"title", "description", "capabilities", "state", "cwd", "additionalDirectories"}
)
#: Lists whose items may name a session (the hold buffer reads them).
VIEW_REF_LISTS = frozenset({"content", "background"})
VIEW_TOP = DECISION_KEYS[0] | {"_meta"}
VIEW_PARAMS = (
    DECISION_KEYS[1]
    | SNAKE_PARAMS_KEYS
    # proxy/successor envelopes wrap a method and its params
    | {"requestId", "clientCapabilities", "protocolVersion", "method", "params"}
)
VIEW_UPDATE = DECISION_KEYS[2] | SNAKE_UPDATE_KEYS | VIEW_FIELDS | VIEW_REF_LISTS | {"messageId"}
VIEW_RESULT = frozenset({"sessionId", "protocolVersion"})
VIEW_ERROR = frozenset({"code", "message"})
