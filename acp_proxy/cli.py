"""Command line (docs/design.md section 3, "Command line").

::

    acp-proxy [--config FILE] [--audit-log FILE] [--log-level LEVEL] -- AGENT_CMD [ARGS...]
    acp-proxy --listen ws://HOST:PORT/PATH [...] -- AGENT_CMD [ARGS...]
    acp-proxy --listen ws://HOST:PORT/PATH --upstream ws://AGENT:PORT/PATH [...]
    acp-proxy --connect ws://HOST:PORT/PATH [...]
    acp-proxy --chain [...]
    acp-proxy demo
    acp-proxy config [default|strict|budgets|permissions]
    acp-proxy check-config FILE [-- AGENT_CMD ...]
    acp-proxy replay [--config FILE] [--diff] TRACE
    acp-proxy view TRACE [-o FILE.html | --format conductor -o FILE]
    acp-proxy audit verify FILE [--key-file K]

This module is the only place that maps errors to exit statuses: the
agent's status as the proxy's (when the agent died of signal N, the proxy
dies of signal N too); 2 for a :class:`~acp_proxy.errors.UsageError`
(usage, configuration, a file or command the options name), printed as one
line on stderr; 1 for a failed ``--connect`` and for an internal error.
"""

from __future__ import annotations

import gc
import os
import sys

from acp_proxy import __version__
from acp_proxy.config.files import (
    BUNDLED,
    BUNDLED_ABOUT,
    bundled_text,
    check_writable,
    expand_config_paths,
    expand_path,
    find_command,
    open_regular,
    resolve_audit_paths,
)
from acp_proxy.errors import AgentSignalled, ConfigError, ConnectFailed, UsageError
from acp_proxy.shell.fast_lane import read_options
from acp_proxy.shell.log_levels import DEFAULT_LEVEL, LEVEL_NAMES, register_notice

# The agent of the common command lines starts before argparse, typing, shlex and
# signal are imported (issue 29).
TYPE_CHECKING = False
if TYPE_CHECKING:  # the shell, the config tree and logging are imported when used (issue 29)
    import argparse
    import logging
    from collections.abc import Awaitable, Callable, Sequence
    from typing import NoReturn, TextIO

    from acp_proxy.config import Config
    from acp_proxy.shell.audit import AuditLog
    from acp_proxy.shell.opening import Opening
    from acp_proxy.shell.spawn import EarlyStart

__all__ = ["effective_config", "main"]


def _log() -> logging.Logger:
    """The proxy's logger (``logging`` is imported after the agent's early start)."""
    import logging

    return logging.getLogger("acp_proxy")


#: the usage lines (argparse prints them after "usage: "; each form under the first)
USAGE = """acp-proxy [options] -- AGENT_CMD [ARGS...]
           stdio client <-> agent subprocess (the drop-in form)
       acp-proxy --listen ws://HOST:PORT/PATH [options] -- AGENT_CMD [ARGS...]
           WebSocket clients <-> one agent subprocess per connection
       acp-proxy --listen ws://HOST:PORT/PATH --upstream ws://AGENT:PORT/PATH [options]
           WebSocket clients <-> one WebSocket to a remote agent per connection (sidecar)
       acp-proxy --connect ws://HOST:PORT/PATH [options]
           stdio client <-> remote agent over WebSocket
       acp-proxy --chain [options]
           proxy component under an ACP conductor
       acp-proxy demo [--json] [--trace FILE]
           scripted client and agent through the proxy
       acp-proxy config [default|strict|budgets|permissions]
           print a shipped configuration file, with its comments
       acp-proxy check-config FILE [-- AGENT_CMD ...]
           validate a config file and what it names, print the effective config
       acp-proxy replay [--config FILE] [--diff] TRACE
           the decisions a configuration makes on a recorded trace (no agent started)
       acp-proxy view TRACE [-o FILE.html | --port N] [--format conductor -o FILE]
           a trace as a page: timeline, session tree, decisions (served, or one file)
       acp-proxy audit verify FILE [--key-file K]
           check an audit log's hash chain: changed, missing, reordered or cut-off records"""

#: options that apply to some modes only -> the modes, as the user reads them
_MODE_OPTIONS = {
    "max_connections": ("--max-connections", ("listen",), "--listen"),
    "token_file": ("--token-file", ("listen", "connect"), "--listen and --connect"),
    "tokens_file": ("--tokens-file", ("listen",), "--listen"),
    "no_token": ("--no-token", ("listen",), "--listen"),
    "upstream": ("--upstream", ("listen",), "--listen"),
    "watch_config": (
        "--watch-config",
        ("stdio", "listen", "connect"),
        "the stdio form, --listen and --connect",
    ),
}


