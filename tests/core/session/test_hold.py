"""The hold buffer, driven through ProxyCore (and HoldBuffer alone for its bounds)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
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
    reports,
    req,
    resp,
    sends,
    update,
)

from acp_proxy.config import Config, HoldConfig
from acp_proxy.core.engine import ProxyCore
from acp_proxy.core.session.hold import HoldBuffer
from acp_proxy.core.wire.jsonrpc import parse


def core_with(**hold: Any) -> ProxyCore:
    return ProxyCore(Config(hold=HoldConfig(**hold)))


def parent_core(**hold: Any) -> ProxyCore:
    core = core_with(**hold)
    open_session(core, "P")
    return core


def permission(rid: Any, sid: str) -> bytes:
    return req(rid, "session/request_permission", {"sessionId": sid, "options": []})


def test_updates_before_session_new_response_are_released_after_it() -> None:
    """Updates for a session the client has not been told about wait for the session/new answer."""
    core = core_with()
    core.receive(CLIENT, req(1, "session/new", {"cwd": "/", "mcpServers": []}), 0.0)
    early = [chunk("S", "a"), chunk("S", "b"), permission("p1", "S")]
    for frame in early:
        out = core.receive(AGENT, frame, 0.1)
        assert sends(out) == []
    assert core.statistics().held == 3
    answer = resp(1, {"sessionId": "S"})
    out = core.receive(AGENT, answer, 0.2)
    assert sends(out, CLIENT) == [answer, *early]
    assert events(out) == ["released"]
    assert audits(out, "released")[0].fields["count"] == 3
    assert core.statistics().held == 0
    assert_accounting(core)


def test_session_fork_response_releases_too() -> None:
    """A session/fork result makes its new session known and releases its traffic."""
    core = parent_core()
    core.receive(CLIENT, req(2, "session/fork", {"sessionId": "P"}), 0.0)
    early = chunk("F", "x")
    assert sends(core.receive(AGENT, early, 0.0)) == []
    answer = resp(2, {"sessionId": "F"})
    assert sends(core.receive(AGENT, answer, 0.0)) == [answer, early]


def test_error_answer_to_session_new_releases_nothing() -> None:
    """Only a successful result carrying a sessionId makes a session known."""
    core = core_with()
    core.receive(CLIENT, req(1, "session/new", {}), 0.0)
    core.receive(AGENT, chunk("S", "a"), 0.0)
    out = core.receive(AGENT, b'{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"no"}}', 0)
    assert len(sends(out)) == 1
    assert core.statistics().held == 1


def test_client_session_load_makes_the_session_known() -> None:
    """A client session/load marks its session known at request time, releasing held replay."""
    core = core_with()
    early = chunk("L", "replay")
    assert sends(core.receive(AGENT, early, 0.0)) == []
    load = req(1, "session/load", {"sessionId": "L", "cwd": "/", "mcpServers": []})
    out = core.receive(CLIENT, load, 0.1)
    assert sends(out, CLIENT) == [early]
    assert sends(out, AGENT) == [load]
    after = chunk("L", "more")
    assert sends(core.receive(AGENT, after, 0.2)) == [after]


def test_child_traffic_before_announcement_released_right_after_it() -> None:
    """Child traffic that outruns its announcement is delivered right after the announcement."""
    core = parent_core()
    early = [chunk("C", "1"), permission(10, "C"), chunk("C", "2")]
    for frame in early:
        out = core.receive(AGENT, frame, 1.0)
        assert sends(out) == []
    assert events(out) == []  # "held" is audited once per session, on its first message
    ann = announce("P", "C", title="t")
    out = core.receive(AGENT, ann, 2.0)
    assert sends(out, CLIENT) == [ann, *early]
    assert events(out) == ["child_announced", "released"]
    assert core.get_timer() is None
    later = chunk("C", "3")
    assert sends(core.receive(AGENT, later, 3.0)) == [later]


def test_first_held_message_is_audited() -> None:
    """The first held message of a session produces a held audit record."""
    core = parent_core()
    out = core.receive(AGENT, chunk("C", "1"), 1.0)
    [rec] = audits(out, "held")
    assert rec.fields["sessionId"] == "C"
    assert rec.direction == "agent->client"


def test_nested_child_under_held_parent() -> None:
    """A grandchild announced on a not-yet-announced child waits for the chain, in order."""
    core = parent_core()
    g_traffic = chunk("G", "g1")
    g_ann = announce("C", "G")
    c_traffic = chunk("C", "c1")
    for frame in (g_traffic, g_ann, c_traffic):
        assert sends(core.receive(AGENT, frame, 0.0)) == []
    c_ann = announce("P", "C")
    out = core.receive(AGENT, c_ann, 0.0)
    assert sends(out) == [c_ann, g_ann, g_traffic, c_traffic]
    assert core.registry.children["G"].parent_id == "C"
    assert core.statistics().held == 0
    assert_accounting(core)


@pytest.mark.parametrize("key", ["senderSessionId", "recipientSessionId"])
def test_session_message_naming_unannounced_child_is_held(key: str) -> None:
    """A session_message on a known session naming an unannounced child is that child's traffic."""
    core = parent_core()
    msg = update("P", {"sessionUpdate": "session_message", "messageId": "m1", key: "C"})
    assert sends(core.receive(AGENT, msg, 0.0)) == []
    other = chunk("P", "flows")
    assert sends(core.receive(AGENT, other, 0.0)) == [other]
    ann = announce("P", "C")
    assert sends(core.receive(AGENT, ann, 0.0)) == [ann, msg]


