"""In process, no I/O: what the mixed turn's messages cost the core, whole and by piece.

``python -m benchmarks.mixed_cost`` prints the framer + core cost per message
of the mixed turn (:func:`benchmarks.peer.mixed_turn`, as ``core_cost`` does
for the plain stream) and of each inspected piece, in microseconds.
``--callgrind`` counts instructions instead (``valgrind --tool=callgrind``,
the workload of N minus the same process with none, divided by N): the
shared machine moves wall-clock figures by a third, instruction counts by
well under 1% (docs/PERFORMANCE.md, issue 29).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from benchmarks import peer as _bench_peer

__all__ = ["PIECES", "main", "mixed_core_cost", "piece_cost"]

_KIB = 1024


def _core() -> Any:
    """A core past ``initialize`` (protocol v1, no subagent opt-in, as the bench's
    client) and ``session/new`` (``s0``)."""
    from acp_proxy.core.actions import Peer
    from acp_proxy.core.engine import ProxyCore

    core = ProxyCore()
    hello = [
        (Peer.CLIENT, b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":'
         b'{"protocolVersion":1,"clientCapabilities":{}}}'),
        (Peer.CLIENT, b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{}}'),
        (Peer.AGENT, b'{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}'),
        (Peer.AGENT, b'{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s0"}}'),
    ]  # fmt: skip
    for p, raw in hello:
        core.receive(p, raw, 0.0)
    return core


def _turn_data(turns: int, variant: str = "mixed_turn") -> bytes:
    """``turns`` mixed turns; or, for a bound on what the run path costs, the same
    line sizes as content chunks of the known session ``s0`` (``as_chunks``: every
    run a chunk run), and those with each turn's first line a state report
    (``as_envelopes``: no run is a chunk run, every line takes the envelope path)."""
    out: list[bytes] = []
    for t in range(turns):
        for i, ln in enumerate(_bench_peer.mixed_turn(t)):
            if variant == "mixed_turn":
                out.append(ln)
            elif variant == "as_envelopes" and i == 0:
                st = {"sessionUpdate": "state_update", "state": "running", "step": t}
                out.append(_bench_peer._update("s0", st))
            else:
                out.append(_bench_peer.stream_line("s0", len(ln), i))
    return b"".join(out)


#: The mixed turn and its two bounds (:func:`_turn_data`).
TURN_VARIANTS = ("mixed_turn", "as_chunks", "as_envelopes")


def _turns(data: bytes) -> Callable[[], int]:
    """The lines ``data`` through framer + core + routing; returns the messages sent."""
    from acp_proxy.core.actions import Peer
    from acp_proxy.core.wire.framing import LineFramer
    from acp_proxy.shell.routing import route_actions

    chunks = [data[i : i + 64 * _KIB] for i in range(0, len(data), 64 * _KIB)]
    core = _core()
    framer = LineFramer(32 * _KIB * _KIB)

    def run() -> int:
        for chunk in chunks:
            actions = []
            for item in framer.feed_runs(chunk):
                actions.extend(core.receive(Peer.AGENT, item, 0.0))
            route_actions(actions, None)
        return data.count(b"\n")

    return run


def mixed_core_cost(turns: int, variant: str = "mixed_turn") -> float:
    """Microseconds per message of ``turns`` mixed turns (or a bound of
    :data:`TURN_VARIANTS`) through framer + core."""
    run = _turns(_turn_data(turns, variant))
    start = time.perf_counter()
    n = run()
    return (time.perf_counter() - start) / n * 1e6


def _update(sid: str, update: dict[str, Any]) -> bytes:
    return _bench_peer._update(sid, update).rstrip(b"\n")


_STATE = _update("s0", {"sessionUpdate": "state_update", "state": "running", "step": 5})
_ANNOUNCE = _update(
    "s0",
    {
        "sessionUpdate": "subagent_update",
        "sessionId": "s0-c0",
        "title": "Subtask 0",
        "description": "Reads the code and reports back",
        "capabilities": {"cancel": {}},
        "state": {"state": "running"},
    },
)
_CHUNK = _bench_peer.stream_line("s0", 200, 1).rstrip(b"\n")
_IDLE_MIRROR = _update(
    "s0", {"sessionUpdate": "subagent_update", "sessionId": "s0-c0", "state": {"state": "idle"}}
)


#: The engine's pieces: a parsed inspected line handled by the engine alone (no
#: framer, no run check, no parse): two lines taken in turn (each is news to the
#: last) or one line again and again (each a repeat of the last).
_ENGINE_LINES: dict[str, tuple[bytes, ...]] = {
    "engine_state_news": (
        _update("s0", {"sessionUpdate": "state_update", "state": "running", "step": 1}),
        _update("s0", {"sessionUpdate": "state_update", "state": "running", "step": 2}),
    ),
    "engine_state_repeat": (_STATE,),
    "engine_mirror_news": (
        _IDLE_MIRROR,
        _update(
            "s0",
            {
                "sessionUpdate": "subagent_update",
                "sessionId": "s0-c0",
                "state": {"state": "running"},
            },
        ),
    ),
    "engine_mirror_repeat": (_ANNOUNCE,),
}


def _engine_piece(name: str) -> Callable[[int], None]:
    """:data:`_ENGINE_LINES` ``name``: ``count`` lines through the engine's handling of
    an inspected line (``ProxyCore._inspect``), child ``s0-c0`` announced first."""
    from acp_proxy.core.actions import Peer
    from acp_proxy.core.wire.framing import Lines

    core = _core()
    core.receive(Peer.AGENT, Lines(_ANNOUNCE), 0.0)
    msgs = [core._reparse(raw) for raw in _ENGINE_LINES[name]]
    inspect = core._inspect
    for m in msgs:
        inspect(m, 0.0)
    n = len(msgs)

    def go(count: int) -> None:
        for i in range(count):
            inspect(msgs[i % n], 0.0)

    return go


def _piece(name: str) -> Callable[[int], None]:
    """A callable running ``count`` times the piece ``name`` of :data:`PIECES`."""
    from acp_proxy.core.actions import Peer
    from acp_proxy.core.wire.framing import Lines
    from acp_proxy.core.wire.jsonrpc import parse

    if name in _ENGINE_LINES:
        return _engine_piece(name)
    agent = Peer.AGENT
    if name.startswith("parse_"):
        one = _STATE if name == "parse_state_update" else _ANNOUNCE

        def parses(count: int) -> None:
            for _ in range(count):
                parse(one)

        return parses
    core = _core()
    line = {
        "duplicate_state_update": _STATE,
        "repeated_mirror": _ANNOUNCE,
        "repeated_idle_mirror": _IDLE_MIRROR,
    }.get(name, _CHUNK)
    core.receive(agent, Lines(_ANNOUNCE), 0.0)
    core.receive(agent, Lines(line), 0.0)  # the first: delivered; the rest repeat it
    run = Lines(line)

    def go(count: int) -> None:
        for _ in range(count):
            core.receive(agent, run, 0.0)

    return go


#: The pieces :func:`piece_cost` measures: the decode of an inspected line, and a
#: repeated line of the run received alone (``receive`` of a one-line run: the
#: decode, the engine, the drop and its audit record); ``chunk``: a ~200 B chunk
#: received alone (the fast path: what a one-line run costs without the engine);
#: ``engine_*``: the engine's handling alone of a parsed line (:data:`_ENGINE_LINES`).
PIECES = (
    "chunk",
    "parse_state_update",
    "parse_subagent_update",
    "duplicate_state_update",
    "repeated_mirror",
    "repeated_idle_mirror",
    *_ENGINE_LINES,
)


def piece_cost(name: str, count: int) -> float:
    """Microseconds per call of the piece ``name`` (:data:`PIECES`)."""
    go = _piece(name)
    start = time.perf_counter()
    go(count)
    return (time.perf_counter() - start) / count * 1e6


def _callgrind_ir(args: list[str]) -> int:
    """Instructions (callgrind ``Ir``) of this module run with ``args``."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg.out")
        subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
             sys.executable, "-m", "benchmarks.mixed_cost", "--run", *args],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        with open(out) as f:
            text = f.read()
    m = re.search(r"^(?:summary|totals): (\d+)", text, re.M)
    if m is None:
        raise RuntimeError("callgrind wrote no summary")
    return int(m.group(1))


