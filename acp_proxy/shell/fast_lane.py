"""The common command lines, read without :mod:`argparse` (issue 29: the agent starts sooner).

``acp-proxy [--config FILE] [--log-level LEVEL] [--log-file FILE] -- AGENT_CMD ...``
(each option as ``--name VALUE`` or ``--name=VALUE``, in any order, repeated
or not) is what editors run. :func:`read_options` reads the options before
``--`` of exactly those forms, as argparse would, without importing argparse
or building the parser: the agent of the default configuration then starts
sooner. Anything else (another option, an abbreviation, ``--help``, a value
that is empty, starts with ``-`` or is not a log level) gives ``None``, and
argparse reads the command line, with its errors and help. A test checks that
the two agree on every form accepted here, and that :data:`DEFAULTS` are the
parser's.
"""

from __future__ import annotations

from acp_proxy.shell.log_levels import DEFAULT_LEVEL, LEVEL_NAMES

__all__ = ["DEFAULTS", "Options", "read_options"]

#: every option of the parser (its ``dest``) and its default: what argparse gives for an
#: option not on the command line
DEFAULTS: dict[str, object] = {
    "config": None,
    "audit_log": None,
    "log_level": DEFAULT_LEVEL,
    "log_file": None,
    "max_message_bytes": None,
    "listen": None,
    "connect": None,
    "token_file": None,
    "tokens_file": None,
    "no_token": None,
    "upstream": None,
    "watch_config": None,
    "max_connections": None,
    "chain": False,
    "trace": None,
    "trace_content": False,
    "metrics": None,
    "sandbox": False,
    "otel": False,
}

#: the options read here (each takes one value) -> their ``dest``
_OPTIONS = {"--config": "config", "--log-level": "log_level", "--log-file": "log_file"}

TYPE_CHECKING = False
if TYPE_CHECKING:  # to the type checker it is argparse's Namespace, which it stands for
    from argparse import Namespace as Options
else:

    class Options:
        """The options read, one attribute per option (as ``argparse.Namespace``)."""

        def __init__(self, **values: object) -> None:
            self.__dict__.update(values)


def read_options(opts: list[str]) -> Options | None:
    """The options of a common command line (see the module doc), or ``None``.

    Args:
        opts: the arguments before the first ``--``.

    Returns:
        Every option of the parser: those given (the last of a repeated one), the
        others at their :data:`DEFAULTS`; ``None`` for a form not read here.
    """
    values = dict(DEFAULTS)
    at = 0
    while at < len(opts):
        name, equals, value = opts[at].partition("=")
        dest = _OPTIONS.get(name)
        if dest is None:
            return None
        if not equals:
            at += 1
            if at == len(opts):
                return None
            value = opts[at]
        if not value or value.startswith("-"):
            return None
        if dest == "log_level" and value not in LEVEL_NAMES:
            return None
        values[dest] = value
        at += 1
    return Options(**values)
