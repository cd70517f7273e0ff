"""ChainAdapter against a hostile successor or conductor (docs/protocol.md section 5)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.corekit import CLIENT, audits, enc, req, resp, sends

from acp_proxy.core.actions import Action, Send
from acp_proxy.core.chain import ChainAdapter
from acp_proxy.core.engine import ProxyCore

CONTROL_METHODS = ["proxy/successor", "_proxy/successor", "proxy/initialize", "_proxy/initialize"]


def envelope(rid: Any, method: str, params: Any) -> bytes:
    """A ``_proxy/successor`` request (``rid`` not None) or notification from the conductor."""
    body: dict[str, Any] = {"jsonrpc": "2.0"}
    if rid is not None:
        body["id"] = rid
    body["method"] = "_proxy/successor"
    body["params"] = {"method": method, "params": params}
    return enc(body)


def initialized() -> ChainAdapter:
    """An adapter past ``_proxy/initialize``."""
    a = ChainAdapter(ProxyCore())
    wrapped = json.loads(sends(a.receive(req(0, "_proxy/initialize", {}), 0.0))[0])
    a.receive(resp(wrapped["id"], {"protocolVersion": 2}), 0.0)
    return a


def written(actions: list[Action]) -> list[Any]:
    assert all(a.to is CLIENT for a in actions if isinstance(a, Send))
    return [json.loads(d) for d in sends(actions)]


@pytest.mark.parametrize("method", CONTROL_METHODS)
def test_successor_request_for_a_conductor_control_method_is_refused(method: str) -> None:
    """A successor request wrapping proxy/successor or proxy/initialize never leaves as ours."""
    a = initialized()
    inner = {"method": "session/prompt", "params": {"sessionId": "C", "prompt": []}}
    frames = written(a.receive(envelope(7, method, inner), 0.0))
    assert len(frames) == 1
    assert frames[0]["id"] == 7
    assert frames[0]["error"]["code"] == -32600
    assert a.statistics().conductor_requests_in_flight == 0


@pytest.mark.parametrize("method", CONTROL_METHODS)
def test_successor_notification_for_a_conductor_control_method_is_dropped(method: str) -> None:
    """A successor notification wrapping a conductor control method is dropped with a record."""
    a = initialized()
    inner = {"method": "$/cancel_request", "params": {"requestId": 1}}
    actions = a.receive(envelope(None, method, inner), 0.0)
    assert written(actions) == []
    (record,) = audits(actions, "notification_dropped")
    assert f"sent {method}," in record.fields["reason"]
