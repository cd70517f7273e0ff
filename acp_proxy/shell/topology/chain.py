"""Proxy-chain topology: the proxy as a component under an ACP conductor.

``acp-proxy --chain`` talks to its conductor on stdin/stdout; the conductor
carries both the client's traffic and the successor's (in ``proxy/successor``
envelopes), so there is one real stream. The sans-IO
:class:`~acp_proxy.core.chain.ChainAdapter` maps it onto a
:class:`~acp_proxy.core.engine.ProxyCore`; this module only moves bytes:

* one reader (the conductor's stdin) feeding the synchronous adapter;
* one writer draining a bounded memory channel to stdout (a slow conductor
  slows our reads: backpressure, bounded memory);
* one timer for the hold buffer.

Shutdown: when the conductor closes our stdin, requests still in flight are
answered (as far as the conductor still reads), the writer flushes, and
:func:`run_chain` returns 0. If the conductor stops reading our stdout we stop
too, with status 0: the conductor is gone.
"""

from __future__ import annotations

import logging

import trio

from acp_proxy.config import Config
from acp_proxy.core.actions import Action
from acp_proxy.core.chain import ChainAdapter
from acp_proxy.errors import UsageError
from acp_proxy.shell.observe import make_core
from acp_proxy.shell.places import apply as use_filesystem
from acp_proxy.shell.relay import AUDIT_LOST
from acp_proxy.shell.relay_loop import CoreTimer, coalesce
from acp_proxy.shell.routing import AuditSink, route_actions
from acp_proxy.shell.transport.base import Closed, FrameTransport
from acp_proxy.shell.transport.stdio import open_stdio_transport

__all__ = ["ChainRelay", "run_chain"]

log = logging.getLogger("acp_proxy.chain")

FLUSH_TIMEOUT_SECONDS = 30.0


class ChainRelay:
    """Moves frames between a conductor transport and a :class:`ChainAdapter`.

    Args:
        adapter: the sans-IO chain adapter (owning its core).
        conductor: frames to and from the conductor.
        audit: audit sink, or ``None``.
        channel_batches: capacity of the outgoing memory channel, in batches.
    """

    def __init__(
        self,
        adapter: ChainAdapter,
        conductor: FrameTransport,
        *,
        audit: AuditSink | None = None,
        channel_batches: int = 64,
    ) -> None:
        self.adapter = adapter
        self.conductor = conductor
        self.audit = audit
        self._tx, self._rx = trio.open_memory_channel[list[bytes] | None](channel_batches)
        self._timer = CoreTimer(adapter.get_timer, self._fire_timer)
        self._read_scope = trio.CancelScope()
        self._flushed = trio.Event()
        self._detail = "conductor closed the connection"
        self._audit_failed = False

    async def run(self) -> None:
        """Relays until the conductor's stream has ended and the answers are flushed."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._writer)
            nursery.start_soon(self._timer.run)
            with self._read_scope:
                await self._read()
            await self._apply(self.adapter.conductor_closed(trio.current_time(), self._detail))
            await self._tx.send(None)
            with trio.move_on_after(FLUSH_TIMEOUT_SECONDS):
                await self._flushed.wait()
            nursery.cancel_scope.cancel()

    async def _read(self) -> None:
        while True:
            try:
                batch = await self.conductor.receive_batch()
            except Closed as exc:
                log.info("%s", exc)
                return
            if batch is None:
                return
            actions = self.adapter.receive(batch, trio.current_time())
            await self._apply(actions)

    async def _apply(self, actions: list[Action]) -> None:
        """Carries out adapter actions in order: sends are queued as one batch.

        After an audit record was lost with ``audit.required``, nothing more is
        sent: the requests in flight are answered with the audit error and the
        reading stops (the proxy then exits with status 1).
        """
        if self._audit_failed:
            return
        routed = route_actions(actions, self.audit)
        chained = getattr(self.audit, "chained", None)
        if chained is not None and chained.failure is not None:
            self._audit_failed = True
            closed = self.adapter.conductor_closed(trio.current_time(), AUDIT_LOST)
            routed = route_actions(closed, None)
            self._read_scope.cancel()
        for frames in routed.values():
            await self._tx.send(frames)  # every send goes to the conductor
        self._timer.poke()

    async def _fire_timer(self, now: float) -> None:
        await self._apply(self.adapter.handle_timer(now))

    async def _writer(self) -> None:
        broken = False
        done = False
        while not done:
            frames = await self._rx.receive()
            if frames is None:
                break
            frames, done = coalesce(self._rx, frames)  # one write for what is queued
            if broken:
                continue
            try:
                await self.conductor.send_batch(frames)
            except Closed as exc:
                broken = True
                log.info("%s", exc)
                self._detail = "conductor stopped reading (stdout closed)"
                self._read_scope.cancel()
        self._flushed.set()
        while True:  # keep draining so that no producer ever blocks
            await self._rx.receive()


async def run_chain(config: Config, audit: AuditSink | None) -> int:
    """Runs ``acp-proxy --chain``: a proxy component on stdin/stdout.

    Args:
        config: effective configuration.
        audit: audit sink or ``None``.

    Returns:
        0 once the conductor has closed the connection.
    """
    if config.budgets.store:
        raise UsageError(
            "budgets.store is not supported with --chain: count budgets in this proxy "
            '(store = "") or run it with --listen or as a stdio proxy'
        )
    conductor = open_stdio_transport(config.limits.max_message_bytes)
    conductor.name = "conductor"
    # the proxy's own files out of reach, paths resolved, as in the stdio form (issue 31)
    adapter = ChainAdapter(use_filesystem(make_core(config)))
    relay = ChainRelay(
        adapter, conductor, audit=audit, channel_batches=config.limits.channel_messages
    )
    try:
        await relay.run()
    finally:
        await conductor.aclose()
    return 0
