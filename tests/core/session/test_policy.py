"""Capability enforcement on child sessions, alone and driving ProxyCore."""

from __future__ import annotations

import json
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
    enc,
    events,
    notif,
    open_session,
    req,
    resp,
    sends,
)

from acp_proxy.config import DEFAULT_CHILD_MUTATIONS, Config, EnforcementConfig
from acp_proxy.core.engine import ProxyCore
from acp_proxy.core.session.policy import Rejection, check_mutation
from acp_proxy.core.session.registry import Registry
from acp_proxy.core.session.schema import view_subagent_update

#: Every client -> agent method in the v1 and v2 schemas (stable and unstable,
#: @agentclientprotocol/sdk 2.4.0), plus v1's session/set_model.
SCHEMA_CLIENT_METHODS = [
    "initialize",
    "authenticate",
    "auth/login",
    "auth/logout",
    "auth/status",
    "logout",
    "providers/list",
    "providers/set",
    "providers/disable",
    "mcp/message",
    "session/new",
    "session/load",
    "session/list",
    "session/delete",
    "session/fork",
    "session/archive",
    "session/unarchive",
    "session/status",
    "session/set_title",
    "session/resume",
    "session/close",
    "session/set_mode",
    "session/set_model",
    "session/set_config_option",
    "session/prompt",
    "session/cancel",
    "tool_call/cancel",
    "terminal/cancel",
]
READ_ONLY = ["session/status"]

INIT = {
    1: (
        {"protocolVersion": 1, "clientCapabilities": {"subagents": {}, "fs": {}}},
        {"protocolVersion": 1, "agentCapabilities": {"loadSession": True}},
    ),
    2: (
        {"protocolVersion": 2, "capabilities": {}},
        {"protocolVersion": 2, "capabilities": {}},
    ),
}


def caps_variants(key: str) -> list[tuple[str, dict[str, Any], bool]]:
    """(name, announcement fields, permits) for capability ``key``."""
    return [
        ("empty_object", {"capabilities": {key: {}}}, True),
        ("object_with_fields", {"capabilities": {key: {"reason": True}}}, True),
        ("true", {"capabilities": {key: True}}, False),
        ("null_value", {"capabilities": {key: None}}, False),
        ("other_key_only", {"capabilities": {"somethingElse": {}}}, False),
        ("empty_capabilities", {"capabilities": {}}, False),
        ("capabilities_null", {"capabilities": None}, False),
        ("capabilities_omitted", {}, False),
    ]


TABLE = [
    pytest.param(version, method, fields, permits, id=f"v{version}-{method}-{name}")
    for version in (1, 2)
    for method, key in DEFAULT_CHILD_MUTATIONS.items()
    for name, fields, permits in caps_variants(key)
]


def start(version: int, config: Config | None = None) -> ProxyCore:
    """A core past initialize, with session P open."""
    core = ProxyCore(config)
    params, result = INIT[version]
    assert sends(core.receive(CLIENT, req(0, "initialize", params), 0.0), AGENT)
    assert sends(core.receive(AGENT, resp(0, result), 0.0), CLIENT)
    assert core.statistics().protocol_version == version
    open_session(core, "P")
    return core


def with_child(version: int, fields: dict[str, Any], config: Config | None = None) -> ProxyCore:
    core = start(version, config)
    frame = announce("P", "C", **fields)
    assert sends(core.receive(AGENT, frame, 0.0), CLIENT) == [frame]
    return core


def params_for(sid: str) -> dict[str, Any]:
    return {"sessionId": sid, "toolCallId": "t1", "terminalId": "x"}


@pytest.mark.parametrize(("version", "method", "fields", "permits"), TABLE)
def test_request_decision_table(
    version: int, method: str, fields: dict[str, Any], permits: bool
) -> None:
    """A mutation request on a child passes exactly when its capability key holds an object."""
    core = with_child(version, fields)
    frame = req(42, method, params_for("C"))
    out = core.receive(CLIENT, frame, 1.0)
    if permits:
        assert sends(out, AGENT) == [frame]
        assert sends(out, CLIENT) == []
        assert "mutation_rejected" not in events(out)
    else:
        assert sends(out, AGENT) == []
        [answer] = sends(out, CLIENT)
        key = DEFAULT_CHILD_MUTATIONS[method]
        body = decoded(answer)
        assert body["id"] == 42
        assert body["error"]["code"] == -32601
        assert method in body["error"]["message"]
        assert "'C'" in body["error"]["message"]
        assert repr(key) in body["error"]["message"]
        assert body["error"]["data"] == {"sessionId": "C", "method": method, "capability": key}
        [rec] = audits(out, "mutation_rejected")
        assert rec.direction == "client->agent"
        assert rec.fields["sessionId"] == "C"
        assert rec.fields["parentSessionId"] == "P"
        assert rec.fields["capability"] == key
        assert rec.fields["id"] == 42
        assert core.statistics().pending_client_requests == 0
    assert_accounting(core)


