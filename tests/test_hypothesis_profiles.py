"""The Hypothesis profile follows the environment (tests/conftest.py): ``ci`` under CI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

TESTS = Path(__file__).resolve().parent


def _loaded_max_examples(**env: str) -> int:
    """``max_examples`` once tests/conftest.py is imported in a fresh interpreter under ``env``
    (on top of the current environment less CI and HYPOTHESIS_PROFILE)."""
    base = {k: v for k, v in os.environ.items() if k not in ("CI", "HYPOTHESIS_PROFILE")}
    code = "import conftest\nfrom hypothesis import settings\nprint(settings.default.max_examples)"
    r = subprocess.run(
        [sys.executable, "-c", code],
        cwd=TESTS,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    return int(r.stdout)


@pytest.mark.parametrize(
    ("env", "examples"),
    [({}, 100), ({"CI": "true"}, 300), ({"CI": "true", "HYPOTHESIS_PROFILE": "dev"}, 100)],
    ids=["dev", "ci", "named"],
)
def test_the_profile_is_chosen_by_the_environment(env: dict[str, str], examples: int) -> None:
    """No CI: ``dev``; CI set: ``ci``; HYPOTHESIS_PROFILE names one whatever CI says."""
    assert _loaded_max_examples(**env) == examples


def test_both_profiles_turn_the_deadline_off() -> None:
    """Neither profile fails a property on a slow example."""
    for name in ("ci", "dev"):
        assert settings.get_profile(name).deadline is None


def test_a_property_without_settings_runs_the_profile_s_examples() -> None:
    """A plain ``@given`` takes the loaded profile's ``max_examples``."""
    calls: list[int] = []

    @given(st.integers())
    def prop(n: int) -> None:
        calls.append(n)

    prop()
    assert len(calls) == settings.default.max_examples
