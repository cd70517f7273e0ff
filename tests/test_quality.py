"""Lint and type-check as part of the test command (a house habit)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600
    )


def test_ruff_check_is_clean() -> None:
    """ruff finds no lint errors in the package, the benchmarks or the tests."""
    r = _run("ruff", "check", "acp_proxy", "benchmarks", "tests")
    assert r.returncode == 0, r.stdout + r.stderr


def test_ruff_format_is_clean() -> None:
    """The code is formatted as ruff format would write it."""
    r = _run("ruff", "format", "--check", "acp_proxy", "benchmarks", "tests")
    assert r.returncode == 0, r.stdout + r.stderr


def test_mypy_strict_is_clean() -> None:
    """mypy --strict (configured in pyproject.toml) finds no type errors in the package
    or the benchmarks."""
    r = _run("mypy")
    assert r.returncode == 0, r.stdout + r.stderr
