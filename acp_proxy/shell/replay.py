"""``acp-proxy replay [--config FILE] [--diff] TRACE``: a policy tried on recorded traffic.

Reads a trace recorded with content (docs/trace-format.md), feeds each
connection's client and agent messages, in the recorded order and at the
recorded times, through a fresh sans-IO core built from ``--config`` (the
defaults without it), and prints the decision the core makes on each message.
No agent is started and nothing is sent anywhere. Held messages expire when
the replayed clock passes their deadline, as they would have.

With ``--diff`` only the messages whose decisions differ from the recorded ones
are printed, and the exit status is 1 when there is one (0 when the
configuration decides exactly as recorded); 2 for a usage error or a trace
that cannot be replayed.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Iterator
from typing import TextIO

import attrs

from acp_proxy.config import Config
from acp_proxy.config.files import expand_path
from acp_proxy.core.actions import Peer
from acp_proxy.core.trace import TRACE_FORMAT, TRACE_VERSION, Record, TracingCore
from acp_proxy.core.wire.framing import Oversize, Partial
from acp_proxy.errors import UsageError
from acp_proxy.shell.replay_check import check_records

__all__ = ["Outcome", "compare", "read_trace", "replay", "run_replay", "summary"]


@attrs.frozen
class Outcome:
    """What happened to one message: its record and the decisions on it, in order.

    Attributes:
        conn: the connection number.
        seq: the message's number in its connection.
        record: the message's first record.
        decisions: the first decision, then those of its later records
            (``held`` then ``released``, ...).
    """

    conn: int
    seq: int
    record: Record
    decisions: tuple[str, ...]


#: Distinct connections one replay builds an engine for (each holds its own state).
MAX_REPLAY_CONNECTIONS = 4096


def read_trace(lines: Iterable[str], where: str = "the trace") -> tuple[Record, list[Record]]:
    """The header and the records of a trace.

    Raises:
        UsageError: not a trace of a version this proxy reads.
    """
    records: list[Record] = []
    head: Record | None = None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            if n > 1:
                break  # a last line cut by a crash
            rec = None
        if not isinstance(rec, dict):
            raise UsageError(f"{where} is not an acp-proxy trace (line {n} is not a record)")
        if head is None:
            if rec.get("type") != "header" or rec.get("format") != TRACE_FORMAT:
                raise UsageError(f"{where} is not an acp-proxy trace (no header record)")
            if rec.get("version") != TRACE_VERSION:
                raise UsageError(
                    f"{where} is trace version {rec.get('version')!r}; "
                    f"this acp-proxy reads version {TRACE_VERSION}"
                )
            head = rec
            continue
        records.append(rec)
    if head is None:
        raise UsageError(f"{where} is empty")
    return head, records


def _outcomes(records: Iterable[Record]) -> dict[tuple[int, int], Outcome]:
    out: dict[tuple[int, int], Outcome] = {}
    for rec in records:
        if rec.get("type") != "message":
            continue
        conn = int(rec.get("conn", 1))
        seq, of = rec.get("seq"), rec.get("of")
        if seq is not None:
            out[(conn, seq)] = Outcome(conn, seq, rec, (rec["decision"],))
        elif of is not None and (conn, of) in out:
            prev = out[(conn, of)]
            out[(conn, of)] = attrs.evolve(prev, decisions=(*prev.decisions, rec["decision"]))
    return out


def _frame(rec: Record) -> bytes | Oversize | Partial | None:
    if rec.get("kind") == "oversize":
        return Oversize(int(rec["size"]), bool(rec.get("complete", True)))
    if rec.get("kind") == "partial":
        return Partial(int(rec["size"]))
    if "content" in rec:
        return str(rec["content"]).encode("utf-8", "surrogatepass")
    if "content_hex" in rec:
        return bytes.fromhex(rec["content_hex"])
    return None


def replay(config: Config, records: list[Record]) -> list[Record]:
    """The records a core with ``config`` gives for the messages of ``records``.

    Raises:
        UsageError: a message record has no content (recorded without it).
    """
    cores: dict[int, TracingCore] = {}
    out: list[Record] = []

    def core_for(conn: int) -> TracingCore:
        core = cores.get(conn)
        if core is None:

            def emit(rec: Record) -> None:
                rec["conn"] = conn
                out.append(rec)

            core = cores[conn] = TracingCore(config, emit=emit)
        return core

    for rec in records:
        kind = rec.get("type")
        if kind not in ("message", "closed"):
            continue
        if kind == "message" and rec.get("seq") is None:
            continue  # a later decision on an earlier message: the core makes its own
        conn = int(rec.get("conn", 1))
        core = core_for(conn)
        now = float(rec.get("t", 0.0))
        deadline = core.get_timer()
        while deadline is not None and deadline <= now:
            core.handle_timer(deadline)
            deadline = core.get_timer()
        if kind == "closed":
            core.peer_closed(Peer(rec["peer"]), now, rec.get("detail") or "")
            continue
        item = _frame(rec)
        if item is None:
            raise UsageError(
                "the trace was recorded without content: record it with --trace-content "
                "(or [trace] include_content = true) to replay it"
            )
        source = Peer.CLIENT if rec["dir"] == Peer.CLIENT.direction else Peer.AGENT
        core.receive(source, item, now)
    return out


def compare(recorded: list[Record], replayed: list[Record]) -> list[tuple[Outcome, Outcome | None]]:
    """Each recorded message's outcome beside the replay's (``None``: not replayed)."""
    mine = _outcomes(replayed)
    return [(o, mine.get(key)) for key, o in _outcomes(recorded).items()]


def _describe(o: Outcome) -> str:
    r = o.record
    parts = [f"#{o.seq}", r.get("dir", "?"), r.get("kind", "?")]
    method = r.get("method") or (f"-> {r['for_method']}" if r.get("for_method") else None)
    if method:
        parts.append(str(method))
    if r.get("id") is not None:
        parts.append(f"id={json.dumps(r['id'])}")
    if r.get("session"):
        parts.append(f"session={r['session']}")
    return " ".join(parts)


def _event(e: Record) -> str:
    """``permission_decided: rule R, deny, option reject`` (the rule, action, option
    of a permission decision when the trace has them), else the event's name."""
    details = [
        f"rule {e['rule']}" if e.get("rule") else None,
        str(e["action"]) if e.get("action") else None,
        f"option {e['optionId']}" if e.get("optionId") else None,
    ]
    if e.get("action") == "ask" and not e.get("rule"):
        details.append("no rule matched: the client asks the user")
    shown = ", ".join(d for d in details if d)
    return f"{e['event']}: {shown}" if shown else str(e["event"])


