"""Hot reload (issue 18): the policy of live connections changes; a bad file changes nothing."""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from support.corekit import announce, chunk

from acp_proxy.config import Config, HoldConfig
from acp_proxy.config.io import load_config
from acp_proxy.config.reload import policy_digest
from acp_proxy.core.actions import Audit
from acp_proxy.core.engine import ProxyCore
from acp_proxy.shell.relay import Relay
from acp_proxy.shell.reload import LivePolicy, watch_config
from shell.test_relay_inprocess import MemoryTransport, enc, open_session

CHILD = "S-child"
CANCEL_CHILD = {"jsonrpc": "2.0", "method": "tool_call/cancel", "params": {"sessionId": CHILD}}


class Records:
    """An audit sink keeping the records."""

    def __init__(self) -> None:
        self.records: list[Audit] = []

    def write(self, record: Audit) -> None:
        self.records.append(record)

    def events(self) -> list[str]:
        return [r.event for r in self.records]


async def _no_status() -> int | None:
    return 0


@asynccontextmanager
async def _live_relay(live: LivePolicy) -> AsyncIterator[tuple[MemoryTransport, MemoryTransport]]:
    """A relay over memory transports, started with ``live``'s policy and reloaded with it."""
    client, agent = MemoryTransport("client"), MemoryTransport("agent")
    relay = Relay(ProxyCore(live.config), client, agent, wait_agent=_no_status)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(relay.run)
        with trio.fail_after(60), live.serving(relay):
            yield client, agent
        nursery.cancel_scope.cancel()


async def _reloaded(live: LivePolicy) -> None:
    """Returns once ``live`` has reloaded (polls: the watcher runs in a thread)."""
    for _ in range(1000):
        if live.reloads:
            return
        await trio.sleep(0.02)
    raise AssertionError("no reload")


def _policy(path: Path, text: str) -> LivePolicy:
    path.write_text(text)
    return LivePolicy(load_config(path), lambda: load_config(path), Records())


