"""The last few inspected lines of the agent's runs, each with its parsed message (issue 29).

An agent repeats its state reports byte for byte (a ``state_update`` sent
twice, a ``subagent_update`` mirror re-sent): :class:`LineMemo` gives a line
seen among the last few the :class:`~acp_proxy.core.wire.jsonrpc.Message`
its first parse built, so the repeat costs a dictionary lookup, not a decode,
a re-encode and the check table.

Exact: :func:`~acp_proxy.core.wire.jsonrpc.parse` is a pure function of a
frame's bytes and the connection's limits, which are fixed for the
connection's life (a reload changes only policy sections); and nothing
changes a :class:`~acp_proxy.core.wire.jsonrpc.Message` or its body once it
is built (the engine reads them, and keeps parts of a body only to compare
or to store as they are). So the memo's message is the one a second parse
would build, and every decision on it is the same.
"""

from __future__ import annotations

from collections.abc import Callable

from acp_proxy.core.wire.jsonrpc import Message

__all__ = ["LineMemo"]


class LineMemo:
    """``parse`` of a line, remembered for the last ``entries`` lines parsed
    (:meth:`parse`).

    Args:
        parse: the connection's parse (its limits bound).
        entries: lines remembered (the oldest goes first).
        max_line_bytes: longer lines are parsed and not remembered, so the memo
            holds at most ``entries`` x ``max_line_bytes`` bytes of lines (and
            their messages).
    """

    __slots__ = ("_entries", "_max_line", "_parse", "_seen")

    def __init__(
        self, parse: Callable[[bytes], Message], entries: int = 8, max_line_bytes: int = 2048
    ) -> None:
        self._parse = parse
        self._entries = entries
        self._max_line = max_line_bytes
        self._seen: dict[bytes, Message] = {}

    def parse(self, raw: bytes) -> Message:
        """The message ``parse(raw)`` builds (the one built before, for a line
        remembered). Never raises (``parse`` does not)."""
        seen = self._seen
        m = seen.get(raw)
        if m is not None:
            return m
        m = self._parse(raw)
        if len(raw) <= self._max_line:
            if len(seen) >= self._entries:
                del seen[next(iter(seen))]
            seen[raw] = m
        return m

    def __len__(self) -> int:
        return len(self._seen)
