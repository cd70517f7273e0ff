"""``--metrics ADDR``: ``/metrics`` (Prometheus text), ``/healthz``, ``/readyz``, ``/status``.

A small HTTP/1.1 server on trio and h11 (one request per connection, bounded
request size and time). The address is loopback unless a token is set: a
non-loopback address needs ``listen.token_file``, and then every request needs
``Authorization: Bearer TOKEN``; the ``Host`` and ``Origin`` rules are those of
``--listen`` (:mod:`~acp_proxy.shell.topology.ws_upgrade`), so a web page cannot
read the status of a proxy on the user's machine.

What is served (README "Metrics and status"):

- ``/metrics``: ``acp_proxy_messages_total{direction,kind}``,
  ``acp_proxy_decisions_total{decision}``, ``acp_proxy_held_messages``,
  ``acp_proxy_held_bytes``, ``acp_proxy_children``,
  ``acp_proxy_connections``, ``acp_proxy_request_duration_seconds`` (histogram),
  ``acp_proxy_uptime_seconds``;
- ``/healthz``: 200 while the proxy runs;
- ``/readyz``: 200 once a connection is open (its agent started), else 503;
- ``/status``: JSON (:func:`status`).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from typing import Any

import h11
import trio

from acp_proxy.config import Config
from acp_proxy.errors import UsageError
from acp_proxy.shell.http_once import host_and_headers, read_request, send_response
from acp_proxy.shell.observe import DURATION_BUCKETS, Connection, Hub
from acp_proxy.shell.timefmt import iso_utc
from acp_proxy.shell.topology.principals import Authenticator, read_tokens_file
from acp_proxy.shell.topology.ws_upgrade import (
    accepted_hosts,
    check_upgrade,
    is_loopback,
    read_token,
)

__all__ = ["parse_address", "render_metrics", "serve_metrics", "status"]

log = logging.getLogger("acp_proxy.metrics")

#: bytes of one request's head accepted
MAX_REQUEST_BYTES = 16 * 1024
#: seconds a client has to send its request (and to read the answer)
REQUEST_TIMEOUT_SECONDS = 10.0
#: Requests served at once; a connection beyond is closed unanswered (each idle one
#: is otherwise held for REQUEST_TIMEOUT_SECONDS).
MAX_CONNECTIONS = 64

PATHS = ("/metrics", "/healthz", "/readyz", "/status")


def parse_address(addr: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) as a host and a port.

    Raises:
        UsageError: it is not one.
    """
    host, sep, port = addr.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise UsageError(f"--metrics takes HOST:PORT, e.g. 127.0.0.1:9464 (got {addr!r})")
    return host, int(port)