@pytest.mark.parametrize(("version", "method", "fields", "permits"), TABLE)
def test_notification_decision_table(
    version: int, method: str, fields: dict[str, Any], permits: bool
) -> None:
    """A mutation notification on a child passes when permitted, else is dropped and audited."""
    core = with_child(version, fields)
    frame = notif(method, params_for("C"))
    dropped_before = core.statistics().dropped
    out = core.receive(CLIENT, frame, 1.0)
    if permits:
        assert sends(out) == [frame]
    else:
        assert sends(out) == []
        assert events(out) == ["mutation_rejected", "notification_dropped"]
        assert audits(out, "notification_dropped")[0].fields["method"] == method
        assert core.statistics().dropped == dropped_before + 1
        assert core.statistics().rejected_mutations == 1
    assert_accounting(core)


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("method", READ_ONLY)
def test_read_only_methods_always_pass_on_children(version: int, method: str) -> None:
    """Reads (session/status) reach the agent for a child without capabilities."""
    core = with_child(version, {"capabilities": None})
    frame = req(7, method, {"sessionId": "C"})
    out = core.receive(CLIENT, frame, 1.0)
    assert sends(out, AGENT) == [frame]
    assert sends(out, CLIENT) == []


@pytest.mark.parametrize("method", SCHEMA_CLIENT_METHODS)
def test_every_schema_method_is_refused_on_a_child_without_grants(method: str) -> None:
    """Allowlist: any schema method naming a child without grants (reads aside) is refused;
    the same message on an ordinary session is forwarded unchanged."""
    core = with_child(2, {"capabilities": None})
    frame = req(7, method, {"sessionId": "C", "cwd": "/", "mcpServers": []})
    out = core.receive(CLIENT, frame, 1.0)
    if method in READ_ONLY:
        assert sends(out, AGENT) == [frame]
    else:
        assert sends(out, AGENT) == []
        [answer] = sends(out, CLIENT)
        assert decoded(answer)["error"]["code"] == -32601
        assert decoded(answer)["error"]["data"]["method"] == method
    ordinary = req(8, method, {"sessionId": "P", "cwd": "/", "mcpServers": []})
    assert sends(core.receive(CLIENT, ordinary, 1.0), AGENT) == [ordinary]
    assert_accounting(core)


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("method", ["session/load", "session/resume", "session/fork"])
def test_load_resume_fork_of_a_child_are_refused_even_with_every_grant(
    version: int, method: str
) -> None:
    """Direct child load and resume are not allowed and forking is a mutation: refused
    even when the child advertises every capability key."""
    caps = {"cancel": {}, "load": {}, "resume": {}, "fork": {}, "prompt": {}}
    core = with_child(version, {"capabilities": caps})
    out = core.receive(CLIENT, req(7, method, {"sessionId": "C", "cwd": "/"}), 1.0)
    assert sends(out, AGENT) == []
    [rec] = audits(out, "mutation_rejected")
    assert rec.fields["reason"] == "not_allowed_on_child"
    assert rec.fields["capability"] is None
    message = decoded(sends(out, CLIENT)[0])["error"]["message"]
    if method == "session/fork":  # a mutation no default grant covers
        assert "no child capability grants this method" in message
    else:  # direct child load and resume are not allowed at all
        assert "the protocol does not allow it on a child session" in message


@given(
    st.from_regex(r"(session|_[a-z]+|tool_call|x)/[a-z_]{1,12}", fullmatch=True).filter(
        lambda m: m not in READ_ONLY and m not in DEFAULT_CHILD_MUTATIONS
    )
)
def test_generated_unknown_methods_are_refused_on_children(method: str) -> None:
    """Methods the proxy has never heard of (future and extension methods) are refused on a
    child, as request and as notification, and forwarded on an ordinary session."""
    core = with_child(2, {"capabilities": {"cancel": {}}})
    out = core.receive(CLIENT, req(3, method, {"sessionId": "C"}), 1.0)
    assert sends(out, AGENT) == []
    assert decoded(sends(out, CLIENT)[0])["id"] == 3
    assert sends(core.receive(CLIENT, notif(method, {"sessionId": "C"}), 1.0)) == []
    ok = notif(method, {"sessionId": "P"})
    assert sends(core.receive(CLIENT, ok, 1.0)) == [ok]
    assert_accounting(core)


