"""Setting up the audit log for a run and for ``check-config`` (README "The chain").

:func:`open_audit` opens the chained log the ``[audit]`` section names (creating
``$XDG_STATE_HOME/acp-proxy`` with mode 0700 when the log is there, reading the
HMAC key), :func:`mirror_audit` adds the OpenTelemetry log bridge (``--otel``)
as a mirror, and :func:`check_audit_files` makes the same checks as a start
without opening anything (a FIFO never blocks). Errors are
:class:`~acp_proxy.errors.UsageError` sentences; the command line maps them to
exit status 2.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from acp_proxy.config import Config
from acp_proxy.config.files import check_writable, state_home
from acp_proxy.errors import UsageError

if TYPE_CHECKING:  # the chained writer is imported when a log is opened (issue 29)
    from acp_proxy.shell.audit import AuditLog

__all__ = ["check_audit_files", "make_state_dir", "mirror_audit", "open_audit", "state_dir"]


def mirror_audit(
    hub: object, audit: AuditLog | None, context: dict[str, object]
) -> AuditLog | None:
    """With ``--otel``, every audit record also goes to the OpenTelemetry log bridge (with
    no audit file, to the bridge only)."""
    for observer in getattr(hub, "others", ()):
        emit = getattr(observer, "audit_record", None)
        if emit is None:
            continue
        if audit is None:
            from acp_proxy.shell.audit import AuditLog

            audit = AuditLog(open(os.devnull, "w", encoding="utf-8"), context)  # noqa: SIM115
        audit.mirrors.append(emit)
    return audit


def open_audit(cfg: Config, context: dict[str, object]) -> AuditLog | None:
    """The chained audit log ``cfg.audit`` names (``path = ""``: none), its records
    carrying ``context``; the directory under ``$XDG_STATE_HOME/acp-proxy`` is created 0700.

    Raises:
        UsageError: it cannot be opened for appending, is not a regular file,
            or the key file cannot be read.
    """
    path = cfg.audit.path
    if not path:
        return None
    from acp_proxy.shell.audit import AuditLog
    from acp_proxy.shell.audit_chain import read_key

    make_state_dir(path)
    check_writable(path, "audit log")
    key = None
    if cfg.audit.hmac_key_file:
        try:
            key = read_key(cfg.audit.hmac_key_file)
        except (OSError, ValueError) as exc:
            why = exc.strerror if isinstance(exc, OSError) else str(exc)
            raise UsageError(
                f"cannot read audit.hmac_key_file {cfg.audit.hmac_key_file!r}: {why}"
            ) from None
    try:
        return AuditLog.open(
            path, context, run=str(context["run"]), key=key, required=cfg.audit.required
        )
    except OSError as exc:
        raise UsageError(f"cannot open the audit log {path!r}: {exc.strerror}") from None


def state_dir(path: str) -> str | None:
    """The ``acp-proxy`` directory under the XDG state home that ``path`` is in, if any."""
    home = os.path.join(state_home(), "acp-proxy")
    directory = os.path.dirname(os.path.abspath(path))
    return home if directory == os.path.abspath(home) else None


def make_state_dir(path: str) -> None:
    """Creates ``$XDG_STATE_HOME/acp-proxy`` (mode 0700, parents as needed) for ``path``."""
    home = state_dir(path)
    if home is None or os.path.isdir(home):
        return
    try:
        os.makedirs(home, mode=0o700, exist_ok=True)
        os.chmod(home, 0o700)
    except OSError as exc:
        raise UsageError(
            f"cannot create the audit log's directory {home!r}: {exc.strerror}"
        ) from None


def check_audit_files(cfg: Config) -> list[str]:
    """Checks the audit log, its key file and the trace as a start would, opening nothing
    (a FIFO never blocks); returns the lines saying where they are.

    Raises:
        UsageError: one is a symbolic link, FIFO, device or directory, or cannot be
            written (the key file: read).
    """
    from acp_proxy.config.files import check_readable, not_regular

    notes = []
    audit = cfg.audit
    if audit.path:
        home = state_dir(audit.path)
        if home is not None and not os.path.isdir(home):
            notes.append(f"audit log: {audit.path} (its directory will be created, mode 0700)")
        else:
            check_writable(audit.path, "audit.path")
            notes.append(f"audit log: {audit.path}")
        chain = "HMAC-SHA256" if audit.hmac_key_file else "SHA-256"
        notes.append(
            f"audit chain: {chain}; a lost record "
            + ("stops the proxy (required)" if audit.required else "is counted (not required)")
        )
    if audit.hmac_key_file:
        kind = not_regular(audit.hmac_key_file)
        if kind is not None and kind != "a symbolic link":
            raise UsageError(f"audit.hmac_key_file {audit.hmac_key_file!r} is {kind}, not a file")
        check_readable(audit.hmac_key_file, "audit.hmac_key_file")
    if cfg.trace.path:
        check_writable(cfg.trace.path, "trace.path")
        notes.append(f"trace: {cfg.trace.path}")
    return notes
