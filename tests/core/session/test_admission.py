"""[admission] rules, pure (issue 26): each refusal's rule, error and audit record."""

from __future__ import annotations

import json
from typing import Any

import pytest

from acp_proxy.config import AdmissionConfig, AdmissionRule, Config
from acp_proxy.core.engine import ProxyCore
from acp_proxy.core.session.admission import AdmissionPolicy, lexical_resolve, outside_roots
from acp_proxy.core.session.hosts import parse_url, url_matches
from tests.support.corekit import AGENT, CLIENT, audits, req, sends

STDIO = {"name": "sh", "command": "/bin/sh", "args": ["-c", "id"], "env": []}
HTTP = {"type": "http", "name": "docs", "url": "https://mcp.example.com/docs", "headers": []}


def _policy(**kw: Any) -> AdmissionPolicy:
    return AdmissionPolicy(AdmissionConfig(**kw))


def test_stdio_servers_are_refused_by_default_and_allowed_when_configured() -> None:
    params = {"cwd": "/ws", "mcpServers": [STDIO]}
    refusal = _policy().decide(params, None)
    assert refusal is not None
    assert (refusal.rule, refusal.field) == ("admission.mcp_stdio", "mcpServers[0]")
    assert _policy(mcp_stdio="allow").decide(params, None) is None
    # a v2 stdio entry says so in its type
    v2 = {"cwd": "/ws", "mcpServers": [{"type": "stdio", "name": "x", "command": "/x"}]}
    assert _policy().decide(v2, None) is not None
    assert _policy(mcp_stdio="allow").decide(v2, None) is None


def test_http_servers_must_match_a_url_glob() -> None:
    params = {"cwd": "/ws", "mcpServers": [HTTP]}
    refusal = _policy().decide(params, None)
    assert refusal is not None
    assert refusal.rule == "admission.mcp_http_allow"
    assert _policy(mcp_http_allow=["https://mcp.example.com/*"]).decide(params, None) is None
    assert _policy(mcp_http_allow=["https://*.example.com/*"]).decide(params, None) is None
    assert _policy(mcp_http_allow=["https://mcp.example.com/other/*"]).decide(params, None)
    sse = {"cwd": "/ws", "mcpServers": [{**HTTP, "type": "sse"}]}
    assert _policy(mcp_http_allow=["https://mcp.example.com/*"]).decide(sse, None) is None


@pytest.mark.parametrize(
    "url",
    [
        "https://mcp.example.com.evil.example/docs",  # look-alike suffix
        "https://mcp.example.com@evil.example/docs",  # userinfo
        "https://evil.example\\@mcp.example.com/docs",  # backslash: browsers read evil.example
        "https://evil.example/.mcp.example.com/docs",  # "*" must not cross into the path
        "https://mcp.example.com:8443/docs",  # another port
        "http://mcp.example.com/docs",  # another scheme
        "https://mcp%2Eexample.com/docs",  # percent in the host
        "https://mcp.example.com/docs\n",
        "ftp://mcp.example.com/docs",
        42,
    ],
)
def test_a_url_that_only_looks_allowed_is_refused(url: Any) -> None:
    policy = _policy(mcp_http_allow=["https://*.example.com/*", "https://mcp.example.com/*"])
    params = {"cwd": "/ws", "mcpServers": [{**HTTP, "url": url}]}
    refusal = policy.decide(params, None)
    assert refusal is not None
    assert refusal.rule == "admission.mcp_http_allow"


def test_url_globs_compare_host_port_and_path_apart() -> None:
    u = parse_url("https://MCP.Example.COM./a/b")
    assert not isinstance(u, str)
    assert (u.host, u.port, u.path) == ("mcp.example.com", 443, "/a/b")
    assert url_matches(u, "https://mcp.example.com/a/*")
    assert url_matches(u, "https://mcp.example.com:443/a/*")
    assert url_matches(u, "https://mcp.example.com:*")
    assert not url_matches(u, "https://mcp.example.com:8443/*")
    assert not url_matches(u, "http://mcp.example.com/*")


def test_unknown_transports_and_unreadable_lists_are_refused() -> None:
    for servers, field in [
        ([{"type": "_custom", "name": "x"}], "mcpServers[0]"),
        (["/bin/sh"], "mcpServers[0]"),
        ({"a": 1}, "mcpServers"),
        ([{"name": "no type, no command, no url"}], "mcpServers[0]"),
    ]:
        refusal = _policy(mcp_stdio="allow").decide({"cwd": "/ws", "mcpServers": servers}, None)
        assert refusal is not None, servers
        assert refusal.field == field, servers


