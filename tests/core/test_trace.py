"""The tracing core: one record per message with the engine's decision (docs/trace-format.md)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from support.corekit import (
    AGENT,
    CLIENT,
    announce,
    assert_accounting,
    chunk,
    req,
    resp,
    sends,
    state_update,
)

from acp_proxy.config import Config, HoldConfig
from acp_proxy.core.actions import Action
from acp_proxy.core.engine import ProxyCore
from acp_proxy.core.trace import DECISIONS, TracingCore, header, redact
from acp_proxy.core.wire.framing import Lines


def traced(config: Config | None = None, content: bool = False) -> tuple[TracingCore, list[Any]]:
    records: list[Any] = []
    return TracingCore(config, emit=records.append, include_content=content), records


def messages(records: list[Any]) -> list[tuple[Any, ...]]:
    return [
        (r["dir"], r["kind"], r["method"], r["decision"]) for r in records if r["type"] == "message"
    ]


def start(core: ProxyCore, now: float = 0.0) -> list[Action]:
    out = core.receive(
        CLIENT, req(0, "initialize", {"protocolVersion": 1, "clientInfo": {"name": "zed"}}), now
    )
    out += core.receive(
        AGENT, resp(0, {"protocolVersion": 1, "agentInfo": {"name": "claude"}}), now
    )
    out += core.receive(CLIENT, req(1, "session/new", {"cwd": "/", "mcpServers": []}), now)
    out += core.receive(AGENT, resp(1, {"sessionId": "s1"}), now + 0.25)
    return out


def test_forwarded_requests_and_responses_carry_names_versions_and_durations() -> None:
    core, records = traced()
    start(core)
    assert messages(records) == [
        ("client->agent", "request", "initialize", "forwarded"),
        ("agent->client", "response", None, "forwarded"),
        ("client->agent", "request", "session/new", "forwarded"),
        ("agent->client", "response", None, "forwarded"),
    ]
    init, init_resp, _new, new_resp = records
    assert init["peer"] == "zed"
    assert init_resp["peer"] == "claude"
    assert init_resp["protocolVersion"] == 1
    assert init_resp["for_method"] == "initialize"
    assert new_resp["created"] == "s1"
    assert new_resp["duration"] == 0.25
    assert new_resp["for_seq"] == 3
    assert [r["seq"] for r in records] == [1, 2, 3, 4]


def test_held_traffic_is_released_after_the_announcement() -> None:
    core, records = traced()
    start(core)
    del records[:]
    core.receive(AGENT, chunk("kid", "early"), 1.0)
    core.receive(AGENT, announce("s1", "kid", capabilities={}), 1.5)
    got = messages(records)
    assert got == [
        ("agent->client", "notification", "session/update", "held"),
        ("agent->client", "notification", "session/update", "forwarded"),
        ("agent->client", "notification", "session/update", "released"),
    ]
    held, ann, released = records
    assert released["of"] == held["seq"]
    assert released["session"] == "kid"
    assert {"child_announced", "released"} <= {e["event"] for e in ann["events"]}
    assert_accounting(core)


def test_refused_mutation_and_dropped_response() -> None:
    core, records = traced()
    start(core)
    core.receive(AGENT, announce("s1", "kid"), 1.0)  # no capabilities: no mutation passes
    del records[:]
    out = core.receive(CLIENT, req(7, "session/prompt", {"sessionId": "kid", "prompt": []}), 2.0)
    assert sends(out, CLIENT)
    core.receive(AGENT, resp(99, {}), 2.0)  # answers nothing in flight
    assert messages(records) == [
        ("client->agent", "request", "session/prompt", "refused"),
        ("agent->client", "response", None, "dropped"),
    ]
    assert records[0]["events"][0]["event"] == "mutation_rejected"
    assert records[1]["events"][0]["event"] == "unknown_response"


def test_duplicate_state_report_is_dropped_and_says_so() -> None:
    core, records = traced()
    start(core)
    core.receive(AGENT, announce("s1", "kid", capabilities={}), 1.0)
    del records[:]
    core.receive(AGENT, state_update("kid", "running"), 2.0)
    core.receive(AGENT, state_update("kid", "running"), 2.0)
    assert [r["decision"] for r in records] == ["forwarded", "dropped"]


def test_expiry_and_close_get_records_of_their_own() -> None:
    cfg = Config(hold=HoldConfig(timeout_seconds=1.0, on_expire="drop"))
    core, records = traced(cfg)
    start(core)
    core.receive(AGENT, chunk("ghost", "x"), 1.0)
    core.receive(AGENT, req(50, "session/request_permission", {"sessionId": "ghost2"}), 1.0)
    core.receive(CLIENT, req(8, "session/prompt", {"sessionId": "s1", "prompt": []}), 1.0)
    del records[:]
    core.handle_timer(5.0)
    assert records[0]["type"] == "timer"
    assert [(r["kind"], r["decision"]) for r in records[1:]] == [
        ("notification", "dropped"),
        ("request", "refused"),
    ]
    assert all(r["of"] is not None for r in records[1:])
    del records[:]
    core.peer_closed(AGENT, 6.0, "agent exited")
    closed = {k: v for k, v in records[0].items() if k != "events"}
    assert closed == {"type": "closed", "t": 6.0, "peer": "agent", "detail": "agent exited"}
    assert records[1]["type"] == "proxy"
    assert (records[1]["to"], records[1]["id"], records[1]["for_method"]) == (
        "client",
        8,
        "session/prompt",
    )


def test_a_line_run_gets_one_record_per_line_and_the_same_actions() -> None:
    plain = ProxyCore()
    core, records = traced()
    start(plain)
    start(core)
    del records[:]
    run = Lines(b"\n".join([chunk("s1", "a"), chunk("s1", "b"), chunk("kid", "c")]))
    joined = b"".join(sends(plain.receive(AGENT, run, 1.0)))
    assert b"".join(sends(core.receive(AGENT, run, 1.0))).replace(b"\n", b"") == joined.replace(
        b"\n", b""
    )
    assert [r["decision"] for r in records] == ["forwarded", "forwarded", "held"]
    assert plain.statistics() == core.statistics()


def test_every_decision_is_a_documented_one() -> None:
    core, records = traced()
    start(core)
    core.receive(AGENT, chunk("kid", "x"), 1.0)
    core.receive(AGENT, b"not json", 1.0)
    core.receive(CLIENT, b"[]", 1.0)
    assert {r["decision"] for r in records} <= set(DECISIONS)
    assert [r["decision"] for r in records[-2:]] == ["dropped", "refused"]


def test_content_is_redacted_on_the_trace_copy_only() -> None:
    core, records = traced(content=True)
    start(core)
    secret = "sk-ant-" + "a1B2" * 8
    frame = chunk("s1", f"key {secret} and Authorization: Bearer abc.def-ghi")
    out = core.receive(AGENT, frame, 1.0)
    assert sends(out, CLIENT) == [frame]  # forwarded bytes untouched
    text = records[-1]["content"]
    assert secret not in text
    assert "abc.def-ghi" not in text
    assert json.loads(text)["params"]["sessionId"] == "s1"


def test_redact_keeps_json_valid_and_cuts_secret_named_values() -> None:
    text = json.dumps({"env": {"OPENAI_API_KEY": 'x"y', "token": "t0k"}, "path": "/tmp"})
    out = json.loads(redact(text))
    assert out == {"env": {"OPENAI_API_KEY": "[REDACTED]", "token": "[REDACTED]"}, "path": "/tmp"}
    assert redact("ghp_" + "Z" * 36) == "[REDACTED]"
    assert redact("AKIAABCDEFGHIJKLMNOP") == "[REDACTED]"
    assert redact("nothing secret here") == "nothing secret here"


def test_redact_cuts_acp_env_and_header_values_whatever_their_names() -> None:
    new = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "session/new",
        "params": {
            "cwd": "/w",
            "mcpServers": [
                {
                    "name": "db",
                    "command": "db-mcp",
                    "args": ["--verbose"],
                    "env": [
                        {"name": "DATABASE_PASSWORD", "value": "hunter2-super-secret"},
                        {"name": "PLAIN", "value": "innocent-looking"},
                    ],
                },
                {
                    "type": "http",
                    "name": "web",
                    "url": "https://mcp.example/x",
                    "headers": [{"name": "X-Api-Key", "value": "abcdef123456"}],
                },
            ],
        },
    }
    out = json.loads(redact(json.dumps(new)))
    db, web = out["params"]["mcpServers"]
    assert db["env"] == [
        {"name": "DATABASE_PASSWORD", "value": "[REDACTED]"},
        {"name": "PLAIN", "value": "[REDACTED]"},
    ]
    assert web["headers"] == [{"name": "X-Api-Key", "value": "[REDACTED]"}]
    assert db["args"] == ["--verbose"]
    assert web["url"] == "https://mcp.example/x"
    assert list(out) == list(new)  # same keys, same order
    assert out["id"] == 3
    terminal = {
        "method": "terminal/create",
        "params": {"command": "make", "env": [{"name": "HOME", "value": "/home/me"}]},
    }
    assert json.loads(redact(json.dumps(terminal)))["params"]["env"][0]["value"] == "[REDACTED]"


def test_redact_works_on_decoded_keys_and_any_value_type() -> None:
    assert json.loads(redact('{"api\\u005fkey":"leak-escaped-key"}')) == {"api_key": "[REDACTED]"}
    text = json.dumps({"password": 12345678, "client_secret": ["a", "b"], "token": {"v": "x"}})
    assert json.loads(redact(text)) == {
        "password": "[REDACTED]",
        "client_secret": "[REDACTED]",
        "token": "[REDACTED]",
    }
    usage = '{"usage":{"inputTokens":12,"outputTokens":3.50e1},"sessionId":"s1"}'
    assert redact(usage) == usage  # counts are no secrets; an untouched text is unchanged
    # duplicate keys do not hide a secret from the decoded value
    assert "first" not in redact('{"password":"first","password":"[REDACTED]"}')


def test_redact_cuts_credentials_in_urls_and_strings() -> None:
    text = json.dumps(
        {"params": {"url": "https://user:pa55word@host/x?access_token=QQQQQQ&page=2"}}
    )
    url = json.loads(redact(text))["params"]["url"]
    assert url == "https://[REDACTED]@host/x?access_token=[REDACTED]&page=2"
    cmd = redact(json.dumps({"command": "DATABASE_PASSWORD=hunter2 psql --host=db"}))
    assert json.loads(cmd) == {"command": "DATABASE_PASSWORD=[REDACTED] psql --host=db"}
    assert redact("not json: Bearer abc.def") == "not json: Bearer [REDACTED]"
    assert json.loads(redact('{"t":"\\ud800 sk-ant-' + "x" * 20 + '"}')) == {
        "t": "\ud800 [REDACTED]"
    }


def test_the_readme_jq_line_selects_only_message_records_not_forwarded() -> None:
    """The README's jq filter over a trace (header, messages, closed records) prints a row
    for each message the proxy did not forward and none for the other records (whose
    decision is absent). Its select() condition is evaluated here as written."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    (line,) = [
        ln for ln in readme.splitlines() if ln.startswith("jq ") and ln.endswith(" /tmp/t.jsonl")
    ]
    cond = re.search(r"select\((.*?)\) \|", line)
    assert cond is not None, line
    python = re.sub(r"\.(\w+)", r'r.get("\1")', cond.group(1))
    core, records = traced()
    start(core)
    core.receive(AGENT, chunk("unknown", "early"), 1.0)  # held: not forwarded
    core.peer_closed(AGENT, 2.0, "eof")
    trace = [header(False), *records]
    assert {"header", "message", "closed"} <= {r["type"] for r in trace}
    rows = [r for r in trace if eval(python, {}, {"r": r})]
    assert rows
    assert all(r["type"] == "message" and r["decision"] != "forwarded" for r in rows)


