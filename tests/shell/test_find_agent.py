"""Which process below the sandbox engine a stop signal goes to (``first_started_match``).

A sandboxed agent is found by its command line. A fork of it that has not
called ``exec`` yet has the same command line; once its parent exits it is
re-parented to the pid namespace's init, the agent's parent. When it comes
first in ``/proc`` (a pid wrap gives it a lower pid), the SIGTERM went to it
and the agent ran on until SIGKILLed (seen: the proxy exited -9, not with the
agent's 3). The process that started first is the agent.
"""

from __future__ import annotations

from acp_proxy.shell.transport.process import first_started_match

AGENT = b"python\0-c\0agent\0"


def _stat(ppid: int, starttime: int) -> list[bytes]:
    """``stat`` fields after the command name: state, ppid, pgrp, ..., starttime (22)."""
    fields = [b"S", str(ppid).encode(), b"1"] + [b"0"] * 16 + [str(starttime).encode()]
    return fields + [b"0"] * 5


def _find(procs: dict[int, tuple[int, int, bytes]], root: int = 10) -> int | None:
    """``procs``: pid -> (ppid, starttime, cmdline), listed in pid order as ``/proc`` is."""
    stats = [(pid, _stat(ppid, start)) for pid, (ppid, start, _) in sorted(procs.items())]
    return first_started_match(root, stats, AGENT, lambda pid: procs[pid][2])


def test_the_agent_is_found_below_the_engine() -> None:
    procs = {10: (1, 100, b"srt\0"), 11: (10, 101, b"init\0"), 12: (11, 102, AGENT)}
    assert _find(procs) == 12


def test_an_unexeced_fork_listed_first_does_not_take_the_agent_s_signal() -> None:
    # pid 5: the agent's grandchild, re-parented to init (11) before its exec, after a
    # pid wrap; it started later than the agent (12)
    procs = {
        5: (11, 250, AGENT),
        10: (1, 100, b"srt\0"),
        11: (10, 101, b"init\0"),
        12: (11, 102, AGENT),
    }
    assert _find(procs) == 12


def test_a_fork_still_below_the_agent_is_not_taken_either() -> None:
    procs = {
        3: (12, 250, AGENT),  # the agent's child before its exec, a lower pid
        10: (1, 100, b"srt\0"),
        11: (10, 101, b"init\0"),
        12: (11, 102, AGENT),
    }
    assert _find(procs) == 12


def test_on_a_tie_the_shallower_process_is_taken() -> None:
    procs = {
        3: (12, 102, AGENT),  # forked in the agent's first clock tick
        10: (1, 100, b"srt\0"),
        11: (10, 101, b"init\0"),
        12: (11, 102, AGENT),
    }
    assert _find(procs) == 12


def test_a_process_outside_the_engine_or_gone_is_never_taken() -> None:
    procs = {
        4: (1, 50, AGENT),  # the same agent, not below the engine
        10: (1, 100, b"srt\0"),
        11: (10, 101, b"init\0"),
    }
    assert _find(procs) is None
    stats = [(10, _stat(1, 100)), (12, _stat(10, 102))]
    assert first_started_match(10, stats, AGENT, lambda pid: None) is None  # 12 exited