def test_session_message_naming_two_unknown_children_waits_for_both() -> None:
    """A message naming two unannounced children is delivered once both are known."""
    core = parent_core()
    msg = update(
        "P",
        {
            "sessionUpdate": "session_message",
            "messageId": "m",
            "senderSessionId": "A",
            "recipientSessionId": "B",
        },
    )
    assert sends(core.receive(AGENT, msg, 0.0)) == []
    a = announce("P", "A")
    assert sends(core.receive(AGENT, a, 0.0)) == [a]
    b = announce("P", "B")
    assert sends(core.receive(AGENT, b, 0.0)) == [b, msg]


def test_no_head_of_line_blocking() -> None:
    """Held traffic of one session does not delay other sessions or responses."""
    core = parent_core()
    core.receive(CLIENT, req(5, "_x/ping", {}), 0.0)
    assert sends(core.receive(AGENT, chunk("C", "held"), 0.0)) == []
    for frame in (chunk("P", "p1"), resp(5, {}), b'{"jsonrpc":"2.0","method":"_x/n"}'):
        assert sends(core.receive(AGENT, frame, 0.0)) == [frame]


def test_timeout_uses_get_timer_and_handle_timer() -> None:
    """get_timer names the first held session's deadline; handle_timer(now) expires it then."""
    core = parent_core(timeout_seconds=10.0)
    assert core.get_timer() is None
    early = chunk("C", "x")
    core.receive(AGENT, early, 100.0)
    core.receive(AGENT, chunk("D", "y"), 105.0)
    assert core.get_timer() == 110.0
    assert core.handle_timer(109.9) == []
    out = core.handle_timer(110.0)
    assert sends(out, CLIENT) == [early]
    [rec] = audits(out, "hold_expired")
    assert rec.fields["sessionId"] == "C"
    assert rec.fields["reason"].startswith("timeout")
    assert reports(out)  # the protocol violation is reported
    assert core.get_timer() == 115.0
    again = chunk("C", "after")
    assert sends(core.receive(AGENT, again, 111.0)) == [again]
    assert_accounting(core)


def test_on_expire_drop_drops_notifications_and_answers_requests() -> None:
    """on_expire=drop: held notifications are dropped, held requests answered to the agent."""
    core = parent_core(on_expire="drop", timeout_seconds=1.0)
    core.receive(AGENT, chunk("C", "x"), 0.0)
    core.receive(AGENT, permission("q", "C"), 0.0)
    assert core.statistics().pending_agent_requests == 1
    out = core.handle_timer(1.0)
    assert sends(out, CLIENT) == []
    [answer] = sends(out, AGENT)
    body = decoded(answer)
    assert body["id"] == "q"
    assert body["error"]["data"] == {"sessionId": "C", "reason": "timeout"}
    assert "notification_dropped" in events(out)
    assert "request_dropped" in events(out)
    s = core.statistics()
    assert (s.held, s.pending_agent_requests) == (0, 0)
    assert_accounting(core)
    # The announcement that comes too late releases nothing.
    ann = announce("P", "C")
    assert sends(core.receive(AGENT, ann, 2.0)) == [ann]


