"""What the stdio form's opening set costs to import (issue 29: start-up).

Before its first forward, the proxy imports the config model, the engine, the
observers, the places and the audit writer, and builds ``Config()`` and one
core, while trio is still being imported. A default run reads none of the
modules below, so they are imported on first use; these tests run that set in
a fresh interpreter and fail when one of them comes back at import.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: the opening set: imports, ``Config()``, the audit set-up, the own files, one core
OPENING = textwrap.dedent(
    """
    import sys
    import logging
    import acp_proxy.config.model
    import acp_proxy.core.engine
    import acp_proxy.shell.audit
    from acp_proxy.config import Config
    from acp_proxy.shell import observe, places
    from acp_proxy.shell.audit_setup import open_audit

    cfg = Config()
    assert open_audit(cfg, {"pid": 1, "run": "r"}) is None
    places.install(places.own_files(cfg, None))
    core = places.apply(observe.make_core(cfg, 1))
    assert type(core).__name__ == "ProxyCore"  # nothing observes: the plain core
    print(" ".join(sorted(sys.modules)))
    """
)

#: read only by what a default configuration never does: a chained audit log
#: (``hashlib``, ``hmac``), a command-line permission rule (``shlex``), a URL
#: elicitation or an MCP server's URL (``hosts``, ``urllib.parse`` with it), a
#: repeat budget (``hashlib``); and what only other modes or a config file need
NOT_IN_THE_OPENING = (
    "hashlib",
    "hmac",
    "shlex",
    "cattrs",
    "tomllib",
    "trio",
    "acp_proxy.shell.audit_chain",
    "acp_proxy.core.session.hosts",
    "acp_proxy.config.io",
)


def _opening_modules() -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", OPENING],
        capture_output=True,
        timeout=60,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    return set(done.stdout.decode().split())


def test_the_opening_set_imports_nothing_a_default_run_never_reads() -> None:
    modules = _opening_modules()
    assert "acp_proxy.core.engine.proxy" in modules  # the set ran
    loaded = sorted(m for m in modules if m in NOT_IN_THE_OPENING)
    assert loaded == []
