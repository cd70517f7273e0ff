"""A reload applies only a settled file, and never an empty one (issue 31, item 2).

Timed with trio's MockClock: a writer changes the file while the reload waits
for it to settle; what becomes live is recorded by a stand-in relay.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import trio
import trio.testing

from acp_proxy.config import Config
from acp_proxy.config.io import load_config
from acp_proxy.config.reload import policy_digest
from acp_proxy.core.actions import Audit, AuditEvent
from acp_proxy.shell.relay import Relay
from acp_proxy.shell.reload import SETTLE_SECONDS, LivePolicy

RULE_A = """
[[permissions.rules]]
name = "a"
action = "deny"
tool_kind = "fetch"
"""
RULE_B = """
[[permissions.rules]]
name = "b"
action = "deny"
method = "fs/read_text_file"
path = "**/.ssh/**"
"""


class Live:
    """A stand-in relay recording every configuration applied to it."""

    def __init__(self) -> None:
        self.applied: list[Config] = []

    async def reconfigure(self, config: Config) -> None:
        self.applied.append(config)


class Records:
    def __init__(self) -> None:
        self.records: list[Audit] = []

    def write(self, record: Audit) -> None:
        self.records.append(record)


def live_policy(path: Path) -> tuple[LivePolicy, Live, Records]:
    audit = Records()
    live = LivePolicy(load_config(path), lambda: load_config(path), audit, path=str(path))
    relay = Live()
    live._relays.add(cast(Relay, relay))
    return live, relay, audit


def names(config: Config) -> list[str | None]:
    return [r.name for r in config.permissions.rules]


def _write(path: Path, text: str) -> None:
    """Writes at once (at this instant of the mock clock)."""
    path.write_text(text)


async def _write_later(path: Path, text: str, delay: float) -> None:
    await trio.sleep(delay)
    _write(path, text)


def run(test: Any) -> None:
    trio.run(test, clock=trio.testing.MockClock(autojump_threshold=0))


def test_truncate_then_write_never_becomes_live(tmp_path: Path) -> None:
    """The truncated file seen by the reload is not applied; the file once written is."""
    path = tmp_path / "policy.toml"
    path.write_text(RULE_A)

    async def main() -> None:
        live, relay, _ = live_policy(path)
        path.write_text("")  # an editor that truncates, then writes
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_write_later, path, RULE_A + RULE_B, SETTLE_SECONDS / 2)
            assert await live.reload("file change")
        assert [names(c) for c in relay.applied] == [["a", "b"]]
        assert live.digest == policy_digest(load_config(path))

    run(main)


def test_a_prefix_cut_at_a_rule_boundary_never_becomes_live(tmp_path: Path) -> None:
    """A file cut after its first rule (valid TOML) is not applied while it still changes."""
    path = tmp_path / "policy.toml"
    path.write_text(RULE_A + RULE_B)

    async def main() -> None:
        live, relay, _ = live_policy(path)
        path.write_text(RULE_B)  # the new file, written in two steps
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_write_later, path, RULE_B + RULE_A, SETTLE_SECONDS * 0.9)
            assert await live.reload("file change")
        assert [names(c) for c in relay.applied] == [["b", "a"]]

    run(main)


def test_an_empty_or_comment_only_file_is_never_a_policy(tmp_path: Path) -> None:
    """`# emptied` (or nothing) left in the file: refused, audited, the last good policy stays."""
    path = tmp_path / "policy.toml"
    path.write_text(RULE_A)

    async def main() -> None:
        live, relay, audit = live_policy(path)
        before = live.digest
        for text in ("", "# emptied\n", "\n\n"):
            path.write_text(text)
            assert not await live.reload("file change")
        assert relay.applied == []
        assert live.digest == before
        assert names(live.config) == ["a"]
        failed = [r for r in audit.records if r.event is AuditEvent.CONFIG_RELOAD_FAILED]
        assert len(failed) == 3
        assert all("empty" in str(r.fields["reason"]) for r in failed)

    run(main)


def test_a_file_that_never_settles_is_not_applied(tmp_path: Path) -> None:
    """A writer that never stops: the reload gives up, audited; nothing applied."""
    path = tmp_path / "policy.toml"
    path.write_text(RULE_A)

    async def churn() -> None:
        for i in range(1000):
            _write(path, RULE_A + f"# {i}\n")
            await trio.sleep(SETTLE_SECONDS / 3)

    async def main() -> None:
        live, relay, audit = live_policy(path)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(churn)
            assert not await live.reload("file change")
            nursery.cancel_scope.cancel()
        assert relay.applied == []
        assert "not settled" in str(audit.records[-1].fields["reason"])

    run(main)


def test_a_settled_file_reloads_after_one_quiet_period(tmp_path: Path) -> None:
    """An ordinary edit: applied after SETTLE_SECONDS, not before."""
    path = tmp_path / "policy.toml"
    path.write_text(RULE_A)

    async def main() -> None:
        live, relay, _ = live_policy(path)
        path.write_text(RULE_B)
        start = trio.current_time()
        assert await live.reload("SIGHUP")
        assert trio.current_time() - start == SETTLE_SECONDS
        assert [names(c) for c in relay.applied] == [["b"]]

    run(main)