def test_max_messages_per_session_release() -> None:
    """Going over max_messages_per_session releases the session's traffic in order (release)."""
    core = parent_core(max_messages_per_session=3)
    frames = [chunk("C", str(i)) for i in range(4)]
    for frame in frames[:3]:
        assert sends(core.receive(AGENT, frame, 0.0)) == []
    out = core.receive(AGENT, frames[3], 0.0)
    assert sends(out) == frames
    assert "max_messages_per_session" in audits(out, "hold_expired")[0].fields["reason"]
    assert core.statistics().held == 0
    assert_accounting(core)


def test_max_messages_per_session_drop() -> None:
    """Going over max_messages_per_session drops the session's traffic (drop)."""
    core = parent_core(max_messages_per_session=2, on_expire="drop")
    for i in range(3):
        out = core.receive(AGENT, chunk("C", str(i)), 0.0)
    assert sends(out) == []
    assert events(out).count("notification_dropped") == 3
    assert core.statistics().held == 0
    assert_accounting(core)


def test_max_bytes_evicts_the_oldest_session_first() -> None:
    """When held bytes would exceed max_bytes, the oldest held session is evicted first."""
    a, b = chunk("A", "x" * 40), chunk("B", "y" * 40)
    core = parent_core(max_bytes=len(a) + len(b) - 1)
    assert sends(core.receive(AGENT, a, 0.0)) == []
    out = core.receive(AGENT, b, 0.0)
    assert sends(out) == [a]
    assert audits(out, "hold_expired")[0].fields["sessionId"] == "A"
    s = core.statistics()
    assert (s.held, s.held_bytes) == (1, len(b))
    assert_accounting(core)


def test_message_larger_than_max_bytes_is_never_stored() -> None:
    """A single message over max_bytes is evicted at once (released with release policy)."""
    big = chunk("C", "z" * 100)
    core = parent_core(max_bytes=50)
    out = core.receive(AGENT, big, 0.0)
    assert sends(out) == [big]
    assert core.statistics().held_bytes == 0


def test_hold_buffer_bounds_directly() -> None:
    """HoldBuffer keeps totals exact and never exceeds max_bytes."""
    buf = HoldBuffer(HoldConfig(max_bytes=100, max_messages_per_session=10))
    m30 = parse(b"x" * 30)
    for sid in "ABCD":
        buf.hold(sid, m30, 0.0)
        assert buf.total_bytes <= 100
    assert buf.total_bytes == 90
    assert "A" not in buf
    assert list(buf._held) == ["B", "C", "D"]
    assert [m.raw for m in buf.take("C")] == [m30.raw]
    assert (buf.total_bytes, buf.total_messages, len(buf)) == (60, 2, 2)
    assert buf.take("nope") == []


@pytest.mark.parametrize("policy", ["release", "drop"])
def test_agent_closing_releases_or_drops_held_traffic(policy: str) -> None:
    """peer_closed(AGENT) flushes held traffic: delivered with release, dropped with drop."""
    core = parent_core(on_expire=policy)
    early = chunk("C", "x")
    core.receive(AGENT, early, 0.0)
    core.receive(AGENT, permission(1, "C"), 0.0)
    out = core.peer_closed(AGENT, 1.0, "agent exited with status 3")
    if policy == "release":
        assert sends(out, CLIENT) == [early, permission(1, "C")]
    else:
        assert sends(out, CLIENT) == []
        assert sends(out, AGENT) == []  # nobody to answer
        assert "notification_dropped" in events(out)
    assert core.statistics().held == 0
    assert core.get_timer() is None
    assert_accounting(core)


def test_held_traffic_dropped_when_both_peers_are_gone() -> None:
    """After the client left, the agent closing drops held traffic even with release."""
    core = parent_core()
    core.receive(AGENT, chunk("C", "x"), 0.0)
    core.peer_closed(CLIENT, 1.0)
    out = core.peer_closed(AGENT, 2.0)
    assert sends(out) == []
    assert "notification_dropped" in events(out)
    assert_accounting(core)


def test_held_request_dropped_after_client_left_is_audited_as_a_request() -> None:
    """A held agent request dropped at agent exit (client already gone) is a request_dropped."""
    core = parent_core()
    core.receive(AGENT, permission(99, "C"), 0.0)
    core.peer_closed(CLIENT, 1.0)  # answers the agent's request 99
    out = core.peer_closed(AGENT, 2.0)
    [rec] = audits(out, "request_dropped")
    assert rec.fields["id"] == 99
    assert "notification_dropped" not in events(out)
    [expired] = audits(out, "hold_expired")
    assert "client is gone" in expired.fields["reason"]
    assert_accounting(core)


