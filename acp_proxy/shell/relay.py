"""The relay: one nursery moving frames between two transports through a ProxyCore.

docs/design.md section 1 (``relay.py``): a reader per peer, a writer per peer, a
timer. Readers hand frames to the synchronous core and queue the resulting
sends on bounded memory channels; writers drain them in batches. A full
channel, or more than ``max_queued_bytes`` queued toward a peer, blocks the
reader that feeds it, so a slow client slows the agent's reads and memory
stays bounded in bytes, not only in batches (backpressure).

Isolation: a frame or line run of at least :data:`THREAD_THRESHOLD_BYTES`
is handed to the core in a worker thread (``trio.to_thread.run_sync``), so
that one connection's large message does not freeze the event loop that
serves every other connection of ``--listen``. The reader awaits the thread
before it reads on (order unchanged), and no other task calls this relay's
core while the thread runs (:meth:`Relay._core_ready`). While any such thread
runs, the cyclic garbage collector is paused (:class:`_GcPause`): a full
collection over the millions of objects a hostile message decodes into is
one C call that holds the GIL for seconds.

Shutdown: when the client's stream ends, the core answers the agent's
pending requests, the agent's input is closed and ``stop_agent`` runs (grace
period, then terminate). When the agent's stream ends, ``wait_agent`` gives
its exit status, the core answers the client's pending requests with an
error naming it, those answers are flushed, and :meth:`Relay.run` returns.
"""

from __future__ import annotations

import gc
import json
import logging
from collections.abc import Awaitable, Callable, Collection

import attrs
import trio

from acp_proxy.config import Config
from acp_proxy.config.records import FrozenRecord
from acp_proxy.core.actions import Action, Audit, Peer, StoreCall
from acp_proxy.core.engine import ProxyCore
from acp_proxy.core.wire.framing import Lines
from acp_proxy.core.wire.jsonrpc import INTERNAL_ERROR, error_frame
from acp_proxy.shell.budget_store import RedisBudgetStore, store_for
from acp_proxy.shell.opening import MAX_QUEUED_BYTES
from acp_proxy.shell.relay_loop import CoreTimer, coalesce
from acp_proxy.shell.routing import AuditSink, flush_log_summaries, route_actions
from acp_proxy.shell.transport.base import Closed, FrameTransport, Incoming

__all__ = ["AUDIT_LOST", "THREAD_THRESHOLD_BYTES", "AuditSink", "Relay", "RelayResult"]

log = logging.getLogger("acp_proxy.relay")

DEFAULT_MAX_QUEUED_BYTES = MAX_QUEUED_BYTES

#: a frame or line run this long or longer (bytes) goes to the core in a worker thread
THREAD_THRESHOLD_BYTES = 256 * 1024

#: audit records written per event-loop turn after a core call in a worker thread
AUDIT_SLICE = 256

#: the reason in the errors answered once an audit record was lost with ``audit.required``
AUDIT_LOST = "the audit log could not be written (audit.required): nothing is forwarded"


class _GcPause:
    """Pauses the cyclic garbage collector while at least one ``with`` block runs.

    Process-wide and nestable (a count); the collector is enabled again when
    the last block ends, only if it was enabled when the first one started.
    Reference counting still frees everything that is not in a cycle.
    Entered and left from event-loop threads only.
    """

    def __init__(self) -> None:
        self.active = 0
        self._reenable = False

    def __enter__(self) -> None:
        if self.active == 0:
            self._reenable = gc.isenabled()
            gc.disable()
        self.active += 1

    def __exit__(self, *exc_info: object) -> None:
        self.active -= 1
        if self.active == 0 and self._reenable:
            gc.enable()


_gc_paused = _GcPause()


class _CollectedAudit:
    """An audit sink that only keeps the records (safe to use in a worker thread)."""

    def __init__(self) -> None:
        self.records: list[Audit] = []

    def write(self, record: Audit) -> None:
        self.records.append(record)


