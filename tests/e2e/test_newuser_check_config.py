"""Issue 32 items 4 and 5: check-config ends with one verdict line and warns (exit 0) about
risky settings; each sentence asserted exactly."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import acp_proxy.config
from acp_proxy.config.io import config_from_dict, load_config
from acp_proxy.config.risks import risky_settings

PY = sys.executable


def check(cfg: Path, *agent: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    extra = ["--", *agent] if agent else []
    return subprocess.run(
        [PY, "-m", "acp_proxy", "check-config", str(cfg), *extra],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=cwd,
    )


def test_the_verdict_names_the_resolved_audit_path_and_the_agent(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[audit]\npath = "logs/audit.jsonl"\n')
    (tmp_path / "logs").mkdir()
    r = check(cfg, PY, "-c", "pass", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stderr == (
        f"acp-proxy check-config: OK: {cfg} is valid; audit log: {tmp_path}/logs/audit.jsonl; "
        f"agent: {PY}; no warnings\n"
    )


def test_risky_settings_warn_and_still_pass(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        "[limits]\nmax_message_bytes = 10\n"
        "[enforcement]\nreject_code = 0\n"
        '[[permissions.rules]]\naction = "allow"\nname = "yes"\noption = ["allow_always"]\n'
    )
    r = check(cfg, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stderr.splitlines() == [
        "acp-proxy check-config: warning: rule 'yes' allows every session/request_permission "
        "request (it has no matcher), answering for the user including allow_always: add a "
        "matcher such as tool_kind, command or path",
        "acp-proxy check-config: warning: enforcement.reject_code = 0 is not a JSON-RPC error "
        "code clients recognise: use -32601 (method not found) or -32600 (invalid request)",
        "acp-proxy check-config: warning: limits.max_message_bytes = 10 is below 65536 bytes, "
        "too small for an initialize: every session would fail (the default is 33554432)",
        f"acp-proxy check-config: OK: {cfg} is valid; audit log: off in this file "
        "(--audit-log FILE on the proxy's command line keeps one); agent: not checked "
        "(give its command after --); 3 warnings",
    ]


@pytest.mark.parametrize(
    ("code", "warned"),
    [(0, True), (-32500, True), (-32768, True), (-32601, False), (-32050, False), (1, False)],
)
def test_reserved_error_codes_are_warned_about(code: int, warned: bool) -> None:
    cfg = config_from_dict({"permissions": {"refuse_code": code}})
    got = risky_settings(cfg)
    assert bool(got) is warned
    if code == -32500:
        assert got == [
            "permissions.refuse_code = -32500 is in the range JSON-RPC reserves for its own "
            "errors (-32768 to -32100 beside the predefined ones): use -32601, -32600 or a code "
            "from -32099 to -32000"
        ]


def test_an_allow_rule_with_a_matcher_and_the_shipped_configs_are_not_warned_about() -> None:
    rule = {"action": "allow", "tool_kind": "read", "option": ["allow_always"]}
    assert risky_settings(config_from_dict({"permissions": {"rules": [rule]}})) == []
    shipped = Path(acp_proxy.config.__file__).parent
    for name in ("default.toml", "strict.toml"):
        assert risky_settings(load_config(str(shipped / name))) == [], name


def test_a_loopback_model_endpoint_in_allowed_domains_is_warned_about(tmp_path: Path) -> None:
    """The fresh-user trial listed its local model API as "127.0.0.1:PORT" (as the README
    then said): srt's NO_PROXY sends loopback past its proxy, so the sandboxed agent never
    reached it. check-config says so and how to list it; a name beside it passes."""
    cfg = tmp_path / "c.toml"
    cfg.write_text('[sandbox]\nallowed_domains = ["127.0.0.1:11434", "api.anthropic.com"]\n')
    r = check(cfg, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stderr.splitlines()[0] == (
        "acp-proxy check-config: warning: sandbox.allowed_domains entry '127.0.0.1:11434' is "
        "never reached: srt's NO_PROXY makes the agent dial loopback and private addresses "
        "directly, and inside the sandbox it has no network; give the endpoint a name (an "
        "/etc/hosts line such as '127.0.0.1 model.local'), point the agent at "
        "http://model.local:11434 and list both 'model.local:11434' and the address"
    )
    named = config_from_dict(
        {"sandbox": {"allowed_domains": ["model.local:11434", "127.0.0.1:11434"]}}
    )
    assert risky_settings(named) == []
    private = config_from_dict({"sandbox": {"allowed_domains": ["[::1]:443", "10.0.0.5"]}})
    assert [w.split(" is never")[0] for w in risky_settings(private)] == [
        "sandbox.allowed_domains entry '[::1]:443'",
        "sandbox.allowed_domains entry '10.0.0.5'",
    ]
