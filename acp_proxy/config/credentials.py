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
"""

from __future__ import annotations

__all__ = ["CREDENTIAL_LOCATIONS", "SANDBOX_DENY_READ", "credential_globs"]

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
)

#: ``[sandbox] deny_read`` default: each location under ``~``.
SANDBOX_DENY_READ: tuple[str, ...] = tuple("~/" + loc.rstrip("/") for loc in CREDENTIAL_LOCATIONS)


def credential_globs() -> tuple[str, ...]:
    """The permission-rule ``path`` globs for :data:`CREDENTIAL_LOCATIONS`.

    Returns:
        ``**/D/**`` for a directory ``D/``, ``**/F`` for a file ``F``, in list order.
    """
    return tuple(
        f"**/{loc.rstrip('/')}/**" if loc.endswith("/") else f"**/{loc}"
        for loc in CREDENTIAL_LOCATIONS
    )