# ------------------------------------------------------------------ interleavings


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[int], list[tuple[str, int]]]:
    """A child tree under P and an agent event order.

    Returns ``(parents, events)``: ``parents[i]`` is the parent index of child i
    (-1 = P); events are ``("announce", i)`` (each child exactly once) and
    ``("traffic", i)`` / ``("request", i)`` for child i, and ``("message", i)``:
    a ``session_message`` on P sent by child i (child i's traffic).
    """
    n = draw(st.integers(min_value=1, max_value=5))
    parents = [draw(st.integers(min_value=-1, max_value=i - 1)) for i in range(n)]
    evs: list[tuple[str, int]] = [("announce", i) for i in range(n)]
    evs += draw(
        st.lists(
            st.tuples(st.sampled_from(["traffic", "request", "message"]), st.integers(0, n - 1)),
            max_size=15,
        )
    )
    return parents, draw(st.permutations(evs))


@given(scenario=scenarios(), cut=st.integers(min_value=0, max_value=30))
def test_arbitrary_interleavings_keep_order_and_lose_nothing(
    scenario: tuple[list[int], list[tuple[str, int]]], cut: int
) -> None:
    """Any interleaving keeps per-session order, delivers after announcement, loses nothing."""
    parents, evs = scenario
    core = parent_core(timeout_seconds=1e9)
    name = [f"C{i}" for i in range(len(parents))]
    sent: list[tuple[str, bytes]] = []
    delivered: list[bytes] = []
    for k, (kind, i) in enumerate(evs[:cut]):
        if kind == "announce":
            parent = "P" if parents[i] < 0 else name[parents[i]]
            frame = announce(parent, name[i], title=f"t{i}")
            session = parent
        elif kind == "traffic":
            frame = chunk(name[i], f"m{k}")
            session = name[i]
        elif kind == "request":
            frame = permission(f"r{k}", name[i])
            session = name[i]
        else:
            upd = {"sessionUpdate": "session_message", "messageId": k, "senderSessionId": name[i]}
            frame = update("P", upd)
            session = name[i]
        sent.append((session, frame))
        out = core.receive(AGENT, frame, float(k))
        delivered += sends(out, CLIENT)
        assert sends(out, AGENT) == []
        assert_accounting(core)
    # nothing duplicated; everything delivered was sent
    assert len(delivered) == len(set(delivered))
    assert set(delivered) <= {f for _, f in sent}
    pos = {f: j for j, f in enumerate(delivered)}
    known = {"P"} | {name[i] for i in range(len(name)) if announce_pos(pos, parents, name, i)}
    for session, frame in sent:
        if session in known:
            assert frame in pos, "traffic of a known session was not delivered"
        else:
            assert frame not in pos, "traffic of an unannounced session leaked"
    assert core.statistics().held == len(sent) - len(delivered)
    # per-session order and "after its session became known"
    for session in known:
        mine = [pos[f] for s, f in sent if s == session]
        assert mine == sorted(mine)
        if session != "P":
            i = name.index(session)
            parent = "P" if parents[i] < 0 else name[parents[i]]
            ann = announce(parent, session, title=f"t{i}")
            assert all(p > pos[ann] for p in mine)


def announce_pos(pos: dict[bytes, int], parents: list[int], name: list[str], i: int) -> bool:
    parent = "P" if parents[i] < 0 else name[parents[i]]
    return announce(parent, name[i], title=f"t{i}") in pos


def test_child_announced_after_its_traffic_timed_out_is_still_enforced() -> None:
    """A child whose early traffic was released on timeout can still be announced and enforced."""
    core = parent_core(timeout_seconds=10.0)
    core.receive(AGENT, chunk("C", "early"), 0.0)
    core.handle_timer(10.0)  # released: C is known, provisionally
    out = core.receive(AGENT, announce("P", "C", capabilities=None), 11.0)
    assert "child_announced" in events(out)
    assert core.registry.child("C") is not None
    out = core.receive(CLIENT, req(7, "session/prompt", {"sessionId": "C", "prompt": []}), 12.0)
    assert sends(out, AGENT) == []
    assert "mutation_rejected" in events(out)
    assert_accounting(core)


