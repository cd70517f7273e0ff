"""A small OTLP/HTTP receiver for the tests: a threading HTTP server that decodes
``ExportTraceServiceRequest`` bodies (``/v1/traces``) and counts the other posts."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

__all__ = ["Receiver", "attributes", "otlp_receiver"]


class Receiver:
    """What the receiver got: decoded trace requests, and every path posted to."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.traces: list[ExportTraceServiceRequest] = []
        self.paths: list[str] = []
        self.got = threading.Condition(self.lock)
        self.url = ""

    def spans(self) -> list[Any]:
        """Every span received, with its resource's attributes as ``span.resource``."""
        with self.lock:
            out = []
            for request in self.traces:
                for rs in request.resource_spans:
                    for ss in rs.scope_spans:
                        out.extend((rs.resource, span) for span in ss.spans)
            return out


def attributes(items: Any) -> dict[str, Any]:
    """OTLP ``KeyValue`` list as a dict of plain values."""
    out: dict[str, Any] = {}
    for kv in items:
        value = kv.value
        which = value.WhichOneof("value")
        out[kv.key] = getattr(value, which) if which is not None else None
    return out


@contextmanager
def otlp_receiver() -> Iterator[Receiver]:
    """Serves on 127.0.0.1 (a free port) until the block ends; ``receiver.url`` is its base."""
    receiver = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with receiver.got:
                receiver.paths.append(self.path)
                if self.path == "/v1/traces":
                    request = ExportTraceServiceRequest()
                    request.ParseFromString(body)
                    receiver.traces.append(request)
                receiver.got.notify_all()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
