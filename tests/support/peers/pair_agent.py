"""An agent that reaches a local endpoint through srt's proxy while another runs.

Used by ``tests/e2e/test_sandbox.py``: ``pair_agent.py PORT MINE OTHER``. On
``initialize`` it creates the file ``MINE`` (in its own workspace), waits until the
file ``OTHER`` exists (the other proxy's agent is up, so both sandboxes, and both
engines' proxies, run at once), then sends a GET for ``127.0.0.1:PORT`` to its
``$HTTP_PROXY`` with that proxy's credentials, and answers with the status line in
``result._meta.status``.
"""

from __future__ import annotations

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from escape_agent import _via_proxy_vars


def main() -> None:
    port, mine, other = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    for line in sys.stdin:
        msg = json.loads(line)
        if msg.get("method") != "initialize":
            continue
        open(mine, "w").close()
        deadline = time.monotonic() + 60
        while not os.path.exists(other) and time.monotonic() < deadline:
            time.sleep(0.02)  # the other agent's start: a file another process makes
        try:
            _via_proxy_vars(port)
            status = "ok"
        except OSError as exc:
            status = str(exc)
        meta = {"status": status, "together": os.path.exists(other)}
        result = {"protocolVersion": 1, "agentCapabilities": {}, "_meta": meta}
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}))
        sys.stdout.write("\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
