"""The audit log's file: a hash chain per run, safe opening, lost records, fail closed.

README "Audit log". Every line is one JSON object; the writer adds two members
at its end, ``"seq"`` (0, 1, ... within a run) and then ``"chain"``:

- the record's **canonical bytes** are the line's UTF-8 bytes up to, not
  including, the final ``, "chain": "..."`` member, with a closing ``}``
  (exactly what the writer hashed; the verifier needs no JSON re-encoding);
- ``chain = SHA-256(previous chain || canonical bytes)`` as 64 lowercase hex
  digits, or ``HMAC-SHA256(key, previous chain || canonical bytes)`` with
  ``[audit] hmac_key_file``; the previous chain is its 32 raw bytes, 32 zero
  bytes for a run's first record.

A run's first record is ``run_started`` (``run``, ``hash``, ``prevSize``: the
file's size before it, ``prevChain``: the chain of the file's last line before
it, or ``null``); a run that ends normally writes ``run_closed`` (``records``).
A file that was removed or replaced under the proxy gets a new file (when not
``required``) starting with ``run_started`` carrying ``reopened: true`` and the
last ``afterSeq`` / ``afterChain`` written to the old one. A record written after
lost ones carries ``lost`` (how many). :mod:`acp_proxy.shell.audit_verify` checks
all of it.

Writes are ``os.write`` calls on an ``O_APPEND`` descriptor (one per line,
retried on a short write); before each, ``fstat`` and ``stat`` of the path
notice a file unlinked (no links) or replaced (another inode). A failure with
``required`` sets :attr:`ChainedFile.failure` (one sentence) and nothing more
is written; the relay then stops forwarding (:mod:`acp_proxy.shell.relay`).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import logging
import os
import re
import threading
from collections.abc import Callable

from acp_proxy import __version__
from acp_proxy.config.files import open_regular
from acp_proxy.errors import UsageError

__all__ = [
    "CHAIN_SUFFIX",
    "GENESIS",
    "ChainedFile",
    "link",
    "read_key",
    "seal",
]

log = logging.getLogger("acp_proxy.audit")

#: the previous chain value of a run's first record
GENESIS = bytes(32)
#: the end of every chained line: the chain member (group 1: its hex digits)
CHAIN_SUFFIX = re.compile(rb', "chain": "([0-9a-f]{64})"\}\n\Z')
#: bytes of the file's end read at start to find its last line's chain
TAIL_BYTES = 1 << 20


def link(prev: bytes, body: bytes, key: bytes | None) -> bytes:
    """The chain value of a record whose canonical bytes are ``body`` (32 bytes)."""
    if key is None:
        return hashlib.sha256(prev + body).digest()
    return hmac.new(key, prev + body, hashlib.sha256).digest()


def seal(text: str, seq: int, prev: bytes, key: bytes | None) -> tuple[bytes, bytes]:
    """One record's line and chain value.

    Args:
        text: the record as a JSON object (at least one member), without ``seq``.
        seq: its sequence number in the run.
        prev: the previous chain value (:data:`GENESIS` for a run's first record).
        key: the HMAC key, or ``None`` for SHA-256.

    Returns:
        ``(line with its newline, chain value)``.
    """
    body = f'{text[:-1]}, "seq": {seq}}}'.encode()
    value = link(prev, body, key)
    return body[:-1] + b', "chain": "' + value.hex().encode() + b'"}\n', value


def read_key(path: str) -> bytes:
    """The bytes of the key file (surrounding whitespace kept: the key is the file).

    Raises:
        OSError: it cannot be read.
        ValueError: it is empty.
    """
    with open(path, "rb") as f:
        key = f.read(1 << 16)
    if not key:
        raise ValueError(f"the key file {path!r} is empty")
    return key


def _last_chain(fd: int, size: int) -> tuple[str | None, bool]:
    """``(chain of the file's last line or None, whether the file ends with a newline)``."""
    if size == 0:
        return None, True
    start = max(0, size - TAIL_BYTES)
    tail = os.pread(fd, size - start, start)
    if not tail.endswith(b"\n"):
        return None, False
    cut = tail.rfind(b"\n", 0, len(tail) - 1)
    m = CHAIN_SUFFIX.search(tail[cut + 1 :])
    return (m.group(1).decode() if m else None), True


class ChainedFile:
    """The audit log file of one run: appends sealed lines, counts what is lost.

    Args:
        path: the file (created 0600 if missing; refused unless a regular file).
        run: the run's id (in ``run_started``).
        key: the HMAC key, or ``None``.
        required: fail closed on the first lost record.
        context: members of the ``run_started`` / ``run_closed`` records (``pid``, ``run``).

    Attributes:
        records_written: lines written (run records included).
        records_lost: records that could not be written.
        failure: with ``required``, the sentence saying why nothing more is forwarded.

    Raises:
        UsageError: ``path`` is not a regular file, or (``required``) the
            ``run_started`` record cannot be written.
        OSError: it cannot be opened or read.
    """

    def __init__(
        self,
        path: str,
        run: str,
        *,
        key: bytes | None = None,
        required: bool = False,
        context: dict[str, object] | None = None,
    ) -> None:
        self.path = path
        self.run = run
        self.key = key
        self.required = required
        self.context = dict(context or {})
        self.records_written = 0
        self.records_lost = 0
        self.bytes_written = 0
        self.failure: str | None = None
        self.on_failure: list[Callable[[str], None]] = []
        self._lock = threading.Lock()
        self._seq = 0
        self._prev = GENESIS
        self._lost_since = 0  # lost since the last line written (the next one says so)
        self._fragment = False  # a short write left part of a line
        self._told = False
        self._reopen_told = False
        self._closed = False
        self._fd = -1
        self._ident = (0, 0)
        #: why a file gone from the path is not started anew there (the sandbox: a new
        #: file would be within the agent's reach), else ``None``
        self.reopen_refused: str | None = None
        self._open({})
        if self.failure is not None:  # required, and not even run_started could be written
            self.close()
            raise UsageError(self.failure)

    # ------------------------------------------------------------- opening

    def _open(self, extra: dict[str, object]) -> None:
        fd = open_regular(self.path, "audit log", read=True)
        try:
            st = os.fstat(fd)
            prev_chain, whole = _last_chain(fd, st.st_size)
            size = st.st_size
            if not whole:  # a cut-off line: end it, so this run starts on a line of its own
                os.write(fd, b"\n")
                size += 1
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        self._ident = (st.st_dev, st.st_ino)
        self._seq = 0
        self._prev = GENESIS
        fields: dict[str, object] = {
            "event": "run_started",
            **self.context,
            "hash": "hmac-sha256" if self.key is not None else "sha256",
            "proxy": __version__,
            "prevSize": size,
            "prevChain": prev_chain,
            **extra,
        }
        self._append(_json(fields))

    def _reopen(self, why: str) -> bool:
        """A new file at the path after the old one went away; True when it is open."""
        after: dict[str, object] = {"afterSeq": self._seq - 1, "afterChain": self._prev.hex()}
        if self._lost_since:
            after["lost"] = self._lost_since
        with contextlib.suppress(OSError):
            os.close(self._fd)
        self._fd = -1
        try:
            self._open({"reopened": True, "gap": why, **after})
        except Exception as exc:
            if not self._reopen_told:  # tried again at every record; said once
                self._reopen_told = True
                log.error("the audit log %r cannot be opened again: %s", self.path, exc)
            return False
        return True

    # ------------------------------------------------------------- writing

    def write(self, text: str) -> bool:
        """Appends one record (a JSON object without ``seq``); never raises.

        Returns:
            True when written; False when lost (counted; with ``required``,
            :attr:`failure` is set).
        """
        with self._lock:
            if self.failure is not None or self._closed:
                self.records_lost += 1
                return False
            gone = self._gone()
            if gone is not None:
                if self.required:
                    return self._lose(f"it was {gone}")
                if self.reopen_refused is not None:
                    if not self._reopen_told:
                        self._reopen_told = True
                        log.error(
                            "the audit log %r was %s; not starting a new file there: %s; "
                            "records from now on are lost (counted)",
                            self.path,
                            gone,
                            self.reopen_refused,
                        )
                    return self._lose(f"it was {gone}")
                self._say(f"the audit log {self.path!r} was {gone}; starting a new file")
                if not self._reopen(f"the previous file was {gone}"):
                    return self._lose(f"it was {gone}")
            if self._lost_since:
                text = f'{text[:-1]}, "lost": {self._lost_since}}}'
            return self._append(text)

    def _append(self, text: str) -> bool:
        line, value = seal(text, self._seq, self._prev, self.key)
        if self._fragment:
            line = b"\n" + line
        view = memoryview(line)
        try:
            while view:
                n = os.write(self._fd, view)
                view = view[n:]
        except OSError as exc:
            self._fragment = self._fragment or len(view) < len(line)
            return self._lose(exc.strerror or str(exc))
        self._fragment = False
        self._seq += 1
        self._prev = value
        self._lost_since = 0
        self.records_written += 1
        self.bytes_written += len(line)
        return True

    def _gone(self) -> str | None:
        """``"removed"`` / ``"replaced"`` when the path no longer names the open file."""
        if self._fd < 0:
            return "removed"  # a reopening failed: try again
        try:
            if os.fstat(self._fd).st_nlink == 0:
                return "removed"
            st = os.stat(self.path, follow_symlinks=False)
        except FileNotFoundError:
            return "removed"
        except OSError:
            return None  # cannot tell: the write says
        return None if (st.st_dev, st.st_ino) == self._ident else "replaced"

    def _lose(self, why: str) -> bool:
        self.records_lost += 1
        self._lost_since += 1
        if self.required:
            self.failure = (
                f"the audit log {self.path!r} could not be written ({why}), and "
                "audit.required is true: nothing more was forwarded"
            )
            for callback in self.on_failure:
                with contextlib.suppress(Exception):
                    callback(self.failure)
        else:
            self._say(
                f"an audit record could not be written to {self.path!r} ({why}); "
                "the relay goes on, lost records are counted (audit.required = true stops it)"
            )
        return False

    def _say(self, text: str) -> None:
        if not self._told:
            self._told = True
            log.error("%s", text)

    def close(self) -> None:
        """Writes ``run_closed`` and closes the file; never raises."""
        with self._lock:
            if self._closed:
                return
            try:
                if self.failure is None and self._fd >= 0 and self._gone() is None:
                    fields = {"event": "run_closed", **self.context}
                    fields["records"] = self._seq + 1
                    if self._lost_since:
                        fields["lost"] = self._lost_since
                    self._append(_json(fields))
            except Exception:  # the exit must not fail on the log
                log.debug("audit log close", exc_info=True)
            self._closed = True
            if self._fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(self._fd)
                self._fd = -1


def _json(fields: dict[str, object]) -> str:
    from acp_proxy.shell.audit import _dumps, _now

    return _dumps({"ts": _now(), **fields})
