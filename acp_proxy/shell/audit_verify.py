"""``acp-proxy audit verify FILE [--key-file K] [--rotated]``: checks an audit log's chain.

The format is :mod:`acp_proxy.shell.audit_chain`'s. The file is read one line at
a time (at most :data:`MAX_LINE_BYTES` each), so memory stays bounded whatever
its size. A line's members are read only after its chain value matched: the
bytes decide, never an unchecked field (a mismatched line's ``seq`` is read
only to say what is wrong with it).

Exit status 0 and one summary line for an intact log; 1 and the first bad line
(``line N: ...``) otherwise: changed, missing, out of order, not a record, a run
not closed (a cut-off tail), a wrong key, a run that does not follow from the
file before it. A file that starts mid-run (rotated, or cut at the head) is
reported; with ``--rotated`` it is accepted from its first line on. 2 for a usage
error (a file that cannot be read).
"""

from __future__ import annotations

import argparse
import hmac
import json
import sys
from typing import IO, Any

import attrs

from acp_proxy.errors import UsageError
from acp_proxy.shell.audit_chain import CHAIN_SUFFIX, GENESIS, link, read_key

__all__ = ["MAX_LINE_BYTES", "Problem", "Summary", "run_audit", "verify_stream"]

#: the longest line read (a record is far shorter: fields are cut, content to 64 KiB)
MAX_LINE_BYTES = 16 * 1024 * 1024


@attrs.frozen
class Summary:
    """An intact log: ``runs`` started in it, ``records`` (lines), and notes (reopened
    files, lost records the proxy noted, a rotated start accepted)."""

    runs: int
    records: int
    notes: tuple[str, ...] = ()


@attrs.frozen
class Problem:
    """The first bad line (1-based; 0: the file as a whole, e.g. empty) and what is wrong."""

    line: int
    what: str


class _Run:
    """The run being read: its id, the next seq, the previous chain value, its keyedness."""

    def __init__(self, run: str, seq: int, prev: bytes, line: int) -> None:
        self.run = run
        self.seq = seq
        self.prev = prev
        self.line = line
        self.closed = False


def _loads(body: bytes) -> dict[str, Any] | None:
    try:
        obj = json.loads(body)
    except (ValueError, RecursionError):
        return None
    return obj if type(obj) is dict else None


def verify_stream(
    stream: IO[bytes], key: bytes | None = None, *, rotated: bool = False
) -> Summary | Problem:
    """Checks every line of ``stream`` (see the module doc).

    Args:
        stream: the log, binary, read line by line.
        key: the HMAC key (``--key-file``): then every run must be keyed with it.
        rotated: accept a file whose first line is inside a run.

    Returns:
        The :class:`Summary` of an intact log, or the first :class:`Problem`.
    """
    offset = 0
    number = 0
    runs = 0
    run: _Run | None = None
    last_chain: str | None = None
    notes: list[str] = []
    lost = 0
    while True:
        line = stream.readline(MAX_LINE_BYTES + 1)
        if not line:
            break
        number += 1
        start = offset
        offset += len(line)
        if len(line) > MAX_LINE_BYTES:
            return Problem(number, f"longer than {MAX_LINE_BYTES} bytes: not a record")
        if not line.endswith(b"\n"):
            return Problem(number, "incomplete: the last line has no newline (cut off)")
        m = CHAIN_SUFFIX.search(line)
        if m is None:
            return Problem(number, "not a chained audit record (changed, or a cut-off write)")
        body = line[: m.start()] + b"}"
        value = bytes.fromhex(m.group(1).decode())
        if run is not None and not run.closed and _same(link(run.prev, body, key), value):
            obj = _loads(body)
            problem = _continuation(obj, run, number)
            if problem is not None:
                return problem
            assert obj is not None
            if type(obj.get("lost")) is int:
                lost += obj["lost"]
            run.seq += 1
            run.prev = value
            run.closed = obj.get("event") == "run_closed"
        elif _same(link(GENESIS, body, key), value):
            obj = _loads(body)
            if run is not None and not run.closed:
                return Problem(
                    number,
                    f"run {run.run!r} (from line {run.line}) was not closed: its records "
                    f"end after seq {run.seq - 1} (cut off, or the proxy was killed)",
                )
            problem = _run_start(obj, number, start, last_chain, key, notes, rotated)
            if problem is not None:
                return problem
            assert obj is not None
            if type(obj.get("lost")) is int:
                lost += obj["lost"]
            runs += 1
            run = _Run(obj["run"], 1, value, number)
        elif number == 1 and rotated:
            obj = _loads(body)
            seq = obj.get("seq") if obj is not None else None
            rid = obj.get("run") if obj is not None else None
            if type(seq) is not int or type(rid) is not str:
                return Problem(number, "not an audit record")
            notes.append(f"starts mid-run (run {rid!r} at seq {seq}; rotated): earlier unchecked")
            runs += 1
            run = _Run(rid, seq + 1, value, number)
            run.closed = obj is not None and obj.get("event") == "run_closed"
        else:
            return Problem(number, _mismatch(body, run, number, key))
        last_chain = m.group(1).decode()
    if run is not None and not run.closed:
        return Problem(
            number,
            f"run {run.run!r} (from line {run.line}) was not closed: the file ends after "
            f"seq {run.seq - 1} (a cut-off tail, or the proxy was killed)",
        )
    if number == 0:
        # no record is no evidence: a log truncated to nothing, or one never written
        return Problem(0, "empty: no record to check (cut to nothing, or never written)")
    if lost:
        notes.append(f"{lost} records lost, as the proxy noted")
    return Summary(runs, number, tuple(notes))


