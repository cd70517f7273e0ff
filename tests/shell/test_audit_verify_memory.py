"""``audit verify`` streams: a 100 MiB log is checked in bounded memory (a subprocess's VmHWM)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from acp_proxy.shell.audit_chain import GENESIS, seal

LOG_BYTES = 100 * 1024 * 1024
#: peak resident memory verify may add over an interpreter that only imported it
MAX_EXTRA_BYTES = 24 * 1024 * 1024

PEAK = (
    "import sys\n"
    "from acp_proxy.shell.audit_verify import run_audit\n"
    "status = run_audit(sys.argv[1:]) if sys.argv[1:] else 0\n"
    "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')][0]\n"
    "print('PEAK', status, int(hwm.split()[1]) * 1024)\n"
)


def _write_log(path: Path) -> int:
    """A closed run of about ``LOG_BYTES`` (4 KiB records); returns the record count."""
    prev, seq = GENESIS, 0
    filler = "x" * 4000
    with open(path, "wb") as f:

        def put(obj: dict[str, object]) -> None:
            nonlocal prev, seq
            line, prev = seal(json.dumps(obj), seq, prev, None)
            f.write(line)
            seq += 1

        put({"event": "run_started", "run": "big", "hash": "sha256", "prevSize": 0})
        while f.tell() < LOG_BYTES:
            put({"event": "held", "run": "big", "content": filler})
        put({"event": "run_closed", "run": "big"})
    return seq


def _peak(*args: str) -> tuple[int, int, str]:
    r = subprocess.run(
        [sys.executable, "-c", PEAK, *args], capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    status, peak = out[-1].split()[1:]
    return int(status), int(peak), "\n".join(out[:-1])


def test_verify_of_a_100_mib_log_runs_in_bounded_memory(tmp_path: Path) -> None:
    """The whole log verifies, and the peak memory grows by far less than the file."""
    path = tmp_path / "big.jsonl"
    records = _write_log(path)
    assert path.stat().st_size >= LOG_BYTES
    _, baseline, _ = _peak()
    status, peak, out = _peak("verify", str(path))
    assert status == 0, out
    assert f"1 run, {records} records" in out
    assert peak - baseline < MAX_EXTRA_BYTES, (peak, baseline)
