"""Fail closed: the sandbox could not start, so no agent runs (issue 24).

The client is still answered: its first JSON-RPC request gets an error saying
that the sandbox could not start and why; notifications before it are
dropped (logged); then the proxy exits with :data:`SANDBOX_FAILED_STATUS`.
"""

from __future__ import annotations

import logging

from acp_proxy.core.wire.framing import Lines
from acp_proxy.core.wire.jsonrpc import INTERNAL_ERROR, Kind, error_frame, parse
from acp_proxy.shell.transport.base import Closed, FrameTransport

__all__ = ["SANDBOX_FAILED_STATUS", "refuse_first_request"]

log = logging.getLogger("acp_proxy")

#: the proxy's exit status when the required sandbox cannot start
SANDBOX_FAILED_STATUS = 126


async def refuse_first_request(client: FrameTransport, reason: str) -> int:
    """Answers the client's first request with ``reason``; returns :data:`SANDBOX_FAILED_STATUS`.

    Args:
        client: the client's transport (closed on return).
        reason: why the sandbox could not start (one sentence).
    """
    message = f"acp-proxy: the sandbox could not start, so the agent was not started: {reason}"
    try:
        while (batch := await client.receive_batch()) is not None:
            for item in batch:
                frames = item.frames() if isinstance(item, Lines) else [item]
                for frame in frames:
                    if not isinstance(frame, bytes):
                        continue  # an oversize or partial line: nothing to answer
                    m = parse(frame)
                    if m.kind is Kind.REQUEST:
                        await client.send_batch([error_frame(m.id, INTERNAL_ERROR, message)])
                        return SANDBOX_FAILED_STATUS
                    log.warning(
                        "dropped a client notification: no agent runs (the sandbox could not start)"
                    )
    except Closed:
        pass
    finally:
        await client.aclose()
    return SANDBOX_FAILED_STATUS
