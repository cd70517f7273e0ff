"""The proxy under cProfile on the ~1 KiB stream (``python -m benchmarks --profile FILE``)."""

from __future__ import annotations

import os
from typing import Any

from benchmarks.client import open_client, stream_params

__all__ = ["profile_proxy"]


def profile_proxy(
    count: int, out_path: str, timeout_s: float, top: int = 25
) -> tuple[str, list[str]]:
    """Runs the ~1 KiB stream through the proxy under cProfile.

    Args:
        count: messages in the stream.
        out_path: where ``cProfile`` writes its stats.
        timeout_s: deadline of any wait.
        top: entries shown (by own time).

    Returns:
        The ``pstats`` listing, and the top 10 entries as
        ``"file:line(function) own_s/cumulative_s"`` strings.
    """
    import io
    import pstats

    prefix = ["-m", "cProfile", "-o", out_path]
    with open_client("proxy", timeout_s, 1, proxy_prefix=prefix) as c:
        c.run_workload(stream_params(count, 1024, c.sessions))
    buf = io.StringIO()
    st = pstats.Stats(out_path, stream=buf)
    st.sort_stats("tottime").print_stats(top)
    raw_stats: dict[tuple[str, int, str], tuple[int, int, float, float, Any]]
    raw_stats = st.stats  # type: ignore[attr-defined]
    ranked = sorted(raw_stats.items(), key=lambda kv: kv[1][2], reverse=True)[:10]
    brief = [
        f"{os.path.basename(f)}:{line}({fn}) {tt:.3f}/{ct:.3f}"
        for (f, line, fn), (_cc, _nc, tt, ct, _callers) in ranked
    ]
    return buf.getvalue(), brief
