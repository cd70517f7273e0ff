"""Helpers shared by the core tests: frame builders and action filters."""

from __future__ import annotations

import json
from typing import Any

from acp_proxy.core.actions import Action, Audit, Peer, Report, Send
from acp_proxy.core.engine import ProxyCore

CLIENT = Peer.CLIENT
AGENT = Peer.AGENT


def enc(obj: Any) -> bytes:
    """Compact JSON bytes of ``obj`` (the way the tests write frames)."""
    return json.dumps(obj, separators=(",", ":")).encode()


def req(rid: Any, method: str, params: Any = None) -> bytes:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        body["params"] = params
    return enc(body)


def notif(method: str, params: Any = None) -> bytes:
    body: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        body["params"] = params
    return enc(body)


def resp(rid: Any, result: Any) -> bytes:
    return enc({"jsonrpc": "2.0", "id": rid, "result": result})


def err(rid: Any, code: int = -32000, message: str = "nope") -> bytes:
    return enc({"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}})


def update(session_id: str, upd: dict[str, Any]) -> bytes:
    """A ``session/update`` notification on ``session_id``."""
    return notif("session/update", {"sessionId": session_id, "update": upd})


def chunk(session_id: str, text: str) -> bytes:
    """An ``agent_message_chunk`` update (ordinary content traffic)."""
    return update(
        session_id,
        {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}},
    )


def announce(parent: str, child: str, **fields: Any) -> bytes:
    """A ``subagent_update`` for ``child`` on ``parent``; ``meta=`` is sent as ``_meta``."""
    upd: dict[str, Any] = {"sessionUpdate": "subagent_update", "sessionId": child}
    for key, value in fields.items():
        upd["_meta" if key == "meta" else key] = value
    return update(parent, upd)


def state_update(session_id: str, state: str, **extra: Any) -> bytes:
    return update(session_id, {"sessionUpdate": "state_update", "state": state, **extra})


def sends(actions: list[Action], to: Peer | None = None) -> list[bytes]:
    """The data of every ``Send`` (to ``to`` when given), in order."""
    return [a.data for a in actions if isinstance(a, Send) and (to is None or a.to is to)]


def audits(actions: list[Action], event: str | None = None) -> list[Audit]:
    return [a for a in actions if isinstance(a, Audit) and (event is None or a.event == event)]


def events(actions: list[Action]) -> list[str]:
    return [a.event for a in actions if isinstance(a, Audit)]


def reports(actions: list[Action]) -> list[Report]:
    return [a for a in actions if isinstance(a, Report)]


def decoded(data: bytes) -> Any:
    return json.loads(data)


def assert_accounting(core: ProxyCore) -> None:
    """Every accepted message is forwarded, answered, dropped or still held."""
    s = core.statistics()
    assert s.accepted == s.forwarded + s.answered + s.dropped + s.held, s


def open_session(core: ProxyCore, session_id: str, now: float = 0.0) -> list[Action]:
    """Runs a ``session/new`` exchange that makes ``session_id`` known."""
    rid = f"new-{session_id}"
    out = core.receive(CLIENT, req(rid, "session/new", {"cwd": "/", "mcpServers": []}), now)
    assert sends(out, AGENT), out
    return core.receive(AGENT, resp(rid, {"sessionId": session_id}), now)


def one_send_per_message(actions: list[Action]) -> list[Action]:
    """Actions with each Send of a joined run split into one Send per message."""
    out: list[Action] = []
    for a in actions:
        if isinstance(a, Send):
            out.extend(Send(a.to, part) for part in a.data.split(b"\n"))
        else:
            out.append(a)
    return out
