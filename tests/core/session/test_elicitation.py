"""[elicitation] rules, pure (issue 26): host match, secret fields, the decline."""

from __future__ import annotations

import json
from typing import Any

import pytest

from acp_proxy.config import Config, ElicitationConfig
from acp_proxy.core.engine import ProxyCore
from acp_proxy.core.session.elicitation import SECRET_PATTERNS, ElicitationRules, names_secret
from acp_proxy.core.session.hosts import canonical_host, host_matches, parse_url
from tests.support.corekit import AGENT, CLIENT, audits, notif, req, resp, sends


def _url(url: Any) -> dict[str, Any]:
    return {
        "sessionId": "s1",
        "mode": "url",
        "message": "sign in",
        "elicitationId": "e1",
        "url": url,
    }


def _form(**props: Any) -> dict[str, Any]:
    return {
        "sessionId": "s1",
        "mode": "form",
        "message": "details",
        "requestedSchema": {"type": "object", "properties": props},
    }


HOSTS = ["docs.example.com", "*.corp.example"]


@pytest.mark.parametrize(
    "url",
    [
        "https://docs.example.com/login",
        "https://DOCS.Example.Com./login",  # case, one trailing dot
        "https://docs.example.com:8443/x",  # a port is not the host
        "http://a.b.corp.example/",
        "https://x.corp.example/?q=@evil.example",
    ],
)
def test_allowed_hosts_pass(url: str) -> None:
    rules = ElicitationRules(ElicitationConfig(url_hosts=HOSTS))
    assert rules.decide(_url(url)) is None


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("https://docs.example.com.evil.example/login", "docs.example.com.evil.example"),
        ("https://docs.example.com@evil.example/", None),  # userinfo
        ("https://evil.example#@docs.example.com/", "evil.example"),
        ("https://evil.example\\@docs.example.com/", None),  # backslash
        ("https://docs.example.com../", None),  # two trailing dots
        ("https://d\u043ecs.example.com/", "xn--dcs-sed.example.com"),  # Cyrillic o look-alike
        ("https://corp.example/", "corp.example"),  # *.corp.example is names under it
        ("https://evilcorp.example/", "evilcorp.example"),
        ("https://docs%2eexample.com/", None),
        ("javascript:alert(1)", None),
        ("data:text/html,<b>x</b>", None),
        (" https://docs.example.com/", None),
        ("", None),
        (None, None),
    ],
)
def test_other_hosts_are_declined(url: Any, host: str | None) -> None:
    rules = ElicitationRules(ElicitationConfig(url_hosts=HOSTS))
    verdict = rules.decide(_url(url))
    assert verdict is not None
    assert (verdict.rule, verdict.verdict, verdict.host) == (
        "elicitation.url_hosts",
        "decline",
        host,
    )


def test_host_canonical_form_and_globs() -> None:
    assert canonical_host("Bücher.Example.") == "xn--bcher-kva.example"
    assert host_matches("xn--bcher-kva.example", ["bücher.example"])
    assert canonical_host("a..b") is None
    assert canonical_host("a_b.example") == "a_b.example"
    assert not host_matches("docs.example.com.evil.example", ["docs.example.com"])
    assert not host_matches("docs.example.com.evil.example", ["*.example.com"])
    parsed = parse_url("https://user:pw@docs.example.com/")
    assert isinstance(parsed, str)
    assert "user" in parsed


def test_no_url_hosts_declines_every_url_and_the_default_passes_all() -> None:
    none = ElicitationRules(ElicitationConfig(url_hosts=[]))
    assert none.decide(_url("https://docs.example.com/")) is not None
    default = ElicitationRules(ElicitationConfig())
    assert not default.active
    assert default.decide(_url("https://evil.example/")) is None


@pytest.mark.parametrize(
    "text",
    [
        "password",
        "Password",
        "userPassword",
        "PASSWORD_CONFIRM",
        "passwd",
        "passphrase",
        "apiKey",
        "API_KEY",
        "api-key",
        "apikey",
        "OpenAI API key",
        "access_token",
        "Personal access token",
        "clientSecret",
        "secrets",
        "AWS credentials",
        "credential",
        "private key",
        "ssh_private_key",
        "SSH key",
    ],
)
def test_secret_words_are_found(text: str) -> None:
    assert names_secret(text)


@pytest.mark.parametrize(
    "text",
    ["name", "email", "max tokens", "maxTokens", "passenger", "keyboard layout", "bypass", None, 3],
)
def test_ordinary_fields_are_not_secrets(text: Any) -> None:
    assert not names_secret(text)


def test_patterns_are_listed_in_one_place() -> None:
    assert any("word" in p for p in SECRET_PATTERNS)
    assert len(SECRET_PATTERNS) >= 5


def test_secret_fields_are_read_in_name_title_and_description() -> None:
    rules = ElicitationRules(ElicitationConfig(secret_fields="decline"))
    assert rules.decide(_form(name={"type": "string"}, age={"type": "integer"})) is None
    for props in [
        {"pw": {"type": "string", "title": "Password"}},
        {"x": {"type": "string", "description": "Your GitHub token"}},
        {"apiKey": {"type": "string"}},
    ]:
        verdict = rules.decide(_form(**props))
        assert verdict is not None
        assert verdict.rule == "elicitation.secret_fields"
        assert verdict.field == next(iter(props))
    alias = {"sessionId": "s", "mode": "form", "requested_schema": {"properties": {"pw": {}}}}
    assert rules.decide(alias) is not None
    unreadable = {"sessionId": "s", "mode": "form", "requestedSchema": {"properties": ["password"]}}
    assert rules.decide(unreadable) is not None
    # url mode is not this rule's business
    assert rules.decide(_url("https://evil.example/")) is None