def test_snake_case_aliases_an_sdk_could_read_are_refused() -> None:
    """The Python SDK's models populate by field name too: ``mcp_servers`` would be read."""
    refusal = _policy(mcp_stdio="allow").decide({"cwd": "/ws", "mcp_servers": [STDIO]}, None)
    assert refusal is not None
    assert (refusal.rule, refusal.field) == ("admission.mcp_servers", "mcp_servers")
    params = {"cwd": "/srv", "additional_directories": ["/etc"]}
    refusal = _policy(roots=["/srv"]).decide(params, None)
    assert refusal is not None
    assert refusal.rule == "admission.roots"
    assert _policy().decide(params, None) is None  # no roots: nothing to hide


def test_roots_are_checked_for_cwd_and_every_additional_directory() -> None:
    policy = _policy(roots=["/srv/ws"])
    assert policy.decide({"cwd": "/srv/ws/p", "additionalDirectories": ["/srv/ws"]}, None) is None
    cases = [
        ({"cwd": "/"}, "cwd"),
        ({"cwd": "/srv/ws/../etc"}, "cwd"),
        ({"cwd": "/srv/wsx"}, "cwd"),
        ({"cwd": "relative"}, "cwd"),
        ({}, "cwd"),
        (
            {"cwd": "/srv/ws", "additionalDirectories": ["/srv/ws/a", "/etc"]},
            "additionalDirectories[1]",
        ),
        ({"cwd": "/srv/ws", "additionalDirectories": "/etc"}, "additionalDirectories"),
    ]
    for params, field in cases:
        refusal = policy.decide(params, None)
        assert refusal is not None, params
        assert (refusal.rule, refusal.field) == ("admission.roots", field)


def test_roots_follow_the_injected_resolver() -> None:
    links = {"/srv/ws/link": "/etc"}

    def resolve(path: str) -> str:
        path = lexical_resolve(path)
        for src, dst in links.items():
            if path == src or path.startswith(src + "/"):
                return dst + path[len(src) :]
        return path

    assert outside_roots("/srv/ws/link/x", ["/srv/ws"], lexical_resolve) is None
    why = outside_roots("/srv/ws/link/x", ["/srv/ws"], resolve)
    assert why is not None
    assert "/etc/x" in why
    assert outside_roots("/anything", [], resolve) is None
    assert outside_roots("/a", ["/"], resolve) is None


def test_a_principal_rule_refines_the_defaults_first_match_wins() -> None:
    policy = _policy(
        roots=["/srv"],
        rules=[
            AdmissionRule(principal=["ci-*"], name="ci", mcp_stdio="allow"),
            AdmissionRule(principal=["ci-*", "alice"], roots=["/home/alice"]),
        ],
    )
    stdio = {"cwd": "/srv/x", "mcpServers": [STDIO]}
    assert policy.decide(stdio, "ci-1") is None
    assert policy.decide(stdio, None) is not None
    refusal = policy.decide({"cwd": "/home/alice"}, "ci-1")  # first match: roots stay /srv
    assert refusal is not None
    assert refusal.rule == "admission.roots"
    assert policy.decide({"cwd": "/home/alice/p"}, "alice") is None
    refusal = policy.decide({"cwd": "/srv"}, "alice")
    assert refusal is not None
    assert refusal.rule == "admission.rules[1].roots"
    refusal = policy.decide({"cwd": "/srv", "mcpServers": [STDIO]}, "alice")
    assert refusal is not None
    assert refusal.rule == "admission.mcp_stdio"


# --- the engine: answer, audit, never forwarded ---------------------------------


def _core(remote: bool, **admission: Any) -> ProxyCore:
    core = ProxyCore(Config(admission=AdmissionConfig(**admission)))
    core.admission.bind("alice", remote, None)
    return core


@pytest.mark.parametrize(
    "method", ["session/new", "session/load", "session/resume", "session/fork"]
)
def test_a_refused_request_is_answered_under_its_id_audited_and_not_forwarded(method: str) -> None:
    core = _core(True, roots=["/srv"])
    params = {"sessionId": "s1", "cwd": "/srv", "additionalDirectories": ["/etc"], "mcpServers": []}
    if method == "session/new":
        del params["sessionId"]
    out = core.receive(CLIENT, req(7, method, params), 0.0)
    assert sends(out, AGENT) == []
    [answer] = [json.loads(d) for d in sends(out, CLIENT)]
    assert answer["id"] == 7
    assert answer["error"]["code"] == -32602
    assert "admission.roots" in answer["error"]["message"]
    assert answer["error"]["data"]["rule"] == "admission.roots"
    assert answer["error"]["data"]["field"] == "additionalDirectories[0]"
    [record] = audits(out, "admission_refused")
    assert record.direction == "client->agent"
    assert record.fields["rule"] == "admission.roots"
    assert record.fields["method"] == method
    assert record.fields["id"] == 7
    assert record.fields["verdict"] == "refuse"
    s = core.statistics()
    assert (s.accepted, s.answered, s.forwarded) == (1, 1, 0)
    assert core.pending_requests(CLIENT) == 0


