"""The agent's stderr is copied to the proxy's in whole lines, so a proxy log line
written to the same fd 2 never lands inside one of the agent's lines."""

from __future__ import annotations

import os
from typing import Any

import pytest
import trio
import trio.testing

from acp_proxy.shell.transport.process import PARTIAL_LINE_SECONDS, _StderrRelay


async def _started(nursery: trio.Nursery) -> tuple[_StderrRelay, int]:
    r, w = os.pipe()
    relay = _StderrRelay(trio.lowlevel.FdStream(r))
    nursery.start_soon(relay.run)
    return relay, w


async def _err_until(capfd: pytest.CaptureFixture[str], want: str) -> str:
    seen = ""
    for _ in range(2000):  # the copy runs in a worker thread
        seen += capfd.readouterr().err
        if seen == want:
            break
        await trio.sleep(0.001)
    return seen


async def test_a_proxy_line_between_two_reads_of_an_agent_line_stays_outside_it(
    capfd: pytest.CaptureFixture[str],
) -> None:
    async with trio.open_nursery() as nursery:
        relay, w = await _started(nursery)
        os.write(w, b"agent: the first half, ")
        while not relay.tail:  # the relay has read it
            await trio.testing.wait_all_tasks_blocked(cushion=0.01)
        # and is idle again (a copy it made runs in a worker thread: give it time)
        await trio.testing.wait_all_tasks_blocked(cushion=0.05)
        os.write(2, b"acp-proxy: NOTICE: a proxy line\n")
        os.write(w, b"the second half\nagent: another\n")
        os.close(w)
        await relay.done.wait()
    assert capfd.readouterr().err == (
        "acp-proxy: NOTICE: a proxy line\nagent: the first half, the second half\nagent: another\n"
    )
    assert bytes(relay.tail).endswith(b"agent: another\n")


async def test_a_begun_line_is_copied_when_its_newline_is_late(
    autojump_clock: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    async with trio.open_nursery() as nursery:
        relay, w = await _started(nursery)
        os.write(w, b"password: ")
        await trio.testing.wait_all_tasks_blocked()
        assert capfd.readouterr().err == ""  # held for its newline
        await trio.sleep(PARTIAL_LINE_SECONDS)
        assert await _err_until(capfd, "password: ") == "password: "
        os.write(w, b"tail without newline")
        os.close(w)
        await relay.done.wait()
    assert capfd.readouterr().err == "tail without newline"  # the end of the stream
