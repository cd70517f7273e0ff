"""Who may connect to ``--listen`` (issue 26): named principals, the generated token.

- ``--tokens-file FILE``: one principal per line, ``NAME TOKEN`` or ``NAME
  sha256:HEX`` (the SHA-256 of the token in hex, so the file need not hold the
  secret); blank lines and lines starting with ``#`` are skipped. The file
  must be a regular file not readable or writable by group or others (mode
  0600 or stricter), else the proxy refuses to start (exit 2).
  :meth:`Authenticator.check` compares the SHA-256 of the token a client
  presents with every entry's in constant time (every entry is compared,
  whichever matches), so neither a token nor which entry matched leaks
  through timing.
- ``--token-file FILE``: one token, no name (as before).
- Neither: a loopback ``--listen`` gets a random token written to a 0600 file
  in the user's runtime directory (:func:`generate_token`), unless
  ``--no-token``.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import re
import secrets
import stat
from collections.abc import Sequence

import attrs

from acp_proxy.config import Config
from acp_proxy.errors import StartupError
from acp_proxy.shell.topology.ws_upgrade import parse_ws_url

__all__ = [
    "Authenticator",
    "generate_token",
    "listen_token",
    "read_tokens_file",
    "runtime_dir",
    "token_note",
]

log = logging.getLogger("acp_proxy")

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,127}")
_TOKEN = re.compile(r"[\x21-\x7e]{1,4096}")
_HEX = re.compile(r"sha256:([0-9a-fA-F]{64})")
#: largest tokens file read, in bytes
MAX_TOKENS_FILE_BYTES = 1 << 20


def _digest(token: bytes) -> bytes:
    return hashlib.sha256(token).digest()


def _check_private(path: str, fd: int, what: str) -> None:
    """Refuses a file that is not regular or that group or others may read or write."""
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise StartupError(f"{what} {path!r} is not a regular file")
    if st.st_mode & 0o077:
        raise StartupError(
            f"{what} {path!r} is readable or writable by others (mode "
            f"{stat.S_IMODE(st.st_mode):04o}): run chmod 600 {path}"
        )


def read_tokens_file(path: str) -> dict[str, bytes]:
    """The principals of ``path``: name -> SHA-256 digest of its token (32 bytes).

    Raises:
        StartupError: unreadable, not private (mode 0600), too large, a line
            that is not ``NAME TOKEN`` / ``NAME sha256:HEX``, a name given twice,
            or no principal at all.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)  # a symlink (a mounted secret) is followed
    except OSError as exc:
        raise StartupError(f"cannot read the tokens file {path!r}: {exc.strerror}") from None
    try:
        _check_private(path, fd, "tokens file")
        with os.fdopen(fd, "rb", closefd=False) as file:
            data = file.read(MAX_TOKENS_FILE_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_TOKENS_FILE_BYTES:
        raise StartupError(f"tokens file {path!r} is over {MAX_TOKENS_FILE_BYTES} bytes")
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        raise StartupError(f"tokens file {path!r} must be ASCII text") from None
    found: dict[str, bytes] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        where = f"tokens file {path!r} line {number}"
        if len(parts) != 2 or not _NAME.fullmatch(parts[0]) or not _TOKEN.fullmatch(parts[1]):
            raise StartupError(f"{where}: write NAME TOKEN or NAME sha256:HEX")
        name, token = parts
        if name in found:
            raise StartupError(f"{where}: principal {name!r} is given twice")
        hexed = _HEX.fullmatch(token)
        found[name] = bytes.fromhex(hexed.group(1)) if hexed else _digest(token.encode("ascii"))
    if not found:
        raise StartupError(f"tokens file {path!r} names no principal")
    return found


@attrs.define
class Authenticator:
    """The bearer tokens a listener accepts.

    Attributes:
        token: the single token of ``--token-file`` (no principal), or ``None``.
        principals: name -> SHA-256 of its token (``--tokens-file``).
    """

    token: bytes | None = None
    principals: dict[str, bytes] = attrs.field(factory=dict)

    @property
    def required(self) -> bool:
        """True when a client must present a token."""
        return self.token is not None or bool(self.principals)

    def check(self, headers: Sequence[tuple[bytes, bytes]]) -> tuple[bool, str | None]:
        """``(accepted, principal)`` for an HTTP request's headers.

        Exactly one ``Authorization: Bearer TOKEN`` header is read. Without any
        token required, every request is accepted with no principal.
        """
        if not self.required:
            return True, None
        auth = [v.strip() for k, v in headers if k.lower() == b"authorization"]
        scheme, _, given = auth[0].partition(b" ") if len(auth) == 1 else (b"", b"", b"")
        if scheme.lower() != b"bearer":
            return False, None
        given = given.strip()
        digest = _digest(given)
        ok = False
        if self.token is not None:
            ok = hmac.compare_digest(digest, _digest(self.token))
        found: str | None = None
        for name, expected in self.principals.items():  # every entry, whichever matches
            if hmac.compare_digest(digest, expected) and found is None:
                found = name
        return ok or found is not None, found


def runtime_dir() -> str:
    """``$XDG_RUNTIME_DIR`` when it is a private directory of this user, else
    ``/tmp/acp-proxy-UID`` (created 0700; refused when another user owns it or
    others may enter it).

    Raises:
        StartupError: no private directory can be had.
    """
    uid = os.getuid()
    xdg = os.environ.get("XDG_RUNTIME_DIR", "")
    if xdg.startswith("/"):
        try:
            st = os.stat(xdg)
            if stat.S_ISDIR(st.st_mode) and st.st_uid == uid and not st.st_mode & 0o077:
                return xdg
        except OSError:
            pass
    path = f"/tmp/acp-proxy-{uid}"
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise StartupError(f"cannot create {path}: {exc.strerror}") from None
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid or st.st_mode & 0o077:
        raise StartupError(
            f"{path} is not a private directory of uid {uid}: remove it, or give --token-file"
        )
    return path


def generate_token(directory: str, name: str) -> str:
    """Writes a new random token (32 bytes, URL-safe base64) to ``directory/name``, 0600.

    Returns:
        The file's path.

    Raises:
        StartupError: the file cannot be written.
    """
    path = os.path.join(directory, name)
    token = secrets.token_urlsafe(32)
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as file:
            file.write(token + "\n")
        os.replace(tmp, path)
    except OSError as exc:
        raise StartupError(f"cannot write a token file in {directory}: {exc.strerror}") from None
    return path


def _loopback(host: str) -> bool:
    """True when every address ``host`` resolves to is a loopback one (blocking: start-up only)."""
    import ipaddress
    import socket

    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError:
        return False
    addresses = {str(info[4][0]).split("%")[0] for info in infos}
    return bool(addresses) and all(ipaddress.ip_address(a).is_loopback for a in addresses)


def listen_token(cfg: Config, url: str, *, no_token: bool) -> tuple[Config, str | None]:
    """``cfg`` with the token a ``--listen`` at ``url`` needs when none is given.

    With ``listen.token_file`` or ``listen.tokens_file`` set, ``cfg`` as is. On a
    loopback bind without either, a token is generated (:func:`generate_token`)
    and ``listen.token_file`` points to it (``run_listen`` prints where, once
    listening). ``no_token``: ``cfg`` as is, and a warning says that every
    local user can connect. A non-loopback bind is left to
    :func:`~acp_proxy.shell.topology.listen.run_listen` (which refuses it).

    Returns:
        The configuration, and the generated token file's path (or ``None``).

    Raises:
        StartupError: ``no_token`` with a token file, or no private runtime
            directory for the token.
    """
    listen = cfg.listen
    given = listen.token_file or listen.tokens_file
    if no_token and given:
        raise StartupError("--no-token contradicts --token-file / --tokens-file: give one")
    if given:
        return cfg, None
    target = parse_ws_url(url, default_host="127.0.0.1")
    if not _loopback(target.host):
        return cfg, None
    if no_token:
        log.warning(
            "--no-token: %s needs no bearer token: every user of this machine (any uid, "
            "any local process) can connect and drive the agent as uid %d",
            url,
            os.getuid(),
        )
        return cfg, None
    path = generate_token(runtime_dir(), f"listen-{target.port or os.getpid()}.token")
    return attrs.evolve(cfg, listen=attrs.evolve(listen, token_file=path)), path


def token_note(path: str, urls: Sequence[str]) -> str:
    """The line telling where the generated token is and how a client sends it."""
    return (
        f"acp-proxy: no --token-file: the bearer token for {' '.join(urls)} is in {path} "
        f'(mode 0600); clients send "Authorization: Bearer $(cat {path})"'
    )
