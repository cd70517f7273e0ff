"""OpenTelemetry export (README "OpenTelemetry"): spans, metrics, trace context, off by default."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from support.corekit import AGENT, CLIENT, announce, req, resp
from support.otlpkit import attributes, otlp_receiver

from acp_proxy.config import Config, TelemetryConfig
from acp_proxy.core.actions import Send
from acp_proxy.core.engine import ProxyCore
from acp_proxy.errors import UsageError
from acp_proxy.shell.observe import Hub, Tally
from acp_proxy.shell.otel import OtelBridge, open_bridge, resource
from acp_proxy.shell.watch import open_hub

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_SPAN}-01"


class Rig:
    """A hub with the bridge, exporting to the SDK's in-memory exporters."""

    def __init__(self, max_open: int = 4096) -> None:
        self.spans = InMemorySpanExporter()
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.reader = InMemoryMetricReader()
        self.tally = Tally()
        self.hub = Hub(tally=self.tally)
        self.bridge = OtelBridge(
            self.hub,
            self.tally,
            tracer_provider,
            MeterProvider(metric_readers=[self.reader]),
            max_open=max_open,
        )
        self.hub.others.append(self.bridge)
        self.core = self.hub.make_core(Config())

    def send(self, source: Any, raw: bytes, now: float = 0.0) -> list[Any]:
        return self.core.receive(source, raw, now)

    def finished(self) -> dict[str, ReadableSpan]:
        """Ended spans by ``name#request id``."""
        return {
            f"{s.name}#{(s.attributes or {})['jsonrpc.request.id']}": s
            for s in self.spans.get_finished_spans()
        }

    def metrics(self) -> dict[str, list[Any]]:
        data = self.reader.get_metrics_data()
        assert data is not None
        out: dict[str, list[Any]] = {}
        for rm in data.resource_metrics:
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    out[metric.name] = list(metric.data.data_points)
        return out


def prompt(rid: int, sid: str, meta: dict[str, Any] | None = None) -> bytes:
    params: dict[str, Any] = {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]}
    if meta is not None:
        params["_meta"] = meta
    return req(rid, "session/prompt", params)


def ask(rid: str, sid: str) -> bytes:
    return req(rid, "session/request_permission", {"sessionId": sid, "options": []})


@pytest.fixture
def rig() -> Iterator[Rig]:
    rig = Rig()
    init = {"protocolVersion": 1, "clientInfo": {"name": "zed"}}
    rig.send(CLIENT, req(0, "initialize", init), 0.0)
    rig.send(AGENT, resp(0, {"protocolVersion": 1, "agentInfo": {"name": "claude"}}), 0.1)
    rig.send(CLIENT, req(1, "session/new", {"cwd": "/", "mcpServers": []}), 0.2)
    rig.send(AGENT, resp(1, {"sessionId": "s1"}), 0.3)
    rig.send(AGENT, announce("s1", "kid", capabilities={"cancel": {}}), 0.4)
    yield rig
    rig.bridge.shutdown()


def test_a_span_per_request_with_the_acp_attributes(rig: Rig) -> None:
    """initialize and session/new: a span each, from request to response, with the
    negotiated version and the session the response created."""
    spans = rig.finished()
    init = spans["initialize#0"]
    assert init.attributes is not None
    assert init.attributes["acp.method.name"] == "initialize"
    assert init.attributes["acp.protocol.version"] == 1
    assert init.attributes["acp.direction"] == "client->agent"
    assert init.end_time is not None
    assert init.start_time is not None
    assert init.end_time >= init.start_time
    new = spans["session/new#1"]
    assert new.attributes is not None
    assert new.attributes["acp.session.id"] == "s1"
    assert new.attributes["gen_ai.conversation.id"] == "s1"
    assert new.attributes["acp.protocol.version"] == 1
    assert new.status.status_code is StatusCode.UNSET


