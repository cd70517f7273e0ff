"""Peak RSS of a real proxy process for one large message of every shape
(``benchmarks.memprobe``, ``VmHWM``): at most 64 MiB + 4 x N, either direction."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from benchmarks.batches import empty_objects_batch
from benchmarks.memprobe import SHAPES, measure

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="reads /proc"),
    pytest.mark.slow,
]


@pytest.mark.parametrize("client", [True, False], ids=["client", "agent"])
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_one_large_message_of_any_shape_stays_under_the_bound(
    tmp_path: Path, shape: str, client: bool
) -> None:
    """8 MiB messages (past limits.dense_message_bytes, so read through views): the proxy's
    peak RSS stays under 64 MiB + 4 x N for every shape, deep, dense or long."""
    payload = SHAPES[shape](8 << 20, client)
    mib = measure(payload, client, str(tmp_path), timeout=60)
    assert 5 < mib <= 64 + 4 * len(payload) / 2**20, (shape, mib)


@pytest.mark.parametrize(
    ("client", "elements"), [(False, 300_000), (True, 200_000)], ids=["agent", "client"]
)
def test_a_batch_under_the_dense_threshold_is_refused_without_building_its_elements(
    tmp_path: Path, client: bool, elements: int
) -> None:
    """``[{},{},...]`` of 0.9 MiB from the agent, 0.6 MiB from the client (under
    limits.dense_message_bytes, so not read through a view): refused whole with the
    proxy's peak RSS under 64 MiB + 4 x N (building its elements took 130 / 98 MiB)."""
    payload = empty_objects_batch(elements)
    mib = measure(payload, client, str(tmp_path), timeout=60)
    assert 5 < mib <= 64 + 4 * len(payload) / 2**20, mib
