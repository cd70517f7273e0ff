"""The sandbox engine the tests run: srt (``@anthropic-ai/sandbox-runtime``), pinned.

Found at ``$ACP_PROXY_SRT``, else in ``<repo>/.cache/srt`` (where ``.ci/run``
installs it), else installed there with npm on first use. Never skipped: a
machine without node, npm, bubblewrap, socat or ripgrep fails these tests
with the reason.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from acp_proxy.config.sandbox_settings import PINNED_SRT_VERSION

REPO = Path(__file__).resolve().parents[2]
SRT_DIR = REPO / ".cache" / "srt"
SRT_BIN = SRT_DIR / "node_modules" / ".bin" / "srt"


def _version(srt: Path) -> str | None:
    try:
        done = subprocess.run(
            [str(srt), "--version"], capture_output=True, text=True, timeout=60, check=False
        )
    except OSError:
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def srt_engine() -> Path:
    """The pinned srt executable (installing it into ``.cache/srt`` if needed)."""
    given = os.environ.get("ACP_PROXY_SRT")
    if given:
        path = Path(given)
        assert _version(path) == PINNED_SRT_VERSION, (
            f"$ACP_PROXY_SRT={given} is not srt {PINNED_SRT_VERSION}"
        )
        return path
    if _version(SRT_BIN) != PINNED_SRT_VERSION:
        npm = shutil.which("npm")
        assert npm is not None, "npm is needed to install srt (see .ci/run)"
        SRT_DIR.mkdir(parents=True, exist_ok=True)
        argv = [npm, "install", "--prefix", str(SRT_DIR), "--no-audit", "--no-fund"]
        argv += ["--loglevel=error", f"@anthropic-ai/sandbox-runtime@{PINNED_SRT_VERSION}"]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
        assert done.returncode == 0, f"npm install of srt failed:\n{done.stderr[-2000:]}"
    assert _version(SRT_BIN) == PINNED_SRT_VERSION, "srt did not install"
    for tool in ("bwrap", "socat", "rg"):
        assert shutil.which(tool), f"{tool} is not installed: srt needs it (see .ci/run)"
    return SRT_BIN
