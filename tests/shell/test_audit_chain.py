"""The audit log's hash chain (shell/audit_chain.py) and `audit verify` (audit_verify.py)."""

from __future__ import annotations

import errno
import io
import json
import logging
import os
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from acp_proxy.core.actions import Audit, AuditEvent
from acp_proxy.errors import UsageError
from acp_proxy.shell import audit_chain
from acp_proxy.shell.audit import AuditLog
from acp_proxy.shell.audit_chain import GENESIS, ChainedFile, link
from acp_proxy.shell.audit_stop import stop_on_audit_failure
from acp_proxy.shell.audit_verify import Problem, Summary, run_audit, verify_stream

KEY = b"a key the agent cannot read\n"


def write_run(path: Path, n: int = 3, *, key: bytes | None = None, run: str = "r1") -> AuditLog:
    """A closed run of ``n`` records (plus run_started and run_closed) appended to ``path``."""
    log = AuditLog.open(str(path), {"pid": 1, "run": run}, key=key)
    for i in range(n):
        log.write(Audit(AuditEvent.MUTATION_REJECTED, "client->agent", {"id": i, "method": "m"}))
    log.close()
    return log


def verify(path: Path, key: bytes | None = None, rotated: bool = False) -> Summary | Problem:
    with open(path, "rb") as f:
        return verify_stream(f, key, rotated=rotated)


def lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def test_each_record_carries_seq_and_a_chain_over_the_previous_value(tmp_path: Path) -> None:
    """seq counts 0.. in a run; chain = SHA-256(previous chain || the line up to its chain
    member, closed by "}"), from 32 zero bytes (README "Audit log")."""
    path = tmp_path / "a.jsonl"
    write_run(path, 2)
    prev = GENESIS
    records = lines(path)
    for i, raw in enumerate(records):
        obj = json.loads(raw)
        assert obj["seq"] == i
        body = raw[: raw.rindex(b', "chain": ')] + b"}"
        assert json.loads(body) == {k: v for k, v in obj.items() if k != "chain"}
        prev = link(prev, body, None)
        assert obj["chain"] == prev.hex()
    first, last = json.loads(records[0]), json.loads(records[-1])
    assert first["event"] == "run_started"
    assert (first["run"], first["hash"], first["prevSize"], first["prevChain"]) == (
        "r1",
        "sha256",
        0,
        None,
    )
    assert (last["event"], last["records"]) == ("run_closed", 4)


def test_an_intact_log_of_two_runs_verifies(tmp_path: Path) -> None:
    """A second run names the file's size and last chain before it; verify says 2 runs."""
    path = tmp_path / "a.jsonl"
    write_run(path, 2, run="r1")
    size, last = path.stat().st_size, json.loads(lines(path)[-1])["chain"]
    write_run(path, 1, run="r2")
    second = json.loads(lines(path)[4])
    assert (second["prevSize"], second["prevChain"]) == (size, last)
    assert verify(path) == Summary(2, 7)


def _rewrite(path: Path, new: list[bytes]) -> None:
    path.write_bytes(b"".join(new))


def test_an_edited_record_is_reported_as_changed(tmp_path: Path) -> None:
    """One changed value: line 3 is 'changed'."""
    path = tmp_path / "a.jsonl"
    write_run(path)
    ls = lines(path)
    ls[2] = ls[2].replace(b'"id": 1', b'"id": 7')
    _rewrite(path, ls)
    result = verify(path)
    assert isinstance(result, Problem)
    assert (result.line, "changed" in result.what) == (3, True)


def test_an_edit_with_the_plain_chain_recomputed_is_caught_by_the_keyed_chain(
    tmp_path: Path,
) -> None:
    """An attacker without the key who edits a record and recomputes a SHA-256 chain
    passes a plain check but not --key-file."""
    path = tmp_path / "a.jsonl"
    write_run(path, key=KEY)
    forged, prev = [], GENESIS
    for raw in lines(path):
        body = raw[: raw.rindex(b', "chain": ')] + b"}"
        body = body.replace(b'"hmac-sha256"', b'"sha256"').replace(b'"id": 1', b'"id": 9')
        prev = link(prev, body, None)
        forged.append(body[:-1] + b', "chain": "' + prev.hex().encode() + b'"}\n')
    _rewrite(path, forged)
    assert isinstance(verify(path), Summary)  # what a plain chain can say
    result = verify(path, KEY)
    assert isinstance(result, Problem)
    assert result.line == 1


