"""A small OTLP/HTTP receiver for the tests: the benchmark's local collector
(:func:`benchmarks.otlp_sink.otlp_sink`), decoding each ``ExportTraceServiceRequest``
posted to ``/v1/traces`` and each ``ExportLogsServiceRequest`` posted to ``/v1/logs``."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from benchmarks.otlp_sink import otlp_sink

__all__ = ["Receiver", "attributes", "otlp_receiver"]


class Receiver:
    """What the receiver got: decoded trace requests, and every path posted to."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.traces: list[ExportTraceServiceRequest] = []
        self.logs: list[ExportLogsServiceRequest] = []
        self.paths: list[str] = []
        self.url = ""

    def post(self, path: str, body: bytes) -> None:
        with self.lock:
            self.paths.append(path)
            if path == "/v1/traces":
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                self.traces.append(request)
            elif path == "/v1/logs":
                logs = ExportLogsServiceRequest()
                logs.ParseFromString(body)
                self.logs.append(logs)

    def log_records(self) -> list[Any]:
        """Every log record received, in order."""
        with self.lock:
            return [
                record
                for request in self.logs
                for rl in request.resource_logs
                for sl in rl.scope_logs
                for record in sl.log_records
            ]

    def spans(self) -> list[Any]:
        """Every span received, as ``(resource, span)``."""
        with self.lock:
            return [
                (rs.resource, span)
                for request in self.traces
                for rs in request.resource_spans
                for ss in rs.scope_spans
                for span in ss.spans
            ]


def attributes(items: Any) -> dict[str, Any]:
    """OTLP ``KeyValue`` list as a dict of plain values."""
    out: dict[str, Any] = {}
    for kv in items:
        which = kv.value.WhichOneof("value")
        out[kv.key] = getattr(kv.value, which) if which is not None else None
    return out


@contextmanager
def otlp_receiver() -> Iterator[Receiver]:
    """Serves on 127.0.0.1 (a free port) until the block ends; ``receiver.url`` is its base."""
    receiver = Receiver()
    with otlp_sink(receiver.post) as (url, _posts):
        receiver.url = url
        yield receiver