def test_announcement_naming_an_ordinary_session_is_a_conflict_enforced() -> None:
    """A session established by session/new and then announced as a child is registered as
    a child (enforced) and audited as a conflict: when in doubt, enforce."""
    core = parent_core()
    open_session(core, "Q")
    out = core.receive(AGENT, announce("P", "Q"), 1.0)
    assert events(out) == ["registry_conflict", "child_announced"]
    assert core.registry.child("Q") is not None
    refused = core.receive(CLIENT, req(9, "session/prompt", {"sessionId": "Q"}), 2.0)
    assert sends(refused, AGENT) == []


def test_max_sessions_expires_the_oldest_held_session() -> None:
    """Holding traffic for more than max_sessions sessions expires the oldest one."""
    core = parent_core(max_sessions=2)
    core.receive(AGENT, chunk("A", "a"), 0.0)
    core.receive(AGENT, chunk("B", "b"), 0.0)
    out = core.receive(AGENT, chunk("C", "c"), 0.0)
    [rec] = audits(out, "hold_expired")
    assert rec.fields["sessionId"] == "A"
    assert "max_sessions" in rec.fields["reason"]
    assert [decoded(m)["params"]["sessionId"] for m in sends(out, CLIENT)] == ["A"]
    assert len(core.hold) == 2
    assert_accounting(core)


def test_mutation_on_child_whose_announcement_is_held_is_refused() -> None:
    """A client mutation naming a child announced only in held traffic fails closed."""
    core = core_with()
    core.receive(AGENT, announce("P", "C", capabilities=None), 0.0)  # P unknown: held
    out = core.receive(CLIENT, req(1, "session/prompt", {"sessionId": "C", "prompt": []}), 0.0)
    assert sends(out, AGENT) == []
    [rec] = audits(out, "mutation_rejected")
    assert rec.fields["reason"] == "session_not_announced"


def test_mutation_on_session_released_by_timeout_is_refused() -> None:
    """A session known only because its held traffic expired cannot be mutated."""
    core = parent_core(timeout_seconds=1.0)
    core.receive(AGENT, chunk("X", "leak"), 0.0)
    core.handle_timer(1.0)
    out = core.receive(CLIENT, notif("session/cancel", {"sessionId": "X"}), 2.0)
    assert sends(out, AGENT) == []
    assert "notification_dropped" in events(out)
    # a session the agent never named passes: the agent decides
    out = core.receive(CLIENT, notif("session/cancel", {"sessionId": "never-seen"}), 2.0)
    assert len(sends(out, AGENT)) == 1


def test_held_messages_keep_only_bytes() -> None:
    """Held entries are raw bytes; released messages are parsed again, equal to the input."""
    buf = HoldBuffer(HoldConfig())
    raw = chunk("C", "x")
    buf.hold("C", parse(raw), 0.0)
    [(stored, child)] = buf._held["C"].entries
    assert type(stored) is bytes
    assert child is None
    [m] = buf.take("C")
    assert m.raw == raw
    assert m.method == "session/update"


def test_announcement_beyond_max_children_is_dropped_and_fails_closed() -> None:
    """Past limits.max_children an announcement is dropped, and mutations on that child refused."""
    from acp_proxy.config import LimitsConfig

    core = ProxyCore(Config(limits=LimitsConfig(max_children=1)))
    open_session(core, "P")
    core.receive(AGENT, announce("P", "A"), 0.0)
    out = core.receive(AGENT, announce("P", "B", capabilities={"prompt": {}}), 0.0)
    assert sends(out) == []
    [rec] = audits(out, "notification_dropped")
    assert "max_children" in rec.fields["reason"]
    core.receive(AGENT, chunk("B", "held"), 0.0)
    out = core.receive(CLIENT, req(9, "session/prompt", {"sessionId": "B", "prompt": []}), 0.0)
    assert sends(out, AGENT) == []
    assert_accounting(core)


def test_released_agent_request_is_answered_by_the_client_normally() -> None:
    """A held agent request, once released, gets the client's response relayed to the agent."""
    core = parent_core()
    held = permission(0, "C")
    assert sends(core.receive(AGENT, held, 0.0)) == []
    out = core.receive(AGENT, announce("P", "C"), 1.0)
    assert sends(out, CLIENT)[-1] == held
    answer = resp(0, {"outcome": {"outcome": "selected", "optionId": "allow"}})
    assert sends(core.receive(CLIENT, answer, 2.0), AGENT) == [answer]
    assert core.statistics().pending_agent_requests == 0
    assert_accounting(core)
