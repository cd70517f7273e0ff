"""The check table: the ordered rows that judge one frame (docs/design.md section 2).

Each row reads the decoders' :class:`~acp_proxy.core.wire.verdict.Facts` and
the classifier's :class:`~acp_proxy.core.wire.verdict.Shape` and says why it
fails, or ``None``. :func:`judge` runs the rows in order: the first that
fails gives the frame its :class:`~acp_proxy.core.wire.verdict.Verdict` and
reason, so the precedence of refusals is the order of :data:`CHECKS` (which
is the order of :class:`~acp_proxy.core.wire.verdict.Verdict`).

Each row exists because a peer could read the frame differently from the
proxy on something the proxy decides on, or because the proxy could not
inspect it within its bounds (nesting, density, a session id's length).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from acp_proxy.core.wire import reasons
from acp_proxy.core.wire.passthrough import UPDATE_RULES
from acp_proxy.core.wire.verdict import Facts, Kind, Shape, Verdict

__all__ = ["CHECKS", "Check", "Limits", "judge", "long_session_id", "session_id_fault"]


class Limits(NamedTuple):
    """The ``[limits]`` the checks read (bytes; levels for ``max_depth``)."""

    dense_bytes: int
    min_bytes_per_value: int
    max_depth: int
    max_session_id_bytes: int


class Check(NamedTuple):
    """One row: the verdict it gives, its name, its test (the reason, or ``None``), and
    what the test reads: ``"facts"`` (it can fail only when
    :attr:`~acp_proxy.core.wire.verdict.Facts.faulty`), ``"shape"`` (only when
    :attr:`~acp_proxy.core.wire.verdict.Shape.faulty`) or ``"params"``."""

    verdict: Verdict
    name: str
    test: Callable[[Facts, Shape, Limits], str | None]
    reads: str


def _too_deep(f: Facts, s: Shape, lim: Limits) -> str | None:
    return reasons.too_deep_reason(lim.max_depth) if f.too_deep else None


def _not_json(f: Facts, s: Shape, lim: Limits) -> str | None:
    return f.not_json


def _long_integer(f: Facts, s: Shape, lim: Limits) -> str | None:
    return reasons.LONG_INTEGER if f.long_integer else None


def _too_dense(f: Facts, s: Shape, lim: Limits) -> str | None:
    if not f.too_dense:
        return None
    return reasons.dense_reason(lim.dense_bytes, lim.min_bytes_per_value)


def _invalid(f: Facts, s: Shape, lim: Limits) -> str | None:
    return s.invalid


def _batch(f: Facts, s: Shape, lim: Limits) -> str | None:
    return reasons.BATCH if s.kind is Kind.BATCH else None


def _bad_session_id(f: Facts, s: Shape, lim: Limits) -> str | None:
    """``params.sessionId`` present but not a string, or a session id the engine may key
    state on longer than ``limits.max_session_id_bytes`` (:func:`session_id_fault`)."""
    params = s.params
    if params is None:
        return None
    return session_id_fault(params, s.method, lim.max_session_id_bytes)


def session_id_fault(params: dict[str, Any], method: str | None, limit: int) -> str | None:
    """Why the ``params`` of ``method`` fail the ``BAD_SESSION_ID`` row, else ``None``:
    ``params.sessionId`` present but not a string, or a session id the engine may key
    state on longer than ``limit`` bytes: ``params.sessionId``, and in a
    ``session/update`` the members and reference lists
    :data:`~acp_proxy.core.wire.passthrough.UPDATE_RULES` names for its kind (the
    same table the fast path reads, so a message the fast path forwards is never
    refused here). Runs on every frame parsed: no list is built (issue 29)."""
    named = params.get("sessionId", "")
    if type(named) is not str:
        return reasons.session_id_reason(named, limit)
    if long_session_id(named, limit):
        return reasons.session_id_reason(named, limit)
    upd = params.get("update")
    if type(upd) is not dict or method != "session/update":
        return None
    su = upd.get("sessionUpdate")
    rule = UPDATE_RULES.get(su) if type(su) is str else None
    if rule is None:
        return None
    for k in rule.ids:
        if long_session_id(upd.get(k), limit):
            return reasons.session_id_reason(named, limit)
    if rule.refs is not None:
        items = upd.get(rule.refs[0])
        if type(items) is list:
            for i in items:
                if type(i) is dict and long_session_id(i.get("sessionId"), limit):
                    return reasons.session_id_reason(named, limit)
    return None


def long_session_id(sid: Any, limit: int) -> bool:
    """``sid`` is a string of more than ``limit`` bytes (UTF-8; lone surrogates as three):
    the measure of ``limits.max_session_id_bytes`` wherever a session id is read."""
    return (
        type(sid) is str
        and len(sid) > limit // 4
        and (len(sid) > limit or len(sid.encode("utf-8", "surrogatepass")) > limit)
    )


def _repeated(f: Facts, s: Shape, lim: Limits) -> str | None:
    return f.repeated


def _unreadable(f: Facts, s: Shape, lim: Limits) -> str | None:
    return f.unreadable


def _misread(f: Facts, s: Shape, lim: Limits) -> str | None:
    return s.misread


#: The rows in precedence order: the first failing one is the verdict.
CHECKS: tuple[Check, ...] = (
    Check(Verdict.TOO_DEEP, "nesting past limits.max_nesting_depth", _too_deep, "facts"),
    Check(Verdict.NOT_JSON, "not one JSON text in strict UTF-8", _not_json, "facts"),
    Check(Verdict.LONG_INTEGER, "an integer of more than 4300 digits", _long_integer, "facts"),
    Check(
        Verdict.TOO_DENSE,
        "values per byte past limits.min_bytes_per_value",
        _too_dense,
        "facts",
    ),
    Check(Verdict.INVALID, "not a JSON-RPC 2.0 message, or an untracked id", _invalid, "shape"),
    Check(Verdict.BATCH, "a JSON-RPC batch", _batch, "shape"),
    Check(
        Verdict.BAD_SESSION_ID, "a session id not a string, or too long", _bad_session_id, "params"
    ),
    Check(Verdict.AMBIGUOUS, "a decision key repeated at its level", _repeated, "facts"),
    Check(Verdict.AMBIGUOUS, "a decision value peers read differently", _unreadable, "facts"),
    Check(Verdict.AMBIGUOUS, "a snake_case or _meta spelling an SDK misreads", _misread, "shape"),
)

_OK = Verdict.OK


def _rows(facts_faulty: bool, shape_faulty: bool) -> tuple[Check, ...]:
    """The rows of :data:`CHECKS` that can fail, in order (the others are skipped)."""
    return tuple(
        row
        for row in CHECKS
        if row.reads == "params"
        or (row.reads == "facts" and facts_faulty)
        or (row.reads == "shape" and shape_faulty)
    )


_ROWS = {(f, s): _rows(f, s) for f in (False, True) for s in (False, True)}
_PLAIN = _ROWS[False, False]


def judge(facts: Facts, shape: Shape, limits: Limits) -> tuple[Verdict, str | None]:
    """The verdict on a frame and its reason: the first row of :data:`CHECKS` that
    fails, else ``(Verdict.OK, None)``. Rows that cannot fail (the decoders found
    nothing, the shape is a plain request, notification or response) are skipped."""
    rows = _ROWS[facts.faulty, shape.faulty] if facts.faulty or shape.faulty else _PLAIN
    for row in rows:
        why = row.test(facts, shape, limits)
        if why is not None:
            return row.verdict, why
    return _OK, None
