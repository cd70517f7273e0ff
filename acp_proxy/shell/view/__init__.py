"""``acp-proxy view``: a wire trace as a page (README "See what it does").

::

    acp-proxy view TRACE -o FILE.html          one self-contained HTML file
    acp-proxy view TRACE [--port N]            served on 127.0.0.1, following the trace
    acp-proxy view TRACE --format conductor -o FILE [--conn N]
                                               the Rust SDK conductor's trace events

:mod:`~acp_proxy.shell.view.page` builds the page (its HTML, CSS and
JavaScript are package data beside it), :mod:`~acp_proxy.shell.view.server`
serves it, :mod:`~acp_proxy.shell.view.conductor` maps records to the
conductor's events.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from typing import NoReturn

import msgspec

from acp_proxy.errors import UsageError

__all__ = ["run_view"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see acp-proxy view --help)")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="acp-proxy view",
        allow_abbrev=False,
        description="Show a wire trace (--trace FILE) as a page: the timeline of messages "
        "with the proxy's decisions, the session tree, filters and totals.",
    )
    p.add_argument("trace", metavar="TRACE", help="a trace written by acp-proxy --trace")
    p.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="write one self-contained file (no network needed to open it); without it, "
        "serve the page on 127.0.0.1 and follow the trace as it grows",
    )
    p.add_argument(
        "--format",
        choices=["html", "conductor"],
        default="html",
        help="html (default) or conductor: the ACP Rust SDK conductor's trace events "
        "(JSON lines), for agent-client-protocol-trace-viewer",
    )
    p.add_argument(
        "--port", type=int, default=0, metavar="N", help="port to serve on (default: any free)"
    )
    p.add_argument(
        "--conn", type=int, metavar="N", help="--format conductor: the connection to export"
    )
    return p


def _check_trace(path: str) -> None:
    try:
        with open(path, "rb") as file:
            first = file.readline()
    except OSError as exc:
        raise UsageError(
            f"cannot read the trace {path!r}: {exc.strerror or exc}; give a file written "
            "by acp-proxy --trace"
        ) from None
    try:
        head = msgspec.json.decode(first) if first.strip() else None
    except msgspec.DecodeError:
        head = None
    if first.strip() and (type(head) is not dict or head.get("format") != "acp-proxy-trace"):
        raise UsageError(f"{path!r} is not an acp-proxy trace: give a file written by --trace")


def _write(path: str, data: bytes) -> None:
    try:
        if path == "-":
            sys.stdout.buffer.write(data)
            sys.stdout.flush()
            return
        with open(path, "wb") as file:
            file.write(data)
    except OSError as exc:
        raise UsageError(f"cannot write {path!r}: {exc.strerror or exc}") from None


def _conductor(trace: str, output: str, conn: int | None) -> int:
    from acp_proxy.shell.view.conductor import to_conductor
    from acp_proxy.shell.view.page import read_records

    records = [msgspec.json.decode(line) for line in read_records(trace).lines]
    conns = sorted(
        {r.get("conn", 1) for r in records if r.get("type") in ("message", "proxy")},
        key=str,
    )
    if conn is None:
        if len(conns) > 1:
            raise UsageError(
                f"the trace holds connections {', '.join(map(str, conns))}: "
                "choose one with --conn N (a conductor trace is one connection)"
            )
        conn = conns[0] if conns else 1
    skipped: Counter[str] = Counter()
    lines = [json.dumps(ev, ensure_ascii=False) for ev in to_conductor(records, conn, skipped)]
    _write(output, "".join(line + "\n" for line in lines).encode())
    _wrote(output, f"{len(lines)} conductor events")
    if skipped:
        left = ", ".join(f"{n} {kind}" for kind, n in sorted(skipped.items()))
        print(f"acp-proxy view: left out (no conductor event for them): {left}", file=sys.stderr)
    return 0


def _wrote(output: str, what: str) -> None:
    """Says on stderr where ``what`` went (nothing for ``-o -``: stdout is the file)."""
    if output != "-":
        print(f"acp-proxy view: wrote {what} to {output}", file=sys.stderr)


def run_view(args: list[str]) -> int:
    """Entry point of ``acp-proxy view``; returns the exit status.

    Raises:
        UsageError: bad options, an unreadable trace or output file, a port in use.
    """
    try:
        opts = _parser().parse_args(args)
    except SystemExit as exc:  # --help
        return 0 if exc.code == 0 else 2
    _check_trace(opts.trace)
    if opts.format == "conductor":
        if not opts.output:
            raise UsageError("--format conductor writes a file: add -o FILE (or -o - for stdout)")
        return _conductor(opts.trace, opts.output, opts.conn)
    if opts.conn is not None:
        raise UsageError("--conn is for --format conductor (the page shows every connection)")
    if opts.output:
        from acp_proxy.shell.view.page import read_records, render_page

        chunk = read_records(opts.trace)
        _write(opts.output, render_page(chunk, title=os.path.basename(opts.trace)))
        _wrote(opts.output, "the trace's page")
        return 0
    return _serve(opts.trace, opts.port)


def _serve(trace: str, port: int) -> int:
    import trio

    from acp_proxy.shell.view.server import serve_view

    def ready(url: str) -> None:
        print(f"acp-proxy view: the trace's page is at {url} (Ctrl-C stops)", flush=True)

    try:
        trio.run(lambda: serve_view(trace, port, on_ready=ready))
    except KeyboardInterrupt:
        return 0
    return 0
