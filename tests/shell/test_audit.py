"""The audit log writer: one valid JSON line per record, whatever a peer put in it."""

from __future__ import annotations

import io
import json

from acp_proxy.core.actions import Audit
from acp_proxy.shell.audit import AuditLog, format_record


def test_a_lone_surrogate_from_a_peer_is_escaped_not_lost() -> None:
    """A method name with a lone surrogate (valid JSON, not UTF-8) still gets its record."""
    record = Audit("notification_dropped", "agent->client", {"method": "x\ud800", "id": None})
    line = format_record(record, {"connection": 1})
    assert line.isascii()
    decoded = json.loads(line)
    assert decoded["method"] == "x\ud800"
    assert decoded["connection"] == 1
    assert "id" not in decoded
    stream = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)
    log = AuditLog(stream)
    log.write(record)
    assert log.records_written == 1


def test_non_ascii_text_is_written_as_utf8() -> None:
    """Ordinary non-ASCII text stays readable (not escaped)."""
    line = format_record(Audit("mutation_rejected", None, {"reason": "déjà"}))
    assert "déjà" in line
    assert json.loads(line)["event"] == "mutation_rejected"