def _same(a: bytes, b: bytes) -> bool:
    return hmac.compare_digest(a, b)


def _continuation(obj: dict[str, Any] | None, run: _Run, number: int) -> Problem | None:
    """Checks a line whose chain follows ``run``'s (its bytes are the writer's)."""
    if obj is None:
        return Problem(number, "chained, but not a JSON object")
    if obj.get("seq") != run.seq or type(obj.get("seq")) is not int:
        return Problem(number, f"out of order: seq {obj.get('seq')!r} where {run.seq} belongs")
    if "run" in obj and obj["run"] != run.run:
        return Problem(number, f"names run {obj.get('run')!r} inside run {run.run!r}")
    if obj.get("event") == "run_started":
        return Problem(number, "a run_started record inside a run")
    return None


def _run_start(
    obj: dict[str, Any] | None,
    number: int,
    start: int,
    last_chain: str | None,
    key: bytes | None,
    notes: list[str],
    rotated: bool,
) -> Problem | None:
    """Checks a line that opens a chain: a ``run_started`` following the file before it."""
    if obj is None or obj.get("event") != "run_started" or obj.get("seq") != 0:
        return Problem(number, "starts a chain but is not a run_started record with seq 0")
    if type(obj.get("run")) is not str:
        return Problem(number, "run_started names no run")
    wanted = "hmac-sha256" if key is not None else "sha256"
    if obj.get("hash") != wanted:
        return Problem(number, f"run_started says hash {obj.get('hash')!r}, not {wanted!r}")
    if obj.get("prevSize") != start:
        if number == 1 and rotated:
            notes.append(f"starts after {obj.get('prevSize')!r} bytes that are not here (rotated)")
        elif number == 1:
            return Problem(
                number,
                f"the file starts mid-way: this run followed {obj.get('prevSize')!r} bytes "
                "that are not here (rotated or cut at the head; --rotated accepts it)",
            )
        return Problem(
            number,
            f"missing: the run started after {obj.get('prevSize')!r} bytes, but follows "
            f"{start} here (lines before it removed or added)",
        )
    if number > 1 and obj.get("prevChain") != last_chain:
        return Problem(number, "does not follow the line before it (prevChain differs)")
    if obj.get("reopened") is True:
        notes.append(
            f"line {number}: run {obj['run']!r} continues in a new file after seq "
            f"{obj.get('afterSeq')!r} ({obj.get('gap')!r})"
        )
    return None


def _mismatch(body: bytes, run: _Run | None, number: int, key: bytes | None) -> str:
    """What a line whose chain value matches nothing is (its claimed members are unchecked:
    read only to name the problem)."""
    obj = _loads(body)
    seq = obj.get("seq") if obj is not None else None
    if run is not None and not run.closed and obj is not None and obj.get("run") != run.run:
        return (
            f"missing: a record of run {obj.get('run')!r} where seq {run.seq} of run "
            f"{run.run!r} belongs (records removed)"
        )
    if run is None or run.closed:
        if number == 1:
            if key is not None:
                return "changed, or a wrong key: the chain does not match"
            return (
                "changed, keyed (verify it with --key-file), or the file starts mid-run "
                "(rotated: --rotated)"
            )
        return "changed: its chain does not match, and no run is open here"
    if type(seq) is int and seq > run.seq:
        return f"missing or out of order: seq {run.seq} belongs here, but the line says seq {seq}"
    if type(seq) is int and seq < run.seq:
        return f"out of order: seq {seq} again after seq {run.seq - 1}"
    if key is not None:
        return "changed, or a wrong key: the chain does not match"
    return "changed: the chain does not match"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="acp-proxy audit verify",
        allow_abbrev=False,
        description="Checks an audit log's hash chain (README 'Audit log').",
    )
    p.add_argument("file", metavar="FILE")
    p.add_argument("--key-file", metavar="K", help="the [audit] hmac_key_file of a keyed chain")
    p.add_argument("--rotated", action="store_true", help="accept a file that starts inside a run")
    return p


def run_audit(argv: list[str]) -> int:
    """``acp-proxy audit verify ...``; returns the exit status.

    Raises:
        UsageError: not ``verify``, or the file or key cannot be read.
    """
    if not argv or argv[0] != "verify":
        if argv in (["-h"], ["--help"]):
            print("usage: acp-proxy audit verify FILE [--key-file K] [--rotated]")
            return 0
        raise UsageError("usage: acp-proxy audit verify FILE [--key-file K] [--rotated]")
    try:
        args = _parser().parse_args(argv[1:])
    except SystemExit as exc:
        return 0 if exc.code == 0 else 2
    key = None
    if args.key_file:
        try:
            key = read_key(args.key_file)
        except (OSError, ValueError) as exc:
            why = exc.strerror if isinstance(exc, OSError) else str(exc)
            raise UsageError(f"cannot read --key-file {args.key_file!r}: {why}") from None
    try:
        with open(args.file, "rb") as f:
            result = verify_stream(f, key, rotated=args.rotated)
    except OSError as exc:
        raise UsageError(f"cannot read {args.file!r}: {exc.strerror}") from None
    if isinstance(result, Problem):
        where = f"line {result.line}: " if result.line else ""  # 0: the file as a whole
        print(f"{args.file}: {where}{result.what}")
        return 1
    notes = "".join(f"; {n}" for n in result.notes)
    chain = "HMAC-SHA256" if key is not None else "SHA-256"
    runs = f"{result.runs} run{'' if result.runs == 1 else 's'}"
    records = f"{result.records} record{'' if result.records == 1 else 's'}"
    print(f"{args.file}: intact: {runs}, {records} ({chain}){notes}")
    sys.stdout.flush()
    return 0
