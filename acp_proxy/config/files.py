"""The files a configuration names, and the configurations the package ships.

Editors start the proxy without a shell, so ``~`` and ``$VAR`` in paths are
expanded here (:func:`expand_path`, :func:`expand_config_paths`). The checks
(:func:`check_writable`, :func:`check_readable`, :func:`find_command`) look at
the file system before anything is served, so that a mistake ends in one
sentence (:class:`~acp_proxy.errors.UsageError`, exit status 2) rather than
in the middle of a session. This module never imports trio.
"""

from __future__ import annotations

import os
import stat
import sys

from acp_proxy.errors import ConfigError, UsageError

# Neither typing, re nor shutil before the agent's early start, which looks up its
# command here (issue 29).
TYPE_CHECKING = False
if TYPE_CHECKING:  # the tree is not needed for paths and commands (issue 29: start-up)
    from acp_proxy.config.model import Config

__all__ = [
    "BUNDLED",
    "BUNDLED_ABOUT",
    "bundled_text",
    "check_readable",
    "check_writable",
    "expand_config_paths",
    "expand_path",
    "find_command",
    "not_regular",
    "open_regular",
    "resolve_audit_paths",
    "state_home",
    "which",
]

#: the configurations shipped inside the package (``acp-proxy config NAME``) and what
#: each is for; the examples live in ``acp_proxy/config/examples/`` (``config/examples/``
#: in a clone links there)
BUNDLED_ABOUT = {
    "default": "every key with its default value",
    "strict": "a starting point for untrusted agents",
    "budgets": "example: budgets on prompts, tool calls, turn time and tokens, observed first",
    "permissions": "example: the [[permissions.rules]] reference, with a policy",
}

#: the names of :data:`BUNDLED_ABOUT`, in that order
BUNDLED = tuple(BUNDLED_ABOUT)

_EXAMPLES = frozenset({"budgets", "permissions"})

#: a ``$VAR`` or ``${VAR}`` left after expansion (a regular expression, compiled when used)
_UNSET_VAR = r"\$(\w+|\{[^}]*\})"


def bundled_text(name: str) -> str:
    """The text of a shipped configuration, comments included.

    Args:
        name: one of :data:`BUNDLED`.

    Raises:
        KeyError: ``name`` is not one of :data:`BUNDLED`.
    """
    if name not in BUNDLED:
        raise KeyError(name)
    from importlib import resources  # 5 ms: only where a shipped file is printed

    where = resources.files("acp_proxy.config")
    if name in _EXAMPLES:
        where = where.joinpath("examples")
    return where.joinpath(f"{name}.toml").read_text("utf-8")


def expand_path(value: str, what: str) -> str:
    """``value`` with ``$VAR``, ``${VAR}`` and a leading ``~`` expanded.

    Args:
        value: a path as written; ``""`` stays ``""``.
        what: how the user wrote it (``"--audit-log"``, ``"audit.path"``), for the message.

    Raises:
        UsageError: ``value`` names an environment variable that is not set.
    """
    if not value:
        return value
    if "$" not in value and not value.startswith("~"):
        return value  # nothing to expand
    import re

    if not os.environ.get("XDG_STATE_HOME"):  # its XDG default, so strict.toml works as is
        value = value.replace("${XDG_STATE_HOME}", "$XDG_STATE_HOME")
        value = re.sub(r"\$XDG_STATE_HOME(?!\w)", lambda _m: state_home(), value)
    expanded = os.path.expandvars(value)
    unset = re.search(_UNSET_VAR, expanded)
    if unset is not None:
        name = unset.group(1).strip("{}")
        raise UsageError(f"{what} {value!r} names the environment variable {name}, which is unset")
    return os.path.expanduser(expanded)


def expand_config_paths(cfg: Config) -> Config:
    """``cfg`` with ``audit.path``, ``audit.hmac_key_file``, ``trace.path`` and
    ``listen.token_file`` expanded (:func:`expand_path`)."""
    audit_path = expand_path(cfg.audit.path, "audit.path")
    key_file = expand_path(cfg.audit.hmac_key_file, "audit.hmac_key_file")
    trace_path = expand_path(cfg.trace.path, "trace.path")
    token_file = expand_path(cfg.listen.token_file, "listen.token_file")
    tokens_file = expand_path(cfg.listen.tokens_file, "listen.tokens_file")
    import attrs

    try:
        return attrs.evolve(
            cfg,
            audit=attrs.evolve(cfg.audit, path=audit_path, hmac_key_file=key_file),
            trace=attrs.evolve(cfg.trace, path=trace_path),
            listen=attrs.evolve(cfg.listen, token_file=token_file, tokens_file=tokens_file),
        )
    except ValueError as exc:
        raise ConfigError("", str(exc)) from exc