def _parser() -> argparse.ArgumentParser:
    import argparse

    class _Parser(argparse.ArgumentParser):
        """An argument parser whose mistakes are one :class:`UsageError` sentence."""

        def error(self, message: str) -> NoReturn:
            raise UsageError(f"{message} (see acp-proxy --help)")

    p = _Parser(
        prog="acp-proxy",
        usage=USAGE,
        # no prefixes: --audit and --a were read as --audit-log, and a prefix that a
        # later option shares would change what an editor's saved command line means
        allow_abbrev=False,
        description="Transparent ACP proxy: subagent registry, capability enforcement, "
        "hold buffer, duplicate state report removal. Paths may use ~ and $VAR.",
    )
    p.add_argument("--version", action="version", version=f"acp-proxy {__version__}")
    p.add_argument("--config", metavar="FILE", help="TOML configuration file")
    p.add_argument(
        "--audit-log", metavar="FILE", help="JSON-lines audit log (overrides [audit] path)"
    )
    p.add_argument(
        "--log-level",
        default=DEFAULT_LEVEL,
        type=str.lower,  # INFO reads as info (the fast lane sends it here)
        choices=LEVEL_NAMES,
        help="the proxy's own log level (stderr); the default, notice, shows one line per "
        "request the proxy refused or answered for the user",
    )
    p.add_argument("--log-file", metavar="FILE", help="write the proxy's own log here, not stderr")
    p.add_argument("--max-message-bytes", type=int, metavar="N", help="overrides [limits]")
    p.add_argument(
        "--listen", metavar="URL", help="serve ACP over WebSocket at ws://HOST:PORT/PATH"
    )
    p.add_argument("--connect", metavar="URL", help="the agent is a remote ACP WebSocket endpoint")
    p.add_argument("--token-file", metavar="FILE", help="bearer token file for --listen/--connect")
    p.add_argument(
        "--tokens-file",
        metavar="FILE",
        help="--listen: named principals, one 'NAME TOKEN' or 'NAME sha256:HEX' per line (0600)",
    )
    p.add_argument(
        "--no-token",
        action="store_const",
        const=True,
        help="--listen on loopback: no bearer token (every local user can connect)",
    )
    p.add_argument(
        "--upstream",
        metavar="URL",
        help="--listen: the agent is a remote ACP WebSocket endpoint (one connection per client)",
    )
    p.add_argument(
        "--watch-config",
        action="store_const",
        const=True,
        help="reload the policy when the --config file changes (SIGHUP always reloads it)",
    )
    p.add_argument(
        "--max-connections", type=int, metavar="N", help="--listen: concurrent connections"
    )
    p.add_argument(
        "--chain", action="store_true", help="run as a proxy component under a conductor"
    )
    p.add_argument(
        "--trace", metavar="FILE", help="wire trace, one JSON line per message (overrides [trace])"
    )
    p.add_argument(
        "--trace-content",
        action="store_true",
        help="put message text, secrets redacted, in the trace (needed by replay)",
    )
    p.add_argument(
        "--metrics",
        metavar="ADDR",
        help="serve /metrics, /healthz, /readyz, /status at HOST:PORT (e.g. 127.0.0.1:9464)",
    )
    p.add_argument(
        "--sandbox",
        action="store_true",
        help="run the agent confined by the OS sandbox of [sandbox] (engine: srt); "
        "overrides [sandbox] enabled",
    )
    p.add_argument(
        "--otel",
        action="store_true",
        help="export OpenTelemetry spans and metrics over OTLP/HTTP (OTEL_* variables; "
        "needs acp-proxy[otel]); overrides [telemetry] enabled",
    )
    return p


def _open_log_file(log_file: str | None) -> TextIO | None:
    """``log_file`` opened for appending (``None``: the log goes to stderr).

    Raises:
        UsageError: ``log_file`` cannot be written.
    """
    if not log_file:
        return None
    check_writable(log_file, "--log-file")
    try:
        fd = open_regular(log_file, "--log-file")
        return open(fd, "a", encoding="utf-8", buffering=1)
    except OSError as exc:
        raise UsageError(f"cannot write --log-file {log_file!r}: {exc.strerror}") from None


def _install_logging(level: str, stream: TextIO | None) -> None:
    """The proxy's own log handler, on ``stream`` (``None``: stderr). A log file's lines
    begin with the time (ISO 8601, UTC, as the audit log's); stderr's do not (the
    editor's log view times them)."""
    import logging

    handler = logging.StreamHandler(sys.stderr if stream is None else stream)
    if stream is None:
        handler.setFormatter(logging.Formatter("acp-proxy: %(levelname)s: %(message)s"))
    else:
        from acp_proxy.shell.timefmt import iso_utc

        class Timed(logging.Formatter):
            def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
                return iso_utc(record.created)

        handler.setFormatter(Timed("%(asctime)s acp-proxy: %(levelname)s: %(message)s"))
    root = logging.getLogger("acp_proxy")
    root.handlers[:] = [handler]
    register_notice()
    root.setLevel(level.upper())
    root.propagate = False


