"""The proxy's own log levels: Python's, plus ``notice`` between ``info`` and ``warning``.

``notice`` is the default (``--log-level``): at it, every request the proxy refused
or answered in the user's place (a deny rule, a budget, admission, the child
allowlist) is one line on stderr, while normal forwarding and the connection
life cycle (``info``) stay silent. A denial is the policy doing its job, not a
warning, so ``--log-level warning`` silences these lines. Imports ``logging`` only
when the level is registered (``cli`` does so before any mode is imported, after the
agent's early start: issue 29).
"""

from __future__ import annotations

__all__ = ["DEFAULT_LEVEL", "LEVEL_NAMES", "NOTICE", "register_notice"]

#: between logging.INFO (20) and logging.WARNING (30)
NOTICE = 25

#: the names ``--log-level`` accepts, lowest first
LEVEL_NAMES = ("debug", "info", "notice", "warning", "error")

#: ``--log-level`` when not given
DEFAULT_LEVEL = "notice"


def register_notice() -> None:
    """Makes ``NOTICE`` a level name of :mod:`logging` (idempotent), so ``"NOTICE"``
    is accepted by ``Logger.setLevel`` and printed by ``%(levelname)s``."""
    import logging

    logging.addLevelName(NOTICE, "NOTICE")
