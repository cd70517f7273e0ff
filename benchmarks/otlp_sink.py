"""A local OTLP/HTTP collector for the ``otel`` latency variant: accepts every POST.

A threading HTTP server on 127.0.0.1 that reads each export request whole and
answers 200 with an empty body (a valid empty ``Export*ServiceResponse``), so
the proxy's exporter does its real work (encode, send, wait for the answer)
against a collector that is always there. It counts the requests per path.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["OTEL_AVAILABLE", "otlp_sink"]


def _available() -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec("opentelemetry.sdk") is not None
    except ModuleNotFoundError:
        return False


#: the ``otel`` extra is installed (the ``otel`` latency variant runs only then)
OTEL_AVAILABLE = _available()


@contextlib.contextmanager
def otlp_sink(
    on_post: Callable[[str, bytes], None] | None = None,
) -> Iterator[tuple[str, dict[str, int]]]:
    """Serves until the block ends; yields its base URL and the POST count per path.

    ``on_post`` is called with each request's path and body (in the server's thread)
    before it is answered.
    """
    posts: dict[str, int] = {}
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with lock:
                posts[self.path] = posts.get(self.path, 0) + 1
            if on_post is not None:
                on_post(self.path, body)
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", posts
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