def effective_config(args: argparse.Namespace) -> Config:
    """The config file (if any) with command-line overrides applied, paths expanded.

    Raises:
        ConfigError: the file or an override is invalid.
        UsageError: a path names an environment variable that is not set.
    """
    import attrs

    from acp_proxy.config import Config

    if args.config:
        from acp_proxy.config.io import load_config

        config_file = expand_path(args.config, "--config")
        cfg = resolve_audit_paths(expand_config_paths(load_config(config_file)), config_file)
    else:
        cfg = Config()
    try:
        if args.audit_log is not None:
            path = expand_path(args.audit_log, "--audit-log")
            cfg = attrs.evolve(cfg, audit=attrs.evolve(cfg.audit, path=path))
        if args.max_message_bytes is not None:
            cfg = attrs.evolve(
                cfg, limits=attrs.evolve(cfg.limits, max_message_bytes=args.max_message_bytes)
            )
        if args.token_file is not None:
            path = expand_path(args.token_file, "--token-file")
            cfg = attrs.evolve(cfg, listen=attrs.evolve(cfg.listen, token_file=path))
        if args.tokens_file is not None:
            path = expand_path(args.tokens_file, "--tokens-file")
            cfg = attrs.evolve(cfg, listen=attrs.evolve(cfg.listen, tokens_file=path))
        if args.trace is not None or args.trace_content:
            trace = cfg.trace
            if args.trace is not None:
                trace = attrs.evolve(trace, path=args.trace)
            if args.trace_content:
                if not trace.path:
                    raise UsageError(
                        "--trace-content needs a trace to put the content in: "
                        "add --trace FILE (or [trace] path in the config)"
                    )
                trace = attrs.evolve(trace, include_content=True)
            cfg = attrs.evolve(cfg, trace=trace)
        if args.metrics is not None:
            cfg = attrs.evolve(cfg, telemetry=attrs.evolve(cfg.telemetry, metrics=args.metrics))
        if args.otel:
            cfg = attrs.evolve(cfg, telemetry=attrs.evolve(cfg.telemetry, enabled=True))
        if args.max_connections is not None:
            cfg = attrs.evolve(
                cfg, listen=attrs.evolve(cfg.listen, max_connections=args.max_connections)
            )
        if getattr(args, "sandbox", False):
            cfg = attrs.evolve(cfg, sandbox=attrs.evolve(cfg.sandbox, enabled=True))
    except ValueError as exc:
        raise ConfigError("command line", str(exc)) from exc
    return resolve_sandbox_workspace(expand_config_paths(cfg))


