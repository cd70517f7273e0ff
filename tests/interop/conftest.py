"""Fixtures for the SDK interop tests: the official TypeScript SDK, installed on demand."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from benchmarks.startup import install_ts_sdk

REPO = Path(__file__).resolve().parents[2]
TS_SDK_DIR = REPO / ".cache" / "ts-sdk"


@pytest.fixture(scope="session")
def ts_sdk_dir() -> Path:
    """A directory whose ``node_modules`` holds ``@agentclientprotocol/sdk@2.4.0`` and zod 4.

    Installed with npm into ``<repo>/.cache/ts-sdk`` on first use and reused
    afterwards. Skips the test only when node or npm is missing.
    """
    npm = shutil.which("npm")
    if shutil.which("node") is None or npm is None:
        pytest.skip("node and npm are not installed: TypeScript SDK interop not run")
    failed = install_ts_sdk(npm, TS_SDK_DIR)
    assert not failed, f"npm install failed:\n{failed}"
    return TS_SDK_DIR
