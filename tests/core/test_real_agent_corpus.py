"""The real-agent corpus through the sans-IO core: every message forwarded unchanged.

Each transcript (``tests/fixtures/corpus/``, recorded from fast-agent, the Codex ACP
adapter and the Claude ACP adapter) is fed to a :class:`ProxyCore` in recorded order,
with the default config and with ``config strict``, two ways: one frame per call, and
each stretch of one direction as the :class:`LineFramer` cuts it from one read (the
agent's fast paths). A message the proxy refuses, drops, answers itself, holds
without releasing or forwards with other bytes fails the test, naming it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.corpus import (
    AGENT_TO_CLIENT,
    AGENTS,
    CORPUS,
    Transcript,
    configs,
    is_benign,
    runs,
    transcript,
)

from acp_proxy.config import Config
from acp_proxy.core.actions import Action, Audit, Peer, Send
from acp_proxy.core.engine import ProxyCore
from acp_proxy.core.wire.framing import LineFramer

CONFIGS = configs()
PERMISSION = "session/request_permission"
SOURCE = {"client->agent": Peer.CLIENT, "agent->client": Peer.AGENT}


def _label(line: bytes) -> str:
    """``method id=ID`` of a message, for failure messages."""
    m: dict[str, Any] = json.loads(line)
    return f"{m.get('method', 'response')} id={m.get('id')!r}"


def _check(source: Peer, lines: list[bytes], out: list[Action]) -> list[str]:
    """What is wrong with ``out`` as the proxy's handling of ``lines`` from ``source``."""
    sent = b"\n".join(a.data for a in out if isinstance(a, Send) and a.to is source.other)
    problems = [
        f"{a.event} {a.fields.get('method')} id={a.fields.get('id')!r}: {a.fields.get('reason')}"
        for a in out
        if isinstance(a, Audit) and not is_benign(a.event, a.fields)
    ]
    problems += [
        f"sent back to the sender: {a.data[:120]!r}"
        for a in out
        if isinstance(a, Send) and a.to is source
    ]
    if sent != b"\n".join(lines):
        got = sent.split(b"\n") if sent else []
        missing = [_label(x) for x in lines if x not in got]
        problems.append(f"not forwarded byte for byte: {missing or 'order or bytes changed'}")
    return problems


def _finish(core: ProxyCore, problems: list[str]) -> list[str]:
    s = core.statistics()
    if s.held or s.pending_client_requests or s.pending_agent_requests:
        problems.append(f"left over at the end: {s}")
    if s.accepted != s.forwarded or s.answered or s.dropped:
        problems.append(f"not all forwarded: {s}")
    return problems


def replay_frames(config: Config, lines: Transcript) -> list[str]:
    """Feeds ``lines`` one frame per call; the problems found (empty: all forwarded)."""
    core = ProxyCore(config)
    problems: list[str] = []
    for n, (direction, line) in enumerate(lines):
        source = SOURCE[direction]
        out = core.receive(source, line, float(n))
        problems += [f"#{n} {_label(line)}: {p}" for p in _check(source, [line], out)]
    return _finish(core, problems)


def replay_reads(config: Config, lines: Transcript) -> list[str]:
    """Feeds each one-direction stretch as one read through a :class:`LineFramer`."""
    core = ProxyCore(config)
    framers = {p: LineFramer(config.limits.max_message_bytes) for p in Peer}
    problems: list[str] = []
    for n, (direction, stretch) in enumerate(runs(lines)):
        source = SOURCE[direction]
        items = framers[source].feed_runs(b"".join(x + b"\n" for x in stretch))
        out = core.receive(source, items, float(n))
        problems += [f"read #{n} ({direction}): {p}" for p in _check(source, stretch, out)]
    return _finish(core, problems)


def _prompt_ends(lines: Transcript) -> list[str | None]:
    """The ``stopReason`` of each ``session/prompt``, in order."""
    messages = [(d, json.loads(line)) for d, line in lines]
    ids = [m["id"] for _, m in messages if m.get("method") == "session/prompt"]
    ends = {
        m["id"]: m["result"].get("stopReason")
        for d, m in messages
        if d == AGENT_TO_CLIENT and "result" in m and m.get("id") in ids
    }
    return [ends.get(rid) for rid in ids]


def test_every_agent_has_a_transcript() -> None:
    """Each agent's session has permission requests, a turn that ends and one cancelled;
    the subagent session has a child session that asks for permission."""
    assert sorted(p.stem for p in CORPUS.glob("*.jsonl")) == sorted(AGENTS)
    for agent in AGENTS:
        lines = transcript(agent)
        messages = [json.loads(line) for _, line in lines]
        methods = [m.get("method") for m in messages]
        assert {"initialize", "session/new", "session/prompt"} <= set(methods), agent
        asks = [m["params"]["sessionId"] for m in messages if m.get("method") == PERMISSION]
        if agent == "claude-subagents":
            kinds = [
                m["params"]["update"].get("sessionUpdate")
                for m in messages
                if m.get("method") == "session/update"
            ]
            assert "subagent_update" in kinds
            parent = next(
                m["result"]["sessionId"] for m in messages if "sessionId" in m.get("result", {})
            )
            assert asks
            assert parent not in asks
            assert _prompt_ends(lines) == ["end_turn"]
        else:
            assert len(asks) >= 2, agent
            assert "session/cancel" in methods, agent
            assert _prompt_ends(lines) == ["end_turn", "cancelled"], agent


@pytest.mark.parametrize("config_name", sorted(CONFIGS))
@pytest.mark.parametrize("agent", AGENTS)
def test_corpus_frames_forwarded_unchanged(agent: str, config_name: str) -> None:
    assert replay_frames(CONFIGS[config_name], transcript(agent)) == []


@pytest.mark.parametrize("config_name", sorted(CONFIGS))
@pytest.mark.parametrize("agent", AGENTS)
def test_corpus_reads_forwarded_unchanged(agent: str, config_name: str) -> None:
    assert replay_reads(CONFIGS[config_name], transcript(agent)) == []


def _with_ssh_write(lines: Transcript) -> Transcript:
    """The Claude transcript with its ``Write`` aimed at ``~/.ssh/authorized_keys``."""
    target = b"/srv/acp-corpus/claude/ws/notes.txt"
    out: Transcript = []
    for direction, line in lines:
        if b'"session/request_permission"' in line and target in line:
            line = line.replace(target, b"/root/.ssh/authorized_keys")
        out.append((direction, line))
    assert out != lines
    return out


@pytest.mark.parametrize("replay", [replay_frames, replay_reads])
def test_replay_catches_a_refusal(replay: Any) -> None:
    """The check is not blind: the same session asking to write under ``~/.ssh`` is
    refused by ``config strict``, and the replay names it."""
    problems = replay(CONFIGS["strict"], _with_ssh_write(transcript("claude")))
    assert any("session/request_permission" in p for p in problems), problems
