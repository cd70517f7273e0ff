"""ProxyCore.reconfigure: a reload's policy sections reach every part of a live core."""

from __future__ import annotations

import attrs
from support.corekit import assert_accounting, audits, open_session, req, sends, state_update

from acp_proxy.config import AuditConfig, Config, DedupConfig, LimitsConfig, ListenConfig
from acp_proxy.config.reload import POLICY_SECTIONS, apply_reload, policy_digest
from acp_proxy.core.actions import Peer
from acp_proxy.core.engine import ProxyCore


def test_dedup_switched_on_by_a_reload_removes_the_next_duplicate() -> None:
    core = ProxyCore(Config(dedup=DedupConfig(state_reports=False)))
    open_session(core, "S")
    assert sends(core.receive(Peer.AGENT, state_update("S", "idle"), 1.0))
    assert sends(core.receive(Peer.AGENT, state_update("S", "idle"), 2.0))  # off: delivered
    core.reconfigure(Config(dedup=DedupConfig(state_reports=True)))
    assert sends(core.receive(Peer.AGENT, state_update("S", "running"), 3.0))
    assert not sends(core.receive(Peer.AGENT, state_update("S", "running"), 4.0))
    assert_accounting(core)


def test_include_content_follows_a_reload() -> None:
    core = ProxyCore(Config())
    open_session(core, "S")
    reply = b'{"jsonrpc":"2.0","id":99,"result":{}}'
    [dropped] = audits(core.receive(Peer.AGENT, reply, 1.0), "unknown_response")
    assert "content" not in dropped.fields
    core.reconfigure(Config(audit=AuditConfig(include_content=True)))
    [dropped] = audits(core.receive(Peer.AGENT, reply, 2.0), "unknown_response")
    assert dropped.fields["content"] == reply.decode()
    assert_accounting(core)


def test_reject_code_follows_a_reload() -> None:
    core = ProxyCore(Config())
    open_session(core, "S")
    core.reconfigure(Config(enforcement=attrs.evolve(Config().enforcement, reject_code=-32099)))
    core.receive(Peer.AGENT, b'{"jsonrpc":"2.0","method":"session/update","params":{'
                 b'"sessionId":"S","update":{"sessionUpdate":"subagent_update",'
                 b'"sessionId":"C","capabilities":{}}}}', 1.0)  # fmt: skip
    [answer] = sends(core.receive(Peer.CLIENT, req(5, "session/prompt", {"sessionId": "C"}), 2.0))
    assert b"-32099" in answer


def test_apply_reload_keeps_what_needs_a_restart_and_names_it() -> None:
    running = Config()
    loaded = Config(
        limits=LimitsConfig(max_children=7),
        listen=ListenConfig(max_connections=3),
        audit=AuditConfig(path="/tmp/x.jsonl", include_content=True),
        dedup=DedupConfig(state_reports=False),
    )
    effective, restart = apply_reload(running, loaded)
    assert restart == ["limits.max_children", "audit.path", "listen.max_connections"]
    assert effective.limits == running.limits
    assert effective.listen == running.listen
    assert effective.audit == AuditConfig(path="", include_content=True)
    assert effective.dedup == loaded.dedup


def test_policy_digest_reads_the_policy_sections_only() -> None:
    base = policy_digest(Config())
    assert policy_digest(Config(limits=LimitsConfig(max_children=7))) == base
    assert policy_digest(Config(dedup=DedupConfig(state_reports=False))) != base
    assert policy_digest(Config(audit=AuditConfig(include_content=True))) != base
    assert base.startswith("sha256:")
    assert len(base) == len("sha256:") + 64
    assert "permissions" in POLICY_SECTIONS