def test_methods_naming_no_session_and_cancel_request_pass() -> None:
    """Methods without params.sessionId, and $/cancel_request, are not child mutations."""
    core = with_child(2, {})
    for frame in (
        req(1, "session/list", {}),
        notif("$/cancel_request", {"requestId": 1}),
        notif("$/cancel_request", {"requestId": 1, "sessionId": "C"}),
        req(2, "_vendor/poke", {"target": "C"}),
    ):
        assert sends(core.receive(CLIENT, frame, 1.0)) == [frame]


def test_meta_inside_capabilities_never_grants() -> None:
    """A capability key `_meta` grants nothing, even when a config maps a method to it
    (the config refuses that mapping; the registry refuses it too)."""
    core = with_child(2, {"capabilities": {"_meta": {}}})
    out = core.receive(CLIENT, req(1, "session/cancel", {"sessionId": "C"}), 1.0)
    assert sends(out, AGENT) == []
    reg = Registry()
    reg.mark_known("P")
    v = view_subagent_update({"sessionId": "C", "capabilities": {"_meta": {}}})
    assert v is not None
    reg.apply("P", v, 0.0)
    assert check_mutation(reg, {"_x/y": "_meta"}, "_x/y", "C") is not None


@pytest.mark.parametrize("rid", ["req-1", 0, -5, 2**53 - 1])
def test_rejection_uses_the_requests_own_id(rid: Any) -> None:
    """The rejection answers the request's id exactly (strings, 0, negatives, big ints)."""
    core = with_child(2, {})
    out = core.receive(CLIENT, req(rid, "session/prompt", {"sessionId": "C", "prompt": []}), 1.0)
    [answer] = sends(out, CLIENT)
    body = decoded(answer)
    assert body["id"] == rid
    assert type(body["id"]) is type(rid)


def test_reject_code_and_tables_come_from_config() -> None:
    """reject_code, child_mutations and child_read_only are read from the config."""
    cfg = Config(
        enforcement=EnforcementConfig(
            reject_code=-32042,
            child_mutations={"_x/kill": "kill", "session/prompt": "prompt"},
            child_read_only=["_x/peek"],
        )
    )
    core = with_child(2, {"capabilities": {"cancel": {}, "prompt": {}}}, cfg)
    out = core.receive(CLIENT, req(1, "_x/kill", {"sessionId": "C"}), 1.0)
    assert decoded(sends(out, CLIENT)[0])["error"]["code"] == -32042
    prompt = req(2, "session/prompt", {"sessionId": "C"})
    assert sends(core.receive(CLIENT, prompt, 1.0), AGENT) == [prompt]
    peek = req(3, "_x/peek", {"sessionId": "C"})
    assert sends(core.receive(CLIENT, peek, 1.0), AGENT) == [peek]
    status = req(4, "session/status", {"sessionId": "C"})  # no longer read-only here
    assert sends(core.receive(CLIENT, status, 1.0), AGENT) == []


def test_batch_is_refused_whole() -> None:
    """ACP uses no batches: a client array gets one -32600 (id null); nothing in it, not even
    a permitted message, reaches the agent."""
    core = with_child(2, {"capabilities": {"cancel": {}}})
    batch = [
        {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "C"}},
        {"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": {"sessionId": "C"}},
        {"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {"sessionId": "P"}},
    ]
    out = core.receive(CLIENT, enc(batch), 1.0)
    assert sends(out, AGENT) == []
    [answer] = [decoded(d) for d in sends(out, CLIENT)]
    assert answer["id"] is None
    assert answer["error"]["code"] == -32600
    assert "batch" in answer["error"]["message"]
    assert_accounting(core)


def test_nested_batch_cannot_smuggle_a_forbidden_mutation() -> None:
    """A batch inside a batch is refused as invalid, never forwarded to the agent."""
    core = with_child(2, {})
    inner = [{"jsonrpc": "2.0", "id": 5, "method": "session/cancel", "params": {"sessionId": "C"}}]
    out = core.receive(CLIENT, enc([inner]), 1.0)
    assert sends(out, AGENT) == []
    [answer] = sends(out, CLIENT)
    assert decoded(answer)["error"]["code"] == -32600
    assert_accounting(core)


def test_ambiguous_session_id_cannot_dodge_enforcement() -> None:
    """A request naming the child and another session via duplicate keys is refused."""
    core = with_child(2, {})
    raw = (
        b'{"jsonrpc":"2.0","id":4,"method":"session/cancel",'
        b'"params":{"sessionId":"C","sessionId":"P"}}'
    )
    out = core.receive(CLIENT, raw, 1.0)
    assert sends(out, AGENT) == []
    assert decoded(sends(out, CLIENT)[0])["error"]["code"] == -32600
    note = (
        b'{"jsonrpc":"2.0","method":"session/cancel",'
        b'"params":{"session\\u0049d":"C","sessionId":"P"}}'
    )
    out = core.receive(CLIENT, note, 1.0)
    assert sends(out) == []
    assert "notification_dropped" in events(out)


