"""The agent launched through the sandbox engine (issue 24; the README's threat model).

The engine is the Anthropic Sandbox Runtime (``srt``): on Linux, bubblewrap
(mount, pid and network namespaces, ``--die-with-parent``) with seccomp, and
the network filtered by domain through its own HTTP and SOCKS proxies; on
macOS, ``sandbox-exec``. acp-proxy writes no sandbox of its own: it writes
srt's settings file (:mod:`acp_proxy.config.sandbox_settings`, pure) into a
private directory, checks once that the engine starts with them (a probe
running ``true`` inside it), and then runs every agent as
``srt --settings FILE -- AGENT_CMD ...``.

Process fidelity through the engine: the agent's exit status is srt's (srt
exits with the command's status; a command killed by signal N gives
128+N). SIGINT, SIGTERM and SIGHUP are passed to the agent itself
(:class:`~acp_proxy.shell.transport.process.SandboxedCommand`); SIGKILL goes
to srt's process group: srt and bubblewrap end and the kernel kills every
process of the sandbox's pid namespace, so nothing the agent started (a
double-forked daemon included) outlives it.

The proxy SIGKILLed: srt starts bubblewrap through ``/bin/sh -c``, and that
shell, re-parented to init when srt dies, would keep bubblewrap's
``--die-with-parent`` from ever firing. So on Linux the engine itself runs as
init of a new pid namespace with its own ``/proc`` (util-linux ``unshare --pid
--fork --mount-proc --kill-child=SIGKILL``, :data:`PID_NAMESPACE`): ``unshare`` dies with the
proxy (``PR_SET_PDEATHSIG``), srt with ``unshare``, and when srt, the
namespace's init, dies the kernel kills every process in it.
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import attrs

from acp_proxy.config import Config
from acp_proxy.config.credentials import other_agents_credentials
from acp_proxy.config.sandbox_settings import (
    PINNED_SRT_VERSION,
    agent_config_files,
    agent_environment,
    private_cache_env,
    protected_files,
    settings_digest,
    settings_json,
    srt_settings,
    workspace_roots,
)
from acp_proxy.shell.log_levels import NOTICE
from acp_proxy.shell.transport.process import SandboxedCommand, engine_start_env

__all__ = [
    "ENGINE_TOOLS",
    "PID_NAMESPACE",
    "PROBE_TIMEOUT_SECONDS",
    "Sandbox",
    "SandboxUnavailable",
    "prepare_sandbox",
    "remove_private_dirs",
    "writable_root_of",
]

log = logging.getLogger("acp_proxy")

#: longest wait for ``srt --version`` and for the start-up probe
PROBE_TIMEOUT_SECONDS = 60.0

#: util-linux ``unshare`` arguments (after its path) that run the engine as init of a new
#: pid namespace killed with ``unshare``; a user other than root also needs a user namespace.
#: ``--mount-proc`` gives the namespace its own ``/proc`` (in a mount namespace of its
#: own): bubblewrap reads ``/proc/<its pid>/ns``, and under the host's ``/proc`` that pid,
#: numbered in the new namespace, names another process or none ("open /proc/24/ns
#: failed", so the sandbox did not start on a host where no process had that number).
PID_NAMESPACE = ("--pid", "--fork", "--mount-proc", "--kill-child=SIGKILL")


class SandboxUnavailable(Exception):
    """The engine is missing or cannot start with the generated settings.

    Attributes:
        reason: one sentence saying why (it goes to the client's error, the
            log and ``check-config``).
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@attrs.frozen
class Sandbox:
    """An engine that started once with the generated settings.

    Attributes:
        engine: the engine executable (resolved path).
        version: what ``engine --version`` printed.
        settings_path: the settings file (in a private directory, 0600).
        digest: ``sha256:<hex>`` of the settings file.
        settings: the settings themselves (for ``check-config``).
        workspace: the absolute workspace roots.
        env: the environment the engine and the agent start with (the proxy's, secrets
            stripped, private caches set).
        engine_tmp: a directory private to this proxy under which each start of the
            engine gets a ``TMPDIR`` of its own (:meth:`SandboxedCommand.launch_env`).
        launcher: the argv that runs the engine: ``unshare`` and :data:`PID_NAMESPACE`
            on Linux, then the engine's interpreter resolved at start-up (if it is a
            script) and the engine's real path.
    """

    engine: str
    version: str
    settings_path: str
    digest: str
    settings: dict[str, Any]
    workspace: list[str]
    launcher: tuple[str, ...]
    env: dict[str, str] = attrs.field(factory=dict)
    engine_tmp: str | None = None

    def wrap(self, command: Sequence[str]) -> SandboxedCommand:
        """The argv that runs ``command`` inside the sandbox (it remembers ``command``,
        so that stop signals reach the agent itself, the environment it starts
        with and where each start of the engine keeps its temporary files)."""
        argv = [*self.launcher, "--settings", self.settings_path, "--", *command]
        return SandboxedCommand(argv, command, dict(self.env), self.engine_tmp)

    def record(self) -> dict[str, object]:
        """The fields of the ``sandbox_started`` audit record."""
        return {
            "engine": self.engine,
            "version": self.version,
            "digest": self.digest,
            "workspace": self.workspace,
        }