def check_writable(path: str, what: str) -> None:
    """Checks that a file can be opened for appending at ``path`` (created if missing).

    Args:
        path: the file (already expanded).
        what: how the user named it (``"--log-file"``, ``"audit.path"``).

    Raises:
        UsageError: ``path`` is a directory, a symbolic link, a FIFO, a device
            or a socket (never followed nor opened, so a FIFO never blocks), its
            directory does not exist, or it (or, for a new file, its directory)
            is not writable.
    """
    if os.path.isdir(path) and not os.path.islink(path):
        raise UsageError(f"{what} {path!r} is a directory; name a file in it")
    kind = not_regular(path)
    if kind is not None:
        raise UsageError(_refusal(what, path, kind))
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise UsageError(
            f"{what} {path!r}: the directory {directory!r} does not exist; "
            "create it or name a file in an existing one"
        )
    if os.path.exists(path):
        if not os.access(path, os.W_OK):
            raise UsageError(f"{what} {path!r} is not writable")
    elif not os.access(directory, os.W_OK | os.X_OK):
        raise UsageError(f"{what} {path!r}: the directory {directory!r} is not writable")


def check_readable(path: str, what: str) -> None:
    """Checks that ``path`` is a file that can be read.

    Raises:
        UsageError: it does not exist, is a directory, or cannot be read.
    """
    if not os.path.exists(path):
        raise UsageError(f"{what} {path!r} does not exist")
    if os.path.isdir(path):
        raise UsageError(f"{what} {path!r} is a directory, not a file")
    if not os.access(path, os.R_OK):
        raise UsageError(f"{what} {path!r} is not readable")


def find_command(command: str) -> str:
    """The executable ``command`` names: a path, or a name looked up on ``PATH``.

    Raises:
        UsageError: no such executable.
    """
    if not command:
        raise UsageError(
            "the agent command after -- is empty: put the agent's executable there "
            "(acp-proxy [options] -- AGENT_CMD ...)"
        )
    if os.sep in command or (os.altsep is not None and os.altsep in command):
        if os.path.isfile(command) and os.access(command, os.X_OK):
            _check_interpreter(command)
            return command
        if not os.path.exists(command):
            reason = "does not exist: give the path of the agent's executable"
        elif os.path.isdir(command):
            reason = "is a directory: give the path of the agent's executable in it"
        else:
            reason = (
                "is not executable: make it executable (chmod +x) or name its interpreter first"
            )
        raise UsageError(f"agent command {command!r} {reason}")
    found = which(command)
    if found is None:
        raise UsageError(
            f"agent command {command!r} was not found on PATH; give its absolute path "
            "(editors often start the proxy with a shorter PATH than your shell's)"
        )
    _check_interpreter(found)
    return found


def which(command: str) -> str | None:
    """``shutil.which(command)`` on POSIX, without importing :mod:`shutil` (issue 29):
    ``command`` itself when it has a directory part, else the first directory of
    ``PATH`` (once each) holding it; ``None`` when none is an executable file.
    A test checks the two agree."""
    if sys.platform == "win32":
        import shutil

        return shutil.which(command)
    if os.path.dirname(command):
        return command if _executable(command) else None
    path = os.environ.get("PATH")
    if path is None:
        try:
            path = os.confstr("CS_PATH")
        except (AttributeError, ValueError):
            path = os.defpath
    if not path:  # PATH="" finds nothing; PATH=":" looks in the working directory
        return None
    seen = set()
    for directory in path.split(os.pathsep):
        if directory in seen:
            continue
        seen.add(directory)
        name = os.path.join(directory, command)
        if _executable(name):
            return name
    return None


def _executable(path: str) -> bool:
    return os.path.exists(path) and os.access(path, os.X_OK) and not os.path.isdir(path)


