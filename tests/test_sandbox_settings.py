"""The srt settings generated from [sandbox] (issue 24): pure unit tests."""

from __future__ import annotations

import json
import tomllib

import attrs
import pytest

from acp_proxy.config import Config
from acp_proxy.config.credentials import other_agents_credentials
from acp_proxy.config.files import bundled_text
from acp_proxy.config.io import config_from_dict
from acp_proxy.config.model import SandboxConfig
from acp_proxy.config.sandbox_settings import (
    agent_environment,
    protected_files,
    settings_digest,
    settings_json,
    srt_settings,
    workspace_roots,
)
from acp_proxy.errors import ConfigError

HOME, CWD = "/home/u", "/home/u/proj"


def test_default_settings_deny_credentials_allow_the_workspace_and_no_network() -> None:
    """The defaults: credentials under HOME unreadable, the working directory and the
    agents' state writable, no domain reachable."""
    s = srt_settings(SandboxConfig(enabled=True), cwd=CWD, home=HOME)
    assert s["network"] == {"allowedDomains": [], "deniedDomains": []}
    fs = s["filesystem"]
    assert fs["denyRead"][:3] == ["/home/u/.ssh", "/home/u/.aws", "/home/u/.gnupg"]
    assert "/home/u/.netrc" in fs["denyRead"]
    assert fs["allowRead"] == []
    assert fs["allowWrite"][0] == CWD
    assert "/home/u/.claude" in fs["allowWrite"]
    for cache in ("/home/u/.cache", "/home/u/.npm", "/home/u/.local/state"):
        assert cache not in fs["allowWrite"]  # what is planted there runs unconfined later
    assert fs["denyWrite"] == [  # the agents' executable configuration stays read-only
        "/home/u/.claude/settings.json",
        "/home/u/.claude/hooks",
        "/home/u/.codex/config.toml",
        "/home/u/.gemini/settings.json",
    ]


def test_the_proxy_files_are_neither_readable_nor_writable() -> None:
    """The proxy's own files are added to denyRead and denyWrite, inside the workspace too."""
    cfg = config_from_dict(
        {
            "audit": {"path": "acp-proxy-audit.jsonl"},
            "trace": {"path": "/var/log/trace.jsonl"},
            "listen": {"token_file": "~/token"},
        }
    )
    protected = protected_files(
        cfg, cwd=CWD, home=HOME, config_file="/etc/acp.toml", log_file="log/proxy.log"
    )
    assert protected == [
        "/etc/acp.toml",
        f"{CWD}/acp-proxy-audit.jsonl",
        "/var/log/trace.jsonl",
        f"{CWD}/log/proxy.log",
        "/home/u/token",
    ]
    s = srt_settings(cfg.sandbox, cwd=CWD, home=HOME, protected=protected)
    assert s["filesystem"]["denyWrite"][: len(protected)] == protected
    assert s["filesystem"]["denyRead"][-len(protected) :] == protected
    assert protected_files(Config(), cwd=CWD, home=HOME) == []


def test_workspace_roots_writable_and_domains_from_the_config() -> None:
    """Relative roots are taken from cwd, ~ from HOME, duplicates dropped, domains kept."""
    sandbox = SandboxConfig(
        enabled=True,
        workspace=[".", "../shared", "~/notes", "."],
        writable=["/opt/state"],
        deny_read=["~/.secret"],
        allowed_domains=["api.anthropic.com", "*.example.com", "127.0.0.1:11434"],
    )
    roots = workspace_roots(sandbox, cwd=CWD, home=HOME)
    assert roots == [CWD, "/home/u/shared", "/home/u/notes"]
    s = srt_settings(sandbox, cwd=CWD, home=HOME)
    assert s["filesystem"]["allowWrite"] == [*roots, "/opt/state"]
    assert s["filesystem"]["denyRead"] == ["/home/u/.secret"]
    assert s["network"]["allowedDomains"] == [
        "api.anthropic.com",
        "*.example.com",
        "127.0.0.1:11434",
    ]