def _run(
    argv: list[str], what: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_SECONDS,
            check=False,
            env=env,
        )
    except subprocess.TimeoutExpired:
        raise SandboxUnavailable(
            f"{what} did not finish within {PROBE_TIMEOUT_SECONDS:.0f} s"
        ) from None
    except OSError as exc:
        raise SandboxUnavailable(f"{what} cannot be run: {exc.strerror}") from None


def _short_tmp() -> str:
    """Where the engines' private ``TMPDIR`` s go: ``/tmp`` where it can be written,
    else the proxy's temporary directory. srt binds unix sockets there
    (``claude-http-<16 hex>.sock``), and a socket's path may be 107 bytes at most: a
    long ``TMPDIR`` of the proxy's, two levels further down, made srt fail with
    "Failed to create bridge sockets"."""
    if os.path.isdir("/tmp") and os.access("/tmp", os.W_OK | os.X_OK):
        return "/tmp"
    return tempfile.gettempdir()


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "no message"


def _touch(path: str) -> None:
    """Creates the proxy's own file if it is missing (so the engine can hide it: a
    path that does not exist when the sandbox starts is not masked)."""
    if os.path.exists(path) or not os.path.isdir(os.path.dirname(path) or "/"):
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    except OSError as exc:
        raise SandboxUnavailable(
            f"cannot create {path!r} to protect it from the agent: {exc.strerror}"
        ) from None
    os.close(fd)


def writable_root_of(config: Config, path: str) -> str | None:
    """The root the sandboxed agent may write (a workspace root or a ``[sandbox]
    writable`` path, real) that ``path`` (its real path) lies in, or ``None``."""
    roots = [root for root, _why in _named_writable_roots(config)]
    return _inside(os.path.realpath(path), roots)


def _named_writable_roots(config: Config) -> list[tuple[str, str]]:
    """The real paths the agent may write (workspace roots and ``[sandbox] writable``),
    each with what makes it writable (for an error's reader)."""
    cwd, home = os.getcwd(), os.path.expanduser("~")
    here = os.path.realpath(cwd)
    named = [
        (
            real := os.path.realpath(root),
            "the workspace: the proxy's working directory; [sandbox] workspace sets another"
            if real == here
            else "the workspace, [sandbox] workspace",
        )
        for root in workspace_roots(config.sandbox, cwd=cwd, home=home)
    ]
    named += [
        (os.path.realpath(os.path.join(cwd, os.path.expanduser(p))), "a [sandbox] writable path")
        for p in config.sandbox.writable
    ]
    return named


def _inside(path: str, roots: Sequence[str]) -> str | None:
    """The first of ``roots`` that ``path`` is or lies inside, or ``None``."""
    for root in roots:
        if path == root or path.startswith(root.rstrip("/") + "/"):
            return root
    return None


