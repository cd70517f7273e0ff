"""The project's exception types that reach the command line.

``acp_proxy/cli.py`` is the only place that turns them into exit statuses:
a :class:`UsageError` (and so a :class:`ConfigError` or :class:`StartupError`)
is status 2, a :class:`ConnectFailed` status 1. ``str(error)`` is one
sentence for the user, printed after ``acp-proxy: ``.

:class:`ConfigError` is also importable from :mod:`acp_proxy.config`, and
:class:`StartupError` from :mod:`acp_proxy.shell.topology.ws_upgrade`, where
they were defined before; :class:`AgentSignalled` from
:mod:`acp_proxy.shell.transport.process`.
"""

from __future__ import annotations

__all__ = ["AgentSignalled", "ConfigError", "ConnectFailed", "StartupError", "UsageError"]


class UsageError(Exception):
    """The command line or what it names is wrong (exit status 2)."""


class ConfigError(UsageError, ValueError):
    """A configuration value is unknown, of the wrong type, or out of range.

    ``str(error)`` is ``"SOURCE: KEY: MESSAGE"``, leaving out the parts that
    are empty (a file that cannot be read or parsed has no key).

    Attributes:
        key: dotted path of the offending key (``"hold.timeout_seconds"``,
            ``'enforcement.child_mutations."session/cancel"'``,
            ``"listen.allowed_origins[1]"``); ``""`` for the file as a whole.
        message: what is wrong with it, without the key.
        source: where the configuration came from (a file name), or ``""``.
    """

    def __init__(self, key: str, message: str, *, source: str = "") -> None:
        text = f"{key}: {message}" if key else message
        super().__init__(f"{source}: {text}" if source else text)
        self.key = key
        self.message = message
        self.source = source


class StartupError(UsageError):
    """A usage or configuration problem found before serving (exit status 2)."""


class ConnectFailed(Exception):
    """``--connect`` could not reach the agent's endpoint (exit status 1)."""


class AgentSignalled(Exception):
    """The agent died of signal ``signum``: the proxy should die of it too.

    Attributes:
        signum: the signal number.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(f"agent killed by signal {signum}")
        self.signum = signum
