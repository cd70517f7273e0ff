"""Command line (DESIGN.md section 3, "Command line").

::

    acp-proxy [--config FILE] [--audit-log FILE] [--log-level LEVEL] -- AGENT_CMD [ARGS...]
    acp-proxy --listen ws://HOST:PORT/PATH [...] -- AGENT_CMD [ARGS...]
    acp-proxy --connect ws://HOST:PORT/PATH [...]
    acp-proxy --chain [...]
    acp-proxy demo
    acp-proxy check-config FILE

Exit status: the agent's (when it died of signal N, the proxy dies of signal
N too); 2 for a usage or configuration error; 1 for an internal error.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Sequence

import attrs
import trio

from acp_proxy import __version__
from acp_proxy.config import Config, ConfigError

__all__ = ["main"]

log = logging.getLogger("acp_proxy")

USAGE = """
  acp-proxy [options] -- AGENT_CMD [ARGS...]
      stdio client <-> agent subprocess (the drop-in form)
  acp-proxy --listen ws://HOST:PORT/PATH [options] -- AGENT_CMD [ARGS...]
      WebSocket clients <-> one agent subprocess per connection
  acp-proxy --connect ws://HOST:PORT/PATH [options]
      stdio client <-> remote agent over WebSocket
  acp-proxy --chain [options]
      proxy component under an ACP conductor
  acp-proxy demo [--json]
      scripted client and agent through the proxy
  acp-proxy check-config FILE
      validate a config file and print the effective config"""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="acp-proxy",
        usage=USAGE,
        description="Transparent ACP proxy: subagent registry, capability enforcement, "
        "hold buffer, duplicate state report removal.",
    )
    p.add_argument("--version", action="version", version=f"acp-proxy {__version__}")
    p.add_argument("--config", metavar="FILE", help="TOML configuration file")
    p.add_argument(
        "--audit-log", metavar="FILE", help="JSON-lines audit log (overrides [audit] path)"
    )
    p.add_argument(
        "--log-level",
        default="warning",
        choices=["debug", "info", "warning", "error"],
        help="the proxy's own log level (stderr)",
    )
    p.add_argument("--log-file", metavar="FILE", help="write the proxy's own log here, not stderr")
    p.add_argument("--max-message-bytes", type=int, metavar="N", help="overrides [limits]")
    p.add_argument(
        "--listen", metavar="URL", help="serve ACP over WebSocket at ws://HOST:PORT/PATH"
    )
    p.add_argument("--connect", metavar="URL", help="the agent is a remote ACP WebSocket endpoint")
    p.add_argument("--token-file", metavar="FILE", help="bearer token file for --listen/--connect")
    p.add_argument(
        "--max-connections", type=int, metavar="N", help="--listen: concurrent connections"
    )
    p.add_argument(
        "--chain", action="store_true", help="run as a proxy component under a conductor"
    )
    return p


def _setup_logging(level: str, log_file: str | None) -> None:
    handler: logging.Handler
    handler = logging.FileHandler(log_file) if log_file else logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("acp-proxy: %(levelname)s: %(message)s"))
    root = logging.getLogger("acp_proxy")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False


def effective_config(args: argparse.Namespace) -> Config:
    """The config file (if any) with command-line overrides applied.

    Raises:
        ConfigError: the file or an override is invalid.
    """
    if args.config:
        from acp_proxy.config.io import load_config

        cfg = load_config(args.config)
    else:
        cfg = Config()
    try:
        if args.audit_log is not None:
            cfg = attrs.evolve(cfg, audit=attrs.evolve(cfg.audit, path=args.audit_log))
        if args.max_message_bytes is not None:
            cfg = attrs.evolve(
                cfg, limits=attrs.evolve(cfg.limits, max_message_bytes=args.max_message_bytes)
            )
        if args.token_file is not None:
            cfg = attrs.evolve(cfg, listen=attrs.evolve(cfg.listen, token_file=args.token_file))
        if args.max_connections is not None:
            cfg = attrs.evolve(
                cfg, listen=attrs.evolve(cfg.listen, max_connections=args.max_connections)
            )
    except ValueError as exc:
        raise ConfigError("command line", str(exc)) from exc
    return cfg


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``acp-proxy``; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
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
        return _check_config(opts[1:])
    parser = _parser()
    try:
        args = parser.parse_args(opts)
    except SystemExit as exc:
        return 0 if exc.code == 0 else 2
    _setup_logging(args.log_level, args.log_file)
    try:
        cfg = effective_config(args)
    except ConfigError as exc:
        print(f"acp-proxy: config error: {exc}", file=sys.stderr)
        return 2
    modes = sum(bool(x) for x in (args.listen, args.connect, args.chain))
    if modes > 1:
        print("acp-proxy: choose one of --listen, --connect, --chain", file=sys.stderr)
        return 2
    if (args.connect or args.chain) and agent_cmd:
        print("acp-proxy: --connect/--chain take no agent command", file=sys.stderr)
        return 2
    if not (args.connect or args.chain) and not agent_cmd:
        if args.listen or sys.stdin is None or sys.stdin.isatty():
            print(
                "acp-proxy: no agent command (usage: acp-proxy [options] -- AGENT_CMD ...)",
                file=sys.stderr,
            )
            return 2
        # No agent command and stdin is a pipe: a conductor started us as a chain component.
        args.chain = True
    audit = None
    if cfg.audit.path:
        from acp_proxy.shell.audit import AuditLog

        try:
            audit = AuditLog.open(cfg.audit.path)
        except OSError as exc:
            print(f"acp-proxy: cannot open audit log {cfg.audit.path!r}: {exc}", file=sys.stderr)
            return 2
    from acp_proxy.shell.transport.process import AgentSignalled

    try:
        status = _run(args, cfg, agent_cmd, audit)
    except AgentSignalled as exc:
        status = -exc.signum
    except KeyboardInterrupt:
        return 130
    except Exception:
        log.exception("internal error")
        return 1
    finally:
        from acp_proxy.shell.routing import flush_log_summaries

        flush_log_summaries(everything=True)
        if audit is not None:
            audit.close()
    return _die_like_the_agent(-status) if status < 0 else status


def _die_like_the_agent(signum: int) -> int:
    """The agent died of ``signum``: the proxy dies of it too (default handler), so the
    client sees the same; returns 128+N only if the signal does not end the process."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    with contextlib.suppress(ValueError, OSError):  # SIGKILL and SIGSTOP have no handler
        signal.signal(signum, signal.SIG_DFL)
    with contextlib.suppress(ValueError, OSError):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signum])
        os.kill(os.getpid(), signum)
    return 128 + signum