def _engine_argv(engine: str) -> list[str]:
    """The argv that runs the engine without a ``#!`` lookup at run time: an interpreter
    script (srt's ``#!/usr/bin/env node``) is run by its interpreter resolved now,
    through ``PATH`` as ``env`` would; anything else is run itself.

    Raises:
        SandboxUnavailable: the interpreter is not found.
    """
    real = os.path.realpath(engine)
    try:
        with open(real, "rb") as f:
            first = f.readline(512)
    except OSError as exc:
        raise SandboxUnavailable(
            f"the sandbox engine {real} cannot be read: {exc.strerror}"
        ) from None
    if not first.startswith(b"#!"):
        return [real]
    words = first[2:].decode(errors="replace").split()
    if words and os.path.basename(words[0]) == "env":
        words = [w for w in words[1:] if not w.startswith("-")][:1]
    found = shutil.which(words[0]) if words else None
    if found is None:
        raise SandboxUnavailable(
            f"the interpreter of the sandbox engine {real} ({first[2:].decode().strip()}) "
            "is not found: install it or put it on PATH"
        )
    return [os.path.realpath(found), *words[1:], real]


def _create_config(path: str) -> None:
    """Creates a missing executable-configuration entry of an agent (empty: ``{}`` for
    JSON, a directory for ``.../``) so the engine can keep it read-only; nothing when
    its directory does not exist."""
    target = path.rstrip("/")
    if os.path.lexists(target) or not os.path.isdir(os.path.dirname(target)):
        return
    try:
        if path.endswith("/"):
            os.mkdir(target, 0o700)
        else:
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write("{}\n" if target.endswith(".json") else "")
    except OSError as exc:
        raise SandboxUnavailable(
            f"cannot create {target!r} to keep it read-only for the agent: {exc.strerror}"
        ) from None


#: private directories of this proxy (settings, the agent's caches), removed at exit
_PRIVATE_DIRS: list[str] = []


def remove_private_dirs() -> None:
    """Removes the sandbox's private directories (settings file, the agent's caches):
    at exit, and before the proxy dies of its agent's signal."""
    while _PRIVATE_DIRS:
        shutil.rmtree(_PRIVATE_DIRS.pop(), ignore_errors=True)


atexit.register(remove_private_dirs)


#: The programs srt 0.0.83 finds on ``PATH`` and runs: ``which`` (to find the others),
#: ``bwrap``, ``socat`` and ``rg`` outside the sandbox, ``bash`` (found by ``which``) as
#: the sandbox's first process, before its seccomp filter applies.
ENGINE_TOOLS = ("which", "bwrap", "socat", "rg", "bash")


def _check_out_of_reach(named: list[tuple[str, str]], engine_argv: Sequence[str]) -> None:
    """Refuses code the agent could rewrite that runs unconfined at the next start: the
    proxy's own Python and packages, the engine, its package and its interpreter, and
    the tools the engine runs (:data:`ENGINE_TOOLS`; srt's README: install it outside
    writable paths) and ``unshare``, the launcher.

    Raises:
        SandboxUnavailable: one of them lies in a workspace or writable path (``named``:
            :func:`_named_writable_roots`).
    """
    roots = [root for root, _why in named]
    here = os.path.dirname(os.path.realpath(__file__))
    ours = [
        ("the proxy's Python", os.path.realpath(sys.executable)),
        ("the proxy's own code", os.path.dirname(here)),
        ("the proxy's Python packages", os.path.realpath(sysconfig.get_paths()["purelib"])),
    ]
    script = engine_argv[-1]
    # the package around the executable (node_modules/<scope>/<name>/dist/cli.js)
    package = os.path.dirname(os.path.dirname(script))
    engine = [("the sandbox engine", script), ("the sandbox engine", package)]
    if len(engine_argv) > 1:
        engine.append(("the sandbox engine's interpreter", engine_argv[0]))
    tools = [
        (f"{tool}, which the sandbox engine runs,", os.path.realpath(found))
        for tool in ENGINE_TOOLS
        if (found := shutil.which(tool)) is not None
    ]
    unshare = shutil.which("unshare") if sys.platform == "linux" else None
    if unshare is not None:  # the launcher (_launcher): run by the proxy, unconfined
        tools.append(("unshare, which starts the sandbox engine,", os.path.realpath(unshare)))
    for what, path in [*ours, *engine, *tools]:
        root = _inside(path, roots)
        if root is not None:
            shown = script if what == "the sandbox engine" else path
            why = dict(named)[root]
            raise SandboxUnavailable(
                f"{what} {shown} lies inside {root} ({why}), which the agent may "
                "write: install it outside the workspace and writable paths"
            )


