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
import re
import shutil
from importlib import resources

import attrs

from acp_proxy.config.model import Config
from acp_proxy.errors import ConfigError, UsageError

__all__ = [
    "BUNDLED",
    "bundled_text",
    "check_readable",
    "check_writable",
    "expand_config_paths",
    "expand_path",
    "find_command",
]

#: the configurations shipped inside the package (``acp-proxy config NAME``)
BUNDLED = ("default", "strict")

_UNSET_VAR = re.compile(r"\$(\w+|\{[^}]*\})")


def bundled_text(name: str) -> str:
    """The text of a shipped configuration, comments included.

    Args:
        name: one of :data:`BUNDLED`.

    Raises:
        KeyError: ``name`` is not one of :data:`BUNDLED`.
    """
    if name not in BUNDLED:
        raise KeyError(name)
    return resources.files("acp_proxy.config").joinpath(f"{name}.toml").read_text("utf-8")


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
    expanded = os.path.expandvars(value)
    unset = _UNSET_VAR.search(expanded)
    if unset is not None:
        name = unset.group(1).strip("{}")
        raise UsageError(f"{what} {value!r} names the environment variable {name}, which is unset")
    return os.path.expanduser(expanded)


def expand_config_paths(cfg: Config) -> Config:
    """``cfg`` with ``audit.path``, ``trace.path`` and ``listen.token_file`` expanded
    (:func:`expand_path`)."""
    audit_path = expand_path(cfg.audit.path, "audit.path")
    trace_path = expand_path(cfg.trace.path, "trace.path")
    token_file = expand_path(cfg.listen.token_file, "listen.token_file")
    tokens_file = expand_path(cfg.listen.tokens_file, "listen.tokens_file")
    try:
        return attrs.evolve(
            cfg,
            audit=attrs.evolve(cfg.audit, path=audit_path),
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
        UsageError: ``path`` is a directory, its directory does not exist, or
            it (or, for a new file, its directory) is not writable.
    """
    if os.path.isdir(path):
        raise UsageError(f"{what} {path!r} is a directory; name a file in it")
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise UsageError(f"{what} {path!r}: the directory {directory!r} does not exist")
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
    if os.sep in command or (os.altsep is not None and os.altsep in command):
        if os.path.isfile(command) and os.access(command, os.X_OK):
            _check_interpreter(command)
            return command
        reason = "does not exist" if not os.path.exists(command) else "is not an executable file"
        raise UsageError(f"agent command {command!r} {reason}")
    found = shutil.which(command)
    if found is None:
        raise UsageError(
            f"agent command {command!r} was not found on PATH; give its absolute path "
            "(editors often start the proxy with a shorter PATH than your shell's)"
        )
    _check_interpreter(found)
    return found


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
    if os.path.basename(interpreter) == "env" and names and shutil.which(names[0]) is None:
        raise UsageError(
            f"agent command {command!r} starts with #!{' '.join(words)}, and {names[0]!r} "
            "was not found on PATH: install it or correct the script's #! line"
        )
