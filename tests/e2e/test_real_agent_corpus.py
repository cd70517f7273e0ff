"""The real-agent corpus through a real ``acp-proxy`` process (stdio drop-in).

The proxy runs ``tests/support/peers/corpus_agent.py``, which replays the agent side
of a recorded transcript; the test is the client and sends the client side. Both
directions must arrive byte for byte as recorded, with the default config and with
``config strict``, and the audit log must hold no refusal or drop.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import trio
from support.corpus import (
    AGENTS,
    CLIENT_TO_AGENT,
    CORPUS,
    is_benign,
    runs,
    transcript,
)
from support.e2ekit import TESTS, open_proxy, proxy_command, read_audit, strict_wire_policy

CORPUS_AGENT = TESTS / "support" / "peers" / "corpus_agent.py"
TIMEOUT = 60


@pytest.mark.parametrize("config_name", ["default", "strict"])
@pytest.mark.parametrize("agent", AGENTS)
async def test_corpus_through_the_proxy(agent: str, config_name: str, tmp_path: Path) -> None:
    lines = transcript(agent)
    received = tmp_path / "agent-received.txt"
    audit = tmp_path / "audit.jsonl"
    args = ["--audit-log", str(audit)]
    if config_name == "strict":
        # strict's wire policy; its [sandbox] is off here: the recorded cwds lie outside
        # any workspace of this machine (the sandbox has its own tests: test_sandbox.py)
        strict = tmp_path / "strict.toml"
        strict.write_text(strict_wire_policy())
        args = ["--config", str(strict), *args]
    cmd = [
        *proxy_command(*args),
        sys.executable,
        str(CORPUS_AGENT),
        str(CORPUS / f"{agent}.jsonl"),
        str(received),
    ]
    with trio.fail_after(TIMEOUT):
        async with open_proxy(cmd) as proxy:
            for n, (direction, stretch) in enumerate(runs(lines)):
                if direction == CLIENT_TO_AGENT:
                    await proxy.send(b"".join(x + b"\n" for x in stretch))
                    continue
                for k, expected in enumerate(stretch):
                    got = await proxy.out.recv_line()
                    assert got == expected + b"\n", (
                        f"{agent} run {n} line {k}: the client got other bytes; "
                        f"stderr: {proxy.stderr_text()[-2000:]}"
                    )
            await proxy.close_stdin()
            await proxy.out.expect_eof()
            assert await proxy.wait() == 0, proxy.stderr_text()[-2000:]
    sent = b"".join(x + b"\n" for d, x in lines if d == CLIENT_TO_AGENT)
    assert received.read_bytes() == sent
    records = read_audit(audit)
    events = [(r["event"], r.get("method"), r.get("reason")) for r in records]
    assert [e for e, r in zip(events, records, strict=True) if not is_benign(e[0], r)] == []