def resolve_sandbox_workspace(cfg: Config) -> Config:
    """``cfg`` with ``[sandbox] workspace`` made absolute (``[]``: the working directory)
    when the sandbox is on: the core compares session directories with these roots."""
    if not cfg.sandbox.enabled:
        return cfg
    import attrs

    from acp_proxy.config.sandbox_settings import workspace_roots

    home = os.path.expanduser("~")
    roots = workspace_roots(cfg.sandbox, cwd=os.getcwd(), home=home)
    return attrs.evolve(cfg, sandbox=attrs.evolve(cfg.sandbox, workspace=roots))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``acp-proxy``; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    collecting = gc.isenabled()  # _main holds the collector off while a run starts
    try:
        status = _main(argv)
        if sys.stdout is not None:  # None: fd 1 was closed when the interpreter started
            sys.stdout.flush()
        return status
    except UsageError as exc:
        print(f"acp-proxy: {exc}", file=sys.stderr)
        return 2
    except ConnectFailed as exc:
        print(f"acp-proxy: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return _stdout_closed()
    finally:
        if collecting:
            gc.enable()


#: the status of a command whose standard output was closed by its reader (``demo |
#: head -1``): 128 + SIGPIPE, what a shell reports for a tool that SIGPIPE ended
STDOUT_CLOSED_STATUS = 128 + 13


def _stdout_closed() -> int:
    """Quiet exit when the reader of stdout went away: stdout is pointed at
    /dev/null so that the interpreter's final flush does not fail again."""
    import contextlib

    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return STDOUT_CLOSED_STATUS


def _main(argv: list[str]) -> int:
    if "--" in argv:
        cut = argv.index("--")
        opts, agent_cmd = argv[:cut], argv[cut + 1 :]
    else:
        opts, agent_cmd = argv, []
    if opts and opts[0] == "demo":
        from acp_proxy.demo import run_demo

        demo_status: int = run_demo(opts[1:])
        return demo_status
    if opts and opts[0] == "check-config":
        return _check_config(opts[1:], agent_cmd)
    if opts and opts[0] == "config":
        return _print_config(opts[1:])
    if opts and opts[0] == "audit":
        from acp_proxy.shell.audit_verify import run_audit

        return run_audit(opts[1:])
    if opts and opts[0] == "replay":
        from acp_proxy.shell.replay import run_replay

        return run_replay(opts[1:])
    if opts and opts[0] == "view":
        from acp_proxy.shell.view import run_view

        return run_view(opts[1:])
    if opts == ["--version"]:  # what argparse prints for it, without the parser (issue 29)
        print(f"acp-proxy {__version__}")
        return 0
    args = read_options(opts)  # the common forms (shell.fast_lane), else argparse
    extra: list[str] = []
    if args is None:
        try:
            args, extra = _parser().parse_known_args(opts)
        except SystemExit as exc:  # --help, --version
            return 0 if exc.code == 0 else 2
    if extra:
        import shlex

        if not extra[0].startswith("-"):
            raise UsageError(
                "put -- before the agent command: "
                f"acp-proxy [options] -- {shlex.join(extra + agent_cmd)}"
            )
        raise UsageError(f"unrecognized option {extra[0]} (see acp-proxy --help)")
    mode = _mode(args, agent_cmd)
    if mode != "listen":
        _require_stdio()
    # No cyclic collection while the run imports and builds (~3% of its start-up
    # instructions); re-enabled, with what exists by then frozen, when the relay starts.
    gc.disable()
    log_stream = _open_log_file(args.log_file and expand_path(args.log_file, "--log-file"))
    early = None
    if _default_config(mode, args):  # nothing left can refuse: the agent starts now
        find_command(agent_cmd[0])
        early = _start_early(mode, None, agent_cmd)
    _install_logging(args.log_level, log_stream)
    cfg = effective_config(args)
    own_files_cfg = cfg  # the files protected: those of the config as given (no token made yet)
    if early is None and mode in ("stdio", "listen") and agent_cmd:
        find_command(agent_cmd[0])  # missing: exit 2 with the sentence; not executable: 127
    if mode == "listen":
        from acp_proxy.shell.topology.principals import listen_token

        cfg, args.generated_token = listen_token(cfg, args.listen, no_token=bool(args.no_token))
    run_id = os.urandom(6).hex()
    from acp_proxy.shell.audit_setup import mirror_audit, open_audit

    audit = open_audit(cfg, {"pid": os.getpid(), "run": run_id})
    cfg, agent_cmd, refusal = _confine(mode, args, cfg, agent_cmd, audit)
    if refusal is not None:
        return _fail_closed(mode, cfg, refusal, audit)
    if early is None:
        early = _start_early(mode, cfg, agent_cmd)
    _protect_own_files(args, own_files_cfg)  # cannot refuse: after the agent's early start
    if not _default_config(mode, args):
        _warn_risky(cfg)
    from acp_proxy.shell.observe import install

    hub = None
    if _observed(cfg):  # else nothing observes: no hub, and no trio imported for one
        from acp_proxy.shell.watch import open_hub

        hub = open_hub(cfg, run_id)
    install(hub)
    if hub is not None:
        hub.audit = audit
        audit = mirror_audit(hub, audit, {"pid": os.getpid(), "run": run_id})
    try:
        status = _run(mode, args, cfg, agent_cmd, audit, early)
    except AgentSignalled as exc:
        status = -exc.signum
    except KeyboardInterrupt:
        return 130
    except (UsageError, ConnectFailed):
        raise
    except Exception:
        _log().exception("internal error")
        return 1
    finally:
        from acp_proxy.shell.routing import flush_log_summaries

        flush_log_summaries(everything=True)
        if early is not None:
            from acp_proxy.shell.spawn import release_signals

            release_signals()
        if audit is not None:
            audit.close()
        install(None)
        if hub is not None:
            hub.close()
    if audit is not None and audit.failure is not None:
        print(f"acp-proxy: {audit.failure}", file=sys.stderr)
        return AUDIT_FAILED_STATUS
    return _die_like_the_agent(-status) if status < 0 else status


#: the exit status after a lost audit record with ``audit.required``
AUDIT_FAILED_STATUS = 1


def _confine(
    mode: str,
    args: argparse.Namespace,
    cfg: Config,
    agent_cmd: list[str],
    audit: AuditLog | None,
) -> tuple[Config, list[str], str | None]:
    """Puts the agent command inside the sandbox when ``[sandbox]`` is on (issue 24).

    Returns:
        The config (sandbox off where it does not apply: a remote agent), the
        agent command to run, and the reason the required sandbox could not
        start (``None`` when it started, or is off, or is not required).
    """
    if not cfg.sandbox.enabled:
        return cfg, agent_cmd, None
    import attrs

    log = _log()
    if not agent_cmd:  # --connect, --upstream, --chain: acp-proxy starts no agent
        log.warning("[sandbox] does not apply: acp-proxy does not start the agent in this mode")
        return attrs.evolve(cfg, sandbox=attrs.evolve(cfg.sandbox, enabled=False)), agent_cmd, None
    from acp_proxy.core.actions import Audit, AuditEvent
    from acp_proxy.shell.sandbox import SandboxUnavailable, prepare_sandbox, writable_root_of

    config_file = expand_path(args.config, "--config") if args.config else None
    log_file = expand_path(args.log_file, "--log-file") if args.log_file else None
    try:
        sandbox = prepare_sandbox(
            cfg, config_file=config_file, log_file=log_file, agent_command=agent_cmd
        )
    except SandboxUnavailable as exc:
        if audit is not None:
            fields = {"reason": exc.reason, "required": cfg.sandbox.required}
            audit.write(Audit(AuditEvent.SANDBOX_FAILED, None, fields))
        if cfg.sandbox.required:
            return cfg, agent_cmd, exc.reason
        log.warning("the sandbox could not start; the agent runs UNCONFINED: %s", exc.reason)
        off = attrs.evolve(cfg.sandbox, enabled=False)
        return attrs.evolve(cfg, sandbox=off), agent_cmd, None
    log.info("sandbox: %s %s, settings %s", sandbox.engine, sandbox.version, sandbox.digest)
    if audit is not None:
        audit.write(Audit(AuditEvent.SANDBOX_STARTED, None, sandbox.record()))
        chained = audit.chained
        if chained is not None and (root := writable_root_of(cfg, chained.path)) is not None:
            # the engine hides the file there now; one made after a rotation it would not
            chained.reopen_refused = (
                f"it lies inside {root}, which the sandboxed agent may write; keep the "
                "audit log outside the workspace and writable paths to rotate it"
            )
    return cfg, sandbox.wrap(agent_cmd), None


#: options that never change the effective configuration (they choose the mode or the log)
_NOT_CONFIG_OPTIONS = frozenset(
    {"log_level", "log_file", "listen", "connect", "chain", "upstream", "no_token", "watch_config"}
)


def _require_stdio() -> None:
    """The stdio form, ``--connect`` and ``--chain`` carry the client (or conductor) on
    fds 0 and 1: one closed at start would be taken by the next pipe opened (the
    agent's), so the proxy refuses to start.

    Raises:
        UsageError: fd 0 or fd 1 is not open.
    """
    for fd, name in ((0, "standard input"), (1, "standard output")):
        try:
            os.fstat(fd)
        except OSError:
            raise UsageError(
                f"{name} is closed: the client's messages travel on the proxy's stdin and "
                "stdout, so start it with both open (or use --listen)"
            ) from None


def _default_config(mode: str, args: argparse.Namespace) -> bool:
    """True for the stdio form with no config file and no option setting a key: the
    effective configuration is then ``Config()``, which is valid and has no audit log,
    sandbox, trace, telemetry or budget store (tests pin both), so the agent can start
    before the tree is even imported (issue 29)."""
    return mode == "stdio" and all(
        value is None or value is False
        for dest, value in vars(args).items()
        if dest not in _NOT_CONFIG_OPTIONS
    )


def _starts_late(cfg: Config) -> bool:
    """True when something opened after the agent's early start may still refuse the
    command line (exit 2): a trace file, the OpenTelemetry bridge, the ``--metrics``
    server or a ``[budgets] store``; the agent then starts when the relay does."""
    return _observed(cfg) or bool(cfg.budgets.store)


def _observed(cfg: Config) -> bool:
    """True when something observes the traffic: a trace, OpenTelemetry, ``--metrics``."""
    telemetry = cfg.telemetry
    return bool(cfg.trace.path or telemetry.enabled or telemetry.metrics)


def _start_early(mode: str, cfg: Config | None, agent_cmd: list[str]) -> EarlyStart | None:
    """Starts the agent of the stdio form now, before the relay is imported, so that it
    boots while the proxy sets up (issue 29); ``None`` where it is started later.

    Only once nothing left can refuse the command line (see :func:`_starts_late`;
    ``cfg`` ``None``: the default configuration, see :func:`_default_config`).
    """
    if mode != "stdio" or (cfg is not None and _starts_late(cfg)):
        return None
    from acp_proxy.shell.spawn import start_early

    return start_early(agent_cmd)


def _fail_closed(mode: str, cfg: Config, reason: str, audit: AuditLog | None) -> int:
    """The required sandbox could not start: no agent runs. On stdio the client's first
    request is answered with the reason; the proxy exits with status 126."""
    from acp_proxy.shell.topology.refuse import SANDBOX_FAILED_STATUS, refuse_first_request

    print(f"acp-proxy: the sandbox could not start: {reason}", file=sys.stderr, flush=True)
    try:
        if mode == "stdio":
            from acp_proxy.shell.transport.stdio import open_stdio_transport

            async def refuse() -> int:
                client = open_stdio_transport(cfg.limits.max_message_bytes)
                return await refuse_first_request(client, reason)

            import trio

            gc.enable()
            return trio.run(refuse)
        return SANDBOX_FAILED_STATUS
    finally:
        if audit is not None:
            audit.close()


def _die_like_the_agent(signum: int) -> int:
    """The agent died of ``signum``: the proxy dies of it too (default handler), so the
    client sees the same; returns 128+N only if the signal does not end the process."""
    import contextlib
    import signal

    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    sandbox = sys.modules.get("acp_proxy.shell.sandbox")  # atexit will not run
    if sandbox is not None:
        sandbox.remove_private_dirs()
    with contextlib.suppress(ValueError, OSError):  # SIGKILL and SIGSTOP have no handler
        signal.signal(signum, signal.SIG_DFL)
    with contextlib.suppress(ValueError, OSError):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signum])
        os.kill(os.getpid(), signum)
    return 128 + signum