def test_the_digest_is_of_the_canonical_bytes() -> None:
    """Same settings, same bytes and digest; any change, another digest."""
    a = srt_settings(SandboxConfig(), cwd=CWD, home=HOME)
    data = settings_json(a)
    assert json.loads(data) == a
    assert settings_digest(data) == settings_digest(settings_json(json.loads(data)))
    b = srt_settings(attrs.evolve(SandboxConfig(), allowed_domains=["x.com"]), cwd=CWD, home=HOME)
    assert settings_digest(settings_json(b)) != settings_digest(data)
    assert settings_digest(data).startswith("sha256:")
    assert len(settings_digest(data)) == 71


@pytest.mark.parametrize(
    ("section", "key"),
    [
        ({"engine_command": " "}, "sandbox.engine_command"),
        ({"writable": ["relative/dir"]}, "sandbox.writable[0]"),
        ({"deny_read": ["/ok", ""]}, "sandbox.deny_read[1]"),
        ({"allowed_domains": ["https://api.anthropic.com"]}, "sandbox.allowed_domains[0]"),
        ({"allowed_domains": ["a b"]}, "sandbox.allowed_domains[0]"),
        ({"enabeld": True}, "sandbox"),
    ],
)
def test_bad_sandbox_keys_are_config_errors_naming_the_key(
    section: dict[str, object], key: str
) -> None:
    """Unknown keys and bad values are refused with the dotted key."""
    with pytest.raises(ConfigError) as info:
        config_from_dict({"sandbox": section})
    assert key in str(info.value)


def test_strict_turns_the_sandbox_on_with_the_model_apis() -> None:
    """config strict: sandbox on, required, the common agents' model API domains."""
    cfg = config_from_dict(tomllib.loads(bundled_text("strict")))
    assert cfg.sandbox.enabled
    assert cfg.sandbox.required
    assert "api.anthropic.com" in cfg.sandbox.allowed_domains
    assert "api.openai.com" in cfg.sandbox.allowed_domains
    assert not Config().sandbox.enabled


def test_the_agent_environment_strips_secret_names_but_the_model_keys() -> None:
    """env_deny globs (case-insensitive) strip secrets; env_allow keeps the model keys;
    the overrides (private caches) are set last."""
    environ = {
        "PATH": "/bin",
        "GITHUB_TOKEN": "t",
        "aws_secret_access_key": "s",
        "OPENAI_API_KEY": "k",
        "XDG_CACHE_HOME": "/home/u/.cache",
    }
    env, stripped = agent_environment(
        SandboxConfig(), environ, {"XDG_CACHE_HOME": "/tmp/acp-proxy-cache-x"}
    )
    cache = {"XDG_CACHE_HOME": "/tmp/acp-proxy-cache-x"}
    assert env == {"PATH": "/bin", "OPENAI_API_KEY": "k", **cache}
    assert stripped == ["GITHUB_TOKEN", "aws_secret_access_key"]
    everything, none = agent_environment(SandboxConfig(env_deny=[]), environ, {})
    assert (everything, none) == (environ, [])


def test_an_agent_reads_its_own_login_but_no_other_agents() -> None:
    """The login files hidden from an agent: the other agents' (all, for an unknown one)."""
    assert other_agents_credentials(["npx", "@zed-industries/claude-code-acp"]) == (
        "~/.codex/auth.json",
        "~/.gemini/oauth_creds.json",
    )
    assert other_agents_credentials(["node", "/opt/codex-acp/dist/index.js", "gemini"]) == (
        "~/.claude/.credentials.json",
        "~/.gemini/oauth_creds.json",
    )
    assert len(other_agents_credentials(["my-agent", "--model", "claude"])) == 3
    assert len(other_agents_credentials([])) == 3


def test_connection_strings_pats_and_the_otlp_headers_are_stripped_too() -> None:
    """Secrets found passing the default env_deny by a hostile review: a personal access
    token, the OTLP exporter's headers (the proxy's collector credentials), connection
    strings; a URL the agents need (their model endpoint) still passes."""
    environ = {
        "GITHUB_PAT": "p",
        "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer x",
        "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "x",
        "REDIS_URL": "redis://:pw@h",
        "DATABASE_URL": "postgres://u:pw@h/db",
        "SENTRY_DSN": "https://key@sentry",
        "OLLAMA_BASE_URL": "http://model.local:11434",
        "PATH": "/bin",
    }
    env, stripped = agent_environment(SandboxConfig(), environ, {})
    assert env == {"OLLAMA_BASE_URL": "http://model.local:11434", "PATH": "/bin"}
    assert len(stripped) == 6
