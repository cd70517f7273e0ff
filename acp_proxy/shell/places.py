"""The proxy's filesystem, for the permission rules (issue 31, items 2 and 3).

:func:`resolve_path` is the :data:`~acp_proxy.core.session.sdk_reading.PathResolver`
the shell injects into each connection's core where the proxy shares the
client's filesystem (the stdio drop-in, and ``--listen`` with a local agent:
there a remote client's files may not be the proxy's, and resolving on the
proxy's disk can then only add denials, never allow more). :func:`own_files`
lists the proxy's own files from the configuration and command line, with
:func:`same_file`, the check that knows them by identity (a hard link to the
audit log is the audit log); :func:`install` makes them the ones :func:`apply`
gives every new core.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterable
from typing import TYPE_CHECKING

import attrs

from acp_proxy.config import Config
from acp_proxy.core.session.places import OwnFiles, SameFile, Unexamined

if TYPE_CHECKING:  # the engine is imported by the relay, not by the command line (issue 29)
    from acp_proxy.core.engine.proxy import ProxyCore

__all__ = ["apply", "identity", "install", "own_files", "resolve_path", "same_file"]

_OWN = OwnFiles()


def resolve_path(path: str) -> str:
    """``path`` with ``..`` and the symbolic links of its longest existing prefix resolved.

    :func:`os.path.realpath` (non-strict: the components that do not exist are
    kept as given). A path that cannot be resolved (a loop, an unreadable
    directory) is returned as given: the rules still read it as given.
    """
    try:
        return os.path.realpath(path)
    except (OSError, ValueError):
        return path


def identity(path: str) -> tuple[int, int] | Unexamined | None:
    """``(st_dev, st_ino)`` of the file ``path`` names (symbolic links followed).

    Returns:
        ``None`` when there is no such file (``ENOENT``, ``ENOTDIR``: it may be
        made later, and is then decided on its path); :class:`Unexamined` for
        any other error (``EACCES``, ``ELOOP``, ``ENAMETOOLONG``...: fail closed).
    """
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        return Unexamined(exc.strerror or type(exc).__name__)
    except ValueError as exc:  # a NUL byte: never reached from the core (not absolute)
        return Unexamined(str(exc))
    return st.st_dev, st.st_ino


def same_file(places: Iterable[str]) -> SameFile:
    """The :data:`~acp_proxy.core.session.places.SameFile` check of the own files ``places``.

    Their identities are read now, and again when a place's identity is not
    among them (a file made since, as the trace is after the start, or
    replaced, as a config saved by rename): at most one ``stat`` per own file
    and per request place. The first place listed with an identity is the
    one named (the file as given, before its links and resolution). The
    identities read at the start are kept: a file replaced since is still known
    by its first inode (if the filesystem reuses that inode for another file,
    that file is refused: fail closed).
    """
    own = tuple(dict.fromkeys(places))

    def read() -> dict[tuple[int, int], str]:
        known: dict[tuple[int, int], str] = {}
        for place in own:
            ident = identity(place)
            if isinstance(ident, tuple):
                known.setdefault(ident, place)
        return known

    first = read()

    def check(path: str) -> str | Unexamined | None:
        ident = identity(path)
        if not isinstance(ident, tuple):
            return ident
        return first.get(ident) or read().get(ident)

    return check


def _chain(path: str) -> list[str]:
    """``path``, normalised, and every link it passes through to its target."""
    out = [posixpath.normpath(path)]
    current = path
    for _ in range(40):  # the kernel's own bound on links followed
        try:
            target = os.readlink(current)
        except (OSError, ValueError):
            break
        current = posixpath.normpath(posixpath.join(posixpath.dirname(current), target))
        out.append(current)
    out.append(resolve_path(path))
    return out


def _file_fields(cfg: Config) -> Iterable[str]:
    """Every non-empty file key of the configuration (``path``, ``*_file``)."""
    for section in attrs.fields(Config):
        value = getattr(cfg, section.name)
        if not attrs.has(type(value)):
            continue
        for field in attrs.fields(type(value)):
            if field.name == "path" or field.name.endswith("_file"):
                text = getattr(value, field.name)
                if isinstance(text, str) and text:
                    yield text


def own_files(
    cfg: Config, config_path: str | None, *, watch: bool = False, log_file: str | None = None
) -> OwnFiles:
    """The proxy's own files: out of reach of every request it governs.

    Args:
        cfg: the effective configuration (its ``audit.path``, ``trace.path``,
            ``listen.token_file`` and any other ``*_file`` key).
        config_path: the ``--config`` file, or ``None``.
        watch: ``--watch-config``: the file's directory is protected too, as
            itself (a terminal there could rename a file over the config), not
            the files below it.
        log_file: ``--log-file``.

    Returns:
        Each file as given (made absolute) and resolved, with the links between,
        and their :func:`same_file` check.
    """
    places: dict[str, bool] = {}
    files = [*_file_fields(cfg), *(p for p in (config_path, log_file) if p)]
    for name in files:
        for place in _chain(os.path.abspath(os.path.expanduser(name))):
            places[place] = True
    if watch and config_path:
        directory = os.path.dirname(os.path.abspath(os.path.expanduser(config_path)))
        for place in {posixpath.normpath(directory), resolve_path(directory)}:
            places.setdefault(place, False)
    return OwnFiles(places, same_file(places)) if places else OwnFiles()


def install(own: OwnFiles) -> None:
    """Makes ``own`` the proxy's own files for every core :func:`apply` prepares."""
    global _OWN
    _OWN = own


def apply(core: ProxyCore) -> ProxyCore:
    """Gives ``core`` the proxy's filesystem: path resolution and the own files."""
    core.permissions.use_filesystem(resolve_path, _OWN)
    return core
