"""State that outlives a message is bounded in bytes by the config (issue 14), and crossing
a bound fails closed: refuse and audit, never crash, never grant."""

from __future__ import annotations

import json

from support.corekit import (
    AGENT,
    CLIENT,
    announce,
    assert_accounting,
    audits,
    chunk,
    decoded,
    events,
    notif,
    open_session,
    req,
    resp,
    sends,
    state_update,
)

from acp_proxy.config import Config, LimitsConfig
from acp_proxy.core.engine import ProxyCore
from acp_proxy.core.session.dedup import StateDedup


def core_with(**limits: int) -> ProxyCore:
    core = ProxyCore(Config(limits=LimitsConfig(**limits)))
    open_session(core, "P")
    return core


def cancel_passes(core: ProxyCore, sid: str) -> bool:
    frame = notif("session/cancel", {"sessionId": sid})
    return sends(core.receive(CLIENT, frame, 1.0), AGENT) == [frame]


def test_a_childs_meta_cannot_grow_without_bound() -> None:
    """300 updates each adding a new 4 KiB _meta key keep at most max_child_bytes of
    tracked fields; the grant in capabilities survives the truncation, audited."""
    core = core_with(max_child_bytes=64 * 1024)
    core.receive(AGENT, announce("P", "C", capabilities={"cancel": {}}), 0.0)
    seen_limit = False
    for i in range(300):
        frame = announce("P", "C", meta={f"k{i}": "x" * 4096})
        out = core.receive(AGENT, frame, 0.0)
        assert sends(out) == [frame]  # the client still gets every update
        seen_limit = seen_limit or "registry_limit" in events(out)
        assert core.registry.nbytes <= 64 * 1024
    child = core.registry.children["C"]
    assert seen_limit
    assert child.truncated
    assert child.nbytes <= 64 * 1024
    assert cancel_passes(core, "C")
    assert_accounting(core)


def test_capabilities_over_the_bound_grant_nothing() -> None:
    """Capabilities that alone exceed max_child_bytes are not kept: no grant (fail closed)."""
    core = core_with(max_child_bytes=1024)
    core.receive(AGENT, announce("P", "C", capabilities={"cancel": {}, "x": "y" * 4096}), 0.0)
    assert core.registry.children["C"].capabilities is None
    assert not cancel_passes(core, "C")


def test_registry_total_bound_refuses_new_children_and_denies_them() -> None:
    """Beyond max_registry_bytes an announcement is dropped and its id denied."""
    core = core_with(max_child_bytes=8192, max_registry_bytes=16 * 1024)
    for i in range(3):
        core.receive(AGENT, announce("P", f"C{i}", title="t" * 7000), 0.0)
    assert len(core.registry.children) == 2  # the third did not fit
    late = announce("P", "LATE", capabilities={"cancel": {}}, title="t" * 7000)
    out = core.receive(AGENT, late, 0.0)
    assert "notification_dropped" in events(out)
    assert core.registry.child("LATE") is None
    assert not cancel_passes(core, "LATE")
    assert core.registry.nbytes <= 16 * 1024


def test_dedup_memory_is_bounded_in_bytes() -> None:
    """Snapshots beyond max_dedup_bytes are forgotten oldest first: memory stays bounded and
    a forgotten channel's next report is delivered, never wrongly dropped."""
    dedup = StateDedup(max_bytes=1000)
    for i in range(100):
        dedup.delivered(("self", f"S{i}"), {"state": "idle"}, 100)
    assert dedup.nbytes <= 1000
    assert not dedup.is_duplicate(("self", "S0"), {"state": "idle"})
    assert dedup.is_duplicate(("self", "S99"), {"state": "idle"})
    dedup.delivered(("self", "big"), {"state": "idle"}, 5000)  # larger than the bound
    assert not dedup.is_duplicate(("self", "big"), {"state": "idle"})
    core = core_with(max_dedup_bytes=4096)
    for i in range(50):
        open_session(core, f"S{i}")
        core.receive(AGENT, state_update(f"S{i}", "idle"), 0.0)
    assert core.dedup.nbytes <= 4096