def _check_own_files_fixed(
    config: Config,
    named: list[tuple[str, str]],
    config_file: str | None,
    log_file: str | None,
) -> None:
    """Refuses a proxy's own file reached through a symbolic link that lies in a directory
    the agent may write: the engine hides the file the link leads to (a mount over it:
    it cannot be written, removed or renamed, nor can the directories around it), not
    the link, so the agent could re-point the link and give the next start, or a
    reload, its own file (its config, the sandbox off).

    Raises:
        SandboxUnavailable: such a file, named with the link (``named``:
            :func:`_named_writable_roots`).
    """
    roots = [root for root, _why in named]
    cwd, home = os.getcwd(), os.path.expanduser("~")
    for own in protected_files(
        config, cwd=cwd, home=home, config_file=config_file, log_file=log_file
    ):
        at = "/"
        for part in own.strip("/").split("/"):
            at = os.path.join(at, part)
            if not os.path.islink(at):
                continue
            root = _inside(os.path.realpath(os.path.dirname(at)), roots)
            if root is not None:
                raise SandboxUnavailable(
                    f"the proxy's own file {own} is reached through the symbolic link "
                    f"{at}, inside {root} ({dict(named)[root]}), which the agent may "
                    f"re-point: name the file itself ({os.path.realpath(own)}), or keep "
                    "it outside the workspace and writable paths"
                )


def _launcher() -> tuple[str, ...]:
    """``unshare`` and :data:`PID_NAMESPACE` (plus a user namespace keeping the uid, for a
    user other than root) on Linux; nothing elsewhere.

    Raises:
        SandboxUnavailable: Linux without util-linux ``unshare``.
    """
    if sys.platform != "linux":
        return ()
    unshare = shutil.which("unshare")
    if unshare is None:
        raise SandboxUnavailable(
            "util-linux unshare is not found on PATH: install util-linux, which keeps "
            "the sandbox from outliving the proxy"
        )
    user = ("--user", "--map-current-user") if os.geteuid() != 0 else ()
    return (unshare, *user, *PID_NAMESPACE)