def _deleted(ls: list[bytes]) -> None:
    del ls[2]


def _swapped(ls: list[bytes]) -> None:
    ls[1], ls[2] = ls[2], ls[1]


def _repeated(ls: list[bytes]) -> None:
    ls.insert(3, ls[1])


@pytest.mark.parametrize(
    ("mutate", "line", "what"),
    [(_deleted, 3, "missing"), (_swapped, 2, "out of order"), (_repeated, 4, "out of order")],
    ids=["line 3 deleted", "lines 2 and 3 swapped", "line 2 repeated after line 3"],
)
def test_a_deleted_swapped_or_moved_record_is_reported_at_its_line(
    tmp_path: Path, mutate: Any, line: int, what: str
) -> None:
    """A deleted record is missing (the next line's seq is one too far); a swapped or
    repeated one is out of order; each at the first line that no longer follows."""
    path = tmp_path / "a.jsonl"
    write_run(path)
    ls = lines(path)
    mutate(ls)
    _rewrite(path, ls)
    result = verify(path)
    assert isinstance(result, Problem)
    assert result.line == line
    assert what in result.what


@pytest.mark.parametrize("cut", [1, 2], ids=["closing record removed", "two records removed"])
def test_a_cut_off_tail_is_a_run_not_closed(tmp_path: Path, cut: int) -> None:
    """The last records removed: the run was not closed, at the last line."""
    path = tmp_path / "a.jsonl"
    write_run(path)
    ls = lines(path)[:-cut]
    _rewrite(path, ls)
    result = verify(path)
    assert isinstance(result, Problem)
    assert result.line == len(ls)
    assert "not closed" in result.what


def test_a_line_cut_mid_way_is_incomplete(tmp_path: Path) -> None:
    """The file ends inside a line: incomplete."""
    path = tmp_path / "a.jsonl"
    write_run(path)
    path.write_bytes(path.read_bytes()[:-20])
    result = verify(path)
    assert isinstance(result, Problem)
    assert "incomplete" in result.what


def test_a_run_removed_from_the_middle_is_missing(tmp_path: Path) -> None:
    """Three runs, the second removed whole: the third does not follow from what is left."""
    path = tmp_path / "a.jsonl"
    for run in ("r1", "r2", "r3"):
        write_run(path, 1, run=run)
    ls = lines(path)
    _rewrite(path, ls[:3] + ls[6:])
    result = verify(path)
    assert isinstance(result, Problem)
    assert (result.line, "missing" in result.what) == (4, True)


def test_a_run_that_was_never_closed_is_reported_at_the_next_run(tmp_path: Path) -> None:
    """A run killed before run_closed, then a new run: the new run's line says so."""
    path = tmp_path / "a.jsonl"
    killed = ChainedFile(str(path), "r1", context={"run": "r1"})
    killed.write('{"event": "held", "run": "r1"}')
    write_run(path, 1, run="r2")
    result = verify(path)
    assert isinstance(result, Problem)
    assert result.line == 3
    assert "'r1'" in result.what
    assert "not closed" in result.what


def test_a_wrong_key_and_a_missing_key_are_reported(tmp_path: Path) -> None:
    """A keyed log: the right key verifies, a wrong one or none does not."""
    path = tmp_path / "a.jsonl"
    write_run(path, key=KEY)
    assert verify(path, KEY) == Summary(1, 5)
    for key in (b"another key", None):
        result = verify(path, key)
        assert isinstance(result, Problem)
        assert result.line == 1
    plain = tmp_path / "plain.jsonl"
    write_run(plain)
    result = verify(plain, KEY)
    assert isinstance(result, Problem)
    assert result.line == 1