def _content(text: str) -> str:
    """The ``content`` string of a response carrying ``text``, after redaction."""
    msg = {"jsonrpc": "2.0", "id": 1, "result": {"content": text}}
    return str(json.loads(redact(json.dumps(msg)))["result"]["content"])


def test_redact_cuts_secret_named_assignments_in_every_form() -> None:
    # NAME=value with short names (DB_PASS) and npm's leading `_`
    assert _content("DB_PASS=hunter2\nX=1\n") == "DB_PASS=[REDACTED]\nX=1\n"
    npmrc = "//registry.npmjs.org/:_authToken=abc123def\n"
    assert _content(npmrc) == "//registry.npmjs.org/:_authToken=[REDACTED]\n"
    assert _content("conn(password='hunter2')") == "conn(password='[REDACTED]')"
    # NAME = value (INI, ~/.pypirc, ~/.aws/credentials), the rest of the line
    pypirc = "[pypi]\nusername = __token__\npassword = hunter2 two\n"
    assert _content(pypirc) == "[pypi]\nusername = __token__\npassword = [REDACTED]\n"
    aws = "[default]\naws_secret_access_key = wJalrXUtnFEMI/K7MDENG\nregion = eu-west-1"
    assert _content(aws) == "[default]\naws_secret_access_key = [REDACTED]\nregion = eu-west-1"
    # NAME: value (YAML, gh hosts.yml)
    assert _content("db:\n  password: hunter2\n  host: db1\n") == (
        "db:\n  password: [REDACTED]\n  host: db1\n"
    )
    assert _content("see apiKey: k123 there") == "see apiKey: [REDACTED] there"
    # usage counters, and words that only look alike, stay
    counts = "inputTokens: 12\noutputTokens=3\nmax_tokens = 9\nkeywords: a\nauthor: me\n"
    assert _content(counts) == counts


