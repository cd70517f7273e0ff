"""The real-agent corpus (``tests/fixtures/corpus/``): loading and the strict config.

Each transcript is a list of ``(direction, line)`` in the order recorded, ``line``
the exact bytes of one message without its newline (``tools/record_corpus.py``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from acp_proxy.config import Config
from acp_proxy.config.io import load_config

TESTS = Path(__file__).resolve().parent.parent
CORPUS = TESTS / "fixtures" / "corpus"
STRICT_TOML = TESTS.parent / "acp_proxy" / "config" / "strict.toml"
CLIENT_TO_AGENT = "client->agent"
AGENT_TO_CLIENT = "agent->client"

#: The recorded agents; a test checks that each has a transcript.
AGENTS = ("fast-agent", "codex", "claude", "claude-subagents")

Transcript = list[tuple[str, bytes]]

#: Audit events that only record what passed (a subagent's child session announced
#: or updated, a connection opened or closed); any other event on corpus traffic is
#: a refusal, a drop, a hold or a rewrite, and fails the tests.
BENIGN_EVENTS = frozenset(
    {"child_announced", "child_updated", "connection_opened", "connection_closed", "peer_closed"}
)


def is_benign(event: str, fields: Mapping[str, Any]) -> bool:
    """True for a record of what passed: a :data:`BENIGN_EVENTS` event, an ask forwarded
    to the client (``permission_decided`` with ``action: "ask"``) or the client's answer
    to one (``permission_answered``): every decision is on the record (issue 25)."""
    if event in BENIGN_EVENTS or event == "permission_answered":
        return True
    return event == "permission_decided" and fields.get("action") == "ask"


def transcript(agent: str) -> Transcript:
    """The transcript of ``agent`` (a name in :data:`AGENTS`).

    Raises:
        ValueError: a record whose direction is not one of the two.
    """
    out: Transcript = []
    for text in (CORPUS / f"{agent}.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(text)
        if record["dir"] not in (CLIENT_TO_AGENT, AGENT_TO_CLIENT):
            raise ValueError(f"{agent}: bad direction {record['dir']!r}")
        out.append((record["dir"], record["line"].encode("utf-8")))
    return out


def configs() -> dict[str, Config]:
    """The configs the corpus must pass unchanged: the default and ``config strict``."""
    return {"default": Config(), "strict": load_config(STRICT_TOML)}


def runs(lines: Transcript) -> list[tuple[str, list[bytes]]]:
    """Consecutive lines of one direction grouped, in order (what one read may carry)."""
    out: list[tuple[str, list[bytes]]] = []
    for direction, line in lines:
        if out and out[-1][0] == direction:
            out[-1][1].append(line)
        else:
            out.append((direction, [line]))
    return out