def test_escaped_method_and_session_id_are_still_enforced() -> None:
    """Escapes in the method or session id do not hide a forbidden mutation."""
    core = with_child(2, {})
    raw = (
        b'{"jsonrpc":"2.0","id":8,"method":"session\\/c\\u0061ncel",'
        b'"params":{"sessionId":"\\u0043"}}'
    )
    out = core.receive(CLIENT, raw, 1.0)
    assert sends(out, AGENT) == []
    assert decoded(sends(out, CLIENT)[0])["id"] == 8


def test_capabilities_null_patch_revokes_and_object_patch_grants() -> None:
    """After capabilities: null cancel is refused; a later {"cancel": {}} permits it again."""
    core = with_child(2, {"capabilities": {"cancel": {}}})
    cancel = notif("session/cancel", {"sessionId": "C"})
    assert sends(core.receive(CLIENT, cancel, 1.0)) == [cancel]
    core.receive(AGENT, announce("P", "C", capabilities=None), 2.0)
    assert sends(core.receive(CLIENT, cancel, 3.0)) == []
    core.receive(AGENT, announce("P", "C", capabilities={"cancel": {}}), 4.0)
    assert sends(core.receive(CLIENT, cancel, 5.0)) == [cancel]


def test_malformed_capabilities_patch_keeps_the_old_grant() -> None:
    """A malformed capabilities patch counts as not reported: the previous grant stays."""
    core = with_child(2, {"capabilities": {"cancel": {}}})
    core.receive(AGENT, announce("P", "C", capabilities=[1]), 2.0)
    cancel = notif("session/cancel", {"sessionId": "C"})
    assert sends(core.receive(CLIENT, cancel, 3.0)) == [cancel]


def test_grandchild_is_enforced_with_its_own_capabilities() -> None:
    """A nested child is enforced by its own capabilities, not its parent's."""
    core = with_child(2, {"capabilities": {"cancel": {}}})
    core.receive(AGENT, announce("C", "G"), 1.0)
    out = core.receive(CLIENT, req(1, "session/cancel", {"sessionId": "G"}), 2.0)
    assert sends(out, AGENT) == []
    assert audits(out, "mutation_rejected")[0].fields["parentSessionId"] == "C"


def test_mutation_on_a_held_session_is_refused_as_not_announced() -> None:
    """While agent traffic for a session is held, client mutations on it are refused."""
    core = start(2)
    core.receive(AGENT, chunk("X", "early"), 0.0)
    out = core.receive(CLIENT, req(3, "session/prompt", {"sessionId": "X"}), 1.0)
    assert sends(out, AGENT) == []
    body = decoded(sends(out, CLIENT)[0])
    assert "not been announced" in body["error"]["message"]
    assert audits(out, "mutation_rejected")[0].fields["reason"] == "session_not_announced"


def test_check_mutation_unit() -> None:
    """check_mutation: None for no session, unlisted methods and ordinary sessions."""
    reg = Registry()
    reg.mark_known("P")
    v = view_subagent_update({"sessionId": "C", "capabilities": {"cancel": {}}})
    assert v is not None
    reg.apply("P", v, 0.0)
    table = DEFAULT_CHILD_MUTATIONS
    assert check_mutation(reg, table, "session/cancel", None) is None
    assert check_mutation(reg, table, "session/status", "C") is None
    assert check_mutation(reg, table, "session/prompt", "P") is None
    assert check_mutation(reg, table, "session/cancel", "C") is None
    assert check_mutation(reg, table, "session/prompt", "C") == Rejection(
        "C", "session/prompt", None, "not_allowed_on_child"
    )
    assert check_mutation(reg, {"session/prompt": "prompt"}, "session/prompt", "C") == Rejection(
        "C", "session/prompt", "prompt"
    )
    assert check_mutation(reg, table, "session/prompt", "U") is None
    rej = check_mutation(reg, table, "session/prompt", "U", unestablished=True)
    assert rej is not None
    assert rej.reason == "session_not_announced"


def test_rejection_message_and_data() -> None:
    """Rejection names method, child and capability in message and data."""
    r = Rejection("C1", "session/close", "close")
    assert "session/close" in r.message
    assert "'C1'" in r.message
    assert "'close'" in r.message
    assert json.loads(json.dumps(r.data)) == {
        "sessionId": "C1",
        "method": "session/close",
        "capability": "close",
    }
