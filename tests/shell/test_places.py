"""Symbolic links in a workspace, and the proxy's own files (issue 31, items 2 and 3).

Real links on a real filesystem, read through the shell's resolver
(:func:`acp_proxy.shell.places.resolve_path`) by the strict policy.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from acp_proxy.config import Config
from acp_proxy.config.io import load_config
from acp_proxy.core.session.permissions import Policy, SessionContext, Workspace
from acp_proxy.core.session.places import OwnFiles, Unexamined, own_file_hit
from acp_proxy.shell.places import identity, own_files, resolve_path

STRICT = Path(__file__).resolve().parents[2] / "acp_proxy" / "config" / "strict.toml"
RP = "session/request_permission"
OPTIONS = [
    {"optionId": "yes", "name": "Yes", "kind": "allow_once"},
    {"optionId": "no", "name": "No", "kind": "reject_once"},
]


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, Path]:
    """A home with a key, a workspace with a file link, a directory link and a home link."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("KEY")
    (home / ".ssh" / "config").write_text("Host *")
    (home / "outside").mkdir()
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").symlink_to(home / ".ssh" / "id_ed25519")
    (ws / "sshdir").symlink_to(home / ".ssh")
    (ws / "homelink").symlink_to(home)
    (ws / "real.txt").write_text("ok")
    return {"home": home, "ws": ws}


def decide(ws: Path, method: str, params: dict[str, Any], resolve: Any = resolve_path) -> Any:
    context = SessionContext("S", workspace=Workspace(str(ws)))
    policy = Policy(load_config(STRICT).permissions)
    return policy.decide(context, method, {"sessionId": "S", **params}, resolve=resolve)


@pytest.mark.parametrize(
    ("relative", "lexical"),
    [
        ("notes.txt", None),
        ("sshdir/config", None),
        ("sshdir/new-key", None),
        ("homelink/.ssh/config", "no-credential-reads"),
    ],
)
def test_a_read_through_a_link_to_a_credential_is_refused(
    tree: dict[str, Path], relative: str, lexical: str | None
) -> None:
    """ws/notes.txt -> ~/.ssh/id_ed25519 (a file, directory or home link) meets the deny."""
    path = str(tree["ws"] / relative)
    d = decide(tree["ws"], "fs/read_text_file", {"path": path})
    assert (d.action, d.rule) == ("deny", "no-credential-reads")
    # read lexically, as before: the link is not seen
    assert decide(tree["ws"], "fs/read_text_file", {"path": path}, None).rule == lexical


@pytest.mark.parametrize("relative", ["homelink/outside/x", "homelink/../x", "homelink/new"])
def test_a_write_or_terminal_through_a_home_link_leaves_the_workspace(
    tree: dict[str, Path], relative: str
) -> None:
    """ws/homelink -> ~: a write or a terminal cwd through it is outside the workspace."""
    place = str(tree["ws"]) + "/" + relative
    write = decide(tree["ws"], "fs/write_text_file", {"path": place, "content": "x"})
    assert (write.action, write.rule) == ("deny", "writes-in-workspace-only")
    if not relative.endswith("/x"):
        term = decide(tree["ws"], "terminal/create", {"command": "make", "cwd": place})
        assert (term.action, term.rule) == ("deny", "terminals-in-workspace-only")


def test_places_inside_the_workspace_are_decided_as_before(tree: dict[str, Path]) -> None:
    """A real file, a new file, a cwd in the workspace: not refused."""
    ws = tree["ws"]
    assert decide(ws, "fs/read_text_file", {"path": str(ws / "real.txt")}).rule is None
    assert (
        decide(ws, "fs/write_text_file", {"path": str(ws / "new.txt"), "content": ""}).rule is None
    )
    assert decide(ws, "terminal/create", {"command": "make", "cwd": str(ws)}).rule is None


def test_a_workspace_root_that_is_a_link_still_holds_its_files(tmp_path: Path) -> None:
    """The workspace given as a link: its files resolve under the resolved root, inside."""
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    d = decide(link, "fs/write_text_file", {"path": str(link / "a.txt"), "content": ""})
    assert d.rule is None


