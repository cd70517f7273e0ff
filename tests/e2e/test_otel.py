"""--otel through the real proxy: the request's bytes reach the agent unchanged, and its span,
parented by the request's traceparent, reaches an OTLP/HTTP receiver."""

from __future__ import annotations

import sys

import pytest
import trio
from support.e2ekit import open_proxy, proxy_command, req
from support.otlpkit import attributes, otlp_receiver

# The agent answers each request with the exact line it read.
ECHO_AGENT = (
    "import json, sys\n"
    "for line in sys.stdin.buffer:\n"
    "    m = json.loads(line)\n"
    "    r = {'raw': line.rstrip(b'\\n').decode(), 'protocolVersion': 1}\n"
    "    print(json.dumps({'jsonrpc': '2.0', 'id': m['id'], 'result': r}), flush=True)\n"
)

TIMEOUT = 30
TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
PARENT = "b7ad6b7169203331"


async def test_otel_forwards_trace_context_unchanged_and_exports_the_span(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    meta = {"traceparent": f"00-{TRACE_ID}-{PARENT}-01", "tracestate": "congo=t61rcWkgMzE"}
    raw = req(7, "session/prompt", {"sessionId": "S1", "prompt": [], "_meta": meta})
    with otlp_receiver() as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
        monkeypatch.setenv("OTEL_SERVICE_NAME", "acp-proxy-e2e")
        monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
        cmd = [*proxy_command("--otel"), sys.executable, "-c", ECHO_AGENT]
        with trio.fail_after(TIMEOUT):
            async with open_proxy(cmd) as proxy:
                await proxy.send(req(0, "initialize", {"protocolVersion": 1}))
                assert (await proxy.out.recv_json())["id"] == 0
                await proxy.send(raw)
                answer = await proxy.out.recv_json()
                assert answer["result"]["raw"].encode() == raw.rstrip(b"\n")
                await proxy.close_stdin()
                assert await proxy.wait() == 0
        spans = {span.name: (res, span) for res, span in receiver.spans()}
    res, span = spans["session/prompt"]
    assert attributes(res.attributes)["service.name"] == "acp-proxy-e2e"
    assert span.trace_id.hex() == TRACE_ID
    assert span.parent_span_id.hex() == PARENT
    attrs = attributes(span.attributes)
    assert attrs["acp.session.id"] == "S1"
    assert attrs["jsonrpc.request.id"] == "7"
    assert attrs["acp.protocol.version"] == 1
