"""Budget counting: prompt windows, prompt turns, token tallies, repeated tool calls.

Issue 28 (README "Budgets"). Pure state and arithmetic, counted per *root*
session (the session at the top of a child tree); the engine part
(:mod:`~acp_proxy.core.engine.budgets`) reads the messages and acts. Time is
an argument (``now``, seconds on any monotonic clock). Every table is bounded:
roots beyond ``max_roots`` forget the oldest, repeat keys are digests.
"""

from __future__ import annotations

import json
from typing import Any

import attrs

from acp_proxy.config.records import Record

__all__ = ["PromptWindow", "RepeatCounter", "TokenTally", "Turn", "repeat_key"]

#: distinct tool calls remembered per root for ``repeat_limit`` (oldest forgotten)
MAX_REPEAT_KEYS = 1024


@attrs.define(slots=True, eq=False, repr=False)
class PromptWindow(Record):
    """A fixed window of prompts: it starts at the first prompt and lasts ``window_s``.

    The same rule as the shared store (a counter that expires ``window_s``
    after its first increment), so a budget reads the same with or without it.
    """

    start: float = 0.0
    count: int = 0

    def take(self, now: float, limit: int, window_s: float, commit_over: bool) -> tuple[bool, int]:
        """Counts one prompt at ``now``.

        Args:
            now: seconds.
            limit: prompts allowed per window (> 0).
            window_s: the window, seconds.
            commit_over: count a prompt beyond the limit too (observe mode: it
                is forwarded); otherwise a refused prompt is not counted.

        Returns:
            ``(allowed, count)``: ``count`` includes this prompt.
        """
        if self.count == 0 or now >= self.start + window_s:
            self.start = now
            self.count = 0
        n = self.count + 1
        allowed = n <= limit
        if allowed or commit_over:
            self.count = n
        return allowed, n

    def reset_in(self, now: float, window_s: float) -> float:
        """Seconds until the window ends (``0.0`` when none is open)."""
        return max(0.0, self.start + window_s - now) if self.count else 0.0


@attrs.define(slots=True, eq=False, repr=False)
class Turn(Record):
    """One prompt turn of a root session.

    Attributes:
        prompt_id: the client's ``session/prompt`` request id.
        started: when it was forwarded, seconds.
        deadline: ``started + max_turn_s`` (``None``: no turn limit).
        tool_calls: ``tool_call`` updates seen in it (the root's and its children's).
        over: the budget that ended it (``session/cancel`` sent), else ``None``.
        accepted: protocol v2: the agent accepted the prompt (the turn then ends
            with an ``idle`` state report, not with the response).
    """

    prompt_id: Any
    started: float
    deadline: float | None
    tool_calls: int = 0
    over: str | None = None
    accepted: bool = False


class TokenTally:
    """Tokens used per root: the sum over its sessions of the highest ``used`` each reported.

    ``usage_update.used`` is the tokens now in a session's context
    (docs/protocol.md section 8); a compaction lowers it. The tally counts
    the high-water mark, so it never goes down (failing closed), and
    :meth:`report` gives the growth, which a shared store adds up.
    """

    def __init__(self, max_sessions: int) -> None:
        self.max_sessions = max_sessions
        self.high: dict[str, int] = {}  # session -> highest used
        self.total: dict[str, int] = {}  # root -> sum of its sessions' high marks

    def report(self, root: str, sid: str, used: int) -> int:
        """Records ``used`` tokens for session ``sid`` under ``root``; returns the growth."""
        grown = used - self.high.get(sid, 0)
        if grown <= 0:
            return 0
        self.high[sid] = used
        self.total[root] = self.total.get(root, 0) + grown
        while len(self.high) > self.max_sessions:
            del self.high[next(iter(self.high))]
        while len(self.total) > self.max_sessions:
            del self.total[next(iter(self.total))]
        return grown

    def used(self, root: str) -> int:
        """Tokens counted for ``root``."""
        return self.total.get(root, 0)


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def repeat_key(call: dict[str, Any]) -> str:
    """The identity of a tool call for ``repeat_limit``: kind, title and raw input.

    Compared canonically (object keys sorted, no insignificant space), so the
    same call with its ``rawInput`` keys in another order is the same call.
    v2's ``subject.toolCall`` names the tool ``name`` where v1 has a
    ``title``; either is read. A digest, so memory per key is fixed.
    """
    title = call.get("title")
    if title is None:
        title = call.get("name")
    ident = [call.get("kind"), title, call.get("rawInput")]
    try:
        text = _canonical(ident)
    except (TypeError, ValueError):  # not JSON (cannot happen for decoded JSON)
        text = repr(ident)
    from hashlib import sha256  # on first use: no start-up cost (issue 29)

    return sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


class RepeatCounter:
    """Permission requests per (session, tool call identity), bounded."""

    def __init__(self, max_sessions: int) -> None:
        self.max_sessions = max_sessions
        self.seen: dict[str, dict[str, int]] = {}

    def count(self, sid: str, key: str) -> int:
        """Counts one more request of tool call ``key`` in ``sid``; returns the count."""
        per = self.seen.get(sid)
        if per is None:
            per = self.seen[sid] = {}
            while len(self.seen) > self.max_sessions:
                del self.seen[next(iter(self.seen))]
        n = per.pop(key, 0) + 1
        per[key] = n  # most recent last
        while len(per) > MAX_REPEAT_KEYS:
            del per[next(iter(per))]
        return n

    def forget(self, sid: str) -> None:
        """``sid`` closed."""
        self.seen.pop(sid, None)