def _ir_per(args: list[str], zero: list[str], count: int) -> int:
    return round((_callgrind_ir(args) - _callgrind_ir(zero)) / count)


def main(argv: list[str] | None = None) -> int:
    """Prints a JSON line: per message of the mixed turn, then per piece."""
    ap = argparse.ArgumentParser(prog="python -m benchmarks.mixed_cost")
    ap.add_argument("--turns", type=int, default=200, help="mixed turns (100 messages each)")
    ap.add_argument("--count", type=int, default=20000, help="calls per piece")
    ap.add_argument("--callgrind", action="store_true", help="instructions, not microseconds")
    ap.add_argument("--only", nargs="+", help="these of the turn variants and the pieces")
    ap.add_argument("--run", nargs="+", help=argparse.SUPPRESS)  # the workload alone
    a = ap.parse_args(argv)
    if a.run:
        what = a.run[0]
        if what == "turns":  # the lines from a file: building them is not measured
            with open(a.run[1], "rb") as f:
                _turns(f.read())()
        else:
            _piece(what)(int(a.run[1]))
        return 0
    res: dict[str, Any] = {}
    wanted = set(a.only or (*TURN_VARIANTS, *PIECES))
    pieces = [p for p in PIECES if p in wanted]
    variants = [v for v in TURN_VARIANTS if v in wanted]
    if a.callgrind:
        res["unit"] = "Ir"
        with tempfile.TemporaryDirectory() as tmp:
            full, empty = os.path.join(tmp, "turns"), os.path.join(tmp, "none")
            open(empty, "wb").close()
            for v in variants:
                data = _turn_data(a.turns, v)
                with open(full, "wb") as f:
                    f.write(data)
                res[v] = _ir_per(["turns", full], ["turns", empty], data.count(b"\n"))
        for p in pieces:
            res[p] = _ir_per([p, str(a.count)], [p, "0"], a.count)
    else:
        res["unit"] = "us"
        for v in variants:
            res[v] = round(min(mixed_core_cost(a.turns, v) for _ in range(3)), 3)
        for p in pieces:
            res[p] = round(min(piece_cost(p, a.count) for _ in range(3)), 3)
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