def test_traceparent_is_the_parent_and_the_bytes_pass_unchanged(rig: Rig) -> None:
    """A client request's params._meta.traceparent parents its span; the request is
    forwarded byte for byte; an agent request during the prompt is a child of it."""
    raw = prompt(2, "s1", {"traceparent": TRACEPARENT, "tracestate": "vendor=x"})
    assert rig.send(CLIENT, raw, 1.0) == [Send(AGENT, raw)]
    question = ask("p1", "s1")
    assert rig.send(AGENT, question, 1.1) == [Send(CLIENT, question)]
    rig.send(CLIENT, resp("p1", {"outcome": {"outcome": "cancelled"}}), 1.2)
    rig.send(AGENT, resp(2, {"stopReason": "end_turn"}), 2.0)
    spans = rig.finished()
    span = spans["session/prompt#2"]
    assert span.context is not None
    assert span.parent is not None
    assert f"{span.context.trace_id:032x}" == TRACE_ID
    assert f"{span.parent.span_id:016x}" == PARENT_SPAN
    assert span.parent.is_remote
    assert span.attributes is not None
    assert span.attributes["gen_ai.conversation.id"] == "s1"
    asked = spans["session/request_permission#p1"]
    assert asked.parent is not None
    assert asked.context is not None
    assert asked.parent.span_id == span.context.span_id
    assert asked.context.trace_id == span.context.trace_id
    assert asked.attributes is not None
    assert asked.attributes["acp.direction"] == "agent->client"
    assert asked.attributes["jsonrpc.request.id"] == "p1"
    # a request without trace context starts a trace of its own
    assert spans["session/new#1"].parent is None


def test_decisions_are_span_events(rig: Rig) -> None:
    """A refused request (a prompt to a child without the grant) ends at once with a
    `refused` event and an error status; a held agent request shows `held` then
    `released`; a child's session names its parent."""
    rig.send(CLIENT, prompt(3, "kid"), 1.0)
    rig.send(AGENT, ask("p2", "ghost"), 1.1)
    assert "session/request_permission#p2" not in rig.finished()
    rig.send(AGENT, announce("s1", "ghost", capabilities={}), 1.2)
    rig.send(CLIENT, resp("p2", {"outcome": {"outcome": "cancelled"}}), 1.3)
    spans = rig.finished()
    refused = spans["session/prompt#3"]
    assert [e.name for e in refused.events] == ["refused"]
    event_attrs = refused.events[0].attributes or {}
    assert event_attrs["acp.proxy.audit_events"] == ("mutation_rejected",)
    assert refused.status.status_code is StatusCode.ERROR
    assert refused.attributes is not None
    assert refused.attributes["acp.session.parent_id"] == "s1"
    held = spans["session/request_permission#p2"]
    assert [e.name for e in held.events] == ["held", "released"]
    assert held.attributes is not None
    assert held.attributes["acp.session.parent_id"] == "s1"


def test_a_request_answered_by_the_proxy_when_the_agent_goes(rig: Rig) -> None:
    rig.send(CLIENT, prompt(4, "s1"), 1.0)
    rig.core.peer_closed(AGENT, 2.0, "agent exited with status 1")
    span = rig.finished()["session/prompt#4"]
    assert [e.name for e in span.events] == ["answered"]
    assert span.status.status_code is StatusCode.ERROR


def test_open_spans_are_bounded() -> None:
    rig = Rig(max_open=2)
    for rid in range(5):
        rig.send(CLIENT, req(rid, "session/new", {"cwd": "/", "mcpServers": []}), 0.0)
    assert len(rig.bridge._spans) == 2
    evicted = rig.finished()
    assert sorted(evicted) == ["session/new#0", "session/new#1", "session/new#2"]
    assert all(s.events[-1].name == "untracked" for s in evicted.values())
    rig.bridge.shutdown()
    assert len(rig.finished()) == 5