def test_a_local_connection_is_trusted_unless_applies_to_all() -> None:
    frame = req(1, "session/new", {"cwd": "/", "mcpServers": [STDIO]})
    out = _core(False).receive(CLIENT, frame, 0.0)
    assert sends(out, AGENT) == [frame]  # byte for byte
    out = _core(False, applies_to="all").receive(CLIENT, frame, 0.0)
    assert sends(out, AGENT) == []
    [record] = audits(out, "admission_refused")
    assert record.fields["rule"] == "admission.mcp_stdio"


def test_an_admitted_request_is_forwarded_byte_for_byte() -> None:
    frame = req(1, "session/new", {"cwd": "/srv/p", "mcpServers": [HTTP]})
    core = _core(True, roots=["/srv"], mcp_http_allow=["https://mcp.example.com/*"])
    out = core.receive(CLIENT, frame, 0.0)
    assert sends(out, AGENT) == [frame]
    assert audits(out, "admission_refused") == []


def test_a_reload_swaps_the_admission_policy() -> None:
    core = _core(True)
    frame = req(1, "session/new", {"cwd": "/", "mcpServers": [STDIO]})
    assert sends(core.receive(CLIENT, frame, 0.0), AGENT) == []
    core.reconfigure(Config(admission=AdmissionConfig(mcp_stdio="allow")))
    assert sends(
        core.receive(CLIENT, req(2, "session/new", {"cwd": "/", "mcpServers": [STDIO]}), 0.0), AGENT
    )


async def _sdk_handler_kwargs(method: str, params: dict[str, Any]) -> dict[str, Any]:
    """What the Python SDK's router (agent-client-protocol 0.12) hands an agent's handler
    for ``params`` of ``method``: the model's fields, then ``kwargs.update(_meta)``."""
    from acp import schema
    from acp.router import MessageRouter

    models = {
        "session/new": (schema.NewSessionRequest, "new_session"),
        "session/load": (schema.LoadSessionRequest, "load_session"),
        "session/resume": (schema.ResumeSessionRequest, "resume_session"),
        "session/fork": (schema.ForkSessionRequest, "fork_session"),
    }
    model, attr = models[method]
    seen: dict[str, Any] = {}

    class Agent:
        async def handler(self, **kwargs: Any) -> None:
            seen.update(kwargs)

    setattr(Agent, attr, Agent.handler)
    func = MessageRouter()._make_func(model, Agent(), attr)
    assert func is not None
    await func(params)
    return seen


@pytest.mark.parametrize(
    "method", ["session/new", "session/load", "session/resume", "session/fork"]
)
async def test_meta_spellings_the_python_sdk_hands_the_agent_are_refused(method: str) -> None:
    """The Python SDK spreads params._meta into the handler's arguments: _meta.mcp_servers
    starts a stdio MCP server, _meta.cwd / _meta.additional_directories move the session.
    Admission refuses them (they are decision keys), naming the _meta field."""
    base: dict[str, Any] = {"cwd": "/ws", "mcpServers": []}
    if method != "session/new":
        base["sessionId"] = "s1"
    cases = {
        "mcp_servers": [STDIO],
        "cwd": "/etc",
        "additional_directories": ["/etc"],
    }
    for key, value in cases.items():
        params = {**base, "_meta": {key: value}}
        kwargs = await _sdk_handler_kwargs(method, params)
        assert kwargs[key] == value  # what the agent would act on
        refusal = _policy(roots=["/ws"]).decide(params, None)
        assert refusal is not None, key
        assert refusal.field == f"_meta.{key}"
    harmless = {**base, "_meta": {"zed.dev/x": 1, "mcpServers": [STDIO], "sessionId": "s"}}
    assert (await _sdk_handler_kwargs(method, harmless))["mcp_servers"] == []
    assert _policy(roots=["/ws"]).decide(harmless, None) is None  # content, not a parameter
