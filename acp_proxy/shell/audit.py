"""JSON-lines audit log writer (docs/design.md section 3, "Audit log").

Two promises, whatever a peer put in a record:

- **Never raises, always one valid JSON line.** Every value is cleaned before
  it is encoded (:func:`clean`): nesting deeper than :data:`MAX_DEPTH`, more
  than :data:`MAX_ITEMS` items, integers past 64 bits, non-finite floats,
  bytes and objects JSON cannot spell become a bounded text preview; strings
  are cut to :data:`FIELD_LIMIT` characters (``content``, written only with
  ``audit.include_content``, to :data:`CONTENT_LIMIT`). A field that names a
  session (``sessionId``, ``parentSessionId``, ...) must be a string: any
  other value is written as ``null`` with a ``notes`` entry naming its type;
  an ``id`` must be a string or an integer, the same way.
- **Bounded under a flood.** :class:`Throttle` lets through at most
  ``burst`` records of one kind (event and direction) per window; the rest
  are counted, and one ``{"event": "suppressed", "suppressedEvent": ...,
  "suppressed": N}`` record per kind and window says how many, written when
  the window has passed (at the next record, or at :meth:`AuditLog.close`).
  Life-cycle events (:data:`UNTHROTTLED`) always pass and first write every
  pending summary; enforcement decisions (:data:`NEVER_SUPPRESSED`) always
  pass. The core's counters are not affected: every drop is still counted
  there.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import math
import time
from collections.abc import Callable, Hashable
from typing import IO, TYPE_CHECKING, Any, cast

from acp_proxy.core.actions import Audit, AuditEvent

if TYPE_CHECKING:  # imported when a log is made: a default run has none (issue 29: start-up)
    from acp_proxy.shell.audit_chain import ChainedFile

__all__ = [
    "CONTENT_LIMIT",
    "FIELD_LIMIT",
    "MAX_DEPTH",
    "MAX_ITEMS",
    "NEVER_SUPPRESSED",
    "UNTHROTTLED",
    "AuditLog",
    "Throttle",
    "clean",
    "format_record",
    "preview",
    "record_object",
]

#: characters kept of one string field (a longer one ends with "...(N chars)")
FIELD_LIMIT = 200
#: characters kept of ``content`` (the message itself, with ``audit.include_content``)
CONTENT_LIMIT = 64 * 1024
#: containers nested deeper than this are written as a preview
MAX_DEPTH = 8
#: items kept per list or object
MAX_ITEMS = 32
#: events never throttled (one per connection or peer)
UNTHROTTLED = frozenset(
    {"peer_closed", "connection_opened", "connection_closed", "connection_rejected"}
)
#: Enforcement decisions: one record each, never suppressed (a record per decision
#: is bounded by the input: a refused message is at least as long as its method).
NEVER_SUPPRESSED = frozenset(
    {
        "mutation_rejected",
        "registry_conflict",
        "grants_revoked",
        "grants_restored",
        "children_retired",
        "permission_decided",
        "permission_answered",
        "request_refused",
        "admission_refused",
        "elicitation_declined",
    }
)

_ID_KEYS = frozenset({"id", "requestId"})
_INT_LIMIT = 1 << 64


def _is_session_key(key: str) -> bool:
    return key == "sessionId" or key.endswith("SessionId")


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}...({len(text)} chars)"


def preview(value: Any, limit: int = FIELD_LIMIT) -> str:
    """A one-line description of any value, at most about ``limit`` characters.

    Never raises and never recurses deeper than a few levels: containers show
    their type, size and first items.
    """
    try:
        text = _preview(value, 0)
    except Exception:  # a hostile __repr__ (not from JSON); be safe anyway
        text = f"<{type(value).__name__}>"
    return _cut(text, limit)


def _preview(value: Any, depth: int) -> str:
    t = type(value)
    if t is str:
        return repr(value[:FIELD_LIMIT])
    if t is int:
        return (
            repr(value)
            if -_INT_LIMIT < value < _INT_LIMIT
            else f"<int of {value.bit_length()} bits>"
        )
    if value is None or t is bool or t is float:
        return repr(value)
    if t is bytes or t is bytearray:
        return repr(bytes(value[:FIELD_LIMIT]))
    if t is list or t is tuple:
        if depth >= 2:
            return f"[...{len(value)} items]"
        items = ", ".join(_preview(v, depth + 1) for v in value[:4])
        return f"[{items}{', ...' if len(value) > 4 else ''}]"
    if isinstance(value, dict):
        if depth >= 2:
            return f"{{...{len(value)} keys}}"
        pairs = list(value.items())[:4]
        items = ", ".join(f"{_preview(k, 2)}: {_preview(v, depth + 1)}" for k, v in pairs)
        return f"{{{items}{', ...' if len(value) > 4 else ''}}}"
    return f"<{t.__name__}>"


def clean(value: Any, limit: int = FIELD_LIMIT, depth: int = 0) -> Any:
    """``value`` made safe to encode: JSON types only, bounded in depth, items and length.

    Args:
        value: anything.
        limit: characters kept of a string.
        depth: the current nesting (callers pass 0).

    Returns:
        ``None``, a bool, an int within 64 bits, a finite float, a string of at
        most ``limit`` characters (plus a length note), or a list / dict of
        such values nested at most :data:`MAX_DEPTH` deep; anything else is
        its :func:`preview`.
    """
    t = type(value)
    if value is None or t is bool:
        return value
    if t is str:
        return _cut(value, limit)
    if t is int:
        return value if -_INT_LIMIT < value < _INT_LIMIT else preview(value)
    if t is float:
        return value if math.isfinite(value) else repr(value)
    if t is bytes or t is bytearray:
        return _cut(bytes(value[: limit * 4]).decode("utf-8", "replace"), limit)
    if depth >= MAX_DEPTH:
        return preview(value)
    if t is list or t is tuple:
        out = [clean(v, limit, depth + 1) for v in value[:MAX_ITEMS]]
        if len(value) > MAX_ITEMS:
            out.append(f"...({len(value)} items)")
        return out
    if isinstance(value, dict):
        d: dict[str, Any] = {}
        for i, (k, v) in enumerate(value.items()):
            if i >= MAX_ITEMS:
                d["..."] = f"({len(value)} keys)"
                break
            d[k if type(k) is str and len(k) <= limit else preview(k)] = clean(v, limit, depth + 1)
        return d
    return preview(value)


def _fields(fields: dict[str, Any], obj: dict[str, Any]) -> None:
    """Adds the cleaned ``fields`` to ``obj`` (``None`` values left out)."""
    notes: list[str] = []
    for k, v in fields.items():
        if v is None:
            continue
        key = k if type(k) is str else preview(k)
        if _is_session_key(key) and type(v) is not str:
            obj[key] = None
            notes.append(f"{key} is not a string: {preview(v, 80)}")
        elif key in _ID_KEYS and type(v) is not str and type(v) is not int:
            obj[key] = None
            notes.append(f"{key} is not a string or an integer: {preview(v, 80)}")
        else:
            obj[key] = clean(v, CONTENT_LIMIT if key == "content" else FIELD_LIMIT)
    if notes:
        obj["notes"] = notes


def _dumps(obj: dict[str, Any]) -> str:
    text = json.dumps(obj, ensure_ascii=False, allow_nan=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate a peer sent (valid JSON, not UTF-8)
        text = json.dumps(obj, ensure_ascii=True, allow_nan=False)
    return text


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def record_object(record: Audit, context: dict[str, Any] | None = None) -> dict[str, Any]:
    """The record as the JSON object :func:`format_record` writes; never raises."""
    obj: dict[str, Any] = {"ts": _now(), "event": clean(str(record.event))}
    try:
        if record.direction is not None:
            obj["direction"] = clean(record.direction)
        _fields(record.fields if isinstance(record.fields, dict) else {}, obj)
        if context:
            _fields(context, obj)
        return obj
    except Exception as exc:  # defense in depth: clean() should leave nothing to fail on
        return {"ts": obj["ts"], "event": obj["event"], "notes": [preview(exc)]}


def format_record(record: Audit, context: dict[str, Any] | None = None) -> str:
    """One audit line (no trailing newline); never raises.

    Shape: ``{"ts": "2026-11-30T03:14:15.123456Z", "event": ..., "direction": ...,
    <cleaned fields without None values>, "notes": [...] (when a field had to
    be replaced), <context>}``.

    Args:
        record: the core's audit action.
        context: extra keys for every record of a connection (e.g. ``connection``).
    """
    obj = record_object(record, context)
    try:
        return _dumps(obj)
    except Exception as exc:  # defense in depth: clean() should leave nothing to fail on
        return _dumps({"ts": obj["ts"], "event": obj["event"], "notes": [preview(exc)]})


class Throttle:
    """Rate limit per kind: at most ``burst`` passes per ``window_seconds``, the rest counted.

    Args:
        burst: passes per kind and window.
        window_seconds: window length, seconds of ``clock``.
        clock: monotonic seconds.
        max_kinds: distinct kinds tracked; further kinds share one ``"other"`` kind.
    """

    def __init__(
        self,
        burst: int = 10,
        window_seconds: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        max_kinds: int = 256,
    ) -> None:
        self.burst = burst
        self.window_seconds = window_seconds
        self.clock = clock
        self.max_kinds = max_kinds
        # kind -> [window start, passed, suppressed]
        self._kinds: dict[Hashable, list[Any]] = {}
        self._ended: list[tuple[Hashable, int, float]] = []
        self.total_suppressed = 0

    def allow(self, kind: Hashable) -> bool:
        """True when one more ``kind`` may be written now (else it is counted)."""
        now = self.clock()
        kinds = self._kinds
        if kind not in kinds and len(kinds) >= self.max_kinds:
            kind = "other"
        entry = kinds.get(kind)
        if entry is not None and now - entry[0] >= self.window_seconds:
            if entry[2]:
                self._ended.append((kind, entry[2], now - entry[0]))
            entry = None
        if entry is None:
            kinds[kind] = [now, 1, 0]
            return True
        if entry[1] < self.burst:
            entry[1] += 1
            return True
        entry[2] += 1
        self.total_suppressed += 1
        return False

    def summaries(self, everything: bool = False) -> list[tuple[Hashable, int, float]]:
        """``(kind, suppressed, seconds)`` for every window that has ended with
        suppressions (all of them with ``everything``), each reported once."""
        now = self.clock()
        out, self._ended = self._ended, []
        for kind, entry in list(self._kinds.items()):
            if everything or now - entry[0] >= self.window_seconds:
                if entry[2]:
                    out.append((kind, entry[2], now - entry[0]))
                del self._kinds[kind]
        return out


#: Something that also gets every record written (the OpenTelemetry log bridge):
#: called with the record's JSON object, on the writing thread; must not block.
Mirror = Callable[[dict[str, Any]], None]


class AuditLog:
    """Appends audit records to a file, one JSON object per line.

    Records of one kind (event, direction) beyond ``throttle.burst`` per
    window are counted instead of written; see the module doc.

    Args:
        stream: an open text stream (the caller owns it; no chain), or the
            :class:`~acp_proxy.shell.audit_chain.ChainedFile` of the run.
        context: keys added to every record.
        throttle: the rate limit (default: 10 per kind per second).
        mirrors: also given every record written (shared with :meth:`with_context`).
    """

    def __init__(
        self,
        stream: IO[str] | ChainedFile,
        context: dict[str, Any] | None = None,
        throttle: Throttle | None = None,
        mirrors: list[Mirror] | None = None,
    ) -> None:
        from acp_proxy.shell.audit_chain import ChainedFile

        self._stream = stream
        self._chained = stream if isinstance(stream, ChainedFile) else None
        self._context = context or {}
        self.throttle = throttle or Throttle()
        self.mirrors: list[Mirror] = mirrors if mirrors is not None else []
        self._records_written = 0
        self._bytes_written = 0

    @classmethod
    def open(
        cls,
        path: str,
        context: dict[str, Any] | None = None,
        *,
        run: str = "",
        key: bytes | None = None,
        required: bool = False,
    ) -> AuditLog:
        """Opens ``path`` for appending, chained (a new file is readable by its owner only).

        Args:
            path: the log file; refused unless a regular file.
            context: keys of every record (``pid``, ``run``).
            run: the run's id (default: ``context["run"]``).
            key: HMAC key of the chain, or ``None`` (SHA-256).
            required: fail closed on a lost record (:attr:`failure`).

        Raises:
            UsageError: ``path`` is a symbolic link, FIFO, device or directory.
            OSError: the file cannot be opened.
        """
        from acp_proxy.shell.audit_chain import ChainedFile

        context = context or {}
        chained = ChainedFile(
            path, run or str(context.get("run", "")), key=key, required=required, context=context
        )
        return cls(chained, context)

    @property
    def records_written(self) -> int:
        """Lines written (with a chain: every run record and every writer's records)."""
        return self._chained.records_written if self._chained else self._records_written

    @property
    def bytes_written(self) -> int:
        """Bytes written."""
        return self._chained.bytes_written if self._chained else self._bytes_written

    @property
    def records_lost(self) -> int:
        """Records that could not be written (0 without a chain)."""
        return self._chained.records_lost if self._chained else 0

    @property
    def failure(self) -> str | None:
        """With ``audit.required``, why nothing more may be forwarded (one sentence)."""
        return self._chained.failure if self._chained else None

    @property
    def chained(self) -> ChainedFile | None:
        """The chained file, or ``None`` (a plain stream)."""
        return self._chained

    def _line(self, text: str, obj: dict[str, Any] | None = None) -> None:
        for mirror in self.mirrors:
            with contextlib.suppress(Exception):  # an exporter must never stop the proxy
                mirror(obj if obj is not None else json.loads(text))
        chained = self._chained
        if chained is not None:
            chained.write(text)
            return
        stream = cast("IO[str]", self._stream)  # not chained: the plain stream given
        try:
            stream.write(text + "\n")
            self._records_written += 1
            self._bytes_written += len(text) + 1
        except (OSError, ValueError):
            pass

    def flush_summaries(self, everything: bool = False) -> None:
        """Writes one ``suppressed`` record per kind whose window ended with suppressions."""
        for kind, count, seconds in self.throttle.summaries(everything):
            event, direction = kind if isinstance(kind, tuple) else (kind, None)
            fields = {
                "suppressedEvent": str(event),
                "suppressed": count,
                "seconds": round(seconds, 3),
            }
            self._line(
                format_record(Audit(AuditEvent.SUPPRESSED, direction, fields), self._context)
            )

    def write(self, record: Audit) -> None:
        """Writes one record (or counts it, when its kind is over the rate); never raises."""
        try:
            if record.event in UNTHROTTLED:
                self.flush_summaries(everything=True)
            elif record.event in NEVER_SUPPRESSED:
                self.flush_summaries()
            else:
                self.flush_summaries()
                if not self.throttle.allow((record.event, record.direction)):
                    return
            obj = record_object(record, self._context)
            try:
                text = _dumps(obj)
            except Exception as exc:  # defense in depth, as format_record
                obj = {"ts": obj["ts"], "event": obj["event"], "notes": [preview(exc)]}
                text = _dumps(obj)
            self._line(text, obj)
        except Exception:  # a record must never stop the proxy
            pass

    def with_context(self, **context: Any) -> AuditLog:
        """A writer on the same file with more context keys (and its own rate limit)."""
        t = self.throttle
        return AuditLog(
            self._stream,
            {**self._context, **context},
            Throttle(t.burst, t.window_seconds, t.clock, t.max_kinds),
            self.mirrors,
        )

    def close(self) -> None:
        """Writes the pending summaries (and ``run_closed``) and closes the file; never raises."""
        with contextlib.suppress(Exception):
            self.flush_summaries(everything=True)
        with contextlib.suppress(OSError, ValueError):
            self._stream.close()