def _esc(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def render_metrics(hub: Hub) -> str:
    """The Prometheus text exposition (version 0.0.4) of the hub's counters."""
    tally = hub.tally
    snap = tally.snapshot() if tally is not None else None
    out: list[str] = []

    def family(name: str, kind: str, text: str) -> None:
        out.append(f"# HELP {name} {text}")
        out.append(f"# TYPE {name} {kind}")

    family("acp_proxy_messages_total", "counter", "Messages seen, by direction and JSON-RPC kind.")
    if snap is not None:
        for (direction, kind), n in sorted(snap["messages"].items()):
            out.append(
                f'acp_proxy_messages_total{{direction="{_esc(direction)}",kind="{_esc(kind)}"}} {n}'
            )
        family("acp_proxy_decisions_total", "counter", "The proxy's decisions, by kind.")
        for decision, n in sorted(snap["decisions"].items()):
            out.append(f'acp_proxy_decisions_total{{decision="{_esc(decision)}"}} {n}')
    totals = hub.totals()
    family("acp_proxy_held_messages", "gauge", "Messages in the hold buffers now.")
    out.append(f"acp_proxy_held_messages {totals['held']}")
    family("acp_proxy_held_bytes", "gauge", "Bytes in the hold buffers now.")
    out.append(f"acp_proxy_held_bytes {totals['held_bytes']}")
    family("acp_proxy_children", "gauge", "Child sessions in the registries now.")
    out.append(f"acp_proxy_children {totals['children']}")
    family("acp_proxy_connections", "gauge", "Client-agent connections open now.")
    out.append(f"acp_proxy_connections {totals['connections']}")
    if snap is not None:
        family(
            "acp_proxy_request_duration_seconds",
            "histogram",
            "Request to response, for requests the proxy forwarded.",
        )
        cumulative = 0
        for bound, n in zip((*DURATION_BUCKETS, None), snap["buckets"], strict=True):
            cumulative += n
            le = "+Inf" if bound is None else repr(float(bound))
            out.append(f'acp_proxy_request_duration_seconds_bucket{{le="{le}"}} {cumulative}')
        out.append(f"acp_proxy_request_duration_seconds_sum {snap['duration_sum']!r}")
        out.append(f"acp_proxy_request_duration_seconds_count {snap['duration_count']}")
    would_block, exceeded = _budget_totals(hub)
    family(
        "acp_proxy_would_block_total",
        "counter",
        'Decisions a rule or budget would have blocked (policy.mode = "observe"), by rule.',
    )
    for rule, n in sorted(would_block.items()):
        out.append(f'acp_proxy_would_block_total{{rule="{_esc(rule)}"}} {n}')
    family("acp_proxy_budget_exceeded_total", "counter", "Budget decisions, by budget.")
    for budget, n in sorted(exceeded.items()):
        out.append(f'acp_proxy_budget_exceeded_total{{budget="{_esc(budget)}"}} {n}')
    family("acp_proxy_uptime_seconds", "gauge", "Seconds since the proxy started.")
    out.append(f"acp_proxy_uptime_seconds {time.monotonic() - hub.started_monotonic:.3f}")
    return "\n".join(out) + "\n"


def _budget_totals(hub: Hub) -> tuple[dict[str, int], dict[str, int]]:
    """Would-block decisions per rule and budget decisions per budget, over the
    connections the hub keeps (issue 28)."""
    would_block: dict[str, int] = {}
    exceeded: dict[str, int] = {}
    for conn in list(hub.connections.values()):
        for rule, n in list(conn.core.ledger.would_block.items()):
            would_block[rule] = would_block.get(rule, 0) + n
        for budget, n in list(conn.core.budgets.exceeded.items()):
            exceeded[budget] = exceeded.get(budget, 0) + n
    return would_block, exceeded


def _connection_status(conn: Connection, include_content: bool = False) -> dict[str, Any]:
    core = conn.core
    registry = core.registry
    stats = core.statistics()
    children = {
        cid: {
            "parent": child.parent_id,
            **({"title": child.title} if include_content else {}),
            "capabilities": child.capabilities,
            "state": child.state,
            "fresh": child.fresh,
        }
        for cid, child in list(registry.children.items())
    }
    return {
        "connection": conn.number,
        "principal": conn.principal,
        "agentPid": conn.agent_pid,
        "started": iso_utc(conn.started),
        "closed": conn.closed,
        "protocolVersion": core.negotiated.protocol_version,
        "client": conn.client_name,
        "agent": conn.agent_name,
        "sessions": sorted(registry.known),
        "children": children,
        "heldSessions": len(core.hold),
        "policyMode": core.config.policy.mode,
        "wouldBlock": dict(core.ledger.would_block),
        "budgets": core.budgets.counts(),
        "counters": {
            name: getattr(stats, name)
            for name in (
                "accepted",
                "forwarded",
                "answered",
                "dropped",
                "held",
                "held_bytes",
                "rejected_mutations",
                "duplicates_removed",
                "invalid",
                "pending_client_requests",
                "pending_agent_requests",
            )
        },
    }


def status(hub: Hub, include_content: bool = False) -> dict[str, Any]:
    """What ``/status`` serves: agent-given text (a child's title) only with
    ``include_content`` (``audit.include_content``)."""
    conns = list(hub.connections.values())
    return {
        "pid": os.getpid(),
        "uptimeSeconds": round(time.monotonic() - hub.started_monotonic, 3),
        "started": iso_utc(hub.started),
        "agentPid": next((c.agent_pid for c in reversed(conns) if c.closed is None), None),
        "connections": [_connection_status(c, include_content) for c in conns],
        "decisions": hub.tally.snapshot()["decisions"] if hub.tally is not None else None,
        "wouldBlock": _budget_totals(hub)[0],
        "budgetExceeded": _budget_totals(hub)[1],
    }


def _respond(hub: Hub, target: str, include_content: bool = False) -> tuple[int, str, bytes]:
    path = target.split("?", 1)[0]
    if path == "/metrics":
        return 200, "text/plain; version=0.0.4; charset=utf-8", render_metrics(hub).encode()
    if path == "/healthz":
        return 200, "text/plain; charset=utf-8", b"ok\n"
    if path == "/readyz":
        if hub.live():
            return 200, "text/plain; charset=utf-8", b"ready\n"
        return 503, "text/plain; charset=utf-8", b"no connection open\n"
    if path == "/status":
        body = json.dumps(status(hub, include_content), indent=2, default=repr).encode() + b"\n"
        return 200, "application/json", body
    return 404, "text/plain; charset=utf-8", b"not found\n"


async def _serve_one(
    stream: trio.SocketStream,
    hub: Hub,
    auth: Authenticator,
    hosts: frozenset[str] | None,
    cfg: Config,
) -> None:
    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_REQUEST_BYTES)
    request = await read_request(stream, conn, REQUEST_TIMEOUT_SECONDS)
    if request is None:
        return
    target = request.target.decode("latin-1")
    host, headers = host_and_headers(request)
    path = target.split("?", 1)[0]
    refusal = check_upgrade(
        target,
        host,
        headers,
        path=path if path in PATHS else "/",
        token=None,
        allowed_origins=cfg.listen.allowed_origins,
        allowed_hosts=hosts,
    )
    if refusal is None and not auth.check(headers)[0]:
        refusal = (401, "missing or wrong bearer token")
    if request.method != b"GET":
        code, ctype, body = 405, "text/plain; charset=utf-8", b"GET only\n"
    elif refusal is not None and refusal[0] != 404:
        code, ctype, body = refusal[0], "text/plain; charset=utf-8", refusal[1].encode() + b"\n"
    else:
        code, ctype, body = _respond(hub, target, cfg.audit.include_content)
    answer = [("content-type", ctype), ("cache-control", "no-store")]
    await send_response(stream, conn, code, answer, body, REQUEST_TIMEOUT_SECONDS)


