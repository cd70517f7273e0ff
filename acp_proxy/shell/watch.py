"""Builds the observers the configuration asks for, and runs their servers beside a mode.

:func:`open_hub` makes the :class:`~acp_proxy.shell.observe.Hub` (``None`` when
nothing observes, so the cores stay plain); :func:`alongside` runs a mode with
the ``--metrics`` server next to it. The OpenTelemetry bridge
(:mod:`acp_proxy.shell.otel`, ``--otel``) plugs into the hub as a
:class:`~acp_proxy.shell.observe.RecordObserver`; it is imported only when on.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from acp_proxy import __version__
from acp_proxy.config import Config
from acp_proxy.config.files import check_writable
from acp_proxy.errors import UsageError
from acp_proxy.shell.observe import Hub, Tally, current

__all__ = ["OTEL_MISSING", "alongside", "open_hub"]

#: the error for --otel without the otel extra (README "OpenTelemetry": acp-proxy is
#: not on PyPI, so the extra is installed from the clone, the git URL or the wheel)
OTEL_MISSING = (
    "--otel ([telemetry] enabled) needs the otel extra where acp-proxy is installed: "
    "pip install '.[otel]' in a clone, uv tool install --force \"acp-proxy[otel] @ git+URL\", "
    "or pipx inject acp-proxy opentelemetry-sdk opentelemetry-exporter-otlp-proto-http "
    '(README "OpenTelemetry")'
)


def open_hub(cfg: Config, run_id: str) -> Hub | None:
    """The hub for ``cfg``'s ``[trace]`` and ``[telemetry]``, or ``None`` when nothing observes.

    Raises:
        UsageError: the trace cannot be written.
    """
    trace = None
    if cfg.trace.path:
        from acp_proxy.shell.trace import TraceWriter  # only when tracing (issue 29)

        check_writable(cfg.trace.path, "trace file")
        try:
            trace = TraceWriter.open(
                cfg.trace.path,
                cfg.trace.include_content,
                {"pid": os.getpid(), "run": run_id, "proxy": __version__},
            )
        except OSError as exc:
            raise UsageError(f"cannot write the trace {cfg.trace.path!r}: {exc.strerror}") from None
    telemetry = cfg.telemetry
    tally = Tally() if telemetry.metrics or telemetry.enabled else None
    hub = Hub(trace=trace, tally=tally)
    if telemetry.enabled:
        assert tally is not None
        try:
            from acp_proxy.shell.otel import open_bridge
        except ImportError as exc:
            raise UsageError(f"{OTEL_MISSING} ({exc})") from None
        hub.others.append(open_bridge(hub, tally))
    return hub if hub.active else None


async def alongside(
    cfg: Config, runner: tuple[Callable[..., Awaitable[int]], *tuple[Any, ...]]
) -> int:
    """Runs ``runner`` (an async function and its arguments) with the metrics server beside it."""
    func, *args = runner
    hub = current()
    async with trio.open_nursery() as nursery:
        if cfg.telemetry.metrics and hub is not None:
            from acp_proxy.shell.metrics import serve_metrics

            await nursery.start(serve_metrics, cfg.telemetry.metrics, hub, cfg)
        status = await func(*args)
        nursery.cancel_scope.cancel()
    return status