async def _child_announced(client: MemoryTransport, agent: MemoryTransport) -> None:
    await client.peer_sends(
        enc({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": 1, "clientCapabilities": {"subagents": {}}}}),
    )  # fmt: skip
    assert (await agent.next_json())["method"] == "initialize"
    await agent.peer_sends(enc({"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1}}))
    await client.next_json()
    await open_session(client, agent, "S")
    await agent.peer_sends(announce("S", CHILD, capabilities={"cancel": {}}, state="running"))
    assert (await client.next_json())["params"]["update"]["sessionId"] == CHILD


async def test_a_reload_narrowing_a_grant_refuses_the_next_mutation_on_a_live_connection(
    autojump_clock: Any, tmp_path: Path
) -> None:
    """tool_call/cancel on a child passes under the old table and is refused after the reload."""
    path = tmp_path / "acp.toml"
    live = _policy(path, "[enforcement]\nreject_code = -32001\n")
    async with _live_relay(live) as (client, agent):
        await _child_announced(client, agent)
        await client.peer_sends(enc({**CANCEL_CHILD, "id": 1}))
        assert (await agent.next_json())["id"] == 1  # granted by the child's "cancel"
        await agent.peer_sends(enc({"jsonrpc": "2.0", "id": 1, "result": {}}))
        assert (await client.next_json())["id"] == 1
        before = live.digest
        path.write_text('[enforcement]\nreject_code = -32001\n[enforcement.child_mutations]\n'
                        '"tool_call/cancel" = ""\n')  # fmt: skip
        assert await live.reload("SIGHUP")
        await client.peer_sends(enc({**CANCEL_CHILD, "id": 2}))
        refused = await client.next_json()
        assert refused["id"] == 2
        assert refused["error"]["code"] == -32001
        assert agent.out_rx.statistics().current_buffer_used == 0  # never reached the agent
        assert live.digest != before
    audit = live._audit
    assert isinstance(audit, Records)
    [reloaded] = [r for r in audit.records if r.event == "config_reloaded"]
    assert reloaded.fields["policy"] == live.digest
    assert reloaded.fields["connections"] == 1


async def test_an_invalid_file_keeps_the_old_policy(
    autojump_clock: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A file that fails validation changes nothing: the grant still passes; failure audited."""
    path = tmp_path / "acp.toml"
    live = _policy(path, "")
    before = live.digest
    async with _live_relay(live) as (client, agent):
        await _child_announced(client, agent)
        # would remove the grant, but the file is invalid as a whole
        path.write_text('[enforcement.child_mutations]\n"tool_call/cancel" = ""\n'
                        "[hold]\ntimeout_seconds = -1\n")  # fmt: skip
        with caplog.at_level(logging.ERROR, logger="acp_proxy"):
            assert not await live.reload("SIGHUP")
        await client.peer_sends(enc({**CANCEL_CHILD, "id": 1}))
        assert (await agent.next_json())["id"] == 1  # still granted
    assert live.digest == before
    assert live.config.hold.timeout_seconds == 10.0
    assert "hold.timeout_seconds" in caplog.text
    audit = live._audit
    assert isinstance(audit, Records)
    [failed] = audit.records
    assert failed.event == "config_reload_failed"
    assert "hold.timeout_seconds" in failed.fields["reason"]


async def test_a_reload_shortening_the_hold_timeout_applies_to_traffic_held_now(
    autojump_clock: Any, tmp_path: Path
) -> None:
    """Held at t=0 under a 30 s timeout; a reload to 5 s at t=1 releases it at t=5."""
    path = tmp_path / "acp.toml"
    live = _policy(path, "[hold]\ntimeout_seconds = 30\n")
    async with _live_relay(live) as (client, agent):
        await open_session(client, agent, "S")
        start = trio.current_time()
        await agent.peer_sends(chunk("ghost", "held"))
        await trio.sleep(1)
        path.write_text("[hold]\ntimeout_seconds = 5\n")
        assert await live.reload("SIGHUP")
        released = await client.next_json()
        assert released["params"]["sessionId"] == "ghost"
        assert trio.current_time() - start == 5.0


async def test_keys_that_need_a_restart_are_named_once_and_not_applied(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """limits and listen keys changed in the file: one restart_required line; policy applied."""
    path = tmp_path / "acp.toml"
    live = _policy(path, "")
    path.write_text("[limits]\nmax_children = 5\n[listen]\nmax_connections = 2\n"
                    "[dedup]\nstate_reports = false\n")  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="acp_proxy"):
        assert await live.reload("SIGHUP")
    lines = [r.getMessage() for r in caplog.records if "restart_required" in r.getMessage()]
    assert lines == [
        "restart_required: limits.max_children, listen.max_connections changed in the "
        "config file; not applied until a restart"
    ]
    assert live.config.limits.max_children == Config().limits.max_children
    assert live.config.listen.max_connections == Config().listen.max_connections
    assert live.config.dedup.state_reports is False


async def test_a_configmap_symlink_swap_is_picked_up(tmp_path: Path) -> None:
    """Kubernetes' update of a mounted ConfigMap (..data re-pointed) reloads the policy."""
    mount = tmp_path / "config"
    mount.mkdir()
    (mount / "..v1").mkdir()
    (mount / "..v1" / "acp.toml").write_text("[hold]\ntimeout_seconds = 10\n")
    os.symlink("..v1", mount / "..data")
    os.symlink("..data/acp.toml", mount / "acp.toml")
    path = mount / "acp.toml"
    audit = Records()
    live = LivePolicy(load_config(path), lambda: load_config(path), audit)
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            await nursery.start(watch_config, str(path), live)
            (mount / "..v2").mkdir()
            (mount / "..v2" / "acp.toml").write_text("[hold]\ntimeout_seconds = 3\n")
            os.symlink("..v2", mount / "..tmp")
            os.rename(mount / "..tmp", mount / "..data")  # the atomic swap
            await _reloaded(live)
            nursery.cancel_scope.cancel()
    assert live.config.hold.timeout_seconds == 3.0
    assert audit.events() == ["config_reloaded"]
    assert audit.records[0].fields["trigger"] == "file change"
    assert audit.records[0].fields["policy"] == policy_digest(
        Config(hold=HoldConfig(timeout_seconds=3.0))
    )


async def test_the_watcher_ignores_other_files_and_unchanged_content(tmp_path: Path) -> None:
    """A file beside it, or a rewrite with the same bytes, reloads nothing; an edit does."""
    path = tmp_path / "acp.toml"
    path.write_text("")
    live = LivePolicy(load_config(path), lambda: load_config(path), Records())
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            await nursery.start(watch_config, str(path), live)
            (tmp_path / "other.txt").write_text("x")
            path.write_text("")
            await trio.sleep(1.0)
            assert live.reloads == 0
            path.write_text("[dedup]\nstate_reports = false\n")
            await _reloaded(live)
            nursery.cancel_scope.cancel()
    assert live.config.dedup.state_reports is False


async def test_a_reload_is_one_notice_line_at_the_default_level(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The user edited the file and waits to see it taken: the reload is a notice (the
    default level), not an info line hidden by default."""
    from acp_proxy.shell.log_levels import NOTICE

    path = tmp_path / "acp.toml"
    live = _policy(path, "")
    path.write_text("[dedup]\nstate_reports = false\n")
    with caplog.at_level(NOTICE, logger="acp_proxy"):
        assert await live.reload("file change")
    assert [r.getMessage() for r in caplog.records] == [
        f"file change: config reloaded (policy {live.digest}), applied to 0 live connection(s)"
    ]