async def serve_metrics(
    addr: str, hub: Hub, cfg: Config, *, task_status: Any = trio.TASK_STATUS_IGNORED
) -> None:
    """Serves until cancelled; ``task_status.started`` gets the bound port.

    Raises:
        UsageError: a bad address, or a non-loopback one without ``listen.token_file``.
    """
    host, port = parse_address(addr)
    loopback = await is_loopback(host)
    token = read_token(cfg.listen.token_file) if cfg.listen.token_file else None
    principals = read_tokens_file(cfg.listen.tokens_file) if cfg.listen.tokens_file else {}
    auth = Authenticator(token=token, principals=principals)
    if not loopback and not auth.required:
        raise UsageError(
            f"--metrics {addr} is not a loopback address: set token_file in the [listen] table "
            "of the --config file (or pass --token-file with --listen or --connect) so that "
            "requests need a bearer token, or use 127.0.0.1"
        )
    hosts = accepted_hosts(
        host, loopback=loopback, token=auth.required, allowed_hosts=cfg.listen.allowed_hosts
    )
    try:
        listeners = await trio.open_tcp_listeners(port, host=host)
    except OSError as exc:
        raise UsageError(f"cannot serve --metrics on {addr}: {exc.strerror or exc}") from None
    bound = listeners[0].socket.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    print(
        f"acp-proxy: serving metrics on http://{shown}:{bound}/metrics (also /healthz, "
        "/readyz, /status)",
        file=sys.stderr,
        flush=True,
    )
    task_status.started(bound)

    slots = trio.Semaphore(MAX_CONNECTIONS)

    async def handler(stream: trio.SocketStream) -> None:
        try:
            if slots.value == 0:
                return  # over MAX_CONNECTIONS at once: closed at once (idle ones would pile up)
            async with slots:
                await _serve_one(stream, hub, auth, hosts, cfg)
        except (trio.BrokenResourceError, trio.ClosedResourceError, h11.ProtocolError, OSError):
            pass
        finally:
            await stream.aclose()

    await trio.serve_listeners(handler, listeners)