def _write_settings(
    config: Config,
    *,
    config_file: str | None,
    log_file: str | None,
    create_missing: bool,
    agent_command: Sequence[str],
) -> tuple[dict[str, Any], bytes, str, str]:
    """Generates the settings and writes them to a new private directory; makes the
    agent's private cache directory.

    Returns:
        The settings, their bytes, the file's path and the cache directory.

    Raises:
        SandboxUnavailable: a protected file or the settings cannot be written.
    """
    cwd, home = os.getcwd(), os.path.expanduser("~")
    protected = protected_files(
        config, cwd=cwd, home=home, config_file=config_file, log_file=log_file
    )
    for path in protected if create_missing else ():
        _touch(path)
    for path in agent_config_files(config.sandbox, cwd=cwd, home=home) if create_missing else ():
        _create_config(path)
    try:
        directory = tempfile.mkdtemp(prefix="acp-proxy-sandbox-")
        _PRIVATE_DIRS.append(directory)
        cache_dir = tempfile.mkdtemp(prefix="acp-proxy-cache-")
        _PRIVATE_DIRS.append(cache_dir)
        os.mkdir(os.path.join(cache_dir, "tmp"), 0o700)  # the agent's TMPDIR (private_cache_env)
        hidden = [*config.sandbox.deny_read, *other_agents_credentials(agent_command)]
        settings = srt_settings(
            attrs.evolve(config.sandbox, deny_read=hidden),
            cwd=cwd,
            home=home,
            protected=protected,
            cache_dir=cache_dir,
        )
        data = settings_json(settings)
        settings_path = os.path.join(directory, "srt-settings.json")
        fd = os.open(settings_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
    except OSError as exc:
        remove_private_dirs()
        raise SandboxUnavailable(f"cannot write the sandbox settings: {exc.strerror}") from None
    return settings, data, settings_path, cache_dir


def prepare_sandbox(
    config: Config,
    *,
    config_file: str | None = None,
    log_file: str | None = None,
    create_missing: bool = True,
    agent_command: Sequence[str] = (),
) -> Sandbox:
    """Finds the engine, writes its settings and checks that it starts with them.

    Blocking (subprocesses): call it before the event loop, once per proxy.

    Args:
        config: the effective configuration (``[sandbox]`` and the paths of
            the proxy's own files).
        config_file: the ``--config`` file, protected from the agent.
        log_file: the ``--log-file``, protected from the agent.
        create_missing: create the proxy's own files that do not exist yet
            (empty), so the engine can hide them (``check-config``: false).
        agent_command: the agent's argv: the other common agents' login files are
            hidden from it (:func:`~acp_proxy.config.credentials.other_agents_credentials`).

    Raises:
        SandboxUnavailable: the engine is not found, ``--version`` fails, the
            settings cannot be written, or the probe fails (the reason is the
            engine's last stderr line).
    """
    sandbox = config.sandbox
    command = sandbox.engine_command
    engine = shutil.which(os.path.expanduser(command))
    if engine is None:
        raise SandboxUnavailable(
            f"the sandbox engine {command!r} is not found on PATH: install it "
            f"(npm install -g @anthropic-ai/sandbox-runtime@{PINNED_SRT_VERSION}) "
            "or set [sandbox] engine_command"
        )
    engine = os.path.abspath(engine)
    argv = _engine_argv(engine)
    named = _named_writable_roots(config)
    _check_out_of_reach(named, argv)
    _check_own_files_fixed(config, named, config_file, log_file)
    launcher = (*_launcher(), *argv)
    # srt names its mux socket after its pid (/tmp/srt-mux-PID-N.sock), and every srt
    # is pid 1 of its own namespace here: in one TMPDIR a second engine (another proxy,
    # another --listen connection, this probe) replaced the first's socket, whose agent
    # then met the other proxy (407, 502). So each start gets a TMPDIR of its own.
    engine_tmp = tempfile.mkdtemp(prefix="acp-proxy-engine-", dir=_short_tmp())
    _PRIVATE_DIRS.append(engine_tmp)
    with ThreadPoolExecutor(1) as pool:  # --version runs beside the probe: start-up time
        version_job = pool.submit(_run, [*argv, "--version"], f"{engine} --version")
        settings, data, settings_path, cache_dir = _write_settings(
            config,
            config_file=config_file,
            log_file=log_file,
            create_missing=create_missing,
            agent_command=agent_command,
        )
        try:
            probe = _run(
                [*launcher, "--settings", settings_path, "--", "true"],
                "the sandbox probe",
                engine_start_env(None, engine_tmp),
            )
            done = version_job.result()
            if done.returncode != 0:
                raise SandboxUnavailable(
                    f"{engine} --version failed (status {done.returncode}): "
                    f"{_last_line(done.stderr)}"
                )
            if probe.returncode != 0:
                raise SandboxUnavailable(
                    f"{engine} cannot start the sandbox (status {probe.returncode}): "
                    f"{_last_line(probe.stderr)}"
                )
        except SandboxUnavailable:
            remove_private_dirs()
            raise
    version = done.stdout.strip()
    if version != PINNED_SRT_VERSION:
        log.warning(
            "sandbox engine %s is version %s; acp-proxy is tested with %s",
            engine,
            version,
            PINNED_SRT_VERSION,
        )
    cwd, home = os.getcwd(), os.path.expanduser("~")
    env, stripped = agent_environment(sandbox, os.environ, private_cache_env(cache_dir))
    if stripped:  # at the default level: an agent missing its API key says only that
        log.log(
            NOTICE,
            "sandbox: not passed to the agent (env_deny): %s; name one in [sandbox] "
            "env_allow to pass it",
            " ".join(stripped),
        )
    return Sandbox(
        engine,
        version,
        settings_path,
        settings_digest(data),
        settings,
        workspace_roots(sandbox, cwd=cwd, home=home),
        launcher,
        env,
        engine_tmp,
    )
