"""``acp-proxy demo``: a scripted client and agent talk ACP through the real proxy.

The demo starts ``python -m acp_proxy --audit-log FILE -- python -m
acp_proxy.demo.agent`` as a subprocess, plays a short ACP session on its
stdin/stdout, then prints a readable transcript (every message, who sent it,
what the proxy did to it), the audit trail and a list of checks. Exit status
0 means every check passed.

What the proxy is shown doing (see :mod:`acp_proxy.demo.agent`):

- holding an update the agent sends before the client can know its session,
  and releasing it right after the message that makes the session known;
- registering child sessions announced with ``subagent_update``;
- removing duplicate state reports;
- letting a permitted ``session/cancel`` reach a child, and answering a
  forbidden ``session/prompt`` on a child itself with ``-32601``;
- refusing a ``session/resume`` of a child (``-32601``, never reaches the agent);
- the freshness boundary at a ``session/resume`` of the parent: the children's
  grants are revoked (audit ``grants_revoked``), the announcements the agent
  replays before its answer are delivered but grant nothing, a
  ``session/cancel`` of a child is dropped until the agent re-announces it
  after the answer, and permitted again once it has.

``--json`` prints the raw transcript as JSON lines instead (for tests and tools).

The proxy also writes a wire trace with content (docs/trace-format.md): with
``--trace FILE`` to that file, kept, and then its path and the ``replay``
command that tries a configuration on it are printed last (on stderr with
``--json``); without, to a temporary directory removed at exit, and the last
lines say how to keep it. The commands printed name the program as it was run
(``sys.argv[0]`` when that is a path).

The package: :mod:`~acp_proxy.demo.runner` runs the proxy and the scripted
client, :mod:`~acp_proxy.demo.analysis` checks what was observed,
:mod:`~acp_proxy.demo.render` (with :mod:`~acp_proxy.demo.summary`) prints it;
:mod:`~acp_proxy.demo.transcript` holds what one run observed.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import tempfile

from acp_proxy.demo.analysis import analyse, checks
from acp_proxy.demo.render import render, render_json
from acp_proxy.demo.runner import execute

__all__ = ["run_demo"]


def run_demo(args: list[str]) -> int:
    """Entry point of ``acp-proxy demo [--json]``; returns 0 when every check passed."""
    parser = argparse.ArgumentParser(
        prog="acp-proxy demo",
        allow_abbrev=False,
        description="Run a scripted ACP client and agent through the proxy and show "
        "what the proxy does.",
    )
    parser.add_argument(
        "--json", action="store_true", help="print the raw transcript as JSON lines"
    )
    parser.add_argument(
        "--trace",
        metavar="FILE",
        help="keep the proxy's wire trace in FILE (default: removed at exit)",
    )
    try:
        opts = parser.parse_args(args)
    except SystemExit as exc:
        return 0 if exc.code == 0 else 2
    with tempfile.TemporaryDirectory(prefix="acp-proxy-demo-") as tmp:
        trace = opts.trace or os.path.join(tmp, "demo.trace.jsonl")
        run = execute(trace=trace)
    an = analyse(run)
    results = checks(run, an)
    prog = invocation()
    text = render_json(run, results) if opts.json else render(run, an, results, prog)
    sys.stdout.write(text)
    sys.stdout.flush()
    tail = sys.stderr if opts.json else sys.stdout
    if opts.trace:
        hint = (
            f"\nThe proxy's wire trace (kept): {opts.trace}\n"
            "Try another configuration on it (no agent is started):\n"
            f"  {prog} replay --diff --config FILE {shlex.quote(opts.trace)}"
        )
    else:
        hint = (
            "\nThe proxy's wire trace was removed with the run; to keep it and try another "
            "configuration on it (no agent is started):\n"
            f"  {prog} demo --trace demo.trace.jsonl\n"
            f"  {prog} replay --diff --config FILE demo.trace.jsonl"
        )
    print(hint, file=tail)
    return 0 if all(c.ok for c in results) else 1


def invocation() -> str:
    """How the user ran the program, for the commands the demo prints: ``sys.argv[0]``
    when it is a path (``.venv/bin/acp-proxy``), ``PYTHON -m acp_proxy`` for ``-m``,
    else ``acp-proxy``."""
    argv0 = sys.argv[0] if sys.argv else ""
    if os.path.basename(argv0) == "__main__.py":
        return f"{shlex.quote(sys.executable)} -m acp_proxy"
    if os.sep in argv0:
        return shlex.quote(argv0)
    return "acp-proxy"
