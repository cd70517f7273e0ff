"""Command rules read commands as real agents write them (issue 31, item 8).

``command_shapes.json`` holds how Codex (argv arrays, ``bash -lc`` scripts),
Claude Code (a ``Bash`` string), fast-agent (an ``execute`` string,
``terminal/create`` ``/bin/sh -lc``), kimi-cli (a whole line as the terminal's
``command``), a v1 terminal (``bash -c``, a plain argv) and a v2 command subject
spell one command (checked against recorded traffic of codex-acp, claude-agent-acp
and fast-agent); every dangerous script in every shape is
denied by the ``config strict`` rule for that shape, every harmless one is not,
and every command rule of ``config strict`` decides at least one of them.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest

from acp_proxy.config.io import load_config
from acp_proxy.core.session.permissions import Policy, SessionContext, Workspace

HERE = Path(__file__).resolve().parent
CORPUS = json.loads((HERE / "command_shapes.json").read_text())
STRICT = HERE.parents[2] / "acp_proxy" / "config" / "strict.toml"
ROOT = SessionContext("S", workspace=Workspace("/ws"))
OPTIONS = [
    {"optionId": "yes", "name": "Yes", "kind": "allow_once"},
    {"optionId": "no", "name": "No", "kind": "reject_once"},
]
POLICY = Policy(load_config(STRICT).permissions)


def fill(value: Any, script: str) -> Any:
    """The shape with ``{script}`` (and ``{argv0}`` / ``{rest...}``) put in."""
    if isinstance(value, str):
        return value.replace("{script}", script).replace("{argv0}", shlex.split(script)[0])
    if isinstance(value, list):
        out: list[Any] = []
        for item in value:
            out += shlex.split(script)[1:] if item == "{rest...}" else [fill(item, script)]
        return out
    if isinstance(value, dict):
        return {k: fill(v, script) for k, v in value.items()}
    return value


def cases() -> list[Any]:
    out = []
    for shape in CORPUS["shapes"]:
        for entry in CORPUS["scripts"]:
            script = entry["script"]
            if shape.get("plain") and any(c in script for c in "&;|~"):
                continue  # a plain argv has no shell: operators would be arguments
            label = f"{shape['agent']}: {shape['name']}: {script}"
            out.append(pytest.param(shape, entry, id=label))
    return out


def rule_for(shape: dict[str, Any], family: str) -> str:
    """The strict rule that must deny ``family`` in ``shape``."""
    if shape["method"] == "terminal/create":
        return f"no-{family}-terminals"
    if "subject" in shape["params"]:
        return f"no-{family}-commands"
    return f"no-{family}-tool-commands"


def decide(shape: dict[str, Any], script: str) -> Any:
    params = {"sessionId": "S", **fill(shape["params"], script)}
    if shape["method"] == "session/request_permission":
        params["options"] = OPTIONS
    return POLICY.decide(ROOT, shape["method"], params)


@pytest.mark.parametrize(("shape", "entry"), cases())
def test_every_agent_shape_is_decided_by_the_strict_rule(
    shape: dict[str, Any], entry: dict[str, Any]
) -> None:
    """A dangerous script is denied by the shape's strict rule; a harmless one is not denied."""
    d = decide(shape, entry["script"])
    if entry["family"] is None:
        assert d.action != "deny", d
    else:
        assert (d.action, d.rule) == ("deny", rule_for(shape, entry["family"]))


def test_every_strict_command_rule_decides_some_corpus_entry() -> None:
    """No command rule of config strict goes untested by the corpus."""
    rules = load_config(STRICT).permissions.rules
    command_rules = {
        r.name
        for r in rules
        if r.command is not None or (r.raw_input is not None and "command" in r.raw_input)
    }
    assert len(command_rules) == 9
    deciding = set()
    for param in cases():
        shape, entry = param.values
        deciding.add(decide(shape, entry["script"]).rule)
    assert command_rules <= deciding


def test_a_codex_argv_script_is_not_re_split() -> None:
    """`["/bin/bash", "-lc", "sudo ls"]` is matched on its script `sudo ls`, as a string is."""
    tool = {
        "toolCallId": "c",
        "kind": "execute",
        "rawInput": {"command": ["bash", "-lc", "sudo ls"]},
    }
    d = POLICY.decide(
        ROOT, "session/request_permission", {"sessionId": "S", "toolCall": tool, "options": OPTIONS}
    )
    assert d.rule == "no-destructive-tool-commands"
