"""Fixtures for the WebSocket transport tests: the TypeScript SDK for interop, when node exists."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from support.wskit import TS_SDK_CACHE

TS_SDK_VERSION = "2.4.0"


def _installed_version(cache: Path) -> str | None:
    pkg = cache / "node_modules" / "@agentclientprotocol" / "sdk" / "package.json"
    if not pkg.exists() or not (cache / "node_modules" / "zod" / "package.json").exists():
        return None
    version: str = json.loads(pkg.read_text())["version"]
    return version


@pytest.fixture(scope="session")
def ts_ws_node() -> list[str]:
    """``[node, flags...]`` for a Node with the TypeScript SDK cached in ``.cache/ts-sdk``.

    Installs ``@agentclientprotocol/sdk@2.4.0`` and ``zod@^4`` there on first
    use (cached across runs); skips when node/npm are missing or the install fails.
    The SDK directory is ``TS_SDK_CACHE``.
    """
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("node and npm are needed for the TypeScript SDK interop test")
    if _installed_version(TS_SDK_CACHE) != TS_SDK_VERSION:
        TS_SDK_CACHE.mkdir(parents=True, exist_ok=True)
        package_json = TS_SDK_CACHE / "package.json"
        if not package_json.exists():
            package_json.write_text('{"name": "acp-proxy-test-deps", "private": true}\n')
        argv = [npm, "install", "--prefix", str(TS_SDK_CACHE), "--no-audit", "--no-fund"]
        argv += ["--loglevel=error", f"@agentclientprotocol/sdk@{TS_SDK_VERSION}", "zod@^4"]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
        if done.returncode != 0 or _installed_version(TS_SDK_CACHE) != TS_SDK_VERSION:
            pytest.skip(f"cannot install the TypeScript SDK: {done.stderr.strip()[-500:]}")
    # Node 22+ has a global WebSocket; Node 20 needs a flag for it.
    probe = "process.exit(typeof WebSocket === 'function' ? 0 : 1)"
    if subprocess.run([node, "-e", probe], check=False, timeout=60).returncode == 0:
        return [node]
    flagged = [node, "--experimental-websocket"]
    if subprocess.run([*flagged, "-e", probe], check=False, timeout=60).returncode == 0:
        return flagged
    pytest.skip("this node has no WebSocket client")


WS_PACKAGE = "ws@8"


@pytest.fixture(scope="session")
def ts_ws_server_node(ts_ws_node: list[str]) -> list[str]:
    """:func:`ts_ws_node`, with the ``ws`` package also in ``.cache/ts-sdk`` (the Node
    WebSocket server the SDK's ``experimental/node`` upgrade handler is written for)."""
    if not (TS_SDK_CACHE / "node_modules" / "ws" / "package.json").exists():
        npm = shutil.which("npm")
        assert npm is not None
        argv = [npm, "install", "--prefix", str(TS_SDK_CACHE), "--no-audit", "--no-fund"]
        argv += ["--loglevel=error", WS_PACKAGE]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
        assert done.returncode == 0, f"npm install {WS_PACKAGE} failed:\n{done.stderr[-2000:]}"
    return ts_ws_node