def _check_interpreter(command: str) -> None:
    """Raises UsageError when the ``#!`` line of script ``command`` names an interpreter
    that does not exist (exec would then say the script itself is missing).

    ``#!/usr/bin/env NAME`` is checked for ``NAME`` on ``PATH``.
    """
    try:
        with open(command, "rb") as f:
            first = f.readline(256)
    except OSError:
        return
    if not first.startswith(b"#!"):
        return
    words = first[2:].decode("utf-8", "replace").split()
    if not words:
        return
    interpreter = words[0]
    if not os.path.exists(interpreter):
        raise UsageError(
            f"agent command {command!r} starts with #!{interpreter}, which does not exist: "
            "install that interpreter or correct the script's #! line"
        )
    names = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
    if os.path.basename(interpreter) == "env" and names and which(names[0]) is None:
        raise UsageError(
            f"agent command {command!r} starts with #!{' '.join(words)}, and {names[0]!r} "
            "was not found on PATH: install it or correct the script's #! line"
        )


_KINDS = (
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _kind(mode: int) -> str | None:
    for test, name in _KINDS:
        if test(mode):
            return name
    return None if stat.S_ISREG(mode) else "not a regular file"


def not_regular(path: str) -> str | None:
    """What ``path`` is when it exists and is not a regular file (``"a FIFO"``, ...), else
    ``None``. Looks with ``lstat``: a symbolic link is never followed, nothing is opened."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return None
    return _kind(mode)


def _refusal(what: str, path: str, kind: str) -> str:
    return (
        f"{what} {path!r} is {kind}, not a regular file: name a regular file "
        "(the proxy never follows a link there nor writes to a pipe or device)"
    )


def open_regular(
    path: str, what: str, *, truncate: bool = False, read: bool = False, mode: int = 0o600
) -> int:
    """Opens ``path`` for writing (appending, or truncated) only if it is a regular file.

    ``O_NOFOLLOW`` refuses a symbolic link at the last component, ``O_NONBLOCK``
    keeps a FIFO from blocking the open, and ``fstat`` on the open descriptor
    refuses anything but a regular file (no race between a check and the open).
    A truncation happens only after that check. A new file gets ``mode``.

    Returns:
        The descriptor (blocking, close-on-exec, ``O_APPEND`` unless ``truncate``;
        readable too with ``read``).

    Raises:
        UsageError: ``path`` is not a regular file (one sentence).
        OSError: it cannot be opened otherwise.
    """
    flags = (os.O_RDWR if read else os.O_WRONLY) | os.O_CREAT | os.O_NOFOLLOW
    flags |= os.O_NONBLOCK | os.O_CLOEXEC
    if not truncate:
        flags |= os.O_APPEND
    try:
        fd = os.open(path, flags, mode)
    except OSError as exc:
        kind = not_regular(path)
        if kind is not None:  # ELOOP (a link), ENXIO (a FIFO nobody reads), EISDIR
            raise UsageError(_refusal(what, path, kind)) from None
        raise exc from None
    try:
        kind = _kind(os.fstat(fd).st_mode)
        if kind is not None:
            raise UsageError(_refusal(what, path, kind))
        os.set_blocking(fd, True)
        if truncate:
            os.ftruncate(fd, 0)
    except BaseException:
        os.close(fd)
        raise
    return fd


def state_home() -> str:
    """``$XDG_STATE_HOME``, or ``~/.local/state`` when it is unset or empty (XDG Base
    Directory specification)."""
    return os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")


def resolve_audit_paths(cfg: Config, config_file: str) -> Config:
    """``cfg`` (expanded) with a relative ``audit.path`` and ``audit.hmac_key_file`` taken
    from the directory of ``config_file``, not from the working directory (a config in
    a repository must not put the audit log where the agent works)."""
    base = os.path.dirname(os.path.abspath(config_file))
    audit = cfg.audit
    path, key_file = audit.path, audit.hmac_key_file
    if path and not os.path.isabs(path):
        path = os.path.join(base, path)
    if key_file and not os.path.isabs(key_file):
        key_file = os.path.join(base, key_file)
    import attrs

    return attrs.evolve(cfg, audit=attrs.evolve(audit, path=path, hmac_key_file=key_file))
