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

import fnmatch
import hashlib
import json
import posixpath
from collections.abc import Mapping, Sequence
from typing import Any

from acp_proxy.config.model import Config, SandboxConfig

__all__ = [
    "AGENT_EXECUTABLE_CONFIG",
    "PINNED_SRT_VERSION",
    "agent_config_files",
    "agent_environment",
    "private_cache_env",
    "protected_files",
    "settings_digest",
    "settings_json",
    "srt_settings",
    "workspace_roots",
]

#: The srt version the tests run (``.ci/run`` installs it); another one is used with a warning.
PINNED_SRT_VERSION = "0.0.83"


#: Files (a trailing ``/``: directories) inside the agents' own state directories that
#: name programs the agent runs later, unconfined when it is started without the
#: sandbox: Claude Code's settings (hooks, MCP servers) and hooks, Codex's and Gemini
#: CLI's MCP servers. Kept read-only when their directory is writable.
AGENT_EXECUTABLE_CONFIG: tuple[str, ...] = (
    "~/.claude/settings.json",
    "~/.claude/hooks/",
    "~/.codex/config.toml",
    "~/.gemini/settings.json",
)


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
    """The proxy's own files, absolute: config file, audit log, trace, log file, token files.

    Args:
        config: the effective configuration (its ``audit.path``,
            ``audit.hmac_key_file``, ``trace.path``, ``listen.token_file``,
            ``listen.tokens_file``; ``""`` = none).
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
        config.listen.tokens_file,  # every principal's bearer token (--listen)
    ]
    return _unique([_absolute(p, cwd=cwd, home=home) for p in named if p])


def _within(path: str, roots: Sequence[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def agent_config_files(sandbox: SandboxConfig, *, cwd: str, home: str) -> list[str]:
    """The :data:`AGENT_EXECUTABLE_CONFIG` entries the agent could otherwise write
    (inside a workspace root or a ``writable`` path), absolute; a directory keeps its
    trailing ``/``."""
    roots = [
        *workspace_roots(sandbox, cwd=cwd, home=home),
        *(_absolute(p, cwd=cwd, home=home) for p in sandbox.writable),
    ]
    found = []
    for entry in AGENT_EXECUTABLE_CONFIG:
        path = _absolute(entry, cwd=cwd, home=home)
        if _within(path, roots):
            found.append(path + "/" if entry.endswith("/") else path)
    return found


def private_cache_env(cache_dir: str) -> dict[str, str]:
    """The environment that sends the agent's caches (XDG, npm, pip, uv) into
    ``cache_dir``, a directory private to this proxy and removed when it exits, instead
    of the user's caches, whose contents later run unconfined.

    ``CLAUDE_CODE_TMPDIR`` (``cache_dir/tmp``) is the ``TMPDIR`` srt hands the agent:
    srt's own default, ``/tmp/claude``, is writable inside only when it exists
    outside, so an agent writing a temporary file failed with EROFS."""
    return {
        "CLAUDE_CODE_TMPDIR": posixpath.join(cache_dir, "tmp"),
        "XDG_CACHE_HOME": cache_dir,
        "npm_config_cache": posixpath.join(cache_dir, "npm"),
        "PIP_CACHE_DIR": posixpath.join(cache_dir, "pip"),
        "UV_CACHE_DIR": posixpath.join(cache_dir, "uv"),
    }


def agent_environment(
    sandbox: SandboxConfig, environ: Mapping[str, str], overrides: Mapping[str, str]
) -> tuple[dict[str, str], list[str]]:
    """The environment the engine and the agent start with: ``environ`` without the
    names matching ``env_deny`` (globs, case-insensitive) unless they match
    ``env_allow``, then ``overrides``.

    Returns:
        The environment and the stripped names (sorted).
    """

    def matches(name: str, patterns: Sequence[str]) -> bool:
        return any(fnmatch.fnmatchcase(name.upper(), p.upper()) for p in patterns)

    stripped = sorted(
        name
        for name in environ
        if matches(name, sandbox.env_deny) and not matches(name, sandbox.env_allow)
    )
    env = {k: v for k, v in environ.items() if k not in set(stripped)}
    env.update(overrides)
    return env, stripped


def srt_settings(
    sandbox: SandboxConfig,
    *,
    cwd: str,
    home: str,
    protected: Sequence[str] = (),
    cache_dir: str = "",
) -> dict[str, Any]:
    """The srt settings for ``sandbox`` (the shape in the module docstring).

    Args:
        sandbox: the ``[sandbox]`` section.
        cwd: the proxy's working directory (absolute; relative paths and an
            empty ``workspace`` are taken from it).
        home: the home directory ``~/`` stands for (absolute).
        protected: the proxy's own files (absolute, :func:`protected_files`):
            neither readable nor writable by the agent.
        cache_dir: the agent's private cache directory (writable; ``""``: none).

    The agents' executable configuration (:func:`agent_config_files`) is made
    read-only.

    Returns:
        A JSON-ready dict; :func:`settings_json` gives its bytes.
    """
    roots = workspace_roots(sandbox, cwd=cwd, home=home)
    writable = [_absolute(p, cwd=cwd, home=home) for p in sandbox.writable]
    denied = [_absolute(p, cwd=cwd, home=home) for p in sandbox.deny_read]
    config_files = [p.rstrip("/") for p in agent_config_files(sandbox, cwd=cwd, home=home)]
    private = [cache_dir] if cache_dir else []
    return {
        "network": {
            "allowedDomains": list(sandbox.allowed_domains),
            "deniedDomains": [],
        },
        "filesystem": {
            "denyRead": _unique([*denied, *protected]),
            "allowRead": [],
            "allowWrite": _unique([*roots, *writable, *private]),
            "denyWrite": _unique([*protected, *config_files]),
        },
    }


def settings_json(settings: dict[str, Any]) -> bytes:
    """The settings as canonical JSON bytes (sorted keys, no spaces): what is written
    to the engine's settings file and digested."""
    return json.dumps(settings, sort_keys=True, separators=(",", ":")).encode()


def settings_digest(data: bytes) -> str:
    """``"sha256:<hex>"`` of the settings file's bytes (the ``sandbox_started`` record)."""
    return "sha256:" + hashlib.sha256(data).hexdigest()
