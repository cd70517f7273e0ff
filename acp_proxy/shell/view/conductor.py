"""``acp-proxy view TRACE --format conductor``: the trace as the Rust SDK conductor's events.

The ACP Rust SDK's ``agent-client-protocol-conductor --trace FILE`` writes
newline-delimited JSON events that ``agent-client-protocol-trace-viewer``
draws as a sequence diagram (the SDK's trace viewer guide, "Event
Schema"): ``request`` (``ts``, ``protocol``, ``from``, ``to``, ``id``,
``method``, ``session``?, ``params``), ``response`` (``ts``, ``from``, ``to``,
``id``, ``is_error``, ``payload``) and ``notification`` (as a request without
``id``). ``ts`` is seconds since capture began; components are named
``Client``, ``Proxy(0)`` and ``Agent``; ``session`` is omitted when unknown.

The proxy is ``Proxy(0)``: a message it passed on is two events (into the
proxy at its ``t``, out of it at the same ``t``, or at its release for a held
message); a message it kept is one (into the proxy); a request it answered
itself adds the proxy's response. What does not map (docs/trace-format.md
names each): the decisions and audit events, sizes, the connection number
(one connection is exported), ``batch``, ``invalid``, ``oversize`` and
``partial`` messages (no method or id to draw), ``closed`` and ``timer``
records; ``params`` and ``payload`` are the redacted content when the trace
has it and ``null`` otherwise, and the proxy's own answers carry
``payload: null`` (the trace does not hold their text).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any

__all__ = ["AGENT", "CLIENT", "PROXY", "to_conductor"]

CLIENT = "Client"
PROXY = "Proxy(0)"
AGENT = "Agent"

_SENDER = {"client->agent": (CLIENT, AGENT), "agent->client": (AGENT, CLIENT)}
_DRAWN = {"request", "notification", "response", "error"}


def _body(rec: dict[str, Any]) -> dict[str, Any] | None:
    content = rec.get("content")
    if type(content) is not str:
        return None
    try:
        body = json.loads(content)
    except ValueError:
        return None
    return body if type(body) is dict else None


def _params(rec: dict[str, Any]) -> Any:
    body = _body(rec)
    if body is None:
        return None
    params = body.get("params")
    if rec.get("decision") == "rewritten" and type(params) is dict:  # the state member was cut
        update = params.get("update")
        if type(update) is dict and "state" in update:
            params = {**params, "update": {k: v for k, v in update.items() if k != "state"}}
    return params


def _payload(rec: dict[str, Any]) -> Any:
    body = _body(rec)
    if body is None:
        return None
    return body.get("error") if rec.get("kind") == "error" else body.get("result")


def _event(rec: dict[str, Any], ts: float, src: str, dst: str, params: Any) -> dict[str, Any]:
    if rec["kind"] in ("response", "error"):
        return {
            "type": "response",
            "ts": ts,
            "from": src,
            "to": dst,
            "id": rec.get("id"),
            "is_error": rec["kind"] == "error",
            "payload": params,
        }
    ev: dict[str, Any] = {"type": rec["kind"], "ts": ts, "protocol": "acp", "from": src, "to": dst}
    if rec["kind"] == "request":
        ev["id"] = rec.get("id")
    ev["method"] = rec.get("method") or ""
    if type(rec.get("session")) is str:
        ev["session"] = rec["session"]
    ev["params"] = params
    return ev


def to_conductor(
    records: Iterable[dict[str, Any]], conn: int, skipped: Counter[str]
) -> Iterator[dict[str, Any]]:
    """The conductor's trace events for connection ``conn`` of a trace's records.

    Args:
        records: the trace's records, in order (the header among them).
        conn: the connection exported.
        skipped: counts, by kind, the messages of ``conn`` that have no event.

    Yields:
        Events in the conductor's shapes, in order.
    """
    t0: float | None = None
    held: dict[int, tuple[dict[str, Any], Any]] = {}
    for rec in records:
        if rec.get("type") not in ("message", "proxy") or rec.get("conn", 1) != conn:
            continue
        t = rec.get("t")
        if type(t) is not float and type(t) is not int:
            continue
        start: float = t if t0 is None else t0
        t0 = start
        ts = round(max(0.0, t - start), 6)
        if rec["type"] == "proxy":
            to = CLIENT if rec.get("to") == "client" else AGENT
            if rec.get("kind") in ("response", "error"):
                yield _event(rec, ts, PROXY, to, None)
            continue
        if rec.get("kind") not in _DRAWN or rec.get("dir") not in _SENDER:
            skipped[str(rec.get("kind"))] += 1
            continue
        src, dst = _SENDER[rec["dir"]]
        decision = rec.get("decision")
        response = rec["kind"] in ("response", "error")
        params = _payload(rec) if response else _params(rec)
        if rec.get("seq") is None:  # what became of a held message
            kept = held.pop(rec.get("of", -1), None)
            if decision == "released":
                yield _event(rec, ts, PROXY, dst, kept[1] if kept else None)
            elif decision in ("refused", "answered") and rec["kind"] == "request":
                yield _proxy_answer(rec, ts, src, decision)
            continue
        yield _event(rec, ts, src, PROXY, params)
        if decision in ("forwarded", "rewritten"):
            yield _event(rec, ts, PROXY, dst, params)
        elif decision == "held":
            held[rec["seq"]] = (rec, params)
        elif decision in ("refused", "answered") and rec["kind"] == "request":
            yield _proxy_answer(rec, ts, src, decision)


def _proxy_answer(rec: dict[str, Any], ts: float, to: str, decision: str) -> dict[str, Any]:
    return {
        "type": "response",
        "ts": ts,
        "from": PROXY,
        "to": to,
        "id": rec.get("id"),
        "is_error": decision == "refused",
        "payload": None,
    }
