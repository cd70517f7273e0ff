"""The trio pieces shared by the shells (:mod:`~acp_proxy.shell.relay`,
:mod:`~acp_proxy.shell.topology.chain`): both drive the core's timer and coalesce
their writes the same way; only the number of real streams differs.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable

import trio

__all__ = ["MAX_COALESCE", "CoreTimer", "PerfCounterClock", "coalesce"]

#: queued batches merged into one write
MAX_COALESCE = 256


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


class PerfCounterClock(trio.abc.Clock):
    """trio's system clock without its random offset: ``time.perf_counter()`` seconds.

    The stdio form's opening gives the core these times before trio runs
    (:mod:`~acp_proxy.shell.opening`); the relay that goes on with that core
    must keep the same clock, so its deadlines stay where the core put them.
    """

    def start_clock(self) -> None:
        """Nothing to start."""

    def current_time(self) -> float:
        """``time.perf_counter()``, seconds."""
        return time.perf_counter()

    def deadline_to_sleep_time(self, deadline: float) -> float:
        """Seconds from now to ``deadline`` (negative when it has passed)."""
        return deadline - time.perf_counter()
