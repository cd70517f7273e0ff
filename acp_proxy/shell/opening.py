"""The stdio form's opening: its first messages relayed while trio is imported (issue 29).

The drop-in form starts its agent before the relay's modules are imported
(:func:`~acp_proxy.shell.spawn.start_early`). Importing trio and the relay
takes about as long as a Python agent's whole boot, and ``initialize`` waits
for it. So, once the core is built, the first messages (``initialize`` and
its answer, typically) are relayed here by a small synchronous loop while a
thread imports the relay's modules (:func:`open_stdio`). When that import is
done, or at anything the loop leaves to the relay (the end of either stream,
a read or write error, :data:`OPENING_BYTES` read), the loop stops and hands over what it holds
(:class:`Opening`): the core, both framers with any partial line, the bytes
not yet written each way. The relay goes on from there
(:func:`~acp_proxy.shell.topology.stdio.run_stdio_process`).

Nothing is decided differently: the bytes read go through the relay's framer
(:meth:`~acp_proxy.core.wire.framing.LineFramer.feed_runs`) and
:meth:`ProxyCore.receive <acp_proxy.core.engine.ProxyCore.receive>` in the
order they were read, the actions are routed by
:func:`~acp_proxy.shell.routing.route_actions`, and the core's timer fires
when due. Times are ``time.perf_counter()`` seconds, which is the relay's
clock after an opening (:class:`~acp_proxy.shell.relay_loop.PerfCounterClock`).
Only the form with nothing else to carry out opens this way: no audit log,
trace, telemetry or budget store (the early start's conditions, and
``audit`` ``None``).
"""

from __future__ import annotations

import logging
import os
import select
import sys
import threading
import time

from acp_proxy.core.actions import Action, Peer
from acp_proxy.core.wire.framing import LineFramer
from acp_proxy.shell.routing import route_actions
from acp_proxy.shell.transport.pipes import widen_pipe

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from acp_proxy.config import Config
    from acp_proxy.core.engine import ProxyCore
    from acp_proxy.shell.spawn import EarlyStart

__all__ = ["Opening", "log_started", "open_stdio", "relay_opening", "stdio_core", "write_queued"]

#: bytes asked of one read (the relay's ``READ_SIZE``)
READ_BYTES = 256 * 1024

#: bytes queued toward a peer before the loop stops reading the other one (the
#: relay's default ``max_queued_bytes``, which its transports share)
MAX_QUEUED_BYTES = 4 * 1024 * 1024

#: seconds after the opening began when the import starts even though the agent has
#: not written yet: the import waits for the agent's first bytes so as not to take
#: CPU from its boot, but signals are held until the relay runs, so not for long
IMPORT_AFTER_SECONDS = 0.25

#: the interpreter's thread switch interval while the import runs beside the loop,
#: seconds: a frame that arrives waits at most about this long for the loop
SWITCH_SECONDS = 0.0005

#: bytes read from the two peers after which the opening hands over: a peer whose
#: output never pauses would keep the loop from finding nothing to read (the import
#: would never start) or, once the import runs, starve it of the interpreter (each of
#: its file reads waits a switch interval); the relay, and the signals held until it
#: runs, would wait for that stream's end. The first messages are far smaller.
OPENING_BYTES = 1024 * 1024

_IN = select.POLLIN | select.POLLHUP | select.POLLERR

log = logging.getLogger("acp_proxy")


def log_started(pid: int, command: Sequence[str]) -> None:
    """Logs the agent's start at info: its pid and command; at debug, the run path
    the agent's stream takes (compiled or pure Python, and why)."""
    if log.isEnabledFor(logging.INFO):
        import shlex

        log.info("agent started: pid %d: %s", pid, shlex.join(command))
    if log.isEnabledFor(logging.DEBUG):
        from acp_proxy.core.wire.runs import RUN_PATH

        log.debug("run path: %s", RUN_PATH)


def stdio_core(config: Config, agent_pid: int) -> ProxyCore:
    """The core of the stdio form: observed if anything observes, confined to the
    proxy's filesystem rules, the local editor admitted as trusted."""
    from acp_proxy.shell.observe import make_core
    from acp_proxy.shell.places import apply as use_filesystem

    core = use_filesystem(make_core(config, agent_pid))
    core.admission.bind(None, False, os.path.realpath)  # the local editor: trusted
    return core


