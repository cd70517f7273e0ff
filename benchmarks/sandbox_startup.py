"""Start-up time the sandbox engine adds (issue 24).

From spawning ``python -m acp_proxy [...] -- <benchmark agent>`` to the
``initialize`` response on its stdout, with and without ``--sandbox`` (srt),
runs interleaved; the medians and their difference are reported. The
sandboxed start includes what the proxy does once (``srt --version`` and a
probe running ``true`` in the sandbox) and the agent's own launch through srt.

The engine is ``$ACP_PROXY_SRT``, else ``.cache/srt`` (where ``.ci/run``
installs it), else ``srt`` on ``PATH``.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["find_engine", "sandbox_startup", "time_to_initialize"]

ROOT = Path(__file__).resolve().parent.parent
INIT = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n'


def find_engine() -> str | None:
    """The srt executable to measure, or ``None``."""
    given = os.environ.get("ACP_PROXY_SRT")
    if given:
        return given
    cached = ROOT / ".cache" / "srt" / "node_modules" / ".bin" / "srt"
    if cached.exists():
        return str(cached)
    return shutil.which("srt")


def time_to_initialize(argv: list[str], cwd: str, timeout_s: float, init: bytes = INIT) -> float:
    """Seconds from spawning ``argv`` (``init`` written to it at once) to the first line
    on its stdout, which must be a result."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=cwd
    )
    assert proc.stdin is not None
    assert proc.stdout is not None
    proc.stdin.write(init)
    proc.stdin.flush()
    line = proc.stdout.readline()
    elapsed = time.perf_counter() - started
    proc.stdin.close()
    proc.wait(timeout=timeout_s)
    assert b'"result"' in line, f"no initialize result: {line[:200]!r}"
    return elapsed


def sandbox_startup(runs: int, timeout_s: float) -> dict[str, Any] | str:
    """Medians (ms) of the time to the ``initialize`` response, plain and sandboxed.

    Args:
        runs: runs of each variant (interleaved).
        timeout_s: longest wait for one proxy to exit.

    Returns:
        ``{"runs", "plain_ms", "sandbox_ms", "added_ms"}``, or why it was not measured.
    """
    engine = find_engine()
    if engine is None:
        return "not measured: srt not found ($ACP_PROXY_SRT, .cache/srt, PATH)"
    agent = [sys.executable, "-m", "benchmarks.peer"]
    proxy = [sys.executable, "-m", "acp_proxy"]
    with tempfile.TemporaryDirectory(prefix="acp-bench-sandbox-") as ws:
        cfg = Path(ws) / "sandbox.toml"
        cfg.write_text(f'[sandbox]\nenabled = true\nengine_command = "{engine}"\n')
        env_root = str(ROOT)
        plain_argv = [*proxy, "--", *agent]
        boxed_argv = [*proxy, "--config", str(cfg), "--", *agent]
        plain: list[float] = []
        boxed: list[float] = []
        old = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = env_root + (os.pathsep + old if old else "")
        try:
            for _ in range(runs):
                plain.append(time_to_initialize(plain_argv, ws, timeout_s))
                boxed.append(time_to_initialize(boxed_argv, ws, timeout_s))
        finally:
            if old is None:
                del os.environ["PYTHONPATH"]
            else:
                os.environ["PYTHONPATH"] = old
    plain_ms = statistics.median(plain) * 1e3
    boxed_ms = statistics.median(boxed) * 1e3
    return {
        "runs": runs,
        "plain_ms": round(plain_ms, 1),
        "sandbox_ms": round(boxed_ms, 1),
        "added_ms": round(max(0.0, boxed_ms - plain_ms), 1),
    }
