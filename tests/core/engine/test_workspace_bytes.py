"""limits.max_workspace_bytes: client-given workspaces bounded in bytes (issue 31, item 5)."""

from __future__ import annotations

from typing import Any

from acp_proxy.config.io import config_from_dict
from acp_proxy.core.engine import ProxyCore
from tests.support.corekit import (
    AGENT,
    CLIENT,
    assert_accounting,
    audits,
    decoded,
    req,
    resp,
    sends,
)

LIMIT = 64 * 1024


def core() -> ProxyCore:
    c = ProxyCore(config_from_dict({"limits": {"max_workspace_bytes": LIMIT}}))
    c.receive(CLIENT, req(0, "initialize", {"protocolVersion": 1}), 0.0)
    c.receive(AGENT, resp(0, {"protocolVersion": 1}), 0.0)
    return c


def new(rid: Any, n: int, method: str = "session/new", **more: Any) -> bytes:
    dirs = [f"/ws/{rid}/{i:05d}" for i in range(n)]
    return req(rid, method, {"cwd": "/ws", "mcpServers": [], "additionalDirectories": dirs, **more})


def test_a_workspace_beyond_the_bytes_is_refused_under_its_id() -> None:
    """Kept and pending workspaces add up; the one beyond the limit is refused, audited."""
    c = core()
    gate = c.permissions
    assert sends(c.receive(CLIENT, new(1, 400), 0.0), AGENT)  # forwarded, pending
    c.receive(AGENT, resp(1, {"sessionId": "A"}), 0.0)
    kept = gate.workspace_bytes
    assert 0 < kept <= LIMIT
    out = c.receive(CLIENT, new(2, 2000), 0.0)
    assert sends(out, AGENT) == []
    [answer] = [decoded(x) for x in sends(out, CLIENT)]
    assert answer["id"] == 2
    assert answer["error"]["code"] == -32602
    assert "limits.max_workspace_bytes" in answer["error"]["message"]
    assert len(audits(out, "request_refused")) == 1
    assert gate.workspace_bytes == kept
    # a load replacing A's workspace counts A's bytes as freed
    assert sends(c.receive(CLIENT, new(3, 400, "session/load", sessionId="A"), 0.0), AGENT)
    assert_accounting(c)


def test_bytes_are_freed_on_close_error_and_agent_exit() -> None:
    """A closed session, a failed session/new and an agent gone free their bytes."""
    c = core()
    gate = c.permissions
    c.receive(CLIENT, new(1, 300), 0.0)
    c.receive(AGENT, resp(1, {"sessionId": "A"}), 0.0)
    c.receive(CLIENT, req(2, "session/close", {"sessionId": "A"}), 0.0)
    c.receive(AGENT, resp(2, {}), 0.0)
    assert gate.workspace_bytes == 0
    c.receive(CLIENT, new(3, 300), 0.0)
    c.receive(AGENT, b'{"jsonrpc":"2.0","id":3,"error":{"code":-32603,"message":"no"}}\n', 0.0)
    assert gate.workspace_bytes == 0
    c.receive(CLIENT, new(4, 300), 0.0)
    assert gate.workspace_bytes > 0
    gate.agent_gone()
    assert gate.workspace_bytes == 0