def test_a_file_starting_mid_run_is_reported_and_accepted_with_rotated(tmp_path: Path) -> None:
    """The head cut off (rotation): reported at line 1; --rotated checks the rest."""
    path = tmp_path / "a.jsonl"
    write_run(path, 4)
    _rewrite(path, lines(path)[2:])
    result = verify(path)
    assert isinstance(result, Problem)
    assert result.line == 1
    rotated = verify(path, rotated=True)
    assert isinstance(rotated, Summary)
    assert rotated.records == 4
    assert "rotated" in rotated.notes[0]


def test_verify_never_trusts_an_unchecked_seq(tmp_path: Path) -> None:
    """A line whose seq was edited to look right still fails: the bytes decide."""
    path = tmp_path / "a.jsonl"
    write_run(path)
    ls = lines(path)
    ls[3] = ls[3].replace(b'"seq": 3', b'"seq": 3 ')
    _rewrite(path, ls)
    result = verify(path)
    assert isinstance(result, Problem)
    assert result.line == 4


@given(data=st.data())
def test_any_single_byte_change_to_a_record_is_caught(data: st.DataObject) -> None:
    """Property: change any one byte of a chained log to any other value: verify fails."""
    buf = io.BytesIO()
    log_bytes = _log_bytes()
    i = data.draw(st.integers(0, len(log_bytes) - 1), label="offset")
    b = data.draw(st.integers(0, 255).filter(lambda v: v != log_bytes[i]), label="byte")
    changed = log_bytes[:i] + bytes([b]) + log_bytes[i + 1 :]
    buf.write(changed)
    buf.seek(0)
    assert isinstance(verify_stream(buf), Problem)


_CACHE: list[bytes] = []


def _log_bytes() -> bytes:
    """A small two-run log (made once)."""
    if not _CACHE:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "a.jsonl"
            write_run(path, 2, run="r1")
            write_run(path, 1, run="r2")
            _CACHE.append(path.read_bytes())
    return _CACHE[0]


