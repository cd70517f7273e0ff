"""``params._meta`` keys no SDK reads as a decision parameter are content, on every path.

fast-agent 0.10.48 (built on the Python SDK) sends ``session/update``
notifications whose ``params._meta`` is ``{"field_meta": {"openhands.dev/metrics":
{...}}}``; the guard once dropped them. The Python SDK router hands a handler a
``_meta`` key in place of a parameter only when the key *is* the parameter's
Python name (``session_id``, ``update``): everything else lands in ``**kwargs``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from acp.client.router import build_client_router
from support.corekit import AGENT, CLIENT, assert_accounting, chunk, open_session, req, resp, sends

from acp_proxy.core.actions import Send
from acp_proxy.core.chain import ChainAdapter
from acp_proxy.core.engine import ProxyCore
from acp_proxy.core.wire.framing import Lines
from acp_proxy.core.wire.jsonrpc import canonical, parse
from acp_proxy.core.wire.passthrough import envelope_uninspected, uninspected
from acp_proxy.core.wire.runs import envelope_run

METRICS = {
    "openhands.dev/metrics": {
        "input_tokens": 1234,
        "output_tokens": 567,
        "cache_read_tokens": 0,
        "reasoning_tokens": 0,
        "cost": 0.0567,
        "status_line": "1,234 in, 567 out (0.1%)",
    }
}


def fast_agent_chunk(sid: str, text: str = "Hello") -> bytes:
    """fast-agent's ``agent_message_chunk``, as the Python SDK writes it (compact, by alias)."""
    body = json.loads(chunk(sid, text))
    body["params"]["_meta"] = {"field_meta": METRICS}
    return json.dumps(body, separators=(",", ":")).encode()


#: What a peer may put in ``_meta`` beside the fast-agent shape: content all.
CONTENT_META: list[dict[str, Any]] = [
    {"field_meta": METRICS},
    {"openhands.dev/metrics": METRICS["openhands.dev/metrics"]},
    {"zed.dev/tool": {"name": "x"}, "traceparent": "00-ab-cd-01"},
    {"sessionId": "C", "SESSION_ID": "C", "session_update": "x", "fieldMeta": {}},
    {"_meta": {"session_id": "C"}},
]


class _Client:
    def __init__(self) -> None:
        self.got: list[tuple[Any, Any]] = []

    async def session_update(self, session_id: Any, update: Any, **_: Any) -> None:
        if hasattr(update, "model_dump"):  # a _meta.update replaces it with a plain dict
            update = update.model_dump(by_alias=True, exclude_none=True)
        self.got.append((session_id, update))


def sdk_reads(raw: bytes) -> list[tuple[Any, Any]]:
    """(session id, update) the real Python SDK client router hands ``session_update``."""
    msg = json.loads(raw)
    client = _Client()
    asyncio.run(build_client_router(client)(msg["method"], msg["params"], True))  # type: ignore[arg-type]
    return client.got


def _core() -> ProxyCore:
    core = ProxyCore()
    open_session(core, "S")
    return core


def _with_meta(meta: dict[str, Any]) -> bytes:
    body = json.loads(fast_agent_chunk("S"))
    body["params"]["_meta"] = meta
    return json.dumps(body, separators=(",", ":")).encode()


@pytest.mark.parametrize("meta", CONTENT_META)
def test_content_meta_is_read_by_the_sdk_as_the_proxy_reads_it(meta: dict[str, Any]) -> None:
    """The premise, checked on the real SDK: these keys replace no parameter."""
    raw = _with_meta(meta)
    body = json.loads(raw)
    assert sdk_reads(raw) == [("S", body["params"]["update"])]
    assert not parse(raw).ambiguous


@pytest.mark.parametrize("meta", CONTENT_META)
def test_content_meta_is_forwarded_byte_identical_on_every_core_path(
    meta: dict[str, Any],
) -> None:
    """One frame, a list of frames (fast path), a run of lines (envelope path)."""
    raw = _with_meta(meta)
    # the fast-path predicates themselves accept it
    assert uninspected(canonical(raw), {"S"})
    envs = envelope_run(raw + b"\n" + raw)
    assert envs is not None
    assert all(envelope_uninspected(e, {"S"}) for e in envs)
    for incoming in (raw, [raw, raw], Lines(raw + b"\n" + raw), Lines(raw)):
        core = _core()
        out = core.receive(AGENT, incoming, 0.0)
        n = 1 if type(incoming) is bytes or incoming == Lines(raw) else 2
        assert b"\n".join(sends(out, CLIENT)) == b"\n".join([raw] * n)
        assert core.statistics().dropped == 0
        assert_accounting(core)


def test_fast_agent_chunk_on_the_full_paths_is_forwarded_byte_identical() -> None:
    """Not canonical (ASCII escapes, spacing): parsed strictly, forwarded unchanged; a
    large one (over limits.dense_message_bytes) is read through a view, forwarded too."""
    escaped = fast_agent_chunk("S", "caf\u00e9 \u2014 ok").replace(b":", b": ")
    assert json.loads(escaped)["params"]["_meta"] == {"field_meta": METRICS}
    assert canonical(escaped) is None  # not the fast path
    large = fast_agent_chunk("S", "x" * (2 * 1024 * 1024))
    for raw in (escaped, large):
        for incoming in ([raw], Lines(raw)):
            core = _core()
            out = core.receive(AGENT, incoming, 0.0)
            assert out == [Send(CLIENT, raw)]
            assert core.statistics().dropped == 0
            assert_accounting(core)


def test_fast_agent_chunk_through_the_chain_adapter_reaches_the_client_unchanged() -> None:
    """Under a conductor the successor's update arrives in a ``proxy/successor`` envelope;
    the client gets the inner message with its params spliced byte for byte."""
    adapter = ChainAdapter(ProxyCore())
    [init] = sends(adapter.receive(req(0, "proxy/initialize", {"protocolVersion": 2}), 0.0))
    adapter.receive(resp(json.loads(init)["id"], {"protocolVersion": 2}), 0.0)
    [new] = sends(adapter.receive(req("n", "session/new", {"cwd": "/", "mcpServers": []}), 0.0))
    adapter.receive(resp(json.loads(new)["id"], {"sessionId": "S"}), 0.0)
    raw = fast_agent_chunk("S")
    params = json.dumps(json.loads(raw)["params"], separators=(",", ":")).encode()
    wrapped = (
        b'{"jsonrpc":"2.0","method":"proxy/successor","params":'
        b'{"method":"session/update","params":' + params + b',"_meta":{"hop":1}}}'
    )
    out = adapter.receive(wrapped, 0.0)
    assert sends(out, CLIENT) == [raw]


@pytest.mark.parametrize(
    "meta",
    [{"session_id": "C"}, {"update": {"sessionUpdate": "agent_message_chunk"}}],
)
def test_a_meta_key_the_sdk_reads_as_a_parameter_is_still_refused(meta: dict[str, Any]) -> None:
    """``_meta.session_id`` routes, ``_meta.update`` replaces the update (real SDK): dropped."""
    raw = _with_meta({**meta, "field_meta": METRICS})
    assert sdk_reads(raw) != [("S", json.loads(raw)["params"]["update"])]
    assert parse(raw).ambiguous
    for incoming in (raw, [raw], Lines(raw)):
        core = _core()
        out = core.receive(AGENT, incoming, 0.0)
        assert sends(out, CLIENT) == []
        assert core.statistics().dropped == 1
