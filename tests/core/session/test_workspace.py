"""The sandbox's workspace check of session directories (issue 24): a pure function,
and ProxyCore refusing session/new|load|resume|fork outside the roots."""

from __future__ import annotations

import tomllib
from typing import Any

import pytest

from acp_proxy.config import Config
from acp_proxy.config.credentials import CREDENTIAL_LOCATIONS, SANDBOX_DENY_READ, credential_globs
from acp_proxy.config.files import bundled_text
from acp_proxy.config.io import config_from_dict
from acp_proxy.core.engine import ProxyCore
from acp_proxy.core.session.workspace import directories_outside, normalize_root
from tests.support.corekit import (
    AGENT,
    CLIENT,
    assert_accounting,
    audits,
    decoded,
    req,
    resp,
    sends,
)

ROOTS = ("/ws", "/data/shared")


@pytest.mark.parametrize(
    ("params", "outside"),
    [
        ({"cwd": "/ws"}, []),
        ({"cwd": "/ws/sub/dir", "additionalDirectories": ["/data/shared/x"]}, []),
        ({"cwd": "/ws/./a/../b"}, []),
        ({"cwd": "//ws/a"}, []),
        ({}, []),
        (None, []),
        ({"cwd": "/etc"}, ["/etc"]),
        ({"cwd": "/ws/../etc"}, ["/ws/../etc"]),
        ({"cwd": "/wsx"}, ["/wsx"]),
        ({"cwd": "/"}, ["/"]),
        ({"cwd": "ws"}, ["ws"]),
        ({"cwd": "~/ws"}, ["~/ws"]),
        ({"cwd": "/ws\0/x"}, ["/ws\0/x"]),
        ({"cwd": 7}, ["7"]),
        ({"cwd": "/ws", "additionalDirectories": ["/ws/a", "/home/u"]}, ["/home/u"]),
        ({"cwd": "/ws", "additionalDirectories": "/tmp"}, ["/tmp"]),
        ({"cwd": "/ws", "additionalDirectories": [None]}, ["None"]),
        ({"cwd": "/ws", "additional_directories": ["/tmp"]}, ["/tmp"]),
        ({"cwd": "/ws", "_meta": {"cwd": "/root"}}, ["/root"]),
        ({"cwd": "/ws", "_meta": {"additionalDirectories": ["/opt"]}}, ["/opt"]),
    ],
)
def test_directories_outside(params: dict[str, Any] | None, outside: list[str]) -> None:
    """Each cwd and additional directory (also snake_case, also in _meta) must be at or
    below a root after lexical normalisation; relative and non-string ones never are."""
    assert directories_outside(params, ROOTS) == outside


def test_normalize_root() -> None:
    """Roots are normalised like the paths they are compared with."""
    assert normalize_root("/a/./b/../c/") == "/a/c"
    assert normalize_root("//a") == "/a"


def _core(enabled: bool = True) -> ProxyCore:
    sandbox = {"enabled": enabled, "workspace": ["/ws"]}
    core = ProxyCore(config_from_dict({"sandbox": sandbox}))
    core.receive(CLIENT, req(0, "initialize", {"protocolVersion": 1}), 0.0)
    core.receive(AGENT, resp(0, {"protocolVersion": 1}), 0.0)
    return core


@pytest.mark.parametrize(
    "method", ["session/new", "session/load", "session/resume", "session/fork"]
)
def test_a_session_outside_the_workspace_is_refused_never_forwarded(method: str) -> None:
    """With the sandbox on, the proxy answers (-32602, naming the workspace) and audits."""
    core = _core()
    params = {"sessionId": "s1", "cwd": "/home/u/project", "mcpServers": []}
    out = core.receive(CLIENT, req(5, method, params), 1.0)
    assert sends(out, AGENT) == []
    (answer,) = [decoded(s) for s in sends(out, CLIENT)]
    assert answer["id"] == 5
    assert answer["error"]["code"] == -32602
    assert "the workspace /ws" in answer["error"]["message"]
    assert answer["error"]["data"] == {"workspace": ["/ws"], "outside": ["/home/u/project"]}
    (record,) = audits(out, "request_refused")
    assert record.fields["method"] == method
    assert record.fields["outside"] == ["/home/u/project"]
    assert_accounting(core)


def test_a_session_inside_the_workspace_is_forwarded_byte_for_byte() -> None:
    """Inside the roots (or with the sandbox off) the request goes to the agent unchanged."""
    inside = req(5, "session/new", {"cwd": "/ws/app", "mcpServers": []})
    assert sends(_core().receive(CLIENT, inside, 1.0), AGENT) == [inside]
    outside = req(6, "session/new", {"cwd": "/etc", "mcpServers": []})
    assert sends(_core(enabled=False).receive(CLIENT, outside, 1.0), AGENT) == [outside]


def test_the_credential_list_is_one_place() -> None:
    """[sandbox] deny_read (default and packaged) and the strict credential rules' path
    globs come from credentials.CREDENTIAL_LOCATIONS, so fs/read_text_file and open() agree."""
    assert Config().sandbox.deny_read == list(SANDBOX_DENY_READ)
    assert len(SANDBOX_DENY_READ) == len(CREDENTIAL_LOCATIONS)
    default = tomllib.loads(bundled_text("default"))
    assert default["sandbox"]["deny_read"] == list(SANDBOX_DENY_READ)
    strict = tomllib.loads(bundled_text("strict"))
    assert "deny_read" not in strict["sandbox"]  # the default list, not a copy
    rules = {r["name"]: r for r in strict["permissions"]["rules"]}
    globs = list(credential_globs())
    for name in ("no-credential-reads", "no-credential-writes", "no-credential-tool-locations"):
        assert rules[name]["path"][: len(globs)] == globs