def test_requests_in_flight_are_bounded_in_bytes() -> None:
    """Long ids and methods in flight count against max_pending_bytes; a request beyond it
    is answered by the proxy, and answers free the budget again."""
    core = core_with(max_pending_bytes=10_000)
    big = "i" * 3000
    for n in range(3):
        assert sends(core.receive(CLIENT, req(f"{big}{n}", "_x/y", {}), 0.0), AGENT)
    out = core.receive(CLIENT, req(f"{big}3", "_x/y", {}), 0.0)
    assert sends(out, AGENT) == []
    body = decoded(sends(out, CLIENT)[0])
    assert body["error"]["code"] == -32600
    assert "max_pending_bytes" in body["error"]["message"]
    core.receive(AGENT, resp(f"{big}0", {}), 0.0)
    assert sends(core.receive(CLIENT, req(f"{big}4", "_x/y", {}), 0.0), AGENT)
    assert_accounting(core)


def test_session_ids_over_the_limit_are_refused_both_ways() -> None:
    """A session id longer than max_session_id_bytes is never stored: a client request
    naming one is answered -32602, an agent message is dropped, a session/new result
    carrying one is not made known."""
    core = core_with(max_session_id_bytes=64)
    long_id = "s" * 65
    out = core.receive(CLIENT, req(1, "session/prompt", {"sessionId": long_id}), 0.0)
    assert decoded(sends(out, CLIENT)[0])["error"]["code"] == -32602
    out = core.receive(AGENT, chunk(long_id, "hi"), 0.0)
    assert sends(out) == []
    assert "invalid_message" in events(out)
    out = core.receive(AGENT, announce("P", "é" * 40), 0.0)  # 80 UTF-8 bytes
    assert sends(out) == []
    core.receive(CLIENT, req(2, "session/new", {"cwd": "/"}), 0.0)
    core.receive(AGENT, resp(2, {"sessionId": long_id}), 0.0)
    assert not core.registry.is_known(long_id)
    assert_accounting(core)


def test_known_ordinary_sessions_are_bounded() -> None:
    """Beyond max_sessions the oldest ordinary session is forgotten (its traffic is held
    again); children are not affected."""
    core = core_with(max_sessions=3)
    core.receive(AGENT, announce("P", "C"), 0.0)
    for sid in ("A", "B", "D"):
        open_session(core, sid)
    assert not core.registry.is_known("P")
    assert core.registry.is_known("C")
    assert len(core.registry.ordinary) == 3
    out = core.receive(AGENT, chunk("P", "late"), 0.0)
    assert audits(out, "held")


def test_a_session_id_that_is_not_a_string_is_refused_both_ways() -> None:
    """params.sessionId must be a string when present: a client request with a list, object,
    number or null there is answered -32602 (never forwarded, whatever method); an agent
    notification is dropped."""
    core = core_with()
    for n, sid in enumerate((["C"], {"id": "C"}, 7, None, True)):
        for method in ("session/prompt", "_vendor/x"):
            out = core.receive(CLIENT, req(n, method, {"sessionId": sid}), 0.0)
            assert sends(out, AGENT) == []
            assert decoded(sends(out, CLIENT)[0])["error"]["code"] == -32602
        out = core.receive(AGENT, notif("session/update", {"sessionId": sid, "update": {}}), 0.0)
        assert sends(out) == []
    assert_accounting(core)


def test_state_bounds_count_memory_not_json_length() -> None:
    """Stored values are counted as the memory they hold (about), not their JSON length: 64
    children each with a 100 KiB state of `{}` items stay within max_registry_bytes of
    estimated memory, and the dedup memory of 8 such state reports within max_dedup_bytes
    (found by a hostile review: JSON length undercounted ~24 times)."""
    from acp_proxy.core.session.size import footprint

    dense = [{} for _ in range(50_000)]  # 100 KiB of JSON, ~12 MiB of dicts
    assert footprint(dense, 1 << 40) > 50 * len(json.dumps(dense))
    core = core_with(max_registry_bytes=4 * 1024 * 1024, max_dedup_bytes=4 * 1024 * 1024)
    for i in range(64):
        core.receive(AGENT, announce("P", f"C{i}", state={"state": "x", "d": dense}), 0.0)
    assert core.registry.nbytes <= 4 * 1024 * 1024
    for i in range(8):
        open_session(core, f"S{i}")
        core.receive(AGENT, state_update(f"S{i}", "running", d=dense), 0.0)
    assert core.dedup.nbytes <= 4 * 1024 * 1024