def test_permission_locations_through_a_link_are_denied(tree: dict[str, Path]) -> None:
    """A tool call whose location is the file link: denied by no-credential-tool-locations."""
    tool = {
        "toolCallId": "t",
        "kind": "read",
        "locations": [{"path": str(tree["ws"] / "notes.txt")}],
    }
    d = decide(tree["ws"], RP, {"toolCall": tool, "options": OPTIONS})
    assert (d.action, d.option_id, d.rule) == ("deny", "no", "no-credential-tool-locations")


def test_own_files_lists_config_logs_links_and_the_watched_directory(tmp_path: Path) -> None:
    """The config (and the link it is), the audit log, the trace, the log file, the token."""
    real = tmp_path / "data" / "policy.toml"
    real.parent.mkdir()
    real.write_text("")
    config = tmp_path / "policy.toml"
    config.symlink_to(real)
    cfg = Config()
    cfg = type(cfg)(
        audit=type(cfg.audit)(path=str(tmp_path / "audit.jsonl")),
        trace=type(cfg.trace)(path=str(tmp_path / "trace.jsonl")),
        listen=type(cfg.listen)(token_file=str(tmp_path / "token")),
    )
    own = own_files(cfg, str(config), watch=True, log_file=str(tmp_path / "proxy.log"))
    for name in (
        "policy.toml",
        "data/policy.toml",
        "audit.jsonl",
        "trace.jsonl",
        "token",
        "proxy.log",
    ):
        assert own.places[str(tmp_path / name)] is True, name
    assert own.places[str(tmp_path)] is False  # the watched directory itself, not below
    assert own_file_hit([str(tmp_path / "other.txt")], [], own) is None
    assert own_file_hit([str(tmp_path)], [], own) == str(tmp_path)
    assert own_file_hit([str(tmp_path / "DATA" / "policy.toml")], [], own) is not None
    assert own_file_hit([], [f"cat {tmp_path}/audit.jsonl"], own) == str(tmp_path / "audit.jsonl")


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("fs/read_text_file", {"path": "{cfg}"}),
        ("fs/write_text_file", {"path": "{cfg}", "content": "# emptied"}),
        ("fs/write_text_file", {"path": "{ws}/cfglink", "content": ""}),
        ("fs/read_text_file", {"path": "{ws}/audit.jsonl"}),
        ("terminal/create", {"command": "ls", "cwd": "{ws}"}),
        (RP, {"toolCall": {"toolCallId": "t", "kind": "edit", "locations": [{"path": "{cfg}"}]}}),
    ],
)
def test_the_proxy_s_own_files_are_refused_without_any_rule(
    tmp_path: Path, method: str, params: dict[str, Any]
) -> None:
    """Config file, a link to it, the audit log, a terminal in the watched directory,
    a permission location: refused whatever the rules say (here: no rules at all)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    cfg_file = ws / ".acp-proxy.toml"
    cfg_file.write_text("")
    (ws / "cfglink").symlink_to(cfg_file)
    audit = Config().audit
    cfg = type(Config())(audit=type(audit)(path=str(ws / "audit.jsonl")))
    own = own_files(cfg, str(cfg_file), watch=True)

    def fill(value: Any) -> Any:
        if isinstance(value, str):
            return value.replace("{cfg}", str(cfg_file)).replace("{ws}", str(ws))
        if isinstance(value, list):
            return [fill(v) for v in value]
        return {k: fill(v) for k, v in value.items()} if isinstance(value, dict) else value

    context = SessionContext("S", workspace=Workspace(str(ws)))
    d = Policy(Config().permissions).decide(
        context,
        method,
        {"sessionId": "S", "options": OPTIONS, **fill(params)},
        resolve=resolve_path,
        own=own,
    )
    assert d.disposition == "refuse", d
    assert d.forced
    assert "own file" in d.reason
    assert d.audit_event is not None
    # another file of the watched directory is not the proxy's
    other = Policy(Config().permissions).decide(
        context,
        "fs/write_text_file",
        {"sessionId": "S", "path": str(ws / "src.py")},
        resolve=resolve_path,
        own=own,
    )
    assert other.disposition == "forward"


def test_no_own_files_no_change() -> None:
    """Without own files, nothing is refused on their account."""
    assert own_file_hit(["/etc/passwd"], ["cat x"], OwnFiles()) is None


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("fs/write_text_file", {"path": "audit.jsonl", "content": "x"}),
        ("fs/read_text_file", {"path": "file:///{ws}/audit.jsonl"}),
        ("fs/write_text_file", {"path": "./audit.jsonl", "content": "x"}),
        ("terminal/create", {"command": "ls", "cwd": "."}),
    ],
)
def test_a_relative_place_is_refused_while_own_files_are_protected(
    tmp_path: Path, method: str, params: dict[str, Any]
) -> None:
    """No rules, but an audit log to protect: a path or cwd that is not absolute (which
    file it names is the client's reading: against its own working directory) is
    refused; without own files it is forwarded as before (found by an attack with an
    SDK agent: ``audit.jsonl`` and ``file://`` reached the client)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    cfg = type(Config())(audit=type(Config().audit)(path=str(ws / "audit.jsonl")))
    own = own_files(cfg, None)
    filled = {k: v.replace("{ws}", str(ws)) for k, v in params.items()}
    context = SessionContext("S", workspace=Workspace(str(ws)))
    request = {"sessionId": "S", **filled}
    d = Policy(Config().permissions).decide(context, method, request, resolve=resolve_path, own=own)
    assert d.disposition == "refuse", d
    assert "not an absolute path" in d.reason
    free = Policy(Config().permissions).decide(
        context, method, request, resolve=resolve_path, own=OwnFiles()
    )
    assert free.disposition == "forward", free


def test_the_identity_check_knows_a_hard_link_and_the_files_made_or_replaced_since(
    tmp_path: Path,
) -> None:
    """Real links: a hard link and a linked directory are the audit log; a file that
    does not exist is not examined further (``None``); a loop of links cannot be
    examined; the trace made after the start, and a config replaced by rename, are
    known by their identities when a request comes."""
    logs = tmp_path / "logs"
    logs.mkdir()
    audit = logs / "audit.jsonl"
    audit.write_text("")
    config = tmp_path / "policy.toml"
    config.write_text("")
    trace = logs / "trace.jsonl"  # not there yet at the start
    cfg = type(Config())(
        audit=type(Config().audit)(path=str(audit)), trace=type(Config().trace)(path=str(trace))
    )
    own = own_files(cfg, str(config))
    assert own.same_file is not None
    same = own.same_file
    (tmp_path / "hard").hardlink_to(audit)
    (tmp_path / "logdir").symlink_to(logs)
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    (tmp_path / "other").write_text("")
    assert same(str(tmp_path / "hard")) == str(audit)
    assert same(str(tmp_path / "logdir" / "audit.jsonl")) == str(audit)
    assert same(str(tmp_path / "other")) is None
    assert same(str(tmp_path / "missing")) is None
    assert same(str(audit / "below")) is None  # ENOTDIR: decided on its path
    assert isinstance(same(str(tmp_path / "loop")), Unexamined)
    assert isinstance(identity(str(tmp_path / "loop")), Unexamined)
    trace.write_text("")
    (tmp_path / "trace-link").hardlink_to(trace)
    assert same(str(tmp_path / "trace-link")) == str(trace)
    new = tmp_path / "policy.toml.new"
    new.write_text("# saved")
    new.replace(config)  # an editor's save: another inode under the config's name
    (tmp_path / "cfg-link").hardlink_to(config)
    assert same(str(tmp_path / "cfg-link")) == str(config)


@pytest.mark.parametrize("method", ["fs/read_text_file", "fs/write_text_file"])
def test_a_hard_link_to_the_audit_log_is_refused_as_the_log(tmp_path: Path, method: str) -> None:
    """The shell's own files and resolver, a real hard link: the same refusal."""
    audit = tmp_path / "audit.jsonl"
    audit.write_text("")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "hard").hardlink_to(audit)
    (ws / "real.txt").write_text("")
    own = own_files(type(Config())(audit=type(Config().audit)(path=str(audit))), None)
    context = SessionContext("S", workspace=Workspace(str(ws)))

    def decide(path: Path) -> Any:
        params = {"sessionId": "S", "path": str(path), "content": ""}
        policy = Policy(Config().permissions)
        return policy.decide(context, method, params, resolve=resolve_path, own=own)

    direct, link = decide(audit), decide(ws / "hard")
    assert link.disposition == "refuse"
    assert link.reason == direct.reason == f"names the proxy's own file {audit}"
    assert decide(ws / "real.txt").disposition == "forward"
