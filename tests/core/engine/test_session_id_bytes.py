"""A session id over ``limits.max_session_id_bytes`` in UTF-8 bytes, not in characters.

Found by a hostile agent behind a real proxy (helper "attack", 2026-12-03): a
``session/new`` answer whose ``sessionId`` is 1000 "é" (1000 characters, 2000
UTF-8 bytes, over the default limit of 1024) made the session known, since
``AgentDirection._settle_create`` compares ``len(sid)`` (characters) with the
limit. Its content chunks were then forwarded by the run paths (the compiled
scanner and ``chunk_run``, which only ask whether the session is known) and by
``_frames`` (``canonical`` + ``uninspected``), while the same line alone
(``ProxyCore.receive`` of one frame) and every line under ``--trace`` / ``--metrics``
(``TracingCore`` feeds frames one by one) is refused by ``parse`` as naming a
session id over the limit: the verdict depended on read boundaries and on
whether something observed the traffic.
"""

from __future__ import annotations

import json

from support.corekit import AGENT, CLIENT, assert_accounting, events, req, resp, sends

from acp_proxy.config import Config, LimitsConfig
from acp_proxy.core.engine import ProxyCore
from acp_proxy.core.wire import runs
from acp_proxy.core.wire.framing import Lines

LIMIT = 64
#: 40 characters, 80 UTF-8 bytes: within LIMIT as characters, over it as bytes
WIDE = "\u00e9" * 40


def _raw_chunk(sid: str, text: str) -> bytes:
    """A chunk written as the SDKs write it: UTF-8, not ``\\u`` escapes."""
    body = {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {
            "sessionId": sid,
            "update": {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": text},
            },
        },
    }
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()


def _core(*, pure: bool) -> ProxyCore:
    saved = runs.fast_stretch
    if pure:
        runs.fast_stretch = None
    try:
        core = ProxyCore(Config(limits=LimitsConfig(max_session_id_bytes=LIMIT)))
    finally:
        runs.fast_stretch = saved
    core.receive(CLIENT, req("n", "session/new", {"cwd": "/", "mcpServers": []}), 0.0)
    core.receive(AGENT, resp("n", {"sessionId": WIDE}), 0.0)
    return core


def test_a_session_new_answer_with_an_id_over_the_limit_in_bytes_is_not_made_known() -> None:
    for pure in (False, True):
        assert not _core(pure=pure).registry.is_known(WIDE)


def test_chunks_naming_an_id_over_the_limit_in_bytes_are_refused_on_every_path() -> None:
    """The frame alone is refused (parse); a run of such lines, compiled or pure, and
    a list of frames must be decided the same."""
    line = _raw_chunk(WIDE, "hi")
    alone = _core(pure=False).receive(AGENT, line, 0.0)
    assert sends(alone) == []
    assert "invalid_message" in events(alone)
    for pure in (False, True):
        core = _core(pure=pure)
        out = core.receive(AGENT, Lines(line + b"\n" + line), 0.0)
        assert sends(out) == [], f"run forwarded (pure={pure})"
        assert events(out).count("invalid_message") == 2
        out = core.receive(AGENT, [line, line], 0.0)
        assert sends(out) == [], f"list of frames forwarded (pure={pure})"
        assert_accounting(core)