def test_metrics_reuse_the_counters_behind_metrics(rig: Rig) -> None:
    """Messages by direction and kind and decisions are the /metrics tally's; held
    messages and bytes, children and connections come from the live cores; request
    durations are a histogram by method."""
    rig.send(AGENT, ask("p3", "ghost"), 0.5)  # held
    rig.send(CLIENT, prompt(5, "s1"), 1.0)
    rig.send(AGENT, resp(5, {"stopReason": "end_turn"}), 1.5)
    metrics = rig.metrics()
    snap = rig.tally.snapshot()
    messages = {
        (p.attributes["direction"], p.attributes["kind"]): p.value
        for p in metrics["acp_proxy.messages"]
    }
    assert messages == snap["messages"]
    assert messages[("client->agent", "request")] == 3
    decisions = {p.attributes["decision"]: p.value for p in metrics["acp_proxy.decisions"]}
    assert decisions["held"] == 1
    assert decisions == snap["decisions"]
    [held] = metrics["acp_proxy.held.messages"]
    assert held.value == 1
    [held_bytes] = metrics["acp_proxy.held.bytes"]
    assert held_bytes.value == len(ask("p3", "ghost"))
    assert [p.value for p in metrics["acp_proxy.children"]] == [1]
    assert [p.value for p in metrics["acp_proxy.connections"]] == [1]
    durations = {p.attributes["acp.method.name"]: p for p in metrics["acp_proxy.request.duration"]}
    assert durations["session/prompt"].count == 1
    assert durations["session/prompt"].sum == pytest.approx(0.5)
    assert durations["initialize"].count == 1
    assert 0.005 in durations["initialize"].explicit_bounds


def test_a_method_a_peer_made_up_is_not_a_metric_attribute() -> None:
    rig = Rig()
    for i in range(3):
        rig.send(CLIENT, req(i, f"_made/up{i}", {}), 0.0)
        rig.send(AGENT, resp(i, {}), 0.1)
    names = {p.attributes["acp.method.name"] for p in rig.metrics()["acp_proxy.request.duration"]}
    assert names == {"other"}
    assert "_made/up2#2" in rig.finished()  # the span keeps the name
    rig.bridge.shutdown()


def test_the_resource_yields_to_the_otel_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    monkeypatch.delenv("OTEL_RESOURCE_ATTRIBUTES", raising=False)
    assert resource().attributes["service.name"] == "acp-proxy"
    monkeypatch.setenv("OTEL_SERVICE_NAME", "my-proxy")
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=ci,service.version=9")
    attrs = resource().attributes
    assert attrs["service.name"] == "my-proxy"
    assert attrs["service.version"] == "9"
    assert attrs["deployment.environment"] == "ci"


def test_spans_reach_a_real_otlp_http_receiver(monkeypatch: pytest.MonkeyPatch) -> None:
    """open_bridge exports over OTLP/HTTP where OTEL_EXPORTER_OTLP_ENDPOINT says, with the
    service name OTEL_SERVICE_NAME gives; the receiver decodes ExportTraceServiceRequest."""
    with otlp_receiver() as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
        monkeypatch.setenv("OTEL_SERVICE_NAME", "proxy-under-test")
        tally = Tally()
        hub = Hub(tally=tally)
        hub.others.append(open_bridge(hub, tally))
        core = hub.make_core(Config())
        core.receive(CLIENT, req(1, "session/new", {"cwd": "/", "mcpServers": []}), 0.0)
        core.receive(AGENT, resp(1, {"sessionId": "s7"}), 0.25)
        core.receive(CLIENT, prompt(2, "s7", {"traceparent": TRACEPARENT}), 0.5)
        core.receive(AGENT, resp(2, {"stopReason": "end_turn"}), 1.0)
        hub.close()  # flushes
        spans = receiver.spans()
        assert "/v1/metrics" in receiver.paths
    by_name = {span.name: (res, span) for res, span in spans}
    res, span = by_name["session/prompt"]
    assert attributes(res.attributes)["service.name"] == "proxy-under-test"
    attrs = attributes(span.attributes)
    assert attrs["acp.method.name"] == "session/prompt"
    assert attrs["acp.session.id"] == "s7"
    assert attrs["gen_ai.conversation.id"] == "s7"
    assert attrs["jsonrpc.request.id"] == "2"
    assert span.trace_id.hex() == TRACE_ID
    assert span.parent_span_id.hex() == PARENT_SPAN
    assert span.end_time_unix_nano >= span.start_time_unix_nano
    assert attributes(by_name["session/new"][1].attributes)["acp.session.id"] == "s7"