def test_redact_cuts_netrc_passwords() -> None:
    line = "machine api.x.com login bob password hunter2\n"
    assert _content(line) == "machine api.x.com login bob password [REDACTED]\n"
    block = "machine x\n  login bob\n  password hunter2\n"
    assert _content(block) == "machine x\n  login bob\n  password [REDACTED]\n"
    assert _content("the password is in the vault") == "the password is in the vault"


def test_redact_cuts_token_shapes() -> None:
    secrets = [
        "sk_live_51Habcdefghijklmnop",
        "sk_test_51Habcdefghijklmnop",
        "rk_live_51Habcdefghijklmnop",
        "npm_AbCdEf0123456789AbCdEf0123456789abcd",
        "pypi-AgEIcHlwaS5vcmcCJGE0ZjQ",
        "gho_abcdefghijklmnopqrstuvwxyz0123",
        "github_pat_11ABCDEFG0123456789_abcdefghij",
        "xoxb-1234567890-abcdefghij",
        "AKIAABCDEFGHIJKLMNOP",
        "AIza" + "B" * 35,
        "sk-proj-" + "c" * 24,
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dBjftJeZ4CVPmB92K27uhbUJU1p1r",
    ]
    for secret in secrets:
        assert _content(f"value {secret} end") == "value [REDACTED] end", secret


