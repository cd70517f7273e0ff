"""Hot reload of the policy (docs/design.md section 3, "Config"): SIGHUP and ``--watch-config``.

:class:`LivePolicy` holds the policy in force for a process and the relays
of its live connections. :meth:`LivePolicy.reload` loads the file again (the
same command-line overrides applied); a file that fails validation changes
nothing (logged, audited ``config_reload_failed``); otherwise the policy
sections (:data:`~acp_proxy.config.reload.POLICY_SECTIONS`) are applied to
every live connection (:meth:`Relay.reconfigure`) and to every connection
opened after, keys that cannot change at run time are named in one
``restart_required`` log line, and the reload is audited ``config_reloaded``
with the digest of the effective policy.

:func:`watch_config` reloads when the file's content changes. It watches
the file's *directory* (``watchfiles``), so that the symlink swap by which
Kubernetes updates a mounted ConfigMap (``..data`` pointing to a new
directory) is seen as well as an edit in place or a rename over the file.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
from collections.abc import Callable, Iterator
from typing import Protocol

import trio

from acp_proxy.config import Config
from acp_proxy.config.reload import apply_reload, policy_digest
from acp_proxy.core.actions import Audit, AuditEvent
from acp_proxy.errors import ConfigError, UsageError
from acp_proxy.shell.log_levels import NOTICE
from acp_proxy.shell.relay import AuditSink, Relay

__all__ = ["LivePolicy", "watch_config"]

log = logging.getLogger("acp_proxy")

#: how long file events are gathered into one change (milliseconds)
WATCH_DEBOUNCE_MS = 200
#: how long the watcher thread waits for events before checking for a cancel (milliseconds)
WATCH_TIMEOUT_MS = 500
#: a reload applies a file only after it went unchanged this long (seconds)
SETTLE_SECONDS = 0.5
#: how many quiet periods a reload waits for the file to settle before giving up
SETTLE_ROUNDS = 20


class LivePolicy:
    """The policy in force for every connection of this process, and how to reload it.

    Args:
        config: the effective configuration the process started with.
        load: loads the configuration file again with the command-line
            overrides (raises :class:`~acp_proxy.errors.UsageError` when it is
            invalid); ``None`` when there is no file to reload.
        audit: where ``config_reloaded`` / ``config_reload_failed`` go.
        path: the file ``load`` reads: a reload then applies only a *settled*
            file (unchanged for ``settle_seconds``, the same bytes read before
            and after loading) that holds at least one key (an empty or
            comment-only file is never a policy: the one in force stays, the
            refusal is audited). Replace a config file by rename to change it
            in one step.
        settle_seconds: the quiet period (seconds).

    Attributes:
        config: the effective configuration now: new connections start with it.
        reloads: successful reloads so far.
    """

    def __init__(
        self,
        config: Config,
        load: Callable[[], Config] | None,
        audit: AuditSink | None,
        *,
        path: str | None = None,
        settle_seconds: float = SETTLE_SECONDS,
    ) -> None:
        self._path = path
        self._settle_seconds = settle_seconds
        self.config = config
        self._digest: str | None = None  # computed when read: it costs cattrs (issue 29)
        self.reloads = 0
        self._load = load
        self._audit = audit
        self._relays: set[Relay] = set()

    @property
    def digest(self) -> str:
        """:func:`~acp_proxy.config.reload.policy_digest` of :attr:`config`."""
        if self._digest is None:
            self._digest = policy_digest(self.config)
        return self._digest

    @property
    def reloadable(self) -> bool:
        """True when there is a configuration file to reload."""
        return self._load is not None

    @contextlib.contextmanager
    def serving(self, relay: Relay) -> Iterator[None]:
        """Within the block, ``relay`` is live: a reload applies to it."""
        self._relays.add(relay)
        try:
            yield
        finally:
            self._relays.discard(relay)

    async def reload(self, trigger: str) -> bool:
        """Loads the file again and applies its policy everywhere; ``False`` if it was refused.

        Args:
            trigger: what asked for it (``"SIGHUP"``, ``"file change"``), for
                the log and the audit record.
        """
        if self._load is None:
            log.info("%s: no --config file, nothing to reload", trigger)
            return False
        settled = await self._settled() if self._path is not None else None
        try:
            if self._path is not None:
                _check_settled(settled)
            loaded = self._load()
            if self._path is not None and _read(self._path) != settled:
                raise UsageError("the file changed while it was read: not settled")
        except UsageError as exc:
            log.error("%s: config reload failed, the policy in force stays: %s", trigger, exc)
            self._write(AuditEvent.CONFIG_RELOAD_FAILED, trigger=trigger, reason=str(exc))
            return False
        effective, restart = apply_reload(self.config, loaded)
        if restart:
            log.warning(
                "restart_required: %s changed in the config file; not applied until a restart",
                ", ".join(restart),
            )
        self.config = effective
        self._digest = policy_digest(effective)
        self.reloads += 1
        relays = list(self._relays)
        for relay in relays:
            await relay.reconfigure(effective)
        log.log(  # at the default level: the user changed the file and waits for this
            NOTICE,
            "%s: config reloaded (policy %s), applied to %d live connection(s)",
            trigger,
            self.digest,
            len(relays),
        )
        self._write(
            AuditEvent.CONFIG_RELOADED,
            trigger=trigger,
            policy=self.digest,
            connections=len(relays),
            restart_required=restart,
        )
        return True

    async def _settled(self) -> bytes | None:
        """The file's bytes once two reads ``settle_seconds`` apart agree; ``None``
        when it never settled within :data:`SETTLE_ROUNDS` periods or cannot be read."""
        assert self._path is not None
        previous = _read(self._path)
        for _ in range(SETTLE_ROUNDS):
            await trio.sleep(self._settle_seconds)
            current = _read(self._path)
            if current == previous:
                return current
            previous = current
        return None

    def _write(self, event: AuditEvent, **fields: object) -> None:
        if self._audit is not None:
            self._audit.write(Audit(event, None, fields))


def _read(path: str) -> bytes | None:
    """The file's bytes, ``None`` when it cannot be read."""
    from acp_proxy.config.io import read_config_bytes  # cattrs: only when reloading

    try:
        return read_config_bytes(path)
    except ConfigError:
        return None


