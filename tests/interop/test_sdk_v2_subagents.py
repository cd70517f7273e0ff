"""The TypeScript SDK's draft-v2 peers (``@agentclientprotocol/sdk/experimental/v2/unstable``)
through the proxy: child-session enforcement as the stabilized subagents spec has it (an
allowlist of mutations on a child, and the freshness boundary at a parent's resume),
against a deliberately permissive agent.

``ts/agent_v2.mjs`` accepts ``session/load``, ``session/resume``, ``session/fork``,
``session/prompt`` and ``session/cancel`` on any session it knows, its child included,
and logs every handler invocation to a file; ``ts/client_v2.mjs`` drives the scenario
(see its header) and reports every message it received. The same scenario runs
directly and through the proxy: directly, every attempt on the child reaches the
agent's handlers; through the proxy, only what the child's capabilities grant does,
and never while the parent's resume has revoked them.

Every wait in the scenario is for a message the agent must send (a response, the idle
state that ends a turn, the mirror of a cancelled child, the snapshot that ends a
replay), so nothing depends on timing; that a refused message never reached the agent
is read from the agent's log once it has exited.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import trio

from .observe import proxy, read_audit, read_jsonl, run_client, ts_agent_v2, ts_client_v2

pytestmark = pytest.mark.interop
TIMEOUT = 60

#: What the client attempts on the child, in order; the spec allows none of them.
CHILD_ATTEMPTS = ("session/load", "session/resume", "session/fork", "session/prompt")
CAPS = 'caps={"cancel": {}}'


def _event(entry: dict[str, Any], parent: str) -> str:
    """One timeline entry as a short string: ``> LABEL`` for what the client sent,
    ``< result`` / ``< error CODE`` for a response, ``WHO:KIND...`` for an update."""
    if "sent" in entry:
        return f"> {entry['sent']}"
    message = entry["received"]
    if "method" not in message:
        return f"< error {message['error']['code']}" if "error" in message else "< result"
    params = message["params"]
    who = "parent" if params.get("sessionId") == parent else "child"
    if message["method"] != "session/update":
        return f"{who}:{message['method']}"
    update = params["update"]
    kind = update["sessionUpdate"]
    if kind == "state_update":
        text = f"{who}:state_update:{update['state']}"
        return text + (f"/{update['stopReason']}" if update.get("stopReason") else "")
    if kind != "subagent_update":
        return f"{who}:{kind}"
    text = f"{who}:subagent_update"
    state = update.get("state")
    if state is not None:
        text += f":{state['state']}" + (f"/{state['stopReason']}" if "stopReason" in state else "")
    if "capabilities" in update:
        text += f" caps={json.dumps(update['capabilities'], sort_keys=True)}"
    if "title" in update:
        text += f" title={update['title']}"
    return text


def _timeline(report: dict[str, Any]) -> list[str]:
    return [_event(e, report["parent"]) for e in report["timeline"]]


def _expected_timeline(*, proxied: bool) -> list[str]:
    """What the client observes. Through the proxy the attempts on the child are
    answered by the proxy; directly, by the agent (its resume of the child sends the
    child's state first). Everything else is the same: the cancels the proxy drops
    find the child idle when they reach the agent directly, so they change nothing
    the client sees (the agent's log tells them apart)."""
    attempts: list[str] = []
    for method in CHILD_ATTEMPTS:
        attempts.append(f"> {method} child")
        if proxied:
            attempts.append("< error -32601")
        else:
            attempts += ["child:state_update:idle"] if method == "session/resume" else []
            attempts.append("< result")
    return [
        "> initialize",
        "< result",
        "> session/new",
        "< result",
        "> session/prompt parent delegate",
        "< result",  # accepted: the turn follows
        "parent:state_update:running",
        "parent:agent_message_chunk",
        f"parent:subagent_update:running {CAPS} title=Helper",
        "child:agent_message_chunk",
        "parent:state_update:idle/end_turn",
        *attempts,
        "> session/cancel child granted",
        "parent:subagent_update:idle/cancelled",  # the agent cancelled the child
        "> session/resume parent",
        # Replayed before the response: history, delivered but granting nothing.
        f"parent:subagent_update:idle/cancelled {CAPS} title=Helper",
        "parent:state_update:idle/end_turn",  # the snapshot every resume sends
        "> session/cancel child during-replay",
        "> release",
        "< result",  # the resume's response: the freshness boundary
        "> session/cancel child after-response",
        "> session/prompt parent rename",
        "< result",
        "parent:state_update:running",
        "parent:subagent_update title=Helper (resumed)",  # a live patch without capabilities
        "parent:state_update:idle/end_turn",
        "> session/cancel child patched",
        "> session/prompt parent continue",
        "< result",
        "parent:state_update:running",
        # The re-announcement after the response, with complete capabilities.
        f"parent:subagent_update:running {CAPS} title=Helper",
        "parent:state_update:idle/end_turn",
        "> session/cancel child re-announced",
        "parent:subagent_update:idle/cancelled",
    ]


def _handler_log(
    parent: str, child: str, *, proxied: bool
) -> list[tuple[str, str | None, str | None]]:
    """The agent's handler invocations, (method, sessionId, step), in the order the
    client sent what caused them."""
    cancel = "session/cancel"
    refused_attempts = [(m, child, None) for m in CHILD_ATTEMPTS]
    refused_attempts[-1] = ("session/prompt", child, "steer the child")
    return [
        ("initialize", None, None),
        ("session/new", None, None),
        ("session/prompt", parent, "delegate"),
        *([] if proxied else refused_attempts),
        (cancel, child, "granted"),
        ("session/resume", parent, None),
        *([] if proxied else [(cancel, child, "during-replay")]),
        ("_acp-proxy-test/release", None, None),
        *([] if proxied else [(cancel, child, "after-response")]),
        ("session/prompt", parent, "rename"),
        *([] if proxied else [(cancel, child, "patched")]),
        ("session/prompt", parent, "continue"),
        (cancel, child, "re-announced"),
    ]


def _check_handler_log(path: Path, expected: list[tuple[str, str | None, str | None]]) -> None:
    """The log holds exactly the expected invocations. Requests are answered before
    the client sends anything else, so their order is fixed; a notification may be
    dispatched by the SDK just before or after a request that followed it on the
    wire, so notifications are compared as a multiset (each carries its step)."""
    log = [(e["method"], e["sessionId"], e["step"]) for e in read_jsonl(path)]
    assert Counter(log) == Counter(expected), log
    requests = {"initialize", "session/new", "session/prompt", "session/resume"}
    requests.update(CHILD_ATTEMPTS)
    assert [e for e in log if e[0] in requests] == [e for e in expected if e[0] in requests]


async def test_v2_child_enforcement_and_parent_resume(tmp_path: Path, ts_sdk_dir: Path) -> None:
    """TypeScript SDK v2 client and agent, directly and through the proxy.

    Through the proxy: ``session/load``, ``session/resume``, ``session/fork`` and
    ``session/prompt`` on the child are answered by the proxy with -32601 naming the
    method, and the agent's handlers for them never run; ``session/cancel`` on the
    child (granted by ``capabilities: {"cancel": {}}``) reaches the agent's cancel
    handler. Resuming the parent revokes the grant: cancels on the child while the
    announcement is replayed before the response, after the response, and after a
    live update without ``capabilities`` are dropped; once the agent re-announces the
    child with its capabilities, a cancel reaches the agent again. Directly, the agent
    handles every one of these itself, so each refusal above is the proxy's.
    """
    client = ts_client_v2()
    direct_log, proxied_log = tmp_path / "direct-agent.jsonl", tmp_path / "proxied-agent.jsonl"
    audit = tmp_path / "audit.jsonl"
    with trio.fail_after(TIMEOUT):
        direct = await run_client(client, ts_agent_v2(direct_log), ts_sdk_dir)
        proxied = await run_client(client, [*proxy(audit), *ts_agent_v2(proxied_log)], ts_sdk_dir)

    for report in (direct, proxied):
        assert report["protocolVersion"] == 2
        assert report["child"] == f"{report['parent']}/child-1"
    parent, child = proxied["parent"], proxied["child"]
    assert (direct["parent"], direct["child"]) == (parent, child)

    # Directly, the permissive agent accepts every attempt on the child.
    assert direct["attempts"] == {
        "session/load": {"result": {}},
        "session/resume": {"result": {}},
        "session/fork": {"result": {"sessionId": f"{child}/fork-1"}},
        "session/prompt": {"result": {"messageId": "msg-4"}},
    }
    # Through the proxy, the proxy refuses each one itself.
    assert proxied["attempts"] == {
        method: {
            "code": -32601,
            "message": f"acp-proxy: {method} refused on child session {child!r}: "
            + (
                "the protocol does not allow it on a child session"
                if method in ("session/load", "session/resume")
                else "no child capability grants this method"
            ),
            "data": {"sessionId": child, "method": method, "capability": None},
        }
        for method in CHILD_ATTEMPTS
    }

    assert _timeline(direct) == _expected_timeline(proxied=False)
    assert _timeline(proxied) == _expected_timeline(proxied=True)

    _check_handler_log(direct_log, _handler_log(parent, child, proxied=False))
    _check_handler_log(proxied_log, _handler_log(parent, child, proxied=True))

    # The audit log (child_updated records aside): each refusal with its reason.
    records = [r for r in read_audit(audit) if r["event"] != "child_updated"]
    verdicts = [
        (r["event"], r.get("sessionId"), r.get("method"), r.get("capability"), r.get("reason"))
        for r in records
        if r["event"] in ("mutation_rejected", "notification_dropped")
    ]
    stale = ("session/cancel", "cancel", "stale_after_parent_reload")
    assert verdicts == [
        *[("mutation_rejected", child, m, None, "not_allowed_on_child") for m in CHILD_ATTEMPTS],
        *[
            (event, child, *stale)
            for _step in ("during-replay", "after-response", "patched")
            for event in ("mutation_rejected", "notification_dropped")
        ],
    ]
    assert [(r["event"], r.get("sessionId")) for r in records] == [
        ("child_announced", child),
        *[("mutation_rejected", child)] * len(CHILD_ATTEMPTS),
        ("grants_revoked", parent),  # at the resume request, before its replay
        *[("mutation_rejected", child), ("notification_dropped", child)] * 3,
        ("grants_restored", child),  # re-announced with capabilities after the response
        ("peer_closed", None),
        ("peer_closed", None),
    ]
    revoked = records[1 + len(CHILD_ATTEMPTS)]
    assert (revoked["method"], revoked["count"]) == ("session/resume", 1)
