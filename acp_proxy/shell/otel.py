"""OpenTelemetry export (``--otel``, ``[telemetry] enabled``): spans and metrics over OTLP/HTTP.

Needs the ``otel`` extra (``pip install 'acp-proxy[otel]'``); imported only when
it is on (:func:`~acp_proxy.shell.watch.open_hub`), so a proxy without it never
loads the SDK. :class:`OtelBridge` is a
:class:`~acp_proxy.shell.observe.RecordObserver`: it reads the trace records of
:mod:`acp_proxy.core.trace` (README "OpenTelemetry"):

- a span per client request and per agent request, from the request to its
  response (or to the proxy's own answer), named after the method, with
  ``acp.method.name``, ``acp.session.id`` and ``gen_ai.conversation.id`` (the
  session), ``jsonrpc.request.id``, ``acp.protocol.version``,
  ``acp.session.parent_id`` (a child's parent) and ``acp.direction``; the
  proxy's decisions (``held``, ``released``, ``refused``, ``answered``,
  ``dropped``, ``rewritten``) are span events. A client request's
  ``params._meta.traceparent`` / ``tracestate`` is its span's parent (through
  the configured propagators, W3C trace context by default); an agent request
  made during a ``session/prompt`` of its session is a child of that prompt's
  span;
- metrics: ``acp_proxy.messages`` (direction, kind) and ``acp_proxy.decisions``
  (decision) read from the :class:`~acp_proxy.shell.observe.Tally` that also
  serves ``/metrics``; ``acp_proxy.held.messages``, ``acp_proxy.held.bytes``,
  ``acp_proxy.children`` and ``acp_proxy.connections`` read from the live cores
  (:meth:`~acp_proxy.shell.observe.Hub.totals`); the histogram
  ``acp_proxy.request.duration`` (seconds, by method).

The relay never waits for the exporter: a span ends into the
``BatchSpanProcessor``'s bounded queue (full: the span is dropped, never
waited for) and the metrics are read by the SDK's periodic reader; both export
in the SDK's own threads. The standard ``OTEL_*`` variables apply (endpoint,
headers, timeout, ``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``,
``OTEL_PROPAGATORS``, ``OTEL_BSP_*``, ``OTEL_METRIC_EXPORT_INTERVAL``,
``OTEL_SDK_DISABLED``); the proxy only supplies defaults they override
(``service.name = acp-proxy``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation
from opentelemetry.sdk.metrics import MeterProvider as SdkMeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import (
    SERVICE_NAME,
    SERVICE_VERSION,
    OTELResourceDetector,
    Resource,
)
from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Span, SpanKind, StatusCode, TracerProvider

from acp_proxy import __version__
from acp_proxy.core.trace import Record
from acp_proxy.shell.observe import DURATION_BUCKETS, Connection, Hub, Tally

__all__ = ["ACP_METHODS", "MAX_OPEN_SPANS", "OtelBridge", "open_bridge", "resource"]

#: spans open at once (requests without a response yet); beyond it the oldest is ended
MAX_OPEN_SPANS = 4096

#: seconds the proxy's exit waits for the last export
SHUTDOWN_SECONDS = 3.0

#: methods named in the duration histogram; any other is ``"other"`` (peers choose
#: method names: a metric attribute must not grow without bound)
ACP_METHODS = frozenset(
    {
        "initialize",
        "authenticate",
        "session/new",
        "session/load",
        "session/resume",
        "session/fork",
        "session/list",
        "session/prompt",
        "session/set_mode",
        "session/set_model",
        "session/set_config_option",
        "session/close",
        "session/request_permission",
        "fs/read_text_file",
        "fs/write_text_file",
        "terminal/create",
        "terminal/output",
        "terminal/release",
        "terminal/wait_for_exit",
        "terminal/kill",
    }
)

#: decisions that end a request's span (the proxy answered it, or nobody will)
_FINAL = frozenset({"refused", "answered", "dropped"})

_REQUESTER = {"client->agent": "client", "agent->client": "agent"}
_OTHER = {"client": "agent", "agent": "client"}

Key = tuple[int, str, Any]  # (connection, requester, request id)


def resource() -> Resource:
    """The proxy's resource: ``service.name = acp-proxy`` and its version, under the
    ``OTEL_SERVICE_NAME`` / ``OTEL_RESOURCE_ATTRIBUTES`` the environment gives (they win)."""
    base = Resource.create({SERVICE_NAME: "acp-proxy", SERVICE_VERSION: __version__})
    return base.merge(OTELResourceDetector().detect())


class OtelBridge:
    """Spans and metrics from the trace records of every connection.

    Args:
        hub: the hub whose connections are observed (gauges read its live cores).
        tally: the counters behind ``/metrics`` (read by the message and decision counters).
        tracer_provider: where spans go.
        meter_provider: where metrics go.
        max_open: spans kept open at once (:data:`MAX_OPEN_SPANS`).
    """

    def __init__(
        self,
        hub: Hub,
        tally: Tally,
        tracer_provider: TracerProvider,
        meter_provider: MeterProvider,
        *,
        max_open: int = MAX_OPEN_SPANS,
    ) -> None:
        self.hub = hub
        self.tally = tally
        self.tracer_provider = tracer_provider
        self.meter_provider = meter_provider
        self.tracer = tracer_provider.get_tracer("acp_proxy", __version__)
        self.max_open = max_open
        self._lock = threading.Lock()  # records may come from a worker thread
        self._spans: dict[Key, Span] = {}
        self._prompts: dict[tuple[int, str], Span] = {}  # (connection, session) -> prompt span
        meter = meter_provider.get_meter("acp_proxy", __version__)
        meter.create_observable_counter(
            "acp_proxy.messages",
            [self._messages],
            unit="{message}",
            description="Messages seen, by direction and JSON-RPC kind.",
        )
        meter.create_observable_counter(
            "acp_proxy.decisions",
            [self._decisions],
            unit="{message}",
            description="The proxy's decisions, by kind.",
        )
        for name, key, unit, text in (
            ("acp_proxy.held.messages", "held", "{message}", "Messages in the hold buffers now."),
            ("acp_proxy.held.bytes", "held_bytes", "By", "Bytes in the hold buffers now."),
            ("acp_proxy.children", "children", "{session}", "Child sessions in the registries."),
            ("acp_proxy.connections", "connections", "{connection}", "Connections open now."),
        ):
            meter.create_observable_gauge(name, [self._gauge(key)], unit=unit, description=text)
        self._duration = meter.create_histogram(
            "acp_proxy.request.duration",
            unit="s",
            description="Request to response, for requests the proxy forwarded.",
            explicit_bucket_boundaries_advisory=list(DURATION_BUCKETS),
        )

    # ------------------------------------------------------------ metrics

    def _messages(self, options: CallbackOptions) -> Iterable[Observation]:
        for (direction, kind), n in self.tally.snapshot()["messages"].items():
            yield Observation(n, {"direction": direction, "kind": kind})

    def _decisions(self, options: CallbackOptions) -> Iterable[Observation]:
        for decision, n in self.tally.snapshot()["decisions"].items():
            yield Observation(n, {"decision": decision})

    def _gauge(self, key: str) -> Any:
        def read(options: CallbackOptions) -> Iterable[Observation]:
            return [Observation(self.hub.totals()[key])]

        return read

    # -------------------------------------------------------------- spans

    def observe(self, conn: Connection, record: Record) -> None:
        """One trace record of ``conn``."""
        kind = record.get("type")
        with self._lock:
            if kind == "message":
                rkind = record["kind"]
                if record["seq"] is None:
                    self._settled(conn, record)
                elif rkind == "request":
                    self._request(conn, record)
                elif rkind == "response" or rkind == "error":
                    self._response(conn, record)
            elif kind == "proxy":
                span = self._spans.pop((conn.number, record["to"], _hashable(record["id"])), None)
                if span is not None:
                    span.add_event("answered", {"acp.proxy.reason": "the other peer is gone"})
                    span.set_status(StatusCode.ERROR, "answered by the proxy: peer gone")
                    self._end(conn, span)

    def _request(self, conn: Connection, record: Record) -> None:
        requester = _REQUESTER[record["dir"]]
        method = record["method"] or ""
        sid = record["session"]
        core = conn.core
        attributes: dict[str, Any] = {
            "acp.method.name": method,
            "acp.direction": record["dir"],
            "rpc.system": "jsonrpc",
            "jsonrpc.request.id": str(record["id"]),
        }
        version = core.negotiated.protocol_version
        if version is not None:
            attributes["acp.protocol.version"] = version
        if sid is not None:
            attributes["acp.session.id"] = sid
            attributes["gen_ai.conversation.id"] = sid
            attributes.update(_parent(conn, sid))
        parent: Context | None = None
        if requester == "client":
            if "traceparent" in record:
                carrier = {k: record[k] for k in ("traceparent", "tracestate") if k in record}
                parent = propagate.extract(carrier)
        elif sid is not None:
            prompt = self._prompts.get((conn.number, sid))
            if prompt is not None:
                parent = trace.set_span_in_context(prompt)
        span = self.tracer.start_span(
            method or "request", context=parent, kind=SpanKind.SERVER, attributes=attributes
        )
        span.set_attribute("acp.connection", conn.number)
        if conn.principal is not None:
            span.set_attribute("acp.principal", conn.principal)
        decision = record["decision"]
        if decision != "forwarded":
            self._event(span, record)
        if decision in _FINAL:
            if decision == "refused":
                span.set_status(StatusCode.ERROR, "refused by the proxy")
            span.end()
            return
        key = (conn.number, requester, _hashable(record["id"]))
        if key in self._spans:  # an id reused while in flight: the core dropped it
            span.end()
            return
        if len(self._spans) >= self.max_open:
            oldest = next(iter(self._spans))
            old = self._spans.pop(oldest)
            old.add_event("untracked", {"acp.proxy.reason": "too many requests in flight"})
            self._end(conn, old)
        self._spans[key] = span
        if method == "session/prompt" and sid is not None:
            self._prompts[(conn.number, sid)] = span

    def _settled(self, conn: Connection, record: Record) -> None:
        """A held agent request left the hold buffer (released, refused, ...)."""
        if record["kind"] != "request":
            return
        key = (conn.number, "agent", _hashable(record["id"]))
        span = self._spans.get(key)
        if span is None:
            return
        self._event(span, record)
        sid = record["session"]
        if sid is not None:  # announced meanwhile: a child now
            span.set_attributes(_parent(conn, sid))
        if record["decision"] in _FINAL:
            del self._spans[key]
            if record["decision"] == "refused":
                span.set_status(StatusCode.ERROR, "refused by the proxy")
            self._end(conn, span)

    def _response(self, conn: Connection, record: Record) -> None:
        if "for_seq" not in record:
            return  # not a response to a request the records followed
        requester = _OTHER[_REQUESTER[record["dir"]]]
        span = self._spans.pop((conn.number, requester, _hashable(record["id"])), None)
        if span is None:
            return
        method = record.get("for_method") or ""
        duration = record.get("duration")
        if duration is not None:
            self._duration.record(
                duration,
                {
                    "acp.method.name": method if method in ACP_METHODS else "other",
                    "direction": record["dir"],
                },
            )
        if "protocolVersion" in record:
            span.set_attribute("acp.protocol.version", record["protocolVersion"])
        created = record.get("created")
        if created is not None:
            span.set_attribute("acp.session.id", created)
            span.set_attribute("gen_ai.conversation.id", created)
        if record["kind"] == "error":
            span.set_status(StatusCode.ERROR, "error response")
        if record["decision"] != "forwarded":
            self._event(span, record)
        self._end(conn, span)

    def _event(self, span: Span, record: Record) -> None:
        attributes: dict[str, Any] = {"acp.proxy.decision": record["decision"]}
        events = record.get("events") or ()
        if events:
            attributes["acp.proxy.audit_events"] = [str(e["event"]) for e in events]
            reason = next((e["reason"] for e in events if "reason" in e), None)
            if reason is not None:
                attributes["acp.proxy.reason"] = str(reason)
        span.add_event(record["decision"], attributes)

    def _end(self, conn: Connection, span: Span) -> None:
        span.end()
        prompts = self._prompts
        if prompts:  # a few: the prompts running now
            for key in [k for k, s in prompts.items() if s is span]:
                del prompts[key]

    # ------------------------------------------------------------ the end

    def shutdown(self, timeout: float = SHUTDOWN_SECONDS) -> None:
        """Ends the spans still open and flushes the export, waiting at most ``timeout``."""
        with self._lock:
            spans = list(self._spans.values())
            self._spans.clear()
            self._prompts.clear()
        for span in spans:
            span.add_event("untracked", {"acp.proxy.reason": "the proxy stopped"})
            span.end()

        def stop() -> None:
            for provider in (self.tracer_provider, self.meter_provider):
                shutdown = getattr(provider, "shutdown", None)
                if shutdown is not None:
                    shutdown()

        worker = threading.Thread(target=stop, name="acp-proxy-otel-shutdown", daemon=True)
        worker.start()
        worker.join(timeout)


def _parent(conn: Connection, sid: str) -> dict[str, Any]:
    """``acp.session.parent_id`` when ``sid`` is a child in the connection's registry."""
    child = conn.core.registry.children.get(sid)
    return {"acp.session.parent_id": child.parent_id} if child is not None else {}


def _hashable(rid: Any) -> Any:
    """A request id as a dict key (the core only tracks string and integer ids)."""
    return rid if type(rid) is str or type(rid) is int else repr(rid)


def open_bridge(hub: Hub, tally: Tally) -> OtelBridge:
    """The bridge exporting over OTLP/HTTP as the ``OTEL_*`` environment says.

    Spans go through a ``BatchSpanProcessor``, metrics through a
    ``PeriodicExportingMetricReader``: export happens in the SDK's threads.
    """
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    res = resource()
    # shutdown_on_exit=False: OtelBridge.shutdown is the one shutdown (an atexit one
    # after it would log "shutdown can only be called once")
    tracer_provider = SdkTracerProvider(resource=res, shutdown_on_exit=False)
    tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    meter_provider = SdkMeterProvider(
        resource=res,
        metric_readers=[PeriodicExportingMetricReader(OTLPMetricExporter())],
        shutdown_on_exit=False,
    )
    return OtelBridge(hub, tally, tracer_provider, meter_provider)