def _run(args: argparse.Namespace, cfg: Config, agent_cmd: list[str], audit: object) -> int:
    from acp_proxy.shell.relay import AuditSink

    sink: AuditSink | None = audit  # type: ignore[assignment]
    if args.listen:
        from acp_proxy.shell.topology.listen import run_listen

        status: int = trio.run(run_listen, cfg, args.listen, agent_cmd, sink)
        return status
    if args.connect:
        from acp_proxy.shell.topology.listen import run_connect

        status = trio.run(run_connect, cfg, args.connect, sink)
        return status
    if args.chain:
        from acp_proxy.shell.topology.chain import run_chain

        status = trio.run(run_chain, cfg, sink)
        return status
    from acp_proxy.shell.topology.stdio import run_stdio_process

    status = trio.run(run_stdio_process, cfg, agent_cmd, sink)
    return status


def _check_config(rest: list[str]) -> int:
    if rest in (["-h"], ["--help"]):
        print(
            "usage: acp-proxy check-config FILE\n\nValidates a TOML config file and prints "
            "the effective config (every key).\nExit status 0 when valid, 2 otherwise."
        )
        return 0
    if len(rest) != 1:
        print("usage: acp-proxy check-config FILE", file=sys.stderr)
        return 2
    from acp_proxy.config import io as config_io

    try:
        cfg = config_io.load_config(rest[0])
    except ConfigError as exc:
        print(f"acp-proxy: config error: {exc}", file=sys.stderr)
        return 2
    print(config_io.dump_config(cfg), end="")
    return 0
