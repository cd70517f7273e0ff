"""The stabilized subagent rules beyond the allowlist (docs/protocol.md section 4): the
freshness boundary at a parent's load or resume, dedup epochs, holds on every
reference, registry conflicts that fail closed, v1 opt-in."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from support.corekit import (
    AGENT,
    CLIENT,
    announce,
    assert_accounting,
    audits,
    chunk,
    decoded,
    err,
    events,
    notif,
    open_session,
    req,
    resp,
    sends,
    state_update,
    update,
)

from acp_proxy.config import Config, LimitsConfig
from acp_proxy.core.engine import ProxyCore

CANCEL = {"cancel": {}}


def cancel(sid: str) -> bytes:
    return notif("session/cancel", {"sessionId": sid})


def passes(core: ProxyCore, sid: str) -> bool:
    """True when a session/cancel naming ``sid`` reaches the agent."""
    frame = cancel(sid)
    return sends(core.receive(CLIENT, frame, 1.0), AGENT) == [frame]


def with_child(caps: Any = CANCEL) -> ProxyCore:
    core = ProxyCore()
    open_session(core, "P")
    core.receive(AGENT, announce("P", "C", capabilities=caps), 0.0)
    return core


@pytest.mark.parametrize("method", ["session/load", "session/resume"])
def test_parent_reload_revokes_until_reannounced_after_the_response(method: str) -> None:
    """A grant from before a parent's load/resume is revoked at the request; replayed
    announcements before the response do not grant; one after a successful response does."""
    core = with_child()
    assert passes(core, "C")
    out = core.receive(CLIENT, req(10, method, {"sessionId": "P", "cwd": "/"}), 1.0)
    assert audits(out, "grants_revoked")[0].fields["count"] == 1
    assert not passes(core, "C")
    replay = announce("P", "C", capabilities=CANCEL)
    assert sends(core.receive(AGENT, replay, 1.0), CLIENT) == [replay]  # delivered, history
    assert not passes(core, "C")
    core.receive(AGENT, resp(10, {}), 2.0)
    assert not passes(core, "C")  # not re-announced since the response
    out = core.receive(AGENT, announce("P", "C", capabilities=CANCEL), 3.0)
    assert audits(out, "grants_restored")[0].fields["sessionId"] == "C"
    assert passes(core, "C")
    assert_accounting(core)


def test_reannouncement_without_capabilities_keeps_the_grant_revoked() -> None:
    """A post-response update that omits capabilities is not a complete re-announcement."""
    core = with_child()
    core.receive(CLIENT, req(10, "session/load", {"sessionId": "P", "cwd": "/"}), 1.0)
    core.receive(AGENT, resp(10, {}), 2.0)
    core.receive(AGENT, announce("P", "C", title="still here"), 3.0)
    assert not passes(core, "C")


def test_failed_reload_keeps_the_grants_revoked() -> None:
    """An error answer to the parent's load changes nothing else: the grants stay revoked
    until a re-announcement."""
    core = with_child()
    core.receive(CLIENT, req(10, "session/resume", {"sessionId": "P"}), 1.0)
    core.receive(AGENT, err(10), 2.0)
    assert not passes(core, "C")
    core.receive(AGENT, announce("P", "C", capabilities=CANCEL), 3.0)
    assert passes(core, "C")


def test_grandchildren_are_revoked_and_regranted_parent_first() -> None:
    """Every descendant loses its grants; a grandchild re-announced before its parent
    stays revoked (fail closed), and is granted once announced after it."""
    core = with_child()
    core.receive(AGENT, announce("C", "G", capabilities=CANCEL), 0.0)
    assert passes(core, "G")
    core.receive(CLIENT, req(10, "session/load", {"sessionId": "P", "cwd": "/"}), 1.0)
    core.receive(AGENT, resp(10, {}), 2.0)
    core.receive(AGENT, announce("C", "G", capabilities=CANCEL), 3.0)
    assert not passes(core, "G")
    core.receive(AGENT, announce("P", "C", capabilities=CANCEL), 3.0)
    core.receive(AGENT, announce("C", "G", capabilities=CANCEL), 3.0)
    assert passes(core, "C")
    assert passes(core, "G")


def test_a_child_first_announced_during_the_replay_is_history() -> None:
    """A child announced while its parent's load is in flight does not grant until
    re-announced after the response."""
    core = ProxyCore()
    open_session(core, "P")
    core.receive(CLIENT, req(10, "session/load", {"sessionId": "P", "cwd": "/"}), 1.0)
    core.receive(AGENT, announce("P", "N", capabilities=CANCEL), 1.0)
    assert not passes(core, "N")
    core.receive(AGENT, resp(10, {}), 2.0)
    core.receive(AGENT, announce("P", "N", capabilities=CANCEL), 3.0)
    assert passes(core, "N")


def test_state_reports_across_a_reload_are_not_duplicates() -> None:
    """The dedup epoch resets at the load request and at its response: the state_update
    and the mirror an agent must send after a resume are delivered although they repeat."""
    core = with_child()
    running = {"state": "running"}
    core.receive(AGENT, announce("P", "C", state=running), 0.0)
    first = state_update("P", "idle")
    assert sends(core.receive(AGENT, first, 0.0)) == [first]
    assert sends(core.receive(AGENT, first, 0.0)) == []  # a duplicate in one epoch
    core.receive(CLIENT, req(10, "session/resume", {"sessionId": "P"}), 1.0)
    assert sends(core.receive(AGENT, first, 1.0)) == [first]  # replayed: a new epoch
    mirror = announce("P", "C", state=running)
    assert sends(core.receive(AGENT, mirror, 1.0)) == [mirror]
    core.receive(AGENT, resp(10, {}), 2.0)
    assert sends(core.receive(AGENT, first, 2.0)) == [first]  # after the response: again
    reannounce = announce("P", "C", capabilities=CANCEL, state=running)
    assert sends(core.receive(AGENT, reannounce, 2.0)) == [reannounce]


def test_load_makes_an_id_ordinary_only_when_answered() -> None:
    """A loaded id is provisional until the agent answers; an error forgets it (its later
    traffic is held again); success makes it an ordinary session."""
    core = ProxyCore()
    core.receive(CLIENT, req(1, "session/load", {"sessionId": "L", "cwd": "/"}), 0.0)
    replay = chunk("L", "history")
    assert sends(core.receive(AGENT, replay, 0.0)) == [replay]  # the replay flows
    assert not core.registry.is_ordinary("L")
    core.receive(AGENT, err(1), 1.0)
    assert not core.registry.is_known("L")
    assert sends(core.receive(AGENT, chunk("L", "late"), 1.0)) == []  # held again
    core.receive(CLIENT, req(2, "session/load", {"sessionId": "M", "cwd": "/"}), 2.0)
    core.receive(AGENT, resp(2, {}), 2.0)
    assert core.registry.is_ordinary("M")


def test_announcement_of_a_loading_id_is_a_conflict_and_enforced() -> None:
    """An id being loaded, then announced as a child, is a child: enforced, audited."""
    core = ProxyCore()
    open_session(core, "P")
    core.receive(CLIENT, req(1, "session/load", {"sessionId": "L", "cwd": "/"}), 0.0)
    out = core.receive(AGENT, announce("P", "L"), 0.0)
    assert "registry_conflict" in events(out)
    core.receive(AGENT, resp(1, {}), 1.0)
    assert core.registry.child("L") is not None
    assert not passes(core, "L")


def test_dropped_announcement_leaves_its_child_enforced() -> None:
    """An announcement dropped because the registry is full does not leave the id open:
    a mutation naming it is refused."""
    core = ProxyCore(Config(limits=LimitsConfig(max_children=1)))
    open_session(core, "P")
    core.receive(AGENT, announce("P", "A"), 0.0)
    out = core.receive(AGENT, announce("P", "B", capabilities=CANCEL), 0.0)
    assert "notification_dropped" in events(out)
    out = core.receive(CLIENT, req(3, "session/prompt", {"sessionId": "B"}), 1.0)
    assert sends(out, AGENT) == []
    assert audits(out, "mutation_rejected")[0].fields["reason"] == "announcement_not_registered"
    status = req(4, "session/status", {"sessionId": "B"})
    assert sends(core.receive(CLIENT, status, 1.0), AGENT) == [status]  # reads still pass


def test_cyclic_announcement_denies_the_id() -> None:
    """An announcement naming the parent itself is invalid, forwarded, and fails closed."""
    core = ProxyCore()
    open_session(core, "P")
    out = core.receive(AGENT, announce("P", "P"), 0.0)
    assert "invalid_subagent_update" in events(out)
    assert not passes(core, "P")


def test_closing_a_parent_retires_its_descendants() -> None:
    """After a successful session/close of the parent, its descendants leave the registry
    and mutations naming them are refused; a failed close changes nothing."""
    core = with_child()
    core.receive(AGENT, announce("C", "G", capabilities=CANCEL), 0.0)
    core.receive(CLIENT, req(5, "session/close", {"sessionId": "P"}), 1.0)
    core.receive(AGENT, err(5), 1.0)
    assert passes(core, "C")
    core.receive(CLIENT, req(6, "session/close", {"sessionId": "P"}), 1.0)
    out = core.receive(AGENT, resp(6, {}), 1.0)
    assert audits(out, "children_retired")[0].fields["count"] == 2
    assert core.registry.child("C") is None
    assert not passes(core, "C")
    assert not passes(core, "G")


def test_child_close_is_refused() -> None:
    """Direct child close is not allowed, whatever the child advertises."""
    core = with_child({"cancel": {}, "close": {}})
    out = core.receive(CLIENT, req(5, "session/close", {"sessionId": "C"}), 1.0)
    assert sends(out, AGENT) == []


@pytest.mark.parametrize(
    ("upd", "sid"),
    [
        (
            {
                "sessionUpdate": "tool_call",
                "toolCallId": "t",
                "title": "x",
                "content": [{"type": "session", "sessionId": "X"}],
            },
            "X",
        ),
        (
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "t",
                "content": [{"type": "content"}, {"type": "session", "sessionId": "X"}],
            },
            "X",
        ),
        (
            {
                "sessionUpdate": "state_update",
                "state": "running",
                "background": [
                    {"type": "terminal", "terminalId": "t"},
                    {"type": "subagent", "sessionId": "X"},
                ],
            },
            "X",
        ),
    ],
)
def test_every_reference_to_an_unannounced_child_is_held(upd: dict[str, Any], sid: str) -> None:
    """A session content item or a background subagent entry naming an unannounced child
    holds the message until the child is announced, then it follows the announcement."""
    core = ProxyCore()
    open_session(core, "P")
    frame = update("P", upd)
    for path in ("frame", "list of frames"):
        core = ProxyCore()
        open_session(core, "P")
        out = (
            core.receive(AGENT, frame, 0.0)
            if path == "frame"
            else core.receive(AGENT, [frame], 0.0)
        )
        assert sends(out) == []
        assert "held" in events(out)
        ann = announce("P", sid)
        assert sends(core.receive(AGENT, ann, 1.0)) == [ann, frame]
        assert_accounting(core)


def test_reference_to_a_known_child_flows() -> None:
    """A session content item naming an announced child is forwarded at once."""
    core = with_child()
    frame = update(
        "P",
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "t",
            "content": [{"type": "session", "sessionId": "C"}],
        },
    )
    assert sends(core.receive(AGENT, frame, 0.0)) == [frame]


@pytest.mark.parametrize("opted_in", [True, False])
def test_v1_client_without_subagents_opt_in(opted_in: bool) -> None:
    """On v1, subagent updates to a client that did not advertise
    clientCapabilities.subagents are forwarded and audited as a protocol violation."""
    core = ProxyCore()
    caps: dict[str, Any] = {"subagents": {}} if opted_in else {"fs": {}}
    core.receive(
        CLIENT, req(0, "initialize", {"protocolVersion": 1, "clientCapabilities": caps}), 0
    )
    core.receive(AGENT, resp(0, {"protocolVersion": 1}), 0.0)
    open_session(core, "P")
    frame = announce("P", "C")
    out = core.receive(AGENT, frame, 0.0)
    assert sends(out) == [frame]
    assert core.registry.child("C") is not None
    assert ("protocol_violation" in events(out)) is not opted_in
    msg = update(
        "P", {"sessionUpdate": "session_message", "messageId": "m", "senderSessionId": "C"}
    )
    assert ("protocol_violation" in events(core.receive(AGENT, msg, 0.0))) is not opted_in


class FreshnessMachine(RuleBasedStateMachine):
    """Announcements (live and replayed), parent load/resume answered ok or error, close,
    and mutations: a mutation reaches the agent only if the child's latest announcement
    after every boundary of its ancestors granted it."""

    PARENTS = ("P", "Q")
    CHILDREN = ("C1", "C2", "C3")

    def __init__(self) -> None:
        super().__init__()
        self.core = ProxyCore()
        for sid in self.PARENTS:
            open_session(self.core, sid)
        self.next_id = 100
        self.parent_of: dict[str, str] = {}  # model: child -> parent (nesting one level)
        self.granted: dict[str, bool] = {}  # model: would a cancel pass now?
        self.opening: dict[str, list[int]] = {}  # parent -> load/resume ids in flight
        self.retired: set[str] = set()

    def _rid(self) -> int:
        self.next_id += 1
        return self.next_id

    @rule(
        child=st.sampled_from(CHILDREN),
        parent=st.sampled_from(PARENTS),
        caps=st.sampled_from([None, {}, CANCEL, {"cancel": None}, {"_meta": {}}]),
    )
    def announce(self, child: str, parent: str, caps: Any) -> None:
        if child in self.retired:
            return
        parent = self.parent_of.get(child, parent)
        self.core.receive(AGENT, announce(parent, child, capabilities=caps), 0.0)
        self.parent_of[child] = parent
        history = bool(self.opening.get(parent))
        if not history:
            self.granted[child] = caps is not None and type(caps.get("cancel")) is dict
        else:
            self.granted[child] = False

    @rule(
        parent=st.sampled_from(PARENTS), method=st.sampled_from(["session/load", "session/resume"])
    )
    def reload(self, parent: str, method: str) -> None:
        rid = self._rid()
        self.core.receive(CLIENT, req(rid, method, {"sessionId": parent, "cwd": "/"}), 0.0)
        self.opening.setdefault(parent, []).append(rid)
        for child, p in self.parent_of.items():
            if p == parent:
                self.granted[child] = False

    @precondition(lambda self: any(self.opening.values()))
    @rule(ok=st.booleans(), data=st.data())
    def answer(self, ok: bool, data: st.DataObject) -> None:
        parent = data.draw(st.sampled_from([p for p, ids in self.opening.items() if ids]))
        rid = self.opening[parent].pop(0)
        self.core.receive(AGENT, resp(rid, {}) if ok else err(rid), 0.0)

    @rule(parent=st.sampled_from(PARENTS))
    def close(self, parent: str) -> None:
        rid = self._rid()
        self.core.receive(CLIENT, req(rid, "session/close", {"sessionId": parent}), 0.0)
        self.core.receive(AGENT, resp(rid, {}), 0.0)
        for child, p in list(self.parent_of.items()):
            if p == parent:
                self.retired.add(child)
                self.granted[child] = False
                del self.parent_of[child]

    @rule(child=st.sampled_from(CHILDREN), as_request=st.booleans())
    def mutate(self, child: str, as_request: bool) -> None:
        if child not in self.parent_of and child not in self.retired:
            return  # never announced: an ordinary unknown id, not a child
        if as_request:
            frame = req(self._rid(), "session/cancel", {"sessionId": child})
        else:
            frame = cancel(child)
        out = self.core.receive(CLIENT, frame, 0.0)
        reached = sends(out, AGENT) == [frame]
        assert reached == self.granted.get(child, False), (child, self.granted)
        if as_request and reached:
            self.core.receive(AGENT, resp(decoded(frame)["id"], {}), 0.0)
        elif as_request:
            assert decoded(sends(out, CLIENT)[0])["error"]["code"] == -32601

    @invariant()
    def accounting(self) -> None:
        assert_accounting(self.core)


FreshnessMachine.TestCase.settings = settings(max_examples=80, stateful_step_count=30)
TestFreshnessMachine = FreshnessMachine.TestCase


def test_an_ordinary_session_reparented_during_a_load_takes_its_children_with_it() -> None:
    """X (ordinary, child G granted cancel) announced under P while P is being loaded: X is
    history, and so is G below it, though G was never re-announced (found by a hostile
    review: G kept its grant)."""
    core = ProxyCore()
    open_session(core, "P")
    open_session(core, "X")
    core.receive(AGENT, announce("X", "G", capabilities=CANCEL), 0.0)
    assert passes(core, "G")
    core.receive(CLIENT, req(10, "session/load", {"sessionId": "P", "cwd": "/"}), 1.0)
    core.receive(AGENT, announce("P", "X", capabilities=CANCEL), 1.0)
    assert not passes(core, "X")
    assert not passes(core, "G")


def test_child_chains_are_bounded_in_depth() -> None:
    """An announcement nested deeper than registry.MAX_DEPTH is refused and its id denied."""
    from acp_proxy.core.session.registry import MAX_DEPTH

    core = ProxyCore()
    open_session(core, "P")
    parent = "P"
    for i in range(MAX_DEPTH - 1):
        core.receive(AGENT, announce(parent, f"C{i}", capabilities=CANCEL), 0.0)
        parent = f"C{i}"
    assert core.registry.child(parent) is not None
    out = core.receive(AGENT, announce(parent, "TOO_DEEP", capabilities=CANCEL), 0.0)
    assert "notification_dropped" in events(out)
    assert not passes(core, "TOO_DEEP")
    assert passes(core, parent)
