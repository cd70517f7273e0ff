"""The memory probe measures a real proxy process (``acp_proxy.memprobe``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from acp_proxy.memprobe import SHAPES, measure

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")


@pytest.mark.parametrize("client", [True, False])
def test_a_small_message_of_each_cheap_shape_stays_under_the_bound(
    tmp_path: Path, client: bool
) -> None:
    """1 MiB messages: the probe reads VmHWM after the ping and the proxy is well under
    64 MiB + 4 x N (the shapes that still build a whole tree are measured at 31 MiB by
    ``python -m acp_proxy.memprobe``, not here)."""
    for name in ("long_string", "many_keys"):
        payload = SHAPES[name](1 << 20, client)
        mib = measure(payload, client, str(tmp_path), timeout=60)
        assert 5 < mib <= 64 + 4 * len(payload) / 2**20, (name, mib)
