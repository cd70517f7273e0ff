"""The audit log's cost per record: the hash chain against a plain append (no I/O but the file's).

Audit records are written only for the proxy's decisions (refusals, drops,
holds, asks), never for forwarded traffic, so the chain is off the stream's hot
path: the stream figures must not move. This measures what one audited record
costs the writer: ``plain`` (a line-buffered text file, as before the chain),
``chained`` (SHA-256 chain, one ``os.write`` per line, the ``fstat`` / ``stat``
that notice a removed or replaced file) and ``keyed`` (HMAC-SHA256).
"""

from __future__ import annotations

import os
import tempfile
import time

__all__ = ["audit_cost_us"]


def audit_cost_us(count: int) -> dict[str, float]:
    """Microseconds per audited record (best of 3), per writer; plus ``chain_ratio``
    (chained / plain)."""
    from acp_proxy.core.actions import Audit, AuditEvent
    from acp_proxy.shell.audit import AuditLog, Throttle

    record = Audit(
        AuditEvent.MUTATION_REJECTED,
        "client->agent",
        {"sessionId": "child-1", "method": "session/prompt", "id": 4, "reason": "not granted"},
    )
    context = {"pid": 1, "run": "bench"}
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("plain", "chained", "keyed"):
            best = float("inf")
            for attempt in range(3):
                path = os.path.join(tmp, f"{name}-{attempt}.jsonl")
                if name == "plain":
                    stream = open(path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115
                    log = AuditLog(stream, context)
                else:
                    key = b"k" * 32 if name == "keyed" else None
                    log = AuditLog.open(path, context, key=key)
                log.throttle = Throttle(burst=count + 1)  # measure writes, not the rate limit
                start = time.perf_counter()
                for _ in range(count):
                    log.write(record)
                best = min(best, time.perf_counter() - start)
                log.close()
            out[name] = round(best / count * 1e6, 2)
    out["chain_ratio"] = round(out["chained"] / out["plain"], 2)
    return out