def _mode(args: argparse.Namespace, agent_cmd: list[str]) -> str:
    """``stdio``, ``listen``, ``connect`` or ``chain``; refuses what does not fit it.

    Raises:
        UsageError: two modes, an agent command where none is taken (or
            none where one is needed), an option the mode does not use.
    """
    chosen = [m for m in ("listen", "connect", "chain") if getattr(args, m)]
    if len(chosen) > 1:
        raise UsageError("choose one of --listen, --connect, --chain")
    mode = chosen[0] if chosen else "stdio"
    if mode in ("connect", "chain") and agent_cmd:
        raise UsageError(f"--{mode} takes no agent command: the agent is on the other side")
    if mode == "listen" and args.upstream is not None and agent_cmd:
        raise UsageError("--upstream takes no agent command: the agent is on the other side")
    for option, value in (("--config", args.config), ("--log-file", args.log_file)):
        if value == "":  # never read as "none": a wrapper's unset variable would drop the policy
            raise UsageError(f"{option} is empty: give the path of a file, or leave the option out")
    if args.watch_config and not args.config:
        raise UsageError("--watch-config needs --config FILE: the file to watch")
    if mode in ("stdio", "listen") and not agent_cmd and args.upstream is None:
        raise UsageError(
            "no agent command: put it after -- (acp-proxy [options] -- AGENT_CMD ...); "
            "under an ACP conductor, use --chain"
        )
    for dest, (option, modes, where) in _MODE_OPTIONS.items():
        if getattr(args, dest) is not None and mode not in modes:
            shown = "the stdio form" if mode == "stdio" else f"--{mode}"
            raise UsageError(f"{option} applies to {where} only, not to {shown}")
    return mode


