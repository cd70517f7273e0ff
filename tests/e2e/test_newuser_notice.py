"""At the default ``--log-level`` (notice) each request the proxy refused or answered for
the user is one line on stderr, and nothing else is: the demo's run, a real proxy process
in front of the demo agent, started without ``--log-level``."""

from __future__ import annotations

from acp_proxy.demo.runner import execute


def test_the_default_level_shows_one_line_per_denial_and_nothing_else() -> None:
    """The demo refuses three client messages to children and denies one web fetch:
    exactly those four lines reach stderr, none for what was forwarded."""
    run = execute()
    assert run.status == 0, run.stderr
    assert "--log-level" not in run.command
    assert run.stderr.splitlines() == [
        "acp-proxy: NOTICE: decided for the user: mutation_rejected rule='[enforcement] "
        "child allowlist' method='session/prompt' id=4 sessionId='sess_review' "
        "reason='not_allowed_on_child'",
        "acp-proxy: NOTICE: decided for the user: mutation_rejected rule='[enforcement] "
        "child allowlist' method='session/resume' id=5 sessionId='sess_search' "
        "reason='not_allowed_on_child'",
        "acp-proxy: NOTICE: decided for the user: mutation_rejected rule='[enforcement] "
        "child allowlist' method='session/cancel' sessionId='sess_search' "
        "reason='stale_after_parent_reload'",
        "acp-proxy: NOTICE: decided for the user: permission_decided rule='no-network-tools' "
        "action='deny' optionId='reject' method='session/request_permission' id='perm-fetch' "
        "sessionId='sess_main' reason='rule no-network-tools'",
    ]
