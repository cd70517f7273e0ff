"""``audit.required``: the whole mode stops once an audit record is lost.

Each relay stops forwarding as soon as it sees the failure
(:meth:`~acp_proxy.shell.relay.Relay._fail_closed`); this runs the mode beside a
task that, after the failure, gives the relays ``grace_seconds`` to answer the
requests in flight and stop their agents, then cancels what is left (a
``--listen`` server, a connection that was idle). The exit status is then
:data:`~acp_proxy.cli.AUDIT_FAILED_STATUS`, set by the command line.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import trio

from acp_proxy.shell.audit_chain import ChainedFile

__all__ = ["stop_on_audit_failure"]


async def stop_on_audit_failure(
    chained: ChainedFile,
    grace_seconds: float,
    runner: tuple[Callable[..., Awaitable[int]], *tuple[Any, ...]],
) -> int:
    """Runs ``runner`` (an async function and its arguments); returns its status, or 1 when
    it was cancelled ``grace_seconds`` after ``chained`` failed."""
    func, *args = runner
    failed = trio.Event()
    token = trio.lowlevel.current_trio_token()

    def on_failure(_why: str) -> None:
        token.run_sync_soon(failed.set)  # from the event loop or a worker thread

    chained.on_failure.append(on_failure)
    status = 1
    async with trio.open_nursery() as nursery:

        async def backstop() -> None:
            await failed.wait()
            await trio.sleep(grace_seconds)
            nursery.cancel_scope.cancel()

        nursery.start_soon(backstop)
        status = await func(*args)
        nursery.cancel_scope.cancel()
    return status