def _protect_own_files(args: argparse.Namespace, cfg: Config) -> None:
    """The proxy's own files (config, watched directory, logs, keys) out of reach
    of the requests it governs (issue 31; :mod:`acp_proxy.shell.places`)."""
    from acp_proxy.shell.places import install, own_files

    config = expand_path(args.config, "--config") if args.config else None
    log_file = expand_path(args.log_file, "--log-file") if args.log_file else None
    install(own_files(cfg, config, watch=bool(args.watch_config), log_file=log_file))


def _unwrap(exc: BaseException) -> BaseException:
    """The one exception inside nested single-member exception groups (or ``exc``)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def _trio_run(func: Callable[..., Awaitable[int]], *args: object, clock: bool = False) -> int:
    """``trio.run(func, *args)``; a usage or connect error out of a nursery is raised bare.

    ``clock``: run on :class:`~acp_proxy.shell.relay_loop.PerfCounterClock` (after
    the stdio form's opening), not trio's offset system clock."""
    import trio

    gc.freeze()  # the start-up's objects live as long as the process: never scanned again
    gc.enable()
    try:
        if clock:
            from acp_proxy.shell.relay_loop import PerfCounterClock

            status: int = trio.run(func, *args, clock=PerfCounterClock())
        else:
            status = trio.run(func, *args)
    except BaseExceptionGroup as group:
        leaf = _unwrap(group)
        if isinstance(leaf, (UsageError, ConnectFailed, AgentSignalled)):
            raise leaf from None
        raise
    return status


def _run(
    mode: str,
    args: argparse.Namespace,
    cfg: Config,
    agent_cmd: list[str],
    audit: AuditLog | None,
    early: EarlyStart | None = None,
) -> int:
    from acp_proxy.shell.observe import current

    opening = None
    if mode == "stdio" and early is not None and audit is None and current() is None:
        # the first messages are relayed while the relay's modules are imported (issue 29)
        from acp_proxy.shell.opening import open_stdio

        opening = open_stdio(cfg, early, _load_relay)
    runner = _mode_runner(mode, args, cfg, agent_cmd, audit, early, opening)
    chained = audit.chained if audit is not None else None
    if chained is not None and chained.required:
        from acp_proxy.shell.audit_stop import stop_on_audit_failure

        grace = cfg.process.grace_seconds + cfg.process.kill_after_seconds + 1.0
        runner = (stop_on_audit_failure, chained, grace, runner)
    if cfg.telemetry.metrics:
        from acp_proxy.shell.watch import alongside

        return _trio_run(alongside, cfg, runner)
    if opening is not None:  # the core's times so far are perf_counter()'s
        return _trio_run(*runner, clock=True)
    return _trio_run(*runner)


#: what the stdio form imports to run its relay: in a thread, beside the opening
_RELAY_MODULES = (
    "trio",
    "functools",
    "acp_proxy.shell.reload",
    "acp_proxy.shell.relay_loop",
    "acp_proxy.shell.topology.stdio",
)


def _load_relay() -> None:
    """Imports :data:`_RELAY_MODULES` (run by :func:`~acp_proxy.shell.opening.open_stdio`)."""
    from importlib import import_module

    for name in _RELAY_MODULES:
        import_module(name)


def _mode_runner(
    mode: str,
    args: argparse.Namespace,
    cfg: Config,
    agent_cmd: list[str],
    audit: AuditLog | None,
    early: EarlyStart | None = None,
    opening: Opening | None = None,
) -> tuple[Callable[..., Awaitable[int]], *tuple[object, ...]]:
    """The async function that runs ``mode``, and its arguments (``early``: the agent of
    the stdio form, already started; ``opening``: what was relayed of its first messages)."""
    from functools import partial

    if cfg.budgets.store and mode != "chain":  # --chain refuses a store itself
        from acp_proxy.shell.budget_store import store_for

        store_for(cfg.budgets)  # UsageError now, not at the first connection, without redis
    if mode == "chain":
        from acp_proxy.shell.topology.chain import run_chain

        return run_chain, cfg, audit
    from acp_proxy.shell.reload import LivePolicy

    # A reload reads the file again with the same command-line overrides.
    live = LivePolicy(
        cfg,
        partial(_reloaded_config, args, cfg) if args.config else None,
        audit,
        path=expand_path(args.config, "--config") if args.config else None,
    )
    watch = expand_path(args.config, "--config") if args.watch_config else None
    if mode == "listen":
        from acp_proxy.shell.topology.listen import run_listen

        listen = partial(
            run_listen,
            upstream=args.upstream,
            live=live,
            watch=watch,
            generated_token=getattr(args, "generated_token", None),
        )
        return listen, cfg, args.listen, agent_cmd, audit
    if mode == "connect":
        from acp_proxy.shell.topology.connect import run_connect

        return partial(run_connect, live=live, watch=watch), cfg, args.connect, audit
    from acp_proxy.shell.topology.stdio import run_stdio_process

    stdio = partial(run_stdio_process, live=live, watch=watch, early=early, opening=opening)
    return stdio, cfg, agent_cmd, audit


def _reloaded_config(args: argparse.Namespace, running: Config) -> Config:
    """The config file read again with the command-line overrides, and the token file the
    process generated (``--listen`` without one) kept, so a reload never reports it changed."""
    cfg = effective_config(args)
    if not cfg.listen.token_file and not cfg.listen.tokens_file and running.listen.token_file:
        import attrs

        cfg = attrs.evolve(
            cfg, listen=attrs.evolve(cfg.listen, token_file=running.listen.token_file)
        )
    return cfg


def _print_config(rest: list[str]) -> int:
    usage = f"usage: acp-proxy config {{{','.join(BUNDLED)}}}"
    if rest in ([], ["-h"], ["--help"]):
        names = "".join(f"  {n:<12} {about}\n" for n, about in BUNDLED_ABOUT.items())
        print(
            f"{usage}\n\nPrints a configuration file shipped with acp-proxy, with its comments:\n"
            f"{names}"
            "Start from one: acp-proxy config strict > ~/.config/acp-proxy/strict.toml"
        )
        return 0
    if len(rest) != 1 or rest[0] not in BUNDLED:
        import shlex

        raise UsageError(f"{usage} (got {shlex.join(rest) or 'nothing'})")
    print(bundled_text(rest[0]), end="")
    return 0


def _check_config(rest: list[str], agent_cmd: list[str]) -> int:
    """Validates a config file and what it names; prints the effective config.

    Raises:
        UsageError: the file is invalid, the audit log's directory is not
            writable, the token file is not readable, or the agent command
            (when given after ``--``) is not found.
    """
    if rest in (["-h"], ["--help"]):
        print(
            "usage: acp-proxy check-config FILE [-- AGENT_CMD ...]\n\nValidates a TOML config "
            "file and prints the effective config (every key).\nAlso checks that the audit "
            "log can be written, the token file read, and the agent command (when given)\n"
            "found. On stderr: a warning line per risky setting, then one verdict line.\n"
            "Exit status 0 when valid (warnings included), 2 otherwise."
        )
        return 0
    if len(rest) != 1:
        raise UsageError("usage: acp-proxy check-config FILE [-- AGENT_CMD ...]")
    from acp_proxy.config import io as config_io
    from acp_proxy.shell.topology.ws_upgrade import read_token

    config_file = expand_path(rest[0], "the config file")
    cfg = resolve_audit_paths(expand_config_paths(config_io.load_config(config_file)), config_file)
    from acp_proxy.shell.audit_setup import check_audit_files

    notes = check_audit_files(cfg)
    if cfg.listen.token_file:
        read_token(cfg.listen.token_file)
    if cfg.listen.tokens_file:
        from acp_proxy.shell.topology.principals import read_tokens_file

        read_tokens_file(cfg.listen.tokens_file)
    found = find_command(agent_cmd[0]) if agent_cmd else None
    cfg = resolve_sandbox_workspace(cfg)
    sandbox_note = _check_sandbox(cfg, expand_path(rest[0], "the config file"))
    for note in notes:
        print(f"# {note}")
    print(config_io.dump_config(cfg), end="")
    print(sandbox_note, end="")
    _check_config_verdict(rest[0], cfg, found)
    return 0


def _check_sandbox(cfg: Config, config_file: str) -> str:
    """The effective sandbox as TOML comments (``""`` when off).

    Raises:
        UsageError: the sandbox is on and required, and cannot start.
    """
    if not cfg.sandbox.enabled:
        return ""
    import json

    from acp_proxy.shell.sandbox import SandboxUnavailable, prepare_sandbox

    try:
        sandbox = prepare_sandbox(cfg, config_file=config_file, create_missing=False)
    except SandboxUnavailable as exc:
        if cfg.sandbox.required:
            raise UsageError(f"the sandbox cannot start: {exc.reason}") from None
        return f"\n# sandbox: cannot start, the agent would run UNCONFINED: {exc.reason}\n"
    lines = [
        f"sandbox: {sandbox.engine} {sandbox.version}, settings {sandbox.digest}",
        "applies where acp-proxy starts the agent (the stdio form, --listen with an agent",
        "command); it does not apply with --upstream or --connect (the agent is remote)",
        "engine settings:",
        *json.dumps(sandbox.settings, indent=2).splitlines(),
    ]
    return "\n" + "".join(f"# {line}\n" for line in lines)


def _warn_risky(cfg: Config) -> None:
    """Logs each setting ``check-config`` warns about (valid but risky), once, at start."""
    from acp_proxy.config.risks import risky_settings

    for warning in risky_settings(cfg):
        _log().warning("risky setting: %s (acp-proxy check-config FILE lists them)", warning)


def _check_config_verdict(path: str, cfg: Config, agent: str | None) -> None:
    """check-config's last lines on stderr: one per risky setting, then the verdict
    (what was checked, the resolved audit path, the agent found, the warnings)."""
    from acp_proxy.config.risks import risky_settings

    warnings = risky_settings(cfg)
    for warning in warnings:
        print(f"acp-proxy check-config: warning: {warning}", file=sys.stderr)
    audit = (
        os.path.abspath(cfg.audit.path)
        if cfg.audit.path
        else "off in this file (--audit-log FILE on the proxy's command line keeps one)"
    )
    found = agent if agent is not None else "not checked (give its command after --)"
    count = {0: "no warnings", 1: "1 warning"}.get(len(warnings), f"{len(warnings)} warnings")
    print(
        f"acp-proxy check-config: OK: {os.path.abspath(expand_path(path, 'the config file'))} "
        f"is valid; audit log: {audit}; agent: {found}; {count}",
        file=sys.stderr,
    )
