"""The audit vocabulary is one enum, and the README documents all of it."""

from __future__ import annotations

import re
import typing
from pathlib import Path

from acp_proxy.core.actions import Audit, AuditEvent

README = Path(__file__).resolve().parents[2] / "README.md"


def test_an_audit_record_is_typed_with_the_enum() -> None:
    hints = typing.get_type_hints(Audit)
    assert hints["event"] is AuditEvent
    assert AuditEvent.HELD == "held"  # written and compared as its name


def test_the_readme_lists_exactly_the_events_the_proxy_writes() -> None:
    text = README.read_text(encoding="utf-8")
    listed = text.split("\nEvents: ", 1)[1].split("\n\n", 1)[0]
    names = set(re.findall(r"`([a-z_]+)`", listed))
    # and the chain's own records, which open and close each run (no AuditEvent)
    assert names == {e.value for e in AuditEvent} | {"run_started", "run_closed"}
    assert '"event": "suppressed"' in text  # the throttle's record, described after the list