class _ByteBudget:
    """Bytes queued toward one peer and not yet written.

    :meth:`acquire` waits while adding ``n`` would exceed ``max_bytes``; a
    batch larger than ``max_bytes`` is admitted alone (when nothing else is
    queued), so one big message can always pass.
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.queued_bytes = 0
        self._lot = trio.lowlevel.ParkingLot()

    async def acquire(self, n: int) -> None:
        await trio.lowlevel.checkpoint_if_cancelled()
        while self.queued_bytes and self.queued_bytes + n > self.max_bytes:
            await self._lot.park()
        self.queued_bytes += n

    def release(self, n: int) -> None:
        self.queued_bytes -= n
        self._lot.unpark_all()

    def resize(self, max_bytes: int) -> None:
        """Sets the bound; a larger one wakes the waiting reader. Bytes already
        queued stay until written (a smaller bound holds for what comes next)."""
        self.max_bytes = max_bytes
        self._lot.unpark_all()


@attrs.frozen(eq=False, repr=False)
class RelayResult(FrozenRecord):
    """How a relay ended.

    Attributes:
        agent_status: the agent's exit status, or ``None`` when unknown
            (e.g. a remote agent whose connection closed).
        client_closed_first: True when the client's stream ended before the agent's.
    """

    agent_status: int | None
    client_closed_first: bool


class Relay:
    """Moves frames between ``client`` and ``agent`` through ``core``.

    Args:
        core: the sans-IO engine for this connection.
        client: the client-side transport.
        agent: the agent-side transport.
        audit: audit sink, or ``None``.
        wait_agent: awaited after the agent's stream ends; returns its exit
            status (``None`` if unknown).
        stop_agent: awaited after the agent's input is closed because the
            client went away (grace period, terminate).
        exit_detail: gives the reason named in the errors for the client's
            requests in flight once the agent has gone (its status, ``None``
            when unknown: a remote agent).
        deaf_detail: awaited when a write to the agent fails: the reason to
            name instead of "stopped reading its input" (an agent process that
            has exited, with its status and stderr), or ``None``.
        channel_batches: capacity of each outgoing memory channel, in batches.
        max_queued_bytes: bytes queued toward one peer before its feeding
            reader waits (one larger batch passes alone).
        flush_timeout_seconds: after the agent is gone, how long the final
            messages to the client may take to write.
        drain_seconds: after the client's EOF, how long to wait for the
            answers to its requests in flight before closing the agent side
            (for transports that cannot half-close, e.g. WebSocket; 0 = close
            at once, right for a pipe, where the agent still answers).
        queued: ``{peer: [frame, ...]}`` to write first, before anything the
            relay decides (what the stdio form's opening had not written yet,
            :class:`~acp_proxy.shell.opening.Opening`).
    """

    def __init__(
        self,
        core: ProxyCore,
        client: FrameTransport,
        agent: FrameTransport,
        *,
        audit: AuditSink | None = None,
        wait_agent: Callable[[], Awaitable[int | None]] | None = None,
        stop_agent: Callable[[], Awaitable[object]] | None = None,
        exit_detail: Callable[[int | None], Awaitable[str]] | None = None,
        deaf_detail: Callable[[], Awaitable[str | None]] | None = None,
        channel_batches: int = 64,
        flush_timeout_seconds: float = 10.0,
        max_queued_bytes: int = DEFAULT_MAX_QUEUED_BYTES,
        drain_seconds: float = 0.0,
        queued: dict[Peer, list[bytes]] | None = None,
    ) -> None:
        self.flush_timeout_seconds = flush_timeout_seconds
        self.drain_seconds = drain_seconds
        self._drained = trio.Event()
        self.core = core
        self.transports = {Peer.CLIENT: client, Peer.AGENT: agent}
        self.audit = audit
        self._wait_agent = wait_agent
        self._stop_agent = stop_agent
        self._exit_detail = exit_detail
        self._deaf_detail = deaf_detail
        self._channels = {
            peer: trio.open_memory_channel[list[bytes] | None](channel_batches) for peer in Peer
        }
        self._budgets = {peer: _ByteBudget(max_queued_bytes) for peer in Peer}
        self._client_gone = False
        self._client_closed_first = False
        # True while a worker thread runs this relay's core; no task touches
        # the core then, and _core_free is set when the thread is done.
        self._core_busy = False
        self._core_free = trio.Event()
        self._timer = CoreTimer(self._get_timer, self._fire_timer)
        # audit.required: the chained file whose failure stops the relay, and the reason
        self._audit_file = getattr(audit, "chained", None)
        self._audit_failed: str | None = None
        self._client_eof = trio.Event()
        self._nursery: trio.Nursery | None = None
        self._client_flushed = trio.Event()
        # the shared budget store, when [budgets] store is set (its calls are core actions)
        budgets = core.config.budgets
        self._store: RedisBudgetStore | None = store_for(budgets) if budgets.store else None
        self._calls: list[StoreCall] = []  # store calls made in a worker thread
        for peer, frames in (queued or {}).items():
            if frames:  # the channel holds one batch at least: this never blocks
                self._budgets[peer].queued_bytes += sum(map(len, frames))
                self._channels[peer][0].send_nowait(list(frames))

    async def run(self) -> RelayResult:
        """Relays until the agent's stream has ended and the client has been told.

        Returns:
            The :class:`RelayResult`.
        """
        status: int | None = None
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            for peer in Peer:
                nursery.start_soon(self._writer, peer)
            nursery.start_soon(self._timer.run)
            nursery.start_soon(self._read_client)
            status = await self._read_agent()
            if self._audit_failed is not None:
                # Fail closed: the agent is gone; the client's new requests are still
                # answered with the audit error until it closes (bounded).
                with trio.move_on_after(self.flush_timeout_seconds):
                    await self._client_eof.wait()
            # Client told; let the client writer flush (bounded: a client that
            # stopped reading must not keep the proxy alive), then stop the rest.
            with trio.move_on_after(self.flush_timeout_seconds):
                await self._channels[Peer.CLIENT][0].send(None)
                await self._client_flushed.wait()
            nursery.cancel_scope.cancel()
        flush_log_summaries(everything=True)  # the counts of rate-limited log lines
        return RelayResult(status, self._client_closed_first)

    async def reconfigure(self, config: Config) -> None:
        """Applies a reloaded policy (:meth:`ProxyCore.reconfigure`) between two core calls.

        Waits while a worker thread holds the core, then swaps the policy in
        one synchronous call and re-reads the core's timer (a new hold timeout).
        """
        await self._core_ready()
        self.core.reconfigure(config)
        self._timer.poke()

    @property
    def max_queued_bytes(self) -> int:
        """The bound on the bytes queued toward each peer (the same both ways), bytes."""
        return self._budgets[Peer.CLIENT].max_bytes

    def set_max_queued_bytes(self, max_bytes: int) -> None:
        """Bounds the bytes queued toward each peer to ``max_bytes`` from now on.

        ``--listen`` shares one budget among its connections
        (:mod:`~acp_proxy.shell.topology.queue_share`).
        """
        for budget in self._budgets.values():
            budget.resize(max_bytes)

    # ------------------------------------------------------------ plumbing

    def _now(self) -> float:
        return trio.current_time()

    def _get_timer(self) -> float | None:
        # None while a worker thread owns the core: its _apply pokes the timer after.
        return None if self._core_busy else self.core.get_timer()

    async def _core_ready(self) -> None:
        """Returns once no worker thread holds the core (at once, without a checkpoint, if none).

        Call the core right after, without awaiting anything in between.
        """
        while self._core_busy:
            await self._core_free.wait()

    async def _handle_in_thread(
        self, source: Peer, batch: list[Incoming]
    ) -> tuple[dict[Peer, list[bytes]], list[Audit]]:
        """:meth:`_handle` in a worker thread, its actions routed there too.

        Other tasks of this relay wait for the core meanwhile
        (:meth:`_core_ready`); the cyclic GC is paused (:class:`_GcPause`).
        Cancellation waits for the thread (the core must not be left mid-call).

        Returns:
            ``(sends per peer, audit records)`` as :func:`route_actions` gives
            them, the records not yet written (reports are logged already).
        """
        while self._core_busy:
            await self._core_free.wait()
        self._core_busy = True
        self._core_free = trio.Event()
        now = self._now()

        def work() -> tuple[dict[Peer, list[bytes]], list[Audit]]:
            sink = _CollectedAudit()
            actions = self._handle(source, batch, now)
            if self._store is not None:
                self._calls.extend(a for a in actions if type(a) is StoreCall)
            return route_actions(actions, sink if self.audit is not None else None), sink.records

        try:
            with _gc_paused:
                return await trio.to_thread.run_sync(work)
        finally:
            self._core_busy = False
            self._core_free.set()

    async def _apply(
        self,
        actions: list[Action],
        source: Peer | None = None,
        incoming: list[Incoming] | None = None,
    ) -> None:
        """Carries out core actions in order; Sends are grouped per peer.

        After an audit record was lost with ``audit.required``, nothing is sent
        (:meth:`_fail_closed`): not even what the failed record was about.

        Args:
            actions: the core's actions.
            source: the peer whose ``incoming`` frames gave them, if any.
            incoming: those frames (their requests are answered if this fails closed).
        """
        if self._audit_failed is not None:
            return
        batch = route_actions(actions, self.audit)
        f = self._audit_file
        if f is not None and f.failure is not None:
            await self._fail_closed(source, incoming)
            return
        await self._send_routed(batch)
        if self._store is not None:
            await self._store_calls([a for a in actions if type(a) is StoreCall])

    async def _fail_closed(
        self, source: Peer | None = None, incoming: list[Incoming] | None = None
    ) -> None:
        """An audit record could not be written and ``audit.required``: stop forwarding.

        The requests in flight both ways are answered with an error saying so
        (through the core, as if both peers had gone), and so are the requests
        of ``incoming`` (whose outcome was not sent: the frames that made the
        failed record); the agent's input is closed (it is stopped after the
        grace period), and from now on every request either peer sends is
        answered with that error, nothing forwarded.
        """
        if self._audit_failed is not None:
            return
        self._audit_failed = AUDIT_LOST
        await self._core_ready()
        now = self._now()
        in_flight = set(self.core.pending_ids(source)) if source is not None else set()
        actions = self.core.peer_closed(Peer.AGENT, now, AUDIT_LOST)
        actions += self.core.peer_closed(Peer.CLIENT, now, AUDIT_LOST)
        await self._send_routed(route_actions(actions, None))  # no record can be written
        if source is not None and incoming:
            await self._refuse_all(source, incoming, in_flight)
        await self._channels[Peer.AGENT][0].send(None)

    async def _refuse_all(
        self, source: Peer, batch: list[Incoming], answered: Collection[object] = ()
    ) -> None:
        """After :meth:`_fail_closed`: answers each request in ``batch`` with the error
        (except those whose id is in ``answered``)."""
        frames: list[bytes] = []
        for item in batch:
            if type(item) is bytes:
                frames.append(item)
            elif type(item) is Lines:
                frames.extend(item.frames())
        answers = []
        for frame in frames:
            try:
                m = json.loads(frame)
            except Exception:  # not JSON, or nested past the decoder's limit
                continue
            rid = m.get("id") if type(m) is dict and "method" in m else None
            if (type(rid) is str or type(rid) is int) and rid not in answered:
                answers.append(error_frame(rid, INTERNAL_ERROR, f"acp-proxy: {AUDIT_LOST}"))
        if answers and not (source is Peer.CLIENT and self._client_gone):
            await self._send_routed({source: answers})

    async def _store_calls(self, calls: list[StoreCall]) -> None:
        """Carries out the core's budget store calls (docs/design.md "Budgets shared through
        a store"): a ``reserve`` is awaited here, so the reader that fed the prompt
        reads nothing more until the core has its answer; an ``add`` runs apart."""
        for call in calls:
            if call.op == "reserve":
                await self._store_answer(call)
            elif self._nursery is not None:
                self._nursery.start_soon(self._store_answer, call)

    async def _store_answer(self, call: StoreCall) -> None:
        assert self._store is not None
        reply = await self._store.call(call)
        await self._core_ready()
        await self._apply(self.core.store_result(call, reply, self._now()))

    async def _send_routed(self, batch: dict[Peer, list[bytes]]) -> None:
        for peer, frames in batch.items():
            await self._budgets[peer].acquire(sum(map(len, frames)))
            await self._channels[peer][0].send(frames)
        self._timer.poke()

    async def _apply_from_thread(
        self,
        routed: tuple[dict[Peer, list[bytes]], list[Audit]],
        origin: tuple[Peer, list[Incoming]],
    ) -> None:
        """Writes the records ``AUDIT_SLICE`` at a time (other tasks run between), then sends."""
        batch, records = routed
        source, incoming = origin
        if self.audit is not None:
            for start in range(0, len(records), AUDIT_SLICE):
                for record in records[start : start + AUDIT_SLICE]:
                    self.audit.write(record)
                await trio.lowlevel.checkpoint()
        f = self._audit_file
        if self._audit_failed is not None or (f is not None and f.failure is not None):
            await self._fail_closed(source, incoming)
            return
        await self._send_routed(batch)
        if self._calls:
            calls, self._calls = self._calls, []
            await self._store_calls(calls)

    async def _fire_timer(self, now: float) -> None:
        await self._core_ready()
        await self._apply(self.core.handle_timer(max(now, self._now())))

    async def _writer(self, peer: Peer) -> None:
        rx = self._channels[peer][1]
        transport = self.transports[peer]
        budget = self._budgets[peer]
        broken = False
        done = False
        while not done:
            frames = await rx.receive()
            if frames is None:
                break
            frames, done = coalesce(rx, frames)  # one write for what is queued
            size = sum(map(len, frames))
            if broken:
                budget.release(size)
                continue
            try:
                await transport.send_batch(frames)
            except Closed as exc:
                broken = True
                log.info("%s", exc)
                if peer is Peer.CLIENT:
                    await self._on_client_gone("client stopped reading (stdout closed)")
                elif self._wait_agent is not None:
                    # an agent process that closed its stdin may still run and write;
                    # a network agent that fails a write is gone, its reader says why
                    await self._on_agent_deaf()
            finally:
                budget.release(size)
        if peer is Peer.AGENT:
            await transport.close_write()
            if self._stop_agent is not None and self._nursery is not None:
                self._nursery.start_soon(self._stop_agent)
        else:
            self._client_flushed.set()
        # Keep draining, so that no reader ever blocks on a closed peer.
        while True:
            frames = await rx.receive()
            if frames is not None:
                budget.release(sum(map(len, frames)))

    # ------------------------------------------------------------- readers

    async def _pump(self, peer: Peer) -> None:
        """Feeds ``peer``'s frames to the core until its stream ends."""
        transport = self.transports[peer]
        while True:
            try:
                batch = await transport.receive_batch()
            except Closed as exc:
                log.info("%s", exc)
                return
            if batch is None:
                return
            await self._feed(peer, batch)

    async def _read_client(self) -> None:
        await self._pump(Peer.CLIENT)
        self._client_eof.set()
        await self._on_client_gone("client closed its stream", stdin_eof=True)

    async def _on_client_gone(self, detail: str, *, stdin_eof: bool = False) -> None:
        if self._client_gone:
            return
        self._client_gone = True
        self._client_closed_first = True
        if self.drain_seconds and stdin_eof:
            # The agent side cannot be half-closed (WebSocket): let the answers
            # to the client's requests in flight arrive before closing it.
            with trio.move_on_after(self.drain_seconds):
                while True:
                    await self._core_ready()
                    if not self.core.pending_requests(Peer.CLIENT):
                        break
                    await self._drained.wait()
                    self._drained = trio.Event()
        await self._core_ready()
        await self._apply(self.core.peer_closed(Peer.CLIENT, self._now(), detail))
        await self._channels[Peer.AGENT][0].send(None)

    async def _on_agent_deaf(self) -> None:
        """A write to the agent failed: its requests are answered, its output still read."""
        exited = await self._deaf_detail() if self._deaf_detail is not None else None
        if exited is None:
            log.warning(
                "the agent stopped reading its input; client requests are answered with an error"
            )
        detail = exited or "agent stopped reading its input (its stdin is closed)"
        await self._core_ready()
        await self._apply(self.core.agent_stopped_reading(self._now(), detail))

    async def _read_agent(self) -> int | None:
        await self._pump(Peer.AGENT)
        status: int | None = None
        if self._wait_agent is not None:
            status = await self._wait_agent()
        if self._exit_detail is not None:
            detail = await self._exit_detail(status)
        elif status is None:
            detail = "agent closed the connection"
        else:
            detail = f"agent exited with status {status}"
        await self._core_ready()
        await self._apply(self.core.peer_closed(Peer.AGENT, self._now(), detail))
        self._drained.set()
        return status

    async def _feed(self, source: Peer, batch: list[Incoming]) -> None:
        """Hands ``batch`` to the core: in a worker thread when an item is large."""
        if self._audit_failed is not None:
            await self._refuse_all(source, batch)
            return
        for item in batch:
            if type(item) is bytes:
                size = len(item)
            elif type(item) is Lines:
                size = len(item.data)
            else:
                continue
            if size >= THREAD_THRESHOLD_BYTES:
                routed = await self._handle_in_thread(source, batch)
                await self._apply_from_thread(routed, (source, batch))
                break
        else:
            await self._core_ready()
            await self._apply(self._handle(source, batch, self._now()), source, batch)
        if source is Peer.AGENT:
            self._drained.set()  # wakes a client-EOF drain waiting for answers

    def _handle(self, source: Peer, batch: list[Incoming], now: float) -> list[Action]:
        """The core's actions for ``batch`` (runs on the event loop or in a worker thread)."""
        return self.core.receive(source, batch, now)
