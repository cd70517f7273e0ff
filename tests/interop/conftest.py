"""Fixtures for the SDK interop tests: the official TypeScript SDK, installed on demand."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TS_SDK_DIR = REPO / ".cache" / "ts-sdk"
TS_SDK_VERSION = "2.4.0"


def _installed(sdk_dir: Path) -> bool:
    pkg = sdk_dir / "node_modules" / "@agentclientprotocol" / "sdk" / "package.json"
    zod = sdk_dir / "node_modules" / "zod" / "package.json"
    return (
        pkg.exists() and zod.exists() and json.loads(pkg.read_text())["version"] == TS_SDK_VERSION
    )


@pytest.fixture(scope="session")
def ts_sdk_dir() -> Path:
    """A directory whose ``node_modules`` holds ``@agentclientprotocol/sdk@2.4.0`` and zod 4.

    Installed with npm into ``<repo>/.cache/ts-sdk`` on first use and reused
    afterwards. Skips the test only when node or npm is missing.
    """
    npm = shutil.which("npm")
    if shutil.which("node") is None or npm is None:
        pytest.skip("node and npm are not installed: TypeScript SDK interop not run")
    if not _installed(TS_SDK_DIR):
        TS_SDK_DIR.mkdir(parents=True, exist_ok=True)
        manifest = TS_SDK_DIR / "package.json"
        if not manifest.exists():
            manifest.write_text('{"name": "acp-proxy-ts-sdk-cache", "private": true}\n')
        argv = [npm, "install", "--prefix", str(TS_SDK_DIR), "--no-audit", "--no-fund"]
        argv += ["--loglevel=error", f"@agentclientprotocol/sdk@{TS_SDK_VERSION}", "zod@^4"]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
        assert done.returncode == 0, f"npm install failed:\n{done.stderr[-2000:]}"
        assert _installed(TS_SDK_DIR), "npm install did not leave the SDK in place"
    return TS_SDK_DIR
