#!/usr/bin/env python3
"""A test agent that hands its stdio to the test over a Unix socket (stdlib only).

usage: bridge_agent.py SOCKET [--exit-code N] [--ignore-eof] [--signal-exit N]
                       [--ignore-sigterm] [--stderr-hex HEX] [--stderr-flood-bytes N]
                       [--pid-file FILE]

The agent connects to the Unix socket SOCKET (the test listens there) and copies
bytes verbatim in both directions: its stdin -> the socket, the socket -> its
stdout. So the test plays the agent byte for byte while the proxy under test
sits between the test's client side and this process.

* stdin EOF: the socket's write side is shut down (the test reads EOF); then
  the agent exits with ``--exit-code`` unless ``--ignore-eof`` keeps it alive.
* socket EOF (the test closed its side): stdout is closed and the agent exits
  with ``--exit-code``.
* ``--signal-exit N``: on SIGTERM or SIGINT, write ``bridge-agent: got SIGTERM``
  (or ``SIGINT``) to stderr and exit with N. ``--ignore-sigterm``: SIGTERM is
  ignored (only SIGKILL ends the agent).
* ``--stderr-hex``: bytes written to stderr at start, verbatim.
* ``--stderr-flood-bytes N``: N bytes written to stderr by a background thread.
* ``--pid-file``: the agent's pid is written there before connecting.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import threading

CHUNK = 64 * 1024


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("socket")
    ap.add_argument("--exit-code", type=int, default=0)
    ap.add_argument("--ignore-eof", action="store_true")
    ap.add_argument("--signal-exit", type=int)
    ap.add_argument("--ignore-sigterm", action="store_true")
    ap.add_argument("--stderr-hex", default="")
    ap.add_argument("--stderr-flood-bytes", type=int, default=0)
    ap.add_argument("--pid-file")
    opts = ap.parse_args()

    if opts.signal_exit is not None:
        code = opts.signal_exit

        def on_signal(signum: int, _frame: object) -> None:
            name = signal.Signals(signum).name
            _write_all(2, f"bridge-agent: got {name}\n".encode())
            os._exit(code)

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
    elif opts.ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)

    if opts.pid_file:
        with open(opts.pid_file, "w") as f:
            f.write(str(os.getpid()))
    if opts.stderr_hex:
        _write_all(2, bytes.fromhex(opts.stderr_hex))

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(opts.socket)
    done = threading.Event()

    def stdin_to_socket() -> None:
        while True:
            data = os.read(0, CHUNK)
            if not data:
                break
            sock.sendall(data)
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_WR)
        if not opts.ignore_eof:
            done.set()

    def socket_to_stdout() -> None:
        try:
            while True:
                data = sock.recv(CHUNK)
                if not data:
                    break
                _write_all(1, data)
        except OSError:
            pass
        finally:
            os.close(1)
            done.set()

    def flood_stderr(total: int) -> None:
        line = b"bridge-agent: stderr flood " + b"x" * 100 + b"\n"
        block = line * (CHUNK // len(line))
        while total > 0:
            piece = block[:total]
            _write_all(2, piece)
            total -= len(piece)

    threads = [
        threading.Thread(target=stdin_to_socket, daemon=True),
        threading.Thread(target=socket_to_stdout, daemon=True),
    ]
    if opts.stderr_flood_bytes:
        threads.append(
            threading.Thread(target=flood_stderr, args=(opts.stderr_flood_bytes,), daemon=True)
        )
    for t in threads:
        t.start()
    done.wait()
    if opts.stderr_flood_bytes:
        threads[-1].join()
    os._exit(opts.exit_code)


if __name__ == "__main__":
    main()