class Opening:
    """What the opening hands over to the relay.

    Attributes:
        core: the connection's core, with everything it decided so far.
        framers: ``{peer: framer}`` of the bytes read from each peer (a partial
            line stays in it).
        ended: ``{peer: bool}``, True when that peer's stream end was read
            (its framer not yet closed: the relay delivers its last line).
        read: ``{peer: bytes read from it}``.
        queued: ``{peer: [frame, ...]}`` still to be written to that peer,
            each followed by a newline; the first may be the rest of a frame
            written in part (``b""``: only its newline is left).
    """

    def __init__(self, core: ProxyCore, max_message_bytes: int) -> None:
        self.core = core
        self.framers = {peer: LineFramer(max_message_bytes) for peer in Peer}
        self.ended = {peer: False for peer in Peer}
        self.queued: dict[Peer, list[bytes]] = {peer: [] for peer in Peer}
        self.read = {peer: 0 for peer in Peer}  # bytes read from each peer

    def queued_bytes(self, peer: Peer) -> int:
        """Bytes queued toward ``peer``, newlines not counted."""
        return sum(map(len, self.queued[peer]))


def open_stdio(config: Config, early: EarlyStart, load: Callable[[], object]) -> Opening | None:
    """Builds the stdio form's core and relays the first messages while ``load`` (the
    import of the relay's modules) runs in a thread.

    Returns:
        The :class:`Opening` to hand to the relay; ``None`` (``load`` called in
        this thread, nothing read) when the agent did not start. fds 0 and 1
        are the proxy's own: the command line refuses to start with either
        closed (``cli._require_stdio``), so no agent pipe took their numbers.

    Raises:
        Exception: what ``load`` raised.
    """
    popen = early.popen
    if popen is None:
        load()
        return None
    assert popen.stdin is not None
    assert popen.stdout is not None
    log_started(popen.pid, early.command)  # before what the opening relays, as the relay does
    core = stdio_core(config, popen.pid)
    opening = Opening(core, config.limits.max_message_bytes)
    fds = {Peer.CLIENT: (0, 1), Peer.AGENT: (popen.stdout.fileno(), popen.stdin.fileno())}
    relay_opening(opening, fds, load)
    log.debug(
        "opening: %d bytes from the client and %d from the agent relayed before the relay ran",
        opening.read[Peer.CLIENT],
        opening.read[Peer.AGENT],
    )
    return opening


def relay_opening(
    opening: Opening,
    fds: dict[Peer, tuple[int, int]],
    load: Callable[[], object],
    clock: Callable[[], float] = time.perf_counter,
) -> None:
    """Relays between the peers through ``opening.core`` until ``load`` has run in a
    thread, a stream ends, a read or write fails, or :data:`OPENING_BYTES` have been
    read (then the import, if not begun, runs in this thread and the relay reads the
    rest); what is left is in ``opening`` for the relay. The descriptors are given
    back in the blocking mode they had (fds 0 and 1 share their open file with the
    proxy's parent; the relay's streams restore the mode they find when they close).

    The thread starts once nothing is left to read at once and the agent has
    written (its boot is over), or :data:`IMPORT_AFTER_SECONDS` after the start.

    Args:
        opening: the core, framers and queues (updated in place).
        fds: ``{peer: (read_fd, write_fd)}`` (made non-blocking here).
        load: the import run beside the loop.
        clock: the core's time, seconds.

    Raises:
        Exception: what ``load`` raised (re-raised once the loop has stopped).
    """
    found = {fd: os.get_blocking(fd) for pair in fds.values() for fd in pair}
    for fd in found:
        os.set_blocking(fd, False)
        widen_pipe(fd)  # as the relay's transports do
    try:
        _relay_until_loaded(_Loop(opening, fds, clock), load)
    finally:
        for fd, blocking in found.items():
            os.set_blocking(fd, blocking)


def _relay_until_loaded(loop: _Loop, load: Callable[[], object]) -> None:
    """:func:`relay_opening`'s loop and import thread, on descriptors already set up."""
    opening = loop.opening
    done_r, done_w = os.pipe()
    failure: list[BaseException] = []

    def work() -> None:
        try:
            load()
        except BaseException as exc:  # re-raised in the main thread
            failure.append(exc)
        finally:
            os.write(done_w, b"x")

    thread: threading.Thread | None = None
    interval = sys.getswitchinterval()
    begin = time.monotonic()
    try:
        while True:
            if thread is None:
                left = IMPORT_AFTER_SECONDS - (time.monotonic() - begin)
                due = opening.read[Peer.AGENT] > 0 or left <= 0
                if not loop.step(None, 0 if due else int(left * 1000) + 1):
                    break
            elif not loop.step(done_r, -1):
                break
            if thread is None and due and loop.idle:
                sys.setswitchinterval(SWITCH_SECONDS)
                thread = threading.Thread(target=work, name="acp-proxy import", daemon=True)
                thread.start()
    finally:
        sys.setswitchinterval(interval)
        if thread is not None:
            thread.join()
        os.close(done_r)
        os.close(done_w)
    if thread is None:
        load()
    elif failure:
        raise failure[0]