def test_redact_cuts_command_line_credentials() -> None:
    curl = "curl -u bob:hunter2 https://x && wget --user=al:s3cr3t https://y"
    assert (
        _content(curl) == "curl -u bob:[REDACTED] https://x && wget --user=al:[REDACTED] https://y"
    )
    assert _content("curl --user bob:hunter2 x") == "curl --user bob:[REDACTED] x"
    assert _content("docker run -u 1000:1000 img") == "docker run -u 1000:1000 img"
    assert _content("mysql -uroot -phunter2 db") == "mysql -uroot -p[REDACTED] db"
    assert _content("mysqldump -p'hunter2' db") == "mysqldump -p'[REDACTED]' db"
    # -p elsewhere is not a password: psql's port, mkdir -p, ssh -p
    kept = "psql -p5432 db; mkdir -pv a; ssh -p2222 h"
    assert _content(kept) == kept
    create = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "terminal/create",
        "params": {"command": "/usr/bin/mysql", "args": ["-uroot", "-phunter2", "-p", "db"]},
    }
    out = json.loads(redact(json.dumps(create)))
    assert out["params"]["args"] == ["-uroot", "-p[REDACTED]", "-p", "db"]
    create["params"] = {"command": "mkdir", "args": ["-phunter2"]}
    assert json.loads(redact(json.dumps(create)))["params"]["args"] == ["-phunter2"]


def test_redact_cuts_http_header_lines() -> None:
    assert _content("Authorization: token ghp_short") == "Authorization: [REDACTED]"
    assert _content("curl -H 'X-Api-Key: k123' x") == "curl -H 'X-Api-Key: [REDACTED]' x"
    assert _content("GET / HTTP/1.1\nX-Auth-Token: abc def\nAccept: */*") == (
        "GET / HTTP/1.1\nX-Auth-Token: [REDACTED]\nAccept: */*"
    )
    assert _content("Cookie: session=abc; theme=dark") == "Cookie: [REDACTED]"
    assert _content("Content-Type: text/plain") == "Content-Type: text/plain"


def test_redaction_of_a_large_message_stays_fast() -> None:
    import time

    text = ("lorem ipsum dolor sit amet, x=1 key words: value; " * 24 + "\n") * 900
    msg = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"content": text}})
    assert len(msg) > 1 << 20
    start = time.perf_counter()
    redact(msg)
    assert time.perf_counter() - start < 5.0  # measured about 0.6 s
