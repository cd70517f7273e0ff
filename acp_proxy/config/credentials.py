"""The credential locations: one list for the sandbox and the permission rules (issue 24).

Every credential store an agent must never read is named here once, relative
to the home directory. Two policies are generated from it, so that an
``fs/read_text_file`` through the client and an ``open()`` by the agent's own
code get the same answer:

- ``[sandbox] deny_read`` (:data:`SANDBOX_DENY_READ`, ``~/`` + each entry): the
  OS sandbox hides them from the agent process;
- the credential rules of ``config strict`` (``no-credential-reads`` and
  ``no-credential-writes``): their ``path`` globs start with
  :func:`credential_globs` (a test holds the packaged files to this list).

Directories end with ``/``: their whole tree is credentials.

The agents' own login files (:data:`AGENT_CREDENTIALS`) are refused by the
rules always, and hidden by the sandbox from every agent but their own
(:func:`other_agents_credentials`: an agent must read its own token, never
another's).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = [
    "AGENT_CREDENTIALS",
    "CREDENTIAL_LOCATIONS",
    "SANDBOX_DENY_READ",
    "credential_globs",
    "other_agents_credentials",
]

#: Credential stores, relative to ``$HOME`` (a trailing ``/``: a directory).
CREDENTIAL_LOCATIONS: tuple[str, ...] = (
    ".ssh/",
    ".aws/",
    ".gnupg/",
    ".config/gcloud/",
    ".config/gh/",
    ".azure/",
    ".kube/",
    ".docker/config.json",
    ".netrc",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".config/git/credentials",
    ".cargo/credentials.toml",
    ".cargo/credentials",
    ".vault-token",
    ".bash_history",
    ".zsh_history",
)

#: The common agents' own login files, relative to ``$HOME``, by a word that names the
#: agent in its command line (``claude-code-acp``, ``codex-acp``, ``gemini``).
AGENT_CREDENTIALS: dict[str, tuple[str, ...]] = {
    "claude": (".claude/.credentials.json",),
    "codex": (".codex/auth.json",),
    "gemini": (".gemini/oauth_creds.json",),
}

#: ``[sandbox] deny_read`` default: each location under ``~``.
SANDBOX_DENY_READ: tuple[str, ...] = tuple("~/" + loc.rstrip("/") for loc in CREDENTIAL_LOCATIONS)


def credential_globs() -> tuple[str, ...]:
    """The permission-rule ``path`` globs for :data:`CREDENTIAL_LOCATIONS`.

    Returns:
        ``**/D/**`` for a directory ``D/``, ``**/F`` for a file ``F``, in list order,
        then the agents' login files (:data:`AGENT_CREDENTIALS`).
    """
    agents = [loc for locs in AGENT_CREDENTIALS.values() for loc in locs]
    return tuple(
        f"**/{loc.rstrip('/')}/**" if loc.endswith("/") else f"**/{loc}"
        for loc in (*CREDENTIAL_LOCATIONS, *agents)
    )


#: programs that run the agent named by a later word (``npx -y claude-code-acp``); a
#: pattern compiled on first use, not at import (issue 29: start-up)
_LAUNCHERS = (
    r"^(npx|bunx|pnpx|uvx|pipx|node|nodejs|deno|bun|npm|pnpm|yarn|uv|env|sh|bash|exec|"
    r"run|dlx|tool|python[0-9.]*)$"
)


def _agent_words(command: Sequence[str]) -> list[str]:
    """The path components (lower-case) of the first word of ``command`` that is neither
    an option nor a launcher (:data:`_LAUNCHERS`): what names the agent."""
    for word in command:
        if word.startswith("-"):
            continue
        parts = [p for p in word.lower().split("/") if p]
        if parts and re.match(_LAUNCHERS, parts[-1]):
            continue
        return parts
    return []


def other_agents_credentials(command: Sequence[str]) -> tuple[str, ...]:
    """The login files (``~/...``) of the agents that ``command`` does not name: the
    sandbox hides them from it. A command naming none of the common agents (or no
    command, ``check-config``) gets them all hidden.

    Args:
        command: the agent's argv; the agent is named by a word of
            :data:`AGENT_CREDENTIALS` in a path component of its first word that is
            neither an option nor a launcher (``npx``, ``node``, ``python3``, ...).
    """
    words = _agent_words(command)
    return tuple(
        "~/" + loc
        for agent, locs in AGENT_CREDENTIALS.items()
        if not any(agent in w for w in words)
        for loc in locs
    )