class _Loop:
    """One poll, read, decide and write round at a time (:meth:`step`)."""

    def __init__(
        self, opening: Opening, fds: dict[Peer, tuple[int, int]], clock: Callable[[], float]
    ) -> None:
        self.opening = opening
        self.fds = fds
        self.clock = clock
        self.idle = False  # the last poll found nothing ready
        self._source = {read_fd: peer for peer, (read_fd, _) in fds.items()}
        self._target = {write_fd: peer for peer, (_, write_fd) in fds.items()}

    def step(self, done_fd: int | None, wait_ms: int) -> bool:
        """One round, waiting at most ``wait_ms`` (-1: no bound) or until the core's
        timer or ``done_fd``; False once the opening should hand over."""
        o = self.opening
        poller = select.poll()
        for peer, (read_fd, write_fd) in self.fds.items():
            other = Peer.AGENT if peer is Peer.CLIENT else Peer.CLIENT
            if not o.ended[peer] and o.queued_bytes(other) < MAX_QUEUED_BYTES:
                poller.register(read_fd, _IN)
            if o.queued[peer]:
                poller.register(write_fd, select.POLLOUT)
        if done_fd is not None:
            poller.register(done_fd, select.POLLIN)
        timer_ms = self._timer_ms()
        if wait_ms < 0 or 0 <= timer_ms < wait_ms:
            wait_ms = timer_ms
        events = poller.poll(wait_ms)
        self.idle = not events
        go_on = True
        for fd, _ in events:
            if fd == done_fd:
                go_on = False
            elif fd in self._target:
                go_on = self._write(self._target[fd]) and go_on
            else:
                go_on = self._read(self._source[fd]) and go_on
        return self._fire_timer() and go_on

    def _timer_ms(self) -> int:
        deadline = self.opening.core.get_timer()
        if deadline is None:
            return -1
        return max(0, int((deadline - self.clock()) * 1000) + 1)

    def _fire_timer(self) -> bool:
        core = self.opening.core
        deadline = core.get_timer()
        now = self.clock()
        if deadline is not None and deadline <= now:
            return self._route(core.handle_timer(now))
        return True

    def _read(self, peer: Peer) -> bool:
        o = self.opening
        try:
            data = os.read(self.fds[peer][0], READ_BYTES)
        except BlockingIOError:
            return True
        except OSError:
            return False  # the relay reads it again and reports the error
        if not data:
            o.ended[peer] = True
            return False
        o.read[peer] += len(data)
        go_on = o.read[Peer.CLIENT] + o.read[Peer.AGENT] < OPENING_BYTES
        items = o.framers[peer].feed_runs(data)
        if not items:
            return go_on
        return self._route(o.core.receive(peer, items, self.clock())) and go_on

    def _route(self, actions: list[Action]) -> bool:
        go_on = True
        for peer, frames in route_actions(actions, None).items():
            self.opening.queued[peer].extend(frames)
            go_on = self._write(peer) and go_on
        return go_on

    def _write(self, peer: Peer) -> bool:
        return write_queued(self.fds[peer][1], self.opening.queued[peer])


def write_queued(fd: int, queue: list[bytes]) -> bool:
    """Writes the frames of ``queue``, each followed by a newline, to the non-blocking
    ``fd`` until it would block, taking from ``queue`` what was written: a frame
    written in part stays as its rest (``b""`` when only its newline is left).

    Returns:
        False when a write failed (an ``OSError`` other than would-block; left to
        the relay's writer, which meets it again), else True.
    """
    while queue:
        iov: list[bytes] = []
        for frame in queue[:256]:
            iov.append(frame)
            iov.append(b"\n")
        try:
            n = os.writev(fd, iov)
        except BlockingIOError:
            return True
        except OSError:
            return False
        out = 0  # frames written whole: taken off at once (one pop each is quadratic)
        while n and out < len(queue):
            size = len(queue[out]) + 1
            if n >= size:
                n -= size
                out += 1
            elif n == len(queue[out]):  # the frame is out, its newline is not
                queue[out] = b""
                n = 0
            else:
                queue[out] = queue[out][n:]
                n = 0
        del queue[:out]
    return True
