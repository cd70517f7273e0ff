"""The zero-inspection baseline: a minimal trio line relay, run as a subprocess like the proxy.

Started as ``python -m benchmarks.bench --relay -- <agent>`` (see
:func:`benchmarks.client.variant_cmd`).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Sequence
from typing import Any

from benchmarks.sizes import KIB

__all__ = ["run_relay"]


async def _pump(rx: Any, tx: Any, close_tx: bool) -> None:
    import trio

    partial = b""
    try:
        while True:
            data = await rx.receive_some(256 * KIB)
            if not data:
                break
            data = partial + data
            cut = data.rfind(b"\n") + 1
            if not cut:
                partial = data
                continue
            lines = data[:cut].split(b"\n")
            lines.pop()
            partial = data[cut:]
            lines.append(b"")
            await tx.send_all(b"\n".join(lines))
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        pass
    if close_tx:
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            await tx.aclose()


async def _relay_main(argv: Sequence[str]) -> int:
    import trio

    proc = await trio.lowlevel.open_process(
        list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    stdin = trio.lowlevel.FdStream(os.dup(0))
    stdout = trio.lowlevel.FdStream(os.dup(1))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_pump, stdin, proc.stdin, True)
        await _pump(proc.stdout, stdout, False)
        nursery.cancel_scope.cancel()
    return await proc.wait()


def run_relay(argv: Sequence[str]) -> int:
    """The zero-inspection baseline: relays lines between stdio and ``argv``.

    Reads chunks, splits complete lines, forwards them; no parsing. Returns
    the agent's exit status.
    """
    import trio

    status: int = trio.run(_relay_main, argv)
    return status