def _events(o: Outcome) -> str:
    names = [_event(e) for e in o.record.get("events", ())]
    if names:
        return f" ({'; '.join(names)})"
    if o.record.get("method") == "session/request_permission" and o.decisions == ("forwarded",):
        return " (no rule matched: the client asks the user)"
    return ""


def _follow_ons(
    pairs: list[tuple[Outcome, Outcome | None]],
) -> dict[tuple[int, int], list[Outcome]]:
    """Changed responses whose request's decision changed too, by that request: the
    client's answer to a request the new configuration answered itself is part of
    that one change, not a second one."""
    changed = {(o.conn, o.seq) for o, m in pairs if m is None or m.decisions != o.decisions}
    out: dict[tuple[int, int], list[Outcome]] = {}
    for o, _mine in pairs:
        cause = o.record.get("for_seq")
        if cause is None or (o.conn, o.seq) not in changed or (o.conn, cause) not in changed:
            continue
        out.setdefault((o.conn, cause), []).append(o)
    return out


def _lines(
    pairs: list[tuple[Outcome, Outcome | None]], diff: bool, many: bool
) -> Iterator[tuple[bool, str]]:
    replayed = {(o.conn, o.seq): mine for o, mine in pairs}
    follow = _follow_ons(pairs) if diff else {}
    folded = {(o.conn, o.seq) for group in follow.values() for o in group}
    for recorded, mine in pairs:
        prefix = f"conn {recorded.conn} " if many else ""
        got = " -> ".join(mine.decisions) if mine is not None else "(not replayed)"
        same = mine is not None and mine.decisions == recorded.decisions
        if diff:
            if not same and (recorded.conn, recorded.seq) not in folded:
                line = (
                    f"{prefix}{_describe(recorded)}: recorded "
                    f"{' -> '.join(recorded.decisions)}{_events(recorded)}, "
                    f"replayed {got}{_events(mine) if mine else ''}"
                )
                for after in follow.get((recorded.conn, recorded.seq), ()):
                    then = replayed[(after.conn, after.seq)]
                    now = " -> ".join(then.decisions) if then else "(not replayed)"
                    line += (
                        f"; so the client's answer #{after.seq} (recorded "
                        f"{' -> '.join(after.decisions)}) is {now}"
                        f"{_events(then) if then else ''}"
                    )
                yield False, line
        else:
            yield same, f"{prefix}{_describe(recorded)}: {got}{_events(mine) if mine else ''}"


