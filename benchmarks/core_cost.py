"""In process, no I/O: the framer + core cost per message, and JSON decoders side by side."""

from __future__ import annotations

import functools
import json
import time
import timeit
from collections.abc import Callable
from typing import Any

from benchmarks import peer as _bench_peer
from benchmarks.sizes import KIB, MIB, BenchError

__all__ = ["core_cost_us", "parser_comparison"]


def parser_comparison(number: int) -> dict[str, dict[str, float]]:
    """Microseconds per decode of a ~1 KiB and a ~200 B chunk, per JSON parser.

    ``json`` / ``orjson`` / ``msgspec``: a generic decode to Python objects.
    ``msgspec_struct``: msgspec decoding only the fields the proxy decides on
    (unknown fields are skipped). ``dup_guard``: the duplicate-key pre-check
    :func:`acp_proxy.core.wire.guard.maybe_duplicated`. ``parse``: the proxy's
    whole :func:`acp_proxy.core.wire.jsonrpc.parse`.
    """
    import msgspec

    from acp_proxy.core.wire import guard, jsonrpc

    decoders: dict[str, Callable[[bytes], Any]] = {"json": json.loads}
    try:
        import orjson  # installed with the [test] extra; not a runtime dependency
    except ImportError:
        pass
    else:
        decoders["orjson"] = orjson.loads
    # Only the fields decisions need; the rest is skipped (still validated).
    upd = msgspec.defstruct("Update", [("sessionUpdate", Any, None)])
    params = msgspec.defstruct("Params", [("sessionId", Any, None), ("update", upd | None, None)])
    envelope = msgspec.defstruct(
        "Envelope",
        [
            ("jsonrpc", Any, None),
            ("id", Any, None),
            ("method", Any, None),
            ("params", params | None, None),
        ],
    )
    decoders["msgspec"] = msgspec.json.Decoder().decode
    decoders["msgspec_struct"] = msgspec.json.Decoder(envelope).decode
    decoders["dup_guard"] = guard.maybe_duplicated
    decoders["parse"] = jsonrpc.parse
    out: dict[str, dict[str, float]] = {}
    for label, size in (("1k", 1024), ("200b", 200)):
        line = _bench_peer.stream_line("s0", size, 7).rstrip(b"\n")
        out[label] = {}
        for name, fn in decoders.items():
            best = min(timeit.repeat(functools.partial(fn, line), number=number, repeat=5))
            out[label][name] = round(best / number * 1e6, 3)
    return out


def core_cost_us(size: int, count: int, traced: bool = False, config: Any = None) -> float:
    """Microseconds per ~``size``-byte chunk through framer + core, in process (no I/O).

    With ``traced``, the core is the :class:`~acp_proxy.core.trace.TracingCore` the
    shell builds when something observes, its records made and discarded.

    The shell's share of the work (framing with ``feed_runs``,
    :meth:`ProxyCore.receive` of each framer item, grouping the sends,
    joining a write) without pipes or scheduling: the proxy's CPU floor per
    message, steadier than the end-to-end figures. ``config``: the core's
    :class:`~acp_proxy.config.Config` (e.g. budgets on), else the defaults.
    """
    from acp_proxy.core.actions import Peer
    from acp_proxy.core.engine import ProxyCore
    from acp_proxy.core.wire.framing import LineFramer, Lines
    from acp_proxy.shell.routing import route_actions

    core = ProxyCore(config)
    if traced:
        from acp_proxy.core.trace import TracingCore

        core = TracingCore(config, emit=lambda record: None)
    hello = [
        (Peer.CLIENT, b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}'),
        (Peer.CLIENT, b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{}}'),
        (Peer.AGENT, b'{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}'),
        (Peer.AGENT, b'{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s0"}}'),
    ]
    for peer, raw in hello:
        core.receive(peer, raw, 0.0)
    data = b"".join(_bench_peer.stream_lines(count, size, ["s0"]))
    chunks = [data[i : i + 64 * KIB] for i in range(0, len(data), 64 * KIB)]
    framer = LineFramer(32 * MIB)
    written = 0
    start = time.perf_counter()
    for chunk in chunks:
        actions = []
        for item in framer.feed_runs(chunk):
            if type(item) is Lines or type(item) is bytes:
                actions.extend(core.receive(Peer.AGENT, item, 0.0))
            else:
                raise BenchError(f"core_cost: unexpected {item!r}")
        for frames in route_actions(actions, None).values():
            frames.append(b"")
            written += len(b"\n".join(frames))
    elapsed = time.perf_counter() - start
    if written < len(data):
        raise BenchError("core_cost: the core did not forward every chunk")
    return elapsed / count * 1e6
