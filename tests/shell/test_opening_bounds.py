"""The stdio form's opening (acp_proxy.shell.opening) against peers that never pause, and
what it leaves of the descriptors it shares with the proxy's parent (issue 29).

Found by running the same traffic through a proxy with and without the opening:
a client whose input never paused kept the opening going until its end (the
relay's import never started, or starved once started; SIGTERM to the proxy, held
until the relay, took 1.3 s instead of milliseconds), and the proxy's stdin and
stdout were left non-blocking for the editor or shell that shares them.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from acp_proxy.config import Config
from acp_proxy.core.actions import Peer
from acp_proxy.core.engine import ProxyCore
from acp_proxy.shell.opening import (
    OPENING_BYTES,
    READ_BYTES,
    Opening,
    relay_opening,
    write_queued,
)

INIT = b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}'


def notification(i: int) -> bytes:
    return json.dumps(
        {"jsonrpc": "2.0", "method": "_test/n", "params": {"i": i, "pad": "p" * 200}},
        separators=(",", ":"),
    ).encode()


@pytest.fixture
def fds() -> Iterator[list[int]]:
    opened: list[int] = []
    yield opened
    for fd in opened:
        with contextlib.suppress(OSError):
            os.close(fd)


class Ticks:
    """A clock that moves one second at every reading (deterministic "time passes")."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def test_a_client_whose_input_never_pauses_is_handed_over_to_the_relay_early(
    tmp_path: Path, fds: list[int]
) -> None:
    """stdin a regular file of 8 MiB of frames: every poll finds it readable, so the loop
    never finds nothing to read (the import would never start) and, were the import
    running, would starve it. The opening must hand over after its first bytes, the
    rest unread for the relay (else the relay, and the signals held until it runs,
    wait for the whole input)."""
    stream = b"".join(notification(i) + b"\n" for i in range(36_000))
    assert len(stream) > 32 * READ_BYTES
    source = tmp_path / "stdin"
    source.write_bytes(INIT + b"\n" + stream)
    client_in = os.open(source, os.O_RDONLY)
    client_r, client_out = os.pipe()
    agent_out, agent_w = os.pipe()  # the agent writes nothing
    agent_in = os.open(os.devnull, os.O_WRONLY)  # an agent that reads everything at once
    fds.extend([client_in, client_r, client_out, agent_out, agent_w, agent_in])
    loaded: list[int] = []
    opening = Opening(ProxyCore(Config()), 1 << 20)
    pipes = {Peer.CLIENT: (client_in, client_out), Peer.AGENT: (agent_out, agent_in)}
    relay_opening(opening, pipes, lambda: loaded.append(1), Ticks())
    assert loaded == [1]
    assert opening.ended[Peer.CLIENT] is False
    read = opening.read[Peer.CLIENT]
    assert OPENING_BYTES <= read < OPENING_BYTES + READ_BYTES
    assert os.lseek(client_in, 0, os.SEEK_CUR) == read  # the rest is the relay's to read
    assert opening.core.statistics().forwarded > 1000  # what was read went on to the agent


def test_the_descriptors_are_left_blocking_as_they_were_found(fds: list[int]) -> None:
    """The opening makes its four descriptors non-blocking; fds 0 and 1 share their open
    file with the proxy's parent (an editor, a shell on a terminal), so each is given
    back in the mode it had (the relay's trio streams then restore that mode on close,
    as they do without an opening)."""
    client_in, client_w = os.pipe()
    client_r, client_out = os.pipe()
    agent_out, agent_w = os.pipe()
    agent_r, agent_in = os.pipe()
    fds.extend([client_in, client_w, client_r, client_out, agent_out, agent_w, agent_r, agent_in])
    os.set_blocking(agent_in, False)  # one found non-blocking stays so
    os.write(client_w, INIT + b"\n")
    os.close(client_w)  # the client's end: the loop stops at once
    opening = Opening(ProxyCore(Config()), 1 << 20)
    pipes = {Peer.CLIENT: (client_in, client_out), Peer.AGENT: (agent_out, agent_in)}
    relay_opening(opening, pipes, lambda: None)
    assert opening.ended[Peer.CLIENT] is True
    assert os.read(agent_r, 1 << 20) == INIT + b"\n"
    modes = [os.get_blocking(fd) for fd in (client_in, client_out, agent_out, agent_in)]
    assert modes == [True, True, True, False]


def test_a_long_queue_written_in_parts_leaves_the_exact_rest(fds: list[int]) -> None:
    """``write_queued`` takes the frames written whole off the queue at once: over many
    partial writes of a queue longer than one ``writev`` (256 frames), what was written
    plus what is left is always the whole queue, each frame followed by a newline."""
    r, w = os.pipe()
    fds.extend([r, w])
    fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, 4096)
    os.set_blocking(w, False)
    sizes = [0, 1, 7, 4095, 4096, 300, 5000, 2]
    frames = [bytes([97 + i % 26]) * sizes[i % len(sizes)] for i in range(700)]
    whole = b"".join(f + b"\n" for f in frames)
    queue = list(frames)
    got = b""
    while queue:
        assert write_queued(w, queue)
        got += os.read(r, 1 << 20)
        assert got + b"".join(f + b"\n" for f in queue) == whole
    assert got == whole
