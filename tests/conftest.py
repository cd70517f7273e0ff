"""Hypothesis profiles for the whole suite: ``ci`` when the environment sets ``CI``, else ``dev``.

- ``dev`` (a developer's run): 100 examples per property, for a quick loop.
- ``ci``: 300 examples per property, and the failing example's reproduction
  blob printed, since a CI machine keeps no example database.

Both turn the per-example deadline off and allow slow data generation: the
properties build whole message sequences and run the core on them, and a
shared machine makes their timing noisy. ``HYPOTHESIS_PROFILE`` (or
pytest's ``--hypothesis-profile``) picks a profile by name instead.

A test carries its own ``@settings`` only where it needs something else
(``test_differential.py``: a high-volume derandomized mix; the stateful
machines in ``test_registry.py`` and ``test_freshness.py``: fewer, longer runs).
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

_COMMON = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])

settings.register_profile("dev", _COMMON, max_examples=100)
settings.register_profile("ci", _COMMON, max_examples=300, print_blob=True)
settings.load_profile(
    os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev")
)