def test_an_unknown_mode_is_declined_while_a_rule_is_on() -> None:
    rules = ElicitationRules(ElicitationConfig(secret_fields="decline"))
    verdict = rules.decide({"sessionId": "s", "mode": "_custom"})
    assert verdict is not None
    assert verdict.rule == "elicitation.mode"


def test_a_meta_mode_is_declined_while_a_rule_is_on() -> None:
    """The Python SDK's client router calls ``create_elicitation(message=, mode=)`` and then
    ``kwargs.update(_meta)``: a ``_meta.mode`` replaces the mode (its url, its schema) the
    client acts on, which the rules never read. Vendor ``_meta`` keys stay content."""
    evil = {"url": "https://evil.example/", "requested_schema": {"properties": {"pw": {}}}}
    for config, params in (
        (ElicitationConfig(url_hosts=HOSTS), _url("https://docs.example.com/a")),
        (ElicitationConfig(secret_fields="decline"), _form(name={"type": "string"})),
    ):
        rules = ElicitationRules(config)
        assert rules.decide(params) is None
        assert rules.decide({**params, "_meta": {"zed.dev/x": 1, "field_meta": {}}}) is None
        verdict = rules.decide({**params, "_meta": {"mode": evil}})
        assert verdict is not None
        assert verdict.rule == "elicitation.mode"
    # with no rule on, nothing is decided: forwarded as it came
    assert ElicitationRules(ElicitationConfig()).decide({**_form(), "_meta": {"mode": 1}}) is None


# --- the engine -----------------------------------------------------------------


def _open(core: ProxyCore) -> None:
    core.receive(CLIENT, req(1, "session/new", {"cwd": "/ws", "mcpServers": []}), 0.0)
    core.receive(AGENT, resp(1, {"sessionId": "s1"}), 0.0)


def test_a_declined_elicitation_is_answered_to_the_agent_and_never_shown() -> None:
    core = ProxyCore(Config(elicitation=ElicitationConfig(url_hosts=["docs.example.com"])))
    _open(core)
    out = core.receive(AGENT, req("e", "elicitation/create", _url("https://evil.example/x")), 1.0)
    assert sends(out, CLIENT) == []
    [answer] = [json.loads(d) for d in sends(out, AGENT)]
    assert answer == {"jsonrpc": "2.0", "id": "e", "result": {"action": "decline"}}
    [record] = audits(out, "elicitation_declined")
    assert record.direction == "agent->client"
    assert record.fields["rule"] == "elicitation.url_hosts"
    assert record.fields["host"] == "evil.example"
    assert record.fields["sessionId"] == "s1"
    assert "url" not in record.fields
    assert "message" not in record.fields
    assert core.pending_requests(AGENT) == 0
    # the agent's cancel of it is dropped, not shown
    out = core.receive(AGENT, notif("$/cancel_request", {"requestId": "e"}), 1.0)
    assert sends(out, CLIENT) == []


def test_allowed_requests_and_complete_pass_unchanged() -> None:
    core = ProxyCore(Config(elicitation=ElicitationConfig(url_hosts=[], secret_fields="decline")))
    _open(core)
    form = req(2, "elicitation/create", _form(name={"type": "string"}))
    assert sends(core.receive(AGENT, form, 1.0), CLIENT) == [form]
    done = notif("elicitation/complete", {"elicitationId": "e1"})
    assert sends(core.receive(AGENT, done, 1.0), CLIENT) == [done]


def test_an_elicitation_for_an_unknown_session_is_held_first_then_decided() -> None:
    core = ProxyCore(Config(elicitation=ElicitationConfig(url_hosts=[])))
    frame = req("e", "elicitation/create", {**_url("https://evil.example/"), "sessionId": "later"})
    out = core.receive(AGENT, frame, 0.0)
    assert sends(out) == []
    assert [a.event for a in audits(out)] == ["held"]
    out = core.receive(
        CLIENT, req(5, "session/load", {"sessionId": "later", "cwd": "/w", "mcpServers": []}), 1.0
    )
    assert sends(out, CLIENT) == []
    to_agent = [json.loads(d) for d in sends(out, AGENT)]
    # released (and declined) as the load goes through
    assert [m.get("method") for m in to_agent] == [None, "session/load"]
    assert to_agent[0] == {"jsonrpc": "2.0", "id": "e", "result": {"action": "decline"}}
    assert [a.fields["rule"] for a in audits(out, "elicitation_declined")] == [
        "elicitation.url_hosts"
    ]


def test_a_held_elicitation_released_on_expiry_is_still_decided() -> None:
    """hold.on_expire = "release": the expired elicitation is decided on its way out."""
    core = ProxyCore(Config(elicitation=ElicitationConfig(url_hosts=[])))
    assert core.config.hold.on_expire == "release"
    frame = req("e", "elicitation/create", {**_url("https://evil.example/"), "sessionId": "ghost"})
    assert sends(core.receive(AGENT, frame, 0.0)) == []
    deadline = core.get_timer()
    assert deadline is not None
    out = core.handle_timer(deadline)
    assert sends(out, CLIENT) == []
    assert [json.loads(d)["result"] for d in sends(out, AGENT)] == [{"action": "decline"}]
    assert [a.event for a in audits(out)][-1] == "elicitation_declined"
