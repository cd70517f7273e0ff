"""Peak RSS of a real proxy for one large message per shape (``python -m benchmarks.memprobe``).

For each shape (a top-level array of empty objects, deep arrays, one long
string, many keys, a long array of numbers) a message of about ``--mib`` MiB
is sent through ``python -m acp_proxy -- AGENT`` in each direction, then a
small ping that comes back only after the big message was handled (the
proxy keeps order). The figure is the proxy's ``VmHWM`` (``/proc/PID/status``)
after the ping, in MiB, against the bound 64 MiB + 4 x N. Linux only.

Output: one line per shape and direction, then a JSON object
``{"<shape>/<direction>": {"bytes": N, "peak_rss_mib": X, "bound_mib": B}}``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable

__all__ = ["SHAPES", "main", "measure"]

# The agent: reads lines; answers a client ``ping`` request; on a ``big``
# request writes the big line (from the file named by its argv) then a ping.
_AGENT = r"""
import sys
big_path = sys.argv[1]
out = sys.stdout.buffer
for line in sys.stdin.buffer:
    if len(line) > 4096:
        continue
    if b'"ping"' in line:
        out.write(b'{"jsonrpc":"2.0","id":"ping","result":null}\n'); out.flush()
    elif b'"go"' in line:
        with open(big_path, "rb") as f:
            out.write(f.read())
        out.write(b'{"jsonrpc":"2.0","method":"_ping"}\n'); out.flush()
"""


def _wrap(inner: bytes, client: bool) -> bytes:
    if client:
        head = (
            b'{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s","prompt":'
        )
        return head + inner + b"}}"
    head = (
        b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":'
        b'{"sessionUpdate":"agent_message_chunk","content":'
    )
    return head + inner + b"}}}"


def _repeat(unit: bytes, size: int) -> bytes:
    n = max(1, size // (len(unit) + 1))
    return b"[" + b",".join([unit] * n) + b"]"


SHAPES: dict[str, Callable[[int, bool], bytes]] = {
    "top_array": lambda size, client: _repeat(b"{}", size),
    "nested_arrays": lambda size, client: _wrap(
        b"[" + b",".join([b"[[[[[[[[[[]]]]]]]]]]"] * (size // 21)) + b"]", client
    ),
    "long_string": lambda size, client: _wrap(b'"' + b"x" * size + b'"', client),
    "many_keys": lambda size, client: _wrap(
        b"{" + b",".join(b'"k%d":0' % i for i in range(size // 13)) + b"}", client
    ),
    "empty_objects": lambda size, client: _wrap(_repeat(b"{}", size), client),
    # a leading space: the view must still be used (found by a hostile review)
    "spaced_empty_objects": lambda size, client: b" " + _wrap(_repeat(b"{}", size), client),
    "numbers": lambda size, client: _wrap(_repeat(b"0", size), client),
    # the keys at a decision level (params / update), not inside content
    "decision_level_keys": lambda size, client: (
        _wrap(b'"x"', client)[:-2] + b"".join(b',"k%d":0' % i for i in range(size // 13)) + b"}}"
    ),
    # the same with an escape, so the decision levels are checked key by key (found by a
    # hostile review: every member was built before the density check)
    "escaped_level_keys": lambda size, client: (
        _wrap(b'"\\u0041"', client)[:-2]
        + b"".join(b',"k%d":0' % i for i in range(size // 13))
        + b"}}"
    ),
    # near the density bound: objects of one short string, ~50 bytes per value
    "small_objects": lambda size, client: _wrap(
        _repeat(b'{"a":"' + b"x" * 90 + b'"}', size), client
    ),
}


def _vmhwm_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise RuntimeError("no VmHWM")


def measure(payload: bytes, client: bool, tmpdir: str, timeout: float = 120.0) -> float:
    """Peak RSS (MiB) of a proxy process that carried ``payload`` once.

    Args:
        payload: one message, without its newline.
        client: True to send it from the client, else the agent writes it.
        tmpdir: a directory for the agent's copy of the payload.
        timeout: seconds to wait for the ping after the payload.

    Raises:
        TimeoutError: the ping did not come back in time.
    """
    big = os.path.join(tmpdir, "big.json")
    with open(big, "wb") as f:
        f.write(b"" if client else payload + b"\n")
    agent = [sys.executable, "-c", _AGENT, big]
    with subprocess.Popen(
        [sys.executable, "-m", "acp_proxy", "--", *agent],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    ) as proxy:
        try:
            return _carry(proxy, payload, client, timeout)
        finally:
            proxy.kill()


def _carry(proxy: subprocess.Popen[bytes], payload: bytes, client: bool, timeout: float) -> float:
    """Sends ``payload`` (or has the agent write it), waits for the ping; VmHWM in MiB."""
    assert proxy.stdin is not None
    assert proxy.stdout is not None
    if client:
        proxy.stdin.write(payload + b"\n")
        proxy.stdin.write(b'{"jsonrpc":"2.0","id":"ping","method":"_x/ping"}\n')
        want = b'"ping"'
    else:
        proxy.stdin.write(b'{"jsonrpc":"2.0","method":"_x/go","params":{"go":1}}\n')
        want = b'"_ping"'
    proxy.stdin.flush()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proxy.stdout.readline()
        if not line:
            raise TimeoutError("proxy closed its stdout")
        if want in line and len(line) < 4096:
            return _vmhwm_kib(proxy.pid) / 1024
    raise TimeoutError("no ping")


def main(argv: list[str] | None = None) -> int:
    """Measures every shape in both directions; prints a table and a JSON summary."""
    import tempfile

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=float, default=31.0, help="message size, MiB (default 31)")
    ap.add_argument("--shape", action="append", choices=sorted(SHAPES), help="only these")
    args = ap.parse_args(argv)
    size = int(args.mib * 1024 * 1024)
    summary: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmpdir:
        for name in args.shape or list(SHAPES):
            for client in (True, False):
                payload = SHAPES[name](size, client)
                mib = measure(payload, client, tmpdir)
                bound = 64 + 4 * len(payload) / 2**20
                key = f"{name}/{'client' if client else 'agent'}"
                summary[key] = {
                    "bytes": len(payload),
                    "peak_rss_mib": round(mib, 1),
                    "bound_mib": round(bound, 1),
                }
                verdict = "ok" if mib <= bound else "OVER"
                print(f"{key:28} {len(payload) / 2**20:6.1f} MiB  peak {mib:7.1f} MiB  {verdict}")
                sys.stdout.flush()
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
