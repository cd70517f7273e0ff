"""Peak RSS of ``--listen`` for one large message per shape over WebSocket (issue 29).

``python -m benchmarks.ws_memprobe``: the WebSocket form of
:mod:`benchmarks.memprobe`. For each shape (the same ``SHAPES``; ``--batches``
adds the two batches of :mod:`benchmarks.batches`), in each direction, a
fresh ``python -m acp_proxy --listen ws://127.0.0.1:0/acp -- AGENT`` carries
the message once on one connection (a text frame from the client, or a line
the agent writes), then a small ping that comes back only after it. The
figure is the proxy process's ``VmHWM`` in MiB (the agent is a separate
process, not counted), against the bound 64 MiB + 4 x N. Linux only.

Output: one line per shape and direction, then a JSON object
``{"<shape>/<direction>": {"bytes": N, "peak_rss_mib": X, "bound_mib": B}}``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

from benchmarks.batches import BATCHES, empty_objects_batch
from benchmarks.client import proc_stats
from benchmarks.memprobe import _AGENT, SHAPES
from benchmarks.sizes import MIB, BenchError, mib
from benchmarks.websocket import listen_server

__all__ = ["main", "measure_ws", "ws_batch_rss"]


async def _carry(url: str, payload: bytes, client: bool, timeout_s: float) -> None:
    import trio
    from trio_websocket import open_websocket_url

    with trio.fail_after(timeout_s):
        async with open_websocket_url(url, max_message_size=4 * len(payload) + MIB) as ws:
            if client:
                await ws.send_message(payload.decode("utf-8"))
                await ws.send_message('{"jsonrpc":"2.0","id":"ping","method":"_x/ping"}')
                want = '"ping"'
            else:
                await ws.send_message('{"jsonrpc":"2.0","method":"_x/go","params":{"go":1}}')
                want = '"_ping"'
            while True:
                text = await ws.get_message()
                if len(text) < 4096 and want in text:
                    return


def measure_ws(payload: bytes, client: bool, tmpdir: str, timeout_s: float = 120.0) -> float:
    """Peak RSS (MiB) of a ``--listen`` proxy that carried ``payload`` once over WebSocket.

    Args:
        payload: one message (UTF-8 JSON text, no newline).
        client: True to send it from the WebSocket client, else the agent writes it.
        tmpdir: a directory for the agent's copy of the payload.
        timeout_s: seconds the start and the exchange may take.

    Raises:
        BenchError: the server did not start or the ping did not come back.
    """
    import trio

    big = os.path.join(tmpdir, "big.json")
    with open(big, "wb") as f:
        f.write(b"" if client else payload + b"\n")
    with listen_server([sys.executable, "-c", _AGENT, big], timeout_s) as (pid, url):
        try:
            trio.run(_carry, url, payload, client, timeout_s)
        except trio.TooSlowError:
            raise BenchError("ws_memprobe: no ping after the large message") from None
        return mib(proc_stats(pid).peak_rss_kib)


def _figure(payload: bytes, client: bool, tmpdir: str) -> dict[str, float]:
    peak = measure_ws(payload, client, tmpdir)
    return {
        "bytes": len(payload),
        "peak_rss_mib": peak,
        "bound_mib": round(64 + 4 * len(payload) / MIB, 1),
    }


def ws_batch_rss(scale: float = 1.0) -> dict[str, dict[str, float]]:
    """The two batches of :mod:`benchmarks.batches` over WebSocket:
    ``{direction: {"elements", "bytes", "peak_rss_mib", "bound_mib"}}``."""
    out: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="acp-bench-wsbatch-") as tmp:
        for direction, elements in BATCHES.items():
            n = max(1, int(elements * scale))
            fig = _figure(empty_objects_batch(n), direction == "client", tmp)
            out[direction] = {"elements": n, **fig}
    return out


def main(argv: list[str] | None = None) -> int:
    """Measures every shape (and with ``--batches`` the batches) both ways; prints a table
    and a JSON summary."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--mib", type=float, default=31.0, help="message size, MiB (default 31)")
    ap.add_argument("--shape", action="append", choices=sorted(SHAPES), help="only these")
    ap.add_argument("--batches", action="store_true", help="also the two batches")
    ap.add_argument("--no-shapes", action="store_true", help="only the batches")
    args = ap.parse_args(argv)
    size = int(args.mib * MIB)
    summary: dict[str, dict[str, float]] = {}

    def show(key: str, fig: dict[str, float]) -> None:
        summary[key] = fig
        verdict = "ok" if fig["peak_rss_mib"] <= fig["bound_mib"] else "OVER"
        print(
            f"{key:28} {fig['bytes'] / MIB:6.1f} MiB  peak {fig['peak_rss_mib']:7.1f} MiB"
            f"  (bound {fig['bound_mib']:.1f})  {verdict}",
            flush=True,
        )

    with tempfile.TemporaryDirectory() as tmpdir:
        for name in [] if args.no_shapes else (args.shape or list(SHAPES)):
            for client in (True, False):
                fig = _figure(SHAPES[name](size, client), client, tmpdir)
                show(f"{name}/{'client' if client else 'agent'}", fig)
    if args.batches or args.no_shapes:
        for direction, fig in ws_batch_rss().items():
            show(f"batch/{direction}", fig)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