def test_a_removed_log_is_noticed_and_a_new_file_notes_the_gap(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Not required: the log unlinked mid-run is said once, a new file starts with a
    run_started that names the gap and the last seq, and it verifies."""
    path = tmp_path / "a.jsonl"
    log = AuditLog.open(str(path), {"run": "r1"})
    log.write(Audit(AuditEvent.HELD, "agent->client", {"sessionId": "x"}))
    os.unlink(path)
    with caplog.at_level(logging.ERROR, "acp_proxy"):
        log.write(Audit(AuditEvent.RELEASED, "agent->client", {"sessionId": "x"}))
        log.write(Audit(AuditEvent.RELEASED, "agent->client", {"sessionId": "y"}))
    assert len([r for r in caplog.records if "removed" in r.getMessage()]) == 1
    log.close()
    first = json.loads(lines(path)[0])
    assert (first["event"], first["reopened"], first["afterSeq"]) == ("run_started", True, 1)
    assert "removed" in first["gap"]
    result = verify(path)
    assert isinstance(result, Summary)
    assert "continues in a new file" in result.notes[0]
    assert log.records_lost == 0


def test_a_replaced_log_fails_closed_when_required(tmp_path: Path) -> None:
    """Required: the file replaced under the writer: the record is lost, failure set, and
    nothing is written to the new file."""
    path = tmp_path / "a.jsonl"
    log = AuditLog.open(str(path), {"run": "r1"}, required=True)
    os.rename(path, tmp_path / "old.jsonl")
    path.write_text("")
    log.write(Audit(AuditEvent.HELD, "agent->client", {"sessionId": "x"}))
    assert log.failure is not None
    assert "could not be written" in log.failure
    assert "replaced" in log.failure
    assert log.records_lost == 1
    log.close()
    assert path.read_text() == ""


def test_lost_records_are_counted_and_noted_by_the_next_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not required: a failed write (ENOSPC) is counted; the next record says "lost": 1."""
    path = tmp_path / "a.jsonl"
    chained = ChainedFile(str(path), "r1", context={"run": "r1"})

    def full(fd: int, data: bytes) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(audit_chain.os, "write", full)
    assert chained.write('{"event": "held"}') is False
    monkeypatch.undo()
    assert chained.write('{"event": "released"}') is True
    chained.close()
    assert chained.records_lost == 1
    assert json.loads(lines(path)[1])["lost"] == 1
    result = verify(path)
    assert isinstance(result, Summary)
    assert "1 records lost" in result.notes[0]


def test_closing_never_raises(tmp_path: Path) -> None:
    """A descriptor that went bad: close() writes what it can and returns."""
    path = tmp_path / "a.jsonl"
    log = AuditLog.open(str(path), {"run": "r1"})
    chained = log.chained
    assert chained is not None
    os.close(chained._fd)
    log.close()
    log.close()


@pytest.mark.parametrize("kind", ["symlink", "fifo", "directory", "device"])
def test_the_writer_opens_only_a_regular_file(tmp_path: Path, kind: str) -> None:
    """A symbolic link, FIFO, directory or device: one sentence, nothing written, no block."""
    path = tmp_path / "a.jsonl"
    target = tmp_path / "bashrc"
    target.write_text("echo hi\n")
    if kind == "symlink":
        path.symlink_to(target)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    else:
        path = Path("/dev/full")
    with pytest.raises(UsageError, match="not a regular file"):
        AuditLog.open(str(path), {"run": "r1"})
    assert target.read_text() == "echo hi\n"


def test_audit_verify_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Exit 0 and one summary line; 1 and 'line N: ...'; 2 for a key file that is missing."""
    path = tmp_path / "a.jsonl"
    write_run(path, key=KEY)
    key = tmp_path / "key"
    key.write_bytes(KEY)
    assert run_audit(["verify", str(path), "--key-file", str(key)]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    assert "intact: 1 run, 5 records (HMAC-SHA256)" in out
    assert run_audit(["verify", str(path)]) == 1
    assert ": line 1: " in capsys.readouterr().out
    with pytest.raises(UsageError, match="key-file"):
        run_audit(["verify", str(path), "--key-file", str(tmp_path / "nope")])
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")  # truncated to nothing: no evidence, so not "intact"
    assert run_audit(["verify", str(empty)]) == 1
    assert (
        capsys.readouterr().out
        == f"{empty}: empty: no record to check (cut to nothing, or never written)\n"
    )


def test_a_log_replaced_by_a_symlink_is_never_followed_and_loses_records(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Not required: the log replaced by a symbolic link: the link is not followed, the
    records are counted lost (said once), and once a regular file is back it is used."""
    path = tmp_path / "a.jsonl"
    target = tmp_path / "bashrc"
    target.write_text("# rc\n")
    log = AuditLog.open(str(path), {"run": "r1"})
    os.unlink(path)
    path.symlink_to(target)
    with caplog.at_level(logging.ERROR, "acp_proxy"):
        for _ in range(3):
            log.write(Audit(AuditEvent.HELD, "agent->client", {"sessionId": "x"}))
    assert target.read_text() == "# rc\n"
    assert log.records_lost == 3
    assert len([r for r in caplog.records if "cannot be opened again" in r.getMessage()]) == 1
    path.unlink()
    log.write(Audit(AuditEvent.RELEASED, "agent->client", {"sessionId": "x"}))
    log.close()
    reopened = [json.loads(x) for x in lines(path)]
    assert (reopened[0]["reopened"], reopened[0]["lost"]) == (True, 3)
    result = verify(path)
    assert isinstance(result, Summary)
    assert "3 records lost" in result.notes[-1]


async def test_a_mode_that_keeps_running_is_stopped_after_a_required_record_is_lost(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """audit.required: a mode that would run forever (a --listen server) is cancelled
    grace_seconds after the failure, and the status is 1; before it, it runs on."""
    path = tmp_path / "a.jsonl"
    log = AuditLog.open(str(path), {"run": "r1"}, required=True)
    chained = log.chained
    assert chained is not None

    async def serve_forever() -> int:
        await trio.sleep_forever()
        return 0

    async def lose_a_record() -> None:
        await trio.sleep(100)
        os.unlink(path)
        log.write(Audit(AuditEvent.HELD, "agent->client", {"sessionId": "x"}))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(lose_a_record)
        start = trio.current_time()
        status = await stop_on_audit_failure(chained, 5.0, (serve_forever,))
    assert status == 1
    assert trio.current_time() - start == pytest.approx(105.0)
    assert log.failure is not None
