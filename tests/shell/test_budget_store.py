"""Budgets shared through Redis (issue 28), against a real redis-server the test starts
on a free loopback port: two proxy processes share one budget; a store stopped mid-run
fails closed (open when configured); counters expire with their window."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import trio

from acp_proxy.core.actions import StoreCall
from acp_proxy.core.engine.budgets import BUDGET_EXCEEDED_CODE
from acp_proxy.shell.budget_store import RedisBudgetStore
from tests.support.e2ekit import (
    agent_next_is_ping,
    bridged_proxy,
    client_to_agent,
    handshake_v1,
    req,
    write_config,
)

TIMEOUT = 30


class RedisServer:
    """A redis-server on 127.0.0.1:port, without persistence."""

    def __init__(self) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        assert self.process.stdout is not None
        for raw in self.process.stdout:  # ends when the server exits
            if b"Ready to accept connections" in raw:
                break
        else:
            raise AssertionError("redis-server did not start")
        self.client = redis.Redis(host="127.0.0.1", port=self.port)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)
        if self.process.stdout is not None:
            self.process.stdout.close()
        self.client.close()


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer()
    try:
        yield server
    finally:
        server.stop()


def config(tmp_path: Path, name: str, url: str, **extra: Any) -> Path:
    lines = [
        "[budgets]",
        "prompts_per_window = 2",
        "window_s = 60.0",
        f'store = "{url}"',
        'key = "team"',
        'key_prefix = "test:"',
    ]
    lines += [f"{k} = {v!r}".replace("'", '"') for k, v in extra.items()]
    return write_config(tmp_path / name, "\n".join(lines) + "\n")


def prompt(rid: int) -> bytes:
    return req(rid, "session/prompt", {"sessionId": "S1", "prompt": []})


async def refused(proxy: Any, rid: int) -> dict[str, Any]:
    answer = await proxy.out.recv_json()
    assert answer["id"] == rid
    assert answer["error"]["code"] == BUDGET_EXCEEDED_CODE
    return dict(answer["error"])


async def test_two_proxies_share_one_budget(tmp_path: Path, redis_server: RedisServer) -> None:
    """Two proxy processes with the same store and key: two prompts in all pass, the
    third (on either) is refused naming the budget, and never reaches its agent."""
    cfg = str(config(tmp_path, "b.toml", redis_server.url))
    with trio.fail_after(TIMEOUT):
        async with (
            bridged_proxy(["--config", cfg]) as (proxy_a, agent_a),
            bridged_proxy(["--config", cfg]) as (proxy_b, agent_b),
        ):
            await handshake_v1(proxy_a, agent_a)
            await handshake_v1(proxy_b, agent_b)
            await client_to_agent(proxy_a, agent_a, prompt(2))
            await client_to_agent(proxy_b, agent_b, prompt(2))
            await proxy_a.send(prompt(3))
            error = await refused(proxy_a, 3)
            assert "prompts_per_window" in error["message"]
            assert "'team'" in error["message"]
            await agent_next_is_ping(proxy_a, agent_a)
            await proxy_b.send(prompt(3))
            await refused(proxy_b, 3)
    counted = redis_server.client.get("test:team:prompts")
    assert counted == b"2"  # refused prompts were taken back
    ttl = redis_server.client.pttl("test:team:prompts")
    assert 0 < ttl <= 60_000


async def test_store_stopped_mid_run_fails_closed(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    """While the store cannot be reached a prompt is refused with an error naming it."""
    cfg = str(config(tmp_path, "c.toml", redis_server.url, store_timeout_s=1.0))
    with trio.fail_after(TIMEOUT):
        async with bridged_proxy(["--config", cfg]) as (proxy, agent):
            await handshake_v1(proxy, agent)
            await client_to_agent(proxy, agent, prompt(2))
            redis_server.stop()
            await proxy.send(prompt(3))
            error = await refused(proxy, 3)
            assert redis_server.url in error["message"]
            assert error["data"] == {"budget": "store", "store": redis_server.url}
            await agent_next_is_ping(proxy, agent)
            await proxy.wait_for_stderr("budget store")


async def test_store_stopped_mid_run_fails_open_when_configured(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    """store_fail = "open": prompts go on, counted in the proxy (the limit still holds),
    and the outage is logged once."""
    cfg = str(config(tmp_path, "o.toml", redis_server.url, store_fail="open"))
    with trio.fail_after(TIMEOUT):
        async with bridged_proxy(["--config", cfg]) as (proxy, agent):
            await handshake_v1(proxy, agent)
            redis_server.stop()
            await client_to_agent(proxy, agent, prompt(2))
            await client_to_agent(proxy, agent, prompt(3))
            await proxy.send(prompt(4))
            await refused(proxy, 4)
            text = await proxy.wait_for_stderr("store_fail = open")
            assert text.count("unreachable") == 1


def test_no_counter_outlives_its_window(redis_server: RedisServer) -> None:
    """Every key the store writes has an expiry of at most its window (checked with
    PTTL, no sleeping), and a window that ended (the key expired) counts afresh."""
    store = RedisBudgetStore(redis_server.url, "w:", 2.0)
    try:
        reserve = StoreCall(1, "reserve", "k", prompt_limit=1, token_limit=10, window_s=30)
        assert store.call_blocking(reserve).allowed
        over = store.call_blocking(reserve)
        assert (over.allowed, over.budget, over.prompts) == (False, "prompts_per_window", 2)
        assert 0 < over.reset_in_s <= 30
        add = StoreCall(2, "add", "k", amount=11, window_s=30)
        assert store.call_blocking(add).tokens == 11
        for key in (b"w:k:prompts", b"w:k:tokens"):
            assert 0 < redis_server.client.pttl(key) <= 30_000
        assert sorted(redis_server.client.keys("*")) == [b"w:k:prompts", b"w:k:tokens"]
        # tokens over the limit refuse before counting a prompt
        redis_server.client.delete("w:k:prompts")
        tokens = store.call_blocking(reserve)
        assert (tokens.allowed, tokens.budget) == (False, "max_tokens")
        assert redis_server.client.get("w:k:prompts") is None
        # the window's end: the keys expire (forced here), the next prompt counts from 1
        redis_server.client.delete("w:k:tokens")
        assert store.call_blocking(reserve).prompts == 1
        # observe: a prompt beyond the limit is counted, as it is forwarded
        watch = StoreCall(3, "reserve", "k", prompt_limit=1, window_s=30, commit_over=True)
        assert store.call_blocking(watch).prompts == 2
        assert redis_server.client.get("w:k:prompts") == b"2"
    finally:
        store.close()
