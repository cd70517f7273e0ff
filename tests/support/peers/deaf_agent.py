#!/usr/bin/env python3
"""An agent (stdlib only) that stops reading but keeps running (issue 31, item 6).

Answers ``initialize`` (v1), closes its stdin, writes ``_deaf/ready``; then,
once the file ``argv[1]`` exists, writes ``_deaf/still_here`` and exits 0.
"""

from __future__ import annotations

import json
import os
import sys
import time


def send(obj: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main() -> None:
    first = json.loads(sys.stdin.readline())
    send({"jsonrpc": "2.0", "id": first["id"], "result": {"protocolVersion": 1}})
    sys.stdin.close()
    os.close(0)
    send({"jsonrpc": "2.0", "method": "_deaf/ready", "params": {}})
    deadline = time.monotonic() + 60
    while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline:
        time.sleep(0.05)
    send({"jsonrpc": "2.0", "method": "_deaf/still_here", "params": {}})


if __name__ == "__main__":
    main()