def _check_settled(data: bytes | None) -> None:
    """Raises :class:`UsageError` unless ``data`` is a settled file holding a key.

    An empty (or comment-only) file would be a policy without rules: never
    applied, whoever wrote it (a truncating writer, an agent through a client).
    """
    if data is None:
        raise UsageError("the file kept changing or cannot be read: not settled")
    import tomllib  # only a reload reads TOML (issue 29: start-up)

    try:
        keys = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError):
        return  # the loader says what is wrong with it
    if not keys:
        raise UsageError("the file is empty (no key): an empty file is never a policy")


def _content_digest(path: str) -> str | None:
    """The SHA-256 of the file's bytes (through symlinks), ``None`` when it cannot be read."""
    try:
        from acp_proxy.config.io import read_config_bytes  # cattrs: only when reloading

        return hashlib.sha256(read_config_bytes(path)).hexdigest()
    except ConfigError:
        return None  # not readable, not a regular file, or over MAX_CONFIG_BYTES


def _directory_of(path: str) -> str:
    """The directory holding ``path`` itself (a symlink is not followed)."""
    return os.path.dirname(os.path.abspath(path))


class Reloadable(Protocol):
    """What :func:`watch_config` reloads (a :class:`LivePolicy`, or the tokens of a listener)."""

    async def reload(self, trigger: str) -> bool:
        """Reloads; ``False`` when refused."""


async def watch_config(
    path: str,
    policy: Reloadable,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Reloads ``policy`` whenever the content of ``path`` changes, until cancelled.

    Watches ``path``'s directory (not the file, whose inode a ConfigMap
    update or an editor's save replaces); each batch of events compares the
    file's content digest with the last one seen, so events on other files of
    the directory, or a rewrite with the same bytes, reload nothing. A file
    that cannot be read is a change (the reload then fails and says why).
    Started (``nursery.start``) once the watch is in place.
    """
    import watchfiles  # only for --watch-config

    directory = _directory_of(path)
    seen = _content_digest(path)
    started = False
    # yield_on_timeout: an empty batch every rust_timeout ms, the first one
    # telling that the watch is in place (and bounding how long a cancel waits)
    async for changes in watchfiles.awatch(
        directory,
        watch_filter=None,
        recursive=False,
        debounce=WATCH_DEBOUNCE_MS,
        rust_timeout=WATCH_TIMEOUT_MS,
        yield_on_timeout=True,
    ):
        if not started:
            started = True
            task_status.started()
            log.info("watching %s for changes of %s", directory, os.path.basename(path))
        if not changes:
            continue
        digest = _content_digest(path)
        if digest != seen:
            seen = digest
            await policy.reload("file change")
