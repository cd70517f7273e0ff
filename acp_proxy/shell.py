"""Pieces shared by the trio shells (:mod:`acp_proxy.relay`, :mod:`acp_proxy.chain`).

Both carry out the sans-IO core's actions and drive its timer the same way;
only the number of real streams differs.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable
from typing import Protocol

import trio

from acp_proxy.core.actions import Action, Audit, Peer, Report, Send

__all__ = ["MAX_COALESCE", "AuditSink", "CoreTimer", "coalesce", "route_actions"]

log = logging.getLogger("acp_proxy")

_LEVELS = {"info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}

#: queued batches merged into one write
MAX_COALESCE = 256

_CLIENT = Peer.CLIENT
_AGENT = Peer.AGENT


class AuditSink(Protocol):
    """Where :class:`~acp_proxy.core.actions.Audit` records go."""

    def write(self, record: Audit) -> None:
        """Records one audit event (must not block for long)."""


def _brief(fields: dict[str, object]) -> str:
    return " ".join(f"{k}={v!r}" for k, v in fields.items() if v is not None and k != "content")


def route_actions(actions: list[Action], audit: AuditSink | None) -> dict[Peer, list[bytes]]:
    """Carries out audit and report actions; returns the sends grouped by peer.

    Audit records go to ``audit`` (and, at debug level, to the log); reports
    go to the log at their level. Sends keep their order within each peer.

    Args:
        actions: the core's actions, in order.
        audit: the audit sink, or ``None``.

    Returns:
        ``{peer: [frame, ...]}`` (frames without line endings).
    """
    to_client: list[bytes] = []
    to_agent: list[bytes] = []
    debug = log.isEnabledFor(logging.DEBUG)
    for a in actions:
        if type(a) is Send:
            # identity tests: hashing an Enum member runs Python code
            (to_client if a.to is _CLIENT else to_agent).append(a.data)
        elif type(a) is Audit:
            if audit is not None:
                audit.write(a)
            if debug:
                log.debug("%s %s %s", a.event, a.direction or "", _brief(a.fields))
        elif type(a) is Report:
            log.log(_LEVELS.get(a.level, logging.WARNING), "%s", a.text)
    batch: dict[Peer, list[bytes]] = {}
    if to_client:
        batch[_CLIENT] = to_client
    if to_agent:
        batch[_AGENT] = to_agent
    return batch


class CoreTimer:
    """Calls ``on_fire(now)`` whenever the core's timer deadline passes.

    Args:
        get_timer: the core's ``get_timer`` (seconds on trio's clock, or ``None``).
        on_fire: awaited with the current time when the deadline is reached.

    Call :meth:`poke` after every core call that may have set an earlier deadline.
    """

    def __init__(
        self,
        get_timer: Callable[[], float | None],
        on_fire: Callable[[float], Awaitable[None]],
    ) -> None:
        self._get_timer = get_timer
        self._on_fire = on_fire
        self._scope: trio.CancelScope | None = None

    def poke(self) -> None:
        """Moves the wake-up earlier if the core's deadline is now earlier."""
        scope = self._scope
        if scope is None:
            return
        deadline = self._get_timer()
        if deadline is not None and deadline < scope.deadline:
            scope.deadline = deadline

    async def run(self) -> None:
        """Runs until cancelled."""
        while True:
            deadline = self._get_timer()
            with trio.CancelScope(deadline=math.inf if deadline is None else deadline) as scope:
                self._scope = scope
                await trio.sleep_forever()
            self._scope = None
            await self._on_fire(trio.current_time())


def coalesce(
    rx: trio.MemoryReceiveChannel[list[bytes] | None], frames: list[bytes]
) -> tuple[list[bytes], bool]:
    """Appends to ``frames`` whatever batches are already queued on ``rx``.

    Returns:
        ``(frames, ended)``: ``ended`` is True when the end-of-stream marker
        (``None``) was taken.
    """
    for _ in range(MAX_COALESCE):
        try:
            more = rx.receive_nowait()
        except trio.WouldBlock:
            break
        if more is None:
            return frames, True
        frames.extend(more)
    return frames, False
