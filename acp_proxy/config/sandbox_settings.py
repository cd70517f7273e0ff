"""The engine's settings generated from ``[sandbox]`` (issue 24): pure, unit-tested.

The engine is the Anthropic Sandbox Runtime (``srt``, npm
``@anthropic-ai/sandbox-runtime``); its settings file is JSON::

    {"network": {"allowedDomains": [...], "deniedDomains": []},
     "filesystem": {"denyRead": [...], "allowRead": [], "allowWrite": [...],
                    "denyWrite": [...]}}

Reads are allowed everywhere but ``denyRead``; writes are denied everywhere
but ``allowWrite`` minus ``denyWrite``; the network is denied but
``allowedDomains`` (reached through srt's HTTP and SOCKS proxies; on Linux the
agent has no network namespace of its own otherwise). The proxy's own files
are in both ``denyRead`` and ``denyWrite``, so they stay out of reach even
inside the workspace. Everything here is a function of strings: the shell
passes the home directory and working directory in.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
from collections.abc import Sequence
from typing import Any

from acp_proxy.config.model import Config, SandboxConfig

__all__ = [
    "PINNED_SRT_VERSION",
    "protected_files",
    "settings_digest",
    "settings_json",
    "srt_settings",
    "workspace_roots",
]

#: The srt version the tests run (``.ci/run`` installs it); another one is used with a warning.
PINNED_SRT_VERSION = "0.0.83"


def _absolute(path: str, *, cwd: str, home: str) -> str:
    if path == "~" or path.startswith("~/"):
        path = home + path[1:]
    path = posixpath.normpath(posixpath.join(cwd, path))
    return "/" + path.lstrip("/") if path.startswith("//") else path


def _unique(paths: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(paths))


def workspace_roots(sandbox: SandboxConfig, *, cwd: str, home: str) -> list[str]:
    """The absolute, normalised workspace roots (``[]`` in the config: ``[cwd]``).

    Args:
        sandbox: the ``[sandbox]`` section.
        cwd: the proxy's working directory (absolute).
        home: the home directory ``~`` stands for (absolute).
    """
    given = sandbox.workspace or [cwd]
    return _unique([_absolute(p, cwd=cwd, home=home) for p in given])


def protected_files(
    config: Config,
    *,
    cwd: str,
    home: str,
    config_file: str | None = None,
    log_file: str | None = None,
) -> list[str]:
    """The proxy's own files, absolute: config file, audit log, trace, log file, token file.

    Args:
        config: the effective configuration (its ``audit.path``,
            ``audit.hmac_key_file``, ``trace.path``, ``listen.token_file``; ``""`` = none).
        cwd: what relative paths are taken from.
        home: the home directory ``~/`` stands for.
        config_file: the ``--config`` file, if any.
        log_file: the ``--log-file``, if any.
    """
    named = [
        config_file or "",
        config.audit.path,
        config.audit.hmac_key_file,  # the key of the chain (issue 25): never the agent's
        config.trace.path,
        log_file or "",
        config.listen.token_file,
    ]
    return _unique([_absolute(p, cwd=cwd, home=home) for p in named if p])


def srt_settings(
    sandbox: SandboxConfig, *, cwd: str, home: str, protected: Sequence[str] = ()
) -> dict[str, Any]:
    """The srt settings for ``sandbox`` (the shape in the module docstring).

    Args:
        sandbox: the ``[sandbox]`` section.
        cwd: the proxy's working directory (absolute; relative paths and an
            empty ``workspace`` are taken from it).
        home: the home directory ``~/`` stands for (absolute).
        protected: the proxy's own files (absolute, :func:`protected_files`):
            neither readable nor writable by the agent.

    Returns:
        A JSON-ready dict; :func:`settings_json` gives its bytes.
    """
    roots = workspace_roots(sandbox, cwd=cwd, home=home)
    writable = [_absolute(p, cwd=cwd, home=home) for p in sandbox.writable]
    denied = [_absolute(p, cwd=cwd, home=home) for p in sandbox.deny_read]
    return {
        "network": {
            "allowedDomains": list(sandbox.allowed_domains),
            "deniedDomains": [],
        },
        "filesystem": {
            "denyRead": _unique([*denied, *protected]),
            "allowRead": [],
            "allowWrite": _unique([*roots, *writable]),
            "denyWrite": _unique(list(protected)),
        },
    }


def settings_json(settings: dict[str, Any]) -> bytes:
    """The settings as canonical JSON bytes (sorted keys, no spaces): what is written
    to the engine's settings file and digested."""
    return json.dumps(settings, sort_keys=True, separators=(",", ":")).encode()


def settings_digest(data: bytes) -> str:
    """``"sha256:<hex>"`` of the settings file's bytes (the ``sandbox_started`` record)."""
    return "sha256:" + hashlib.sha256(data).hexdigest()