def test_otel_is_off_by_default_and_on_with_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert open_hub(Config(), "run") is None
    hub = open_hub(Config(telemetry=TelemetryConfig(enabled=True)), "run")
    assert hub is not None
    assert [type(o) for o in hub.others] == [OtelBridge]
    assert hub.tally is not None
    assert type(hub.make_core(Config())) is not ProxyCore
    hub.close()


def test_otel_without_the_extra_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "acp_proxy.shell.otel")
    monkeypatch.setitem(sys.modules, "opentelemetry", None)  # import fails
    with pytest.raises(UsageError) as err:
        open_hub(Config(telemetry=TelemetryConfig(enabled=True)), "run")
    assert str(err.value).startswith(
        "--otel ([telemetry] enabled) needs the otel extra where acp-proxy is installed: "
        "pip install '.[otel]' in a clone, uv tool install --force \"acp-proxy[otel] @ "
        'git+URL", or pipx inject acp-proxy opentelemetry-sdk '
        'opentelemetry-exporter-otlp-proto-http (README "OpenTelemetry") ('
    )


LOADED = (
    "import sys\n"
    "from acp_proxy.cli import main\n"
    "status = main(sys.argv[1:] + ['--', sys.executable, '-c', 'pass'])\n"
    "print(status, sorted(m for m in sys.modules\n"
    "    if m.split('.')[0] == 'opentelemetry' or m == 'acp_proxy.shell.otel'))\n"
)


@pytest.mark.parametrize(
    ("args", "loaded"),
    [([], False), (["--trace", "/dev/null", "--log-level", "info"], False), (["--otel"], True)],
)
def test_the_otel_modules_are_imported_only_when_on(args: list[str], loaded: bool) -> None:
    """A proxy without --otel (even tracing, at info) never imports OpenTelemetry."""
    env = {"PATH": "/usr/bin:/bin", "OTEL_SDK_DISABLED": "true"}
    out = subprocess.run(
        [sys.executable, "-c", LOADED, *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=True,
    ).stdout
    status, modules = out.split(" ", 1)
    assert status == "0"
    names = json.loads(modules.replace("'", '"'))
    assert ("acp_proxy.shell.otel" in names) is loaded
    assert any(n.startswith("opentelemetry") for n in names) is loaded


def test_a_connections_spans_name_its_principal() -> None:
    """A connection bound to a principal (``--tokens-file``): every span carries
    ``acp.principal``; a connection without one carries none."""
    rig = Rig()
    rig.core.admission.bind("alice", True, None)
    rig.send(CLIENT, req(0, "initialize", {"protocolVersion": 1}), 0.0)
    rig.send(AGENT, resp(0, {"protocolVersion": 1}), 0.1)
    rig.send(
        CLIENT,
        req(1, "session/new", {"cwd": "/", "mcpServers": [{"name": "x", "command": "/x"}]}),
        0.2,
    )
    spans = rig.finished()
    assert {(s.attributes or {}).get("acp.principal") for s in spans.values()} == {"alice"}
    assert set(spans) == {"initialize#0", "session/new#1"}  # the refused one is a span too
    plain = Rig()
    plain.send(CLIENT, req(0, "initialize", {"protocolVersion": 1}), 0.0)
    plain.send(AGENT, resp(0, {"protocolVersion": 1}), 0.1)
    assert "acp.principal" not in (plain.finished()["initialize#0"].attributes or {})
    rig.bridge.shutdown()
    plain.bridge.shutdown()