def run_replay(argv: list[str], stdout: TextIO | None = None) -> int:
    """Entry point of ``acp-proxy replay``; returns the exit status.

    Raises:
        UsageError: bad arguments, or a trace that cannot be replayed.
    """
    out = stdout or sys.stdout
    parser = argparse.ArgumentParser(
        prog="acp-proxy replay",
        allow_abbrev=False,
        description="Feed the messages of a trace recorded with --trace-content through "
        "the proxy's core with a configuration, and print its decisions (no agent is "
        "started).",
    )
    parser.add_argument("--config", metavar="FILE", help="TOML configuration to try")
    parser.add_argument(
        "--diff",
        action="store_true",
        help="print only the decisions that differ from the recorded ones (exit 1 if any)",
    )
    parser.add_argument("trace", metavar="TRACE", help="a trace file (docs/trace-format.md)")
    try:
        opts = parser.parse_args(argv)
    except SystemExit as exc:
        return 0 if exc.code == 0 else 2
    if opts.config:
        from acp_proxy.config.io import load_config

        config = load_config(expand_path(opts.config, "--config"))
    else:
        config = Config()
    path = expand_path(opts.trace, "the trace")
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as file:
            head, records = read_trace(file, repr(path))
    except OSError as exc:
        raise UsageError(f"cannot read the trace {path!r}: {exc.strerror}") from None
    if not head.get("content"):
        raise UsageError(
            f"{path!r} was recorded without content: record it with --trace-content "
            "(or [trace] include_content = true) to replay it"
        )
    conns = {c for rec in records if type(c := rec.get("conn", 1)) is int}
    if len(conns) > MAX_REPLAY_CONNECTIONS:
        raise UsageError(
            f"{path!r} holds {len(conns)} connections; replay reads at most "
            f"{MAX_REPLAY_CONNECTIONS} (one engine each)"
        )
    check_records(records, repr(path))
    try:
        pairs = compare(records, replay(config, records))
        many = len({o.conn for o, _ in pairs}) > 1
        lines = list(_lines(pairs, opts.diff, many))
    except UsageError:
        raise
    except Exception as exc:  # any other shape check_records does not know: still one sentence
        raise UsageError(f"{path!r} is not a valid trace: {type(exc).__name__}: {exc}") from None
    differ = 0
    for same, line in lines:
        differ += not same
        print(line, file=out)
    if opts.diff:
        print(summary(pairs, differ), file=out)
        return 1 if differ else 0
    return 0


def summary(pairs: list[tuple[Outcome, Outcome | None]], changes: int) -> str:
    """The last line of ``--diff``: what its numbers count.

    ``changes`` changed messages (a client's answer that follows from a changed
    request folded into it, as the lines show) of the trace's messages, then, when a
    held message has a second record, how the trace's message records add up (a
    trace of 47 message records may hold 45 messages).
    """
    messages = len(pairs)
    records = sum(len(o.decisions) for o, _ in pairs)
    head = (
        f"{changes} of {messages} messages decided differently"
        if changes
        else f"all {messages} messages decided as recorded"
    )
    if records == messages:
        return head
    held = sum(len(o.decisions) > 1 for o, _ in pairs)
    return (
        f"{head} (the trace's {records} message records include a second one, what "
        f"became of it, for each of the {held} held messages)"
    )
