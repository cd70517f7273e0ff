"""The proxy's own files recognised by identity, not only by path (issue 31, item 3).

Pure: the shell's identity check (:data:`~acp_proxy.core.session.places.SameFile`)
and its resolver are fakes here (dictionaries), so each decision is a function of
the request and of what the fake filesystem says. A hard link to the audit log
(another path, the same file) and a path through a linked directory are refused
as the audit log itself, with the same answer to the agent; a file that is not
the proxy's is decided as before; a place that exists but cannot be examined is
refused (fail closed); one that does not exist yet is decided on its path.
"""

from __future__ import annotations

import posixpath
import shlex
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_proxy.config import Config
from acp_proxy.config.io import config_from_dict
from acp_proxy.core.engine import ProxyCore
from acp_proxy.core.session.permissions import Policy, SessionContext, Workspace, answer_frame
from acp_proxy.core.session.places import (
    MAX_WORDS_EXAMINED,
    OwnFiles,
    Unexamined,
    own_file_refusal,
    word_places,
)
from acp_proxy.core.session.words import _glued_values, _split, command_words
from acp_proxy.core.wire.views import OPAQUE
from tests.support import corekit as kit

AUDIT = "/logs/audit.jsonl"
HARD = "/ws/hard-link"  # a hard link to the audit log: another path, the same inode
THROUGH = "/ws/logdir/audit.jsonl"  # /ws/logdir -> /logs
DIRECT_REASON = f"names the proxy's own file {AUDIT}"
READ = ("fs/read_text_file", {})
WRITE = ("fs/write_text_file", {"content": "forged"})


class FakeDisk:
    """A filesystem of identities: place -> what the shell's check answers; every
    place it is asked about is recorded in ``asked``."""

    def __init__(self, answers: dict[str, str | Unexamined | None]) -> None:
        self.answers = answers
        self.asked: list[str] = []

    def __call__(self, path: str) -> str | Unexamined | None:
        self.asked.append(path)
        return self.answers.get(path)


def links(path: str) -> str:
    """The fake resolver: ``/ws/logdir`` is a link to ``/logs``."""
    return "/logs" + path[len("/ws/logdir") :] if path.startswith("/ws/logdir/") else path


def own_with(disk: FakeDisk | None) -> OwnFiles:
    return OwnFiles({AUDIT: True}, disk)


def decide(method: str, params: dict[str, Any], own: OwnFiles, resolve: Any = links) -> Any:
    context = SessionContext("S", workspace=Workspace("/ws"))
    return Policy(Config().permissions).decide(
        context, method, {"sessionId": "S", **params}, resolve=resolve, own=own
    )


@pytest.mark.parametrize(("method", "extra"), [READ, WRITE])
@pytest.mark.parametrize("place", [HARD, THROUGH])
def test_a_hard_link_or_a_linked_directory_is_refused_as_the_file_itself(
    method: str, extra: dict[str, Any], place: str
) -> None:
    """The same refusal (reason, code, answer bytes) as the audit log's own path."""
    disk = FakeDisk({HARD: AUDIT, AUDIT: AUDIT, THROUGH: AUDIT})
    direct = decide(method, {"path": AUDIT, **extra}, own_with(disk))
    other = decide(method, {"path": place, **extra}, own_with(disk))
    assert direct.reason == DIRECT_REASON
    assert (other.disposition, other.forced, other.reason) == ("refuse", True, DIRECT_REASON)
    assert answer_frame(9, other) == answer_frame(9, direct)
    assert other.audit_event == direct.audit_event


@pytest.mark.parametrize(("method", "extra"), [READ, WRITE])
def test_by_path_only_a_hard_link_passes_so_the_identity_check_is_what_catches_it(
    method: str, extra: dict[str, Any]
) -> None:
    """Without the shell's check (as before), the hard link is forwarded: the test
    above fails without identities."""
    assert decide(method, {"path": HARD, **extra}, own_with(None)).disposition == "forward"


@pytest.mark.parametrize(("method", "extra"), [READ, WRITE])
def test_a_file_that_is_not_the_proxy_s_is_decided_as_before(
    method: str, extra: dict[str, Any]
) -> None:
    disk = FakeDisk({"/ws/src/main.py": None})
    d = decide(method, {"path": "/ws/src/main.py", **extra}, own_with(disk))
    assert (d.disposition, d.reason, d.forced) == ("forward", "no rule matched", False)
    assert disk.asked == ["/ws/src/main.py"]


def test_a_place_that_cannot_be_examined_is_refused_fail_closed() -> None:
    disk = FakeDisk({"/ws/locked/x": Unexamined("Permission denied")})
    d = decide("fs/read_text_file", {"path": "/ws/locked/x"}, own_with(disk))
    assert d.disposition == "refuse"
    assert d.forced
    assert d.reason == "/ws/locked/x cannot be examined (Permission denied): fail closed"


def test_a_place_named_by_its_path_is_refused_without_asking_the_disk() -> None:
    """A direct hit (as given or resolved) costs no identity check."""
    disk = FakeDisk({})
    assert decide("fs/read_text_file", {"path": AUDIT}, own_with(disk)).reason == DIRECT_REASON
    assert decide("fs/read_text_file", {"path": THROUGH}, own_with(disk)).reason == DIRECT_REASON
    assert disk.asked == []


def test_a_place_that_does_not_exist_yet_is_decided_on_its_path() -> None:
    """The check says ``None`` (no such file): forwarded, or refused by path below a file."""
    disk = FakeDisk({})
    assert decide("fs/write_text_file", {"path": "/ws/new.txt"}, own_with(disk)).reason == (
        "no rule matched"
    )
    below = decide("fs/write_text_file", {"path": AUDIT + "/x"}, own_with(disk))
    assert below.reason == DIRECT_REASON


def test_terminal_cwds_and_permission_locations_are_checked_by_identity_too() -> None:
    disk = FakeDisk({"/ws/hard-dir": AUDIT, "/ws/tool": AUDIT})
    term = decide("terminal/create", {"command": "ls", "cwd": "/ws/hard-dir"}, own_with(disk))
    assert term.reason == DIRECT_REASON
    tool = {"toolCallId": "t", "kind": "edit", "locations": [{"path": "/ws/tool"}]}
    options = [{"optionId": "no", "name": "No", "kind": "reject_once"}]
    rp = decide(
        "session/request_permission", {"toolCall": tool, "options": options}, own_with(disk)
    )
    assert (rp.disposition, rp.reason) == ("refuse", DIRECT_REASON)


def test_each_place_is_asked_once_and_relative_places_never() -> None:
    disk = FakeDisk({})
    assert own_file_refusal(["/a", "/a", "rel", "/b"], [], own_with(disk)) is None
    assert disk.asked == ["/a", "/b"]
    assert own_file_refusal(["/a"], [], OwnFiles({}, disk)) is None  # no own files: no check
    assert disk.asked == ["/a", "/b"]


@given(
    st.lists(st.sampled_from(["/ws/a", "/ws/b", AUDIT, "/logs", "rel", "/ws/hard-link"])),
    st.lists(st.sampled_from(["ls", f"cat {AUDIT}", "make"]), max_size=2),
)
def test_with_a_check_that_knows_no_file_the_decision_is_the_path_decision(
    places: list[str], lines: list[str]
) -> None:
    """An identity check that finds nothing never changes what the paths decide."""
    by_path = own_file_refusal(places, lines, own_with(None))
    assert own_file_refusal(places, lines, own_with(FakeDisk({}))) == by_path


# ------------------------------------------------------------------ through the engine


def engine(disk: FakeDisk) -> ProxyCore:
    core = ProxyCore(config_from_dict({}))
    core.permissions.use_filesystem(links, own_with(disk))
    core.receive(kit.CLIENT, kit.req(0, "initialize", {"protocolVersion": 1}), 0.0)
    core.receive(kit.AGENT, kit.resp(0, {"protocolVersion": 1}), 0.0)
    core.receive(kit.CLIENT, kit.req("new", "session/new", {"cwd": "/ws", "mcpServers": []}), 0.0)
    core.receive(kit.AGENT, kit.resp("new", {"sessionId": "S"}), 0.0)
    return core


@pytest.mark.parametrize(("method", "extra"), [READ, WRITE])
def test_the_engine_answers_the_agent_the_same_for_the_link_as_for_the_file(
    method: str, extra: dict[str, Any]
) -> None:
    """Same bytes to the agent (under each request's id), nothing to the client, the
    same audit record; a normal file reaches the client."""
    disk = FakeDisk({HARD: AUDIT})
    answers = []
    for place in (AUDIT, HARD, THROUGH):
        core = engine(disk)
        out = core.receive(
            kit.AGENT, kit.req(5, method, {"sessionId": "S", "path": place, **extra}), 1.0
        )
        assert kit.sends(out, kit.CLIENT) == []
        [answer] = kit.sends(out, kit.AGENT)
        [record] = kit.audits(out, "request_refused")
        answers.append((answer, {k: v for k, v in record.fields.items() if k != "content"}))
        kit.assert_accounting(core)
    assert answers[0] == answers[1] == answers[2]
    assert "own file" in kit.decoded(answers[0][0])["error"]["message"]
    core = engine(disk)
    ok = kit.req(6, method, {"sessionId": "S", "path": "/ws/src/main.py", **extra})
    out = core.receive(kit.AGENT, ok, 1.0)
    assert kit.sends(out, kit.CLIENT) == [ok]
    assert kit.sends(out, kit.AGENT) == []


# ------------------------------------------------------------------ command words


def terminal(command: str, args: list[str], cwd: str, own: OwnFiles) -> Any:
    return decide("terminal/create", {"command": command, "args": args, "cwd": cwd}, own)


#: (command, args, cwd): the audit log by a spelling its full path's text is not in.
SPELLINGS = [
    ("cat", ["./audit.jsonl"], "/logs"),
    ("cat", ["audit.jsonl"], "/logs"),
    ("./audit.jsonl", [], "/logs"),
    ("cat", ["/logs/sub/../audit.jsonl"], "/ws"),
    ("cat", ["../../logs//audit.jsonl"], "/ws/deep"),
    ("cat", ["/logs//audit.jsonl"], "/ws"),
    ("cat", ["/logs/./audit.jsonl"], "/ws"),
    ("cat", ["./AUDIT.jsonl"], "/logs"),
    ("sh", ["-c", "cat ./audit.jsonl | wc -l"], "/logs"),
    ("bash", ["-lc", "echo forged>>audit.jsonl"], "/logs"),
    ("env", ["X=1", "sh", "-c", "tail -f ./audit.jsonl"], "/logs"),
    ("tool", ["--log=./audit.jsonl"], "/logs"),
    ("sh", ["-c", "cat <./audit.jsonl"], "/logs"),
    ("cat", ["my dir/../audit.jsonl"], "/logs"),
    ("sort", ["-o./audit.jsonl", "x"], "/logs"),  # a value glued to a short option
    ("sort", ["-oaudit.jsonl", "x"], "/logs"),
    ("tar", ["-cfaudit.jsonl", "x"], "/logs"),  # after a cluster of flags
    ("sort", ["-o../../logs/sub/../audit.jsonl", "x"], "/ws/deep"),
    ("sh", ["-c", "sort -o./audit.jsonl x"], "/logs"),
    ("bash", ["-c", "echo x >> ./aud\\\nit.jsonl"], "/logs"),  # a line continuation
    ("bash", ["-c", 'cat "./aud\\\nit.jsonl"'], "/logs"),  # removed in double quotes too
    ("bash", ["-c", "cat $'audit.jsonl'"], "/logs"),  # an ANSI-C string
    ("bash", ["-c", "echo x >> ./$'\\x61udit.jsonl'"], "/logs"),  # its escapes decoded
    ("bash", ["-c", "cat $'\\141udit.jsonl\\0.x'"], "/logs"),  # octal, cut at a NUL
    ("bash", ["-c", 'cat $"audit.jsonl"'], "/logs"),  # a locale string
    ("bash", ["-c", "echo x>>audit.jsonl # don't"], "/logs"),  # an apostrophe in a comment
    ("bash", ["-c", "cat >> 'audit.jsonl' <<EOF\nit's\nEOF"], "/logs"),  # a here-document's
    ("bash", ["-c", '# don\'t\ncat "./audit.jsonl"'], "/logs"),  # before the quoted path
]


@pytest.mark.parametrize(("command", "args", "cwd"), SPELLINGS)
def test_a_command_word_naming_the_audit_log_relative_to_its_cwd_is_refused(
    command: str, args: list[str], cwd: str
) -> None:
    """Each word joined to the cwd and normalised is compared by path: refused
    without asking the disk (the line's text alone misses every one of them)."""
    disk = FakeDisk({})
    d = terminal(command, args, cwd, own_with(disk))
    assert (d.disposition, d.forced, d.reason) == ("refuse", True, DIRECT_REASON)
    assert disk.asked == []
    line = " ".join([command, *args])
    assert own_file_refusal([cwd], [line], own_with(None)) is None  # the text check misses it


DEEP = "/home/u/.acp/audit.jsonl"  # beside the workspace /home/u/ws: a shared prefix


@pytest.mark.parametrize(
    ("command", "args"),
    [
        ("tee", ["--", "-d/../../.acp/audit.jsonl"]),  # a directory -d the agent made
        ("sh", ["-c", ": /; echo x >> -d/../../.acp/audit.jsonl"]),  # a redirection's target
        ("cp", ["x", "-d//../../.acp/./audit.jsonl"]),
    ],
)
def test_a_word_starting_with_a_dash_is_also_a_path(command: str, args: list[str]) -> None:
    """``-d/..`` is a path through a directory named ``-d``; its glued value
    ``/../../.acp/audit.jsonl`` alone names ``/.acp/audit.jsonl``, another file."""
    own = OwnFiles({DEEP: True}, FakeDisk({}))
    d = terminal(command, args, "/home/u/ws", own)
    assert (d.disposition, d.reason) == ("refuse", f"names the proxy's own file {DEEP}")
    assert terminal("ls", ["-la", "-d/x"], "/home/u/ws", own).disposition == "forward"
    disk = FakeDisk({"/ws/-d/audit.jsonl": AUDIT})  # -d a symbolic link to /logs
    d = terminal("cat", ["--", "-d/audit.jsonl"], "/ws", own_with(disk))
    assert (d.disposition, d.reason) == ("refuse", DIRECT_REASON)


@pytest.mark.parametrize(
    ("command", "args"),
    [
        ("cp", ["audit.jsonl", "/logs/"]),  # the agent's forged log over the proxy's
        ("mv", ["-t", "../logs", "x/audit.jsonl"]),
        ("rsync", ["AUDIT.jsonl", "/logs"]),
        ("find", ["/logs", "-name", "audit.jsonl", "-delete"]),
        ("git", ["-C", "/logs", "rm", "audit.jsonl"]),
        ("sh", ["-c", "cd /logs && : > audit.jsonl"]),
    ],
)
def test_a_directory_and_the_log_s_name_in_two_words_are_refused(
    command: str, args: list[str]
) -> None:
    """No word is the log, but one names its directory and another its name."""
    d = terminal(command, args, "/ws", own_with(FakeDisk({})))
    assert (d.disposition, d.forced, d.reason) == ("refuse", True, DIRECT_REASON)
    assert own_file_refusal(["/ws"], [" ".join([command, *args])], own_with(None)) is None


def test_a_directory_holding_the_log_by_identity_and_other_names_forwarded() -> None:
    disk = FakeDisk({"/ws/logdir/audit.jsonl": AUDIT})  # /ws/logdir -> /logs
    d = terminal("cp", ["audit.jsonl", "logdir"], "/ws", own_with(disk))
    assert (d.disposition, d.reason) == ("refuse", DIRECT_REASON)
    for args in (["notes.txt", "/logs/"], ["audit.jsonl", "/ws/out/"], ["-la", "/logs"]):
        assert terminal("cp", args, "/ws", own_with(disk)).disposition == "forward", args


@pytest.mark.parametrize(
    ("command", "args"),
    [
        ("python3", ["-c", "open('audit.jsonl','a').write('x')"]),  # a program's code
        ("node", ["-e", 'require("fs").truncateSync("./audit.jsonl")']),
        ("gcc", ["-Wl,-Map,./audit.jsonl", "m.c"]),  # a list of the linker's options
        ("docker", ["run", "-v", "./audit.jsonl:/x", "alpine"]),  # source:target
        ("bash", ["-c", "echo x | tee -a audit.json{l,x}"]),  # a brace expansion
        ("bash", ["-c", "echo x >> {./,}{audit,x}.jsonl"]),
        ("bash", ["-c", "echo x >> ${X:-audit.jsonl}"]),  # a parameter's default
        ("sh", ["-c", 'echo x >> "${X-audit.jsonl}"']),
        ("sh", ["-c", "echo x >> ${X:=audit.jsonl}"]),
    ],
)
def test_a_path_inside_a_word_is_compared_by_path(command: str, args: list[str]) -> None:
    d = terminal(command, args, "/logs", own_with(FakeDisk({})))
    assert (d.disposition, d.forced, d.reason) == ("refuse", True, DIRECT_REASON)


def test_a_word_s_inner_parts_are_never_asked_about() -> None:
    """Compared by path only: the identity checks stay the words' (and their budget)."""
    disk = FakeDisk({})
    for args in (["-c", "open('notes.txt','a')"], ["-m", "rotate audit.jsonl, keep {it,me}"]):
        assert terminal("python3", args, "/ws", own_with(disk)).disposition == "forward"
    assert "/ws/notes.txt,a" in disk.asked  # a word of the line, as before
    assert not {"/ws/notes.txt", "/ws/audit.jsonl", "/ws/it", "/ws/me"} & set(disk.asked)


def test_glued_values_are_the_rests_of_a_short_option_word() -> None:
    assert _glued_values("-o../x") == ["../x"]
    assert _glued_values("-xzfa.b") == ["zfa.b", "fa.b", "a.b", ".b"]
    assert _glued_values("-la") == ["a"]
    assert _glued_values("-n") == _glued_values("-") == []
    many = _glued_values("-" + "v" * 100 + "o./x")  # bounded, the nearest the value kept
    assert len(many) == 4 + 33
    assert many[-1] == "./x"
    long = "L" * 40  # a value longer than the bound, glued to -o or a cluster of flags
    assert {long, "o" + long, "L" * 38} <= set(_glued_values("-xo" + long))
    assert command_words(["a --f"]) == ("a",)  # a long option carries nothing glued


ENV_SCRIPT = ["-c", 'echo forged >> "$F"']


@pytest.mark.parametrize("value", ["./audit.jsonl", "audit.jsonl", "/logs/./audit.jsonl", AUDIT])
def test_a_terminal_env_value_naming_the_audit_log_is_refused(value: str) -> None:
    """The script writes to ``$F``: the line's text never names the file, its env does."""
    env = [{"name": "HOME", "value": "/home/u"}, {"name": "F", "value": value}]
    params = {"command": "sh", "args": ENV_SCRIPT, "cwd": "/logs", "env": env}
    d = decide("terminal/create", params, own_with(FakeDisk({})))
    assert (d.disposition, d.forced, d.reason) == ("refuse", True, DIRECT_REASON)
    assert decide(
        "terminal/create", {**params, "env": [{"name": "F", "value": "./notes.txt"}]},
        own_with(FakeDisk({})),
    ).disposition == "forward"  # fmt: skip


def test_an_env_value_by_identity_and_one_too_large_to_read() -> None:
    params = {"command": "sh", "args": ENV_SCRIPT, "cwd": "/ws"}
    by_link = {**params, "env": [{"name": "F", "value": "hard-link"}]}
    d = decide("terminal/create", by_link, own_with(FakeDisk({HARD: AUDIT})))
    assert (d.disposition, d.reason) == ("refuse", DIRECT_REASON)
    rules = config_from_dict(
        {"permissions": {"rules": [
            {"name": "no-rm", "action": "deny", "method": "terminal/create", "command": "rm *"},
        ]}}
    ).permissions  # fmt: skip
    context = SessionContext("S", workspace=Workspace("/ws"))
    for env in (OPAQUE, [{"name": "F", "value": OPAQUE}]):
        d = Policy(rules).decide(context, "terminal/create", {**params, "env": env})
        assert d.disposition == "refuse"  # fail closed: what it sets cannot be read


def test_a_v2_command_subject_s_words_are_read_against_its_cwd() -> None:
    subject = {"type": "command", "command": "cat ./audit.jsonl", "cwd": "/logs"}
    options = [{"optionId": "no", "name": "No", "kind": "reject_once"}]
    d = decide(
        "session/request_permission", {"subject": subject, "options": options}, own_with(None)
    )
    assert (d.disposition, d.reason) == ("refuse", DIRECT_REASON)


@pytest.mark.parametrize(
    "command",
    [
        f"cat {AUDIT}",  # Claude's Bash tool: a string
        ["/bin/bash", "-lc", f"echo forged >> {AUDIT}"],  # Codex: an argv
        ["truncate", "-s0", "--reference=/x", AUDIT],
        "sh -c 'cat /logs//audit.jsonl'",
        f"cat {HARD}",  # a hard link to the log, by identity
    ],
)
def test_a_v1_tool_call_s_raw_command_naming_the_log_is_refused(command: Any) -> None:
    """``toolCall.rawInput.command`` is read as the v2 ``subject.command`` is (its words
    by path and identity; no cwd, so relative words are left out)."""
    tool = {"toolCallId": "t1", "kind": "execute", "rawInput": {"command": command}}
    options = [{"optionId": "no", "name": "No", "kind": "reject_once"}]
    disk = FakeDisk({HARD: AUDIT})
    d = decide("session/request_permission", {"toolCall": tool, "options": options}, own_with(disk))
    assert (d.disposition, d.reason) == ("refuse", DIRECT_REASON)


def test_a_v1_tool_call_s_raw_command_elsewhere_goes_to_the_client() -> None:
    tool = {"toolCallId": "t1", "kind": "execute", "rawInput": {"command": ["ls", "-la", "/ws"]}}
    options = [{"optionId": "no", "name": "No", "kind": "reject_once"}]
    d = decide("session/request_permission", {"toolCall": tool, "options": options}, own_with(None))
    assert d.disposition == "forward"  # no rule: the client asks its user


@pytest.mark.parametrize(
    ("args", "cwd", "answers"),
    [
        (["hard-link"], "/ws", {HARD: AUDIT}),  # a hard link, by a bare name
        (["./logdir/audit.jsonl"], "/ws", {THROUGH: AUDIT}),  # through a linked directory
        (["--in=alias"], "/ws", {"/ws/alias": AUDIT}),  # a symbolic link to the file
        (["-o" + "L" * 40], "/ws", {"/ws/" + "L" * 40: AUDIT}),  # a long one, glued
        (["/ws/x/../hard-link"], "/", {"/ws/x/../hard-link": AUDIT}),  # `..` as the kernel reads
    ],
)
def test_a_command_word_that_is_the_audit_log_by_identity_is_refused(
    args: list[str], cwd: str, answers: dict[str, str | Unexamined | None]
) -> None:
    disk = FakeDisk(answers)
    d = terminal("cat", args, cwd, own_with(disk))
    assert (d.disposition, d.forced, d.reason) == ("refuse", True, DIRECT_REASON)
    assert terminal("cat", args, cwd, own_with(None)).disposition == "forward"  # by path: missed


@pytest.mark.parametrize(
    ("command", "args", "cwd"),
    [
        ("cat", ["audit.jsonl"], "/ws"),  # the same name in another directory
        ("cat", ["old-audit.jsonl", "audit.jsonl.1"], "/logs"),  # a longer name beside it
        ("cat", ["/other/audit.jsonl", "../audit.jsonl"], "/logs"),
        ("ls", ["-la", "/logs"], "/ws"),  # the log's directory is not the log
        ("git", ["commit", "-m", "rotate audit.jsonl"], "/ws"),
        ("sh", ["-c", "grep -r audit.jsonl src > out.txt && make test"], "/ws"),
        ("python3", ["-m", "pytest", "-q", "tests/"], "/ws"),
    ],
)
def test_a_command_that_does_not_name_an_own_file_is_forwarded(
    command: str, args: list[str], cwd: str
) -> None:
    """Its words are asked about (the disk knows none of them) and it reaches the client."""
    disk = FakeDisk({})
    d = terminal(command, args, cwd, own_with(disk))
    assert (d.disposition, d.reason, d.forced) == ("forward", "no rule matched", False)
    assert f"{cwd.rstrip('/')}/{args[-1]}" in disk.asked or args[-1] in disk.asked


def test_a_word_that_cannot_be_examined_is_refused_fail_closed() -> None:
    disk = FakeDisk({"/ws/locked/x": Unexamined("Permission denied")})
    d = terminal("cat", ["locked/x"], "/ws", own_with(disk))
    assert (d.disposition, d.forced) == ("refuse", True)
    assert d.reason == "/ws/locked/x cannot be examined (Permission denied): fail closed"


def test_a_word_too_long_to_name_a_file_is_not_asked_about() -> None:
    """A long ``-m`` message is no file (the client's open would fail too): never
    refused because the disk cannot examine it."""
    long = "a long message " * 20  # one name of 300 bytes
    disk = FakeDisk({f"/ws/{long}": Unexamined("File name too long")})
    d = terminal("git", ["commit", "-m", long], "/ws", own_with(disk))
    assert d.disposition == "forward"
    assert f"/ws/{long}" not in disk.asked
    assert "/ws/git" in disk.asked


def test_a_word_naming_the_watched_config_directory_is_not_refused() -> None:
    """``--watch-config``'s directory is protected as a place (a terminal there), not
    as a word: ``ls ..`` from a project subdirectory passes; its config does not."""
    own = OwnFiles({AUDIT: True, "/proj/acp.toml": True, "/proj": False}, FakeDisk({}))
    assert terminal("ls", [".."], "/proj/src", own).disposition == "forward"
    assert terminal("cp", ["x", "../acp.toml"], "/proj/src", own).reason == (
        "names the proxy's own file /proj/acp.toml"
    )
    by_identity = OwnFiles({AUDIT: True, "/proj": False}, FakeDisk({"/ws/to-proj": "/proj"}))
    assert terminal("ls", ["to-proj"], "/ws", by_identity).disposition == "forward"
    assert terminal("ls", ["."], "/ws/to-proj", by_identity).disposition == "refuse"  # its cwd


def test_words_are_asked_after_the_places_each_once_and_at_most_the_budget() -> None:
    """Up to the budget every word place is asked about once; one more to ask about and
    the request is refused (a link to the log could be that one: ``tee f0 .. f69 alias``)."""
    disk = FakeDisk({})
    words = ["/ws", "a", "a", *(f"f{i}" for i in range(MAX_WORDS_EXAMINED - 1))]
    assert own_file_refusal(["/ws"], [], own_with(disk), [("/ws", words)]) is None
    assert disk.asked[:2] == ["/ws", "/ws/a"]
    assert len(disk.asked) == 1 + MAX_WORDS_EXAMINED  # the place /ws, then the budget
    assert len(set(disk.asked)) == len(disk.asked)
    over = FakeDisk({"/ws/alias": AUDIT})
    padded = [*(f"f{i}" for i in range(MAX_WORDS_EXAMINED)), "alias"]
    assert own_file_refusal([], [], own_with(over), [("/ws", padded)]) == (
        f"more than {MAX_WORDS_EXAMINED} words to examine: fail closed"
    )
    assert "/ws/alias" not in over.asked  # refused without asking: it could be a link
    last = f"/ws/f{2 * MAX_WORDS_EXAMINED - 1}"  # compared by path before any identity
    many = [f"f{i}" for i in range(2 * MAX_WORDS_EXAMINED)]
    assert own_file_refusal([], [], OwnFiles({last: True}, disk), [("/ws", many)]) == (
        f"names the proxy's own file {last}"
    )


def test_relative_words_without_a_cwd_are_left_out() -> None:
    assert word_places(["a", "/b//c/../d", "./e"], None) == (("/b/d", "/b//c/../d"),)
    assert word_places(["./a", "b/../c"], "/w") == (("/w/a", "/w/./a"), ("/w/c", "/w/b/../c"))
    assert word_places(["//x/./y"], "/w") == (("/x/y", "//x/./y"),)


def test_command_words_read_options_values_redirections_and_scripts() -> None:
    words = command_words(["sh -c 'a>b; c 2>>d|e --f=g'", "a>b; c 2>>d|e --f=g"], ["sh", ">x"])
    assert words[:3] == ("sh", ">x", "x")  # the argv as given first, a redirection's target
    assert {"a", "b", "c", "d", "e", "g", "a>b; c 2>>d|e --f=g"} <= set(words)
    assert not set(words) & {">", ";", "2>>", "|", "-c", "--f=g"}  # operators, options
    # an open quote: the words before it, the line cut at whitespace and without quotes
    assert command_words(["cat 'it"], ["cat", "it's"]) == ("cat", "it's", "'it", "it")
    assert command_words(["a\0b c"]) == ("c",)


@given(st.text(alphabet="ab/.-=~*?# \t\n();<>|&$", max_size=24))
def test_a_line_without_quotes_splits_as_the_shell_lexer_splits_it(line: str) -> None:
    """The fast cut of a quote-free line gives the words :mod:`shlex` gives."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = ""
    _split.cache_clear()
    assert _split(line) == tuple(lexer)


@given(
    st.sampled_from(["/", "/logs", "/ws", "/ws/deep/er", "/logs/sub"]),
    st.lists(st.sampled_from(["", ".", "x/.."]), max_size=4),
    st.sampled_from([("audit.jsonl", "refuse"), ("old-audit.jsonl", "forward")]),
)
def test_any_lexical_spelling_of_the_log_is_refused_and_of_a_neighbour_forwarded(
    cwd: str, noise: list[str], name: tuple[str, str]
) -> None:
    """The path from ``cwd`` to ``/logs/NAME`` with ``./``, ``//`` and ``x/..`` put in
    (``/logs/audit.jsonl.bak`` is not the neighbour: the line's text check refuses it)."""
    parts = posixpath.relpath(f"/logs/{name[0]}", cwd).split("/")
    spelled = "/".join([parts[0], *noise, *parts[1:]]) if len(parts) > 1 else parts[0]
    if len(parts) == 1:  # beside the cwd: ./NAME, .//NAME, ./x/../NAME
        spelled = "/".join([".", *noise, parts[0]])
    d = terminal("cat", [spelled], cwd, own_with(FakeDisk({})))
    assert d.disposition == name[1], (cwd, spelled)


def test_the_engine_refuses_a_terminal_naming_the_log_by_a_relative_word() -> None:
    """Nothing to the client, the own-file refusal to the agent; a normal command passes."""
    core = engine(FakeDisk({}))
    params = {"sessionId": "S", "command": "cat", "args": ["./audit.jsonl"], "cwd": "/logs"}
    out = core.receive(kit.AGENT, kit.req(5, "terminal/create", params), 1.0)
    assert kit.sends(out, kit.CLIENT) == []
    [answer] = kit.sends(out, kit.AGENT)
    assert "own file" in kit.decoded(answer)["error"]["message"]
    [record] = kit.audits(out, "request_refused")
    assert record.fields["reason"] == DIRECT_REASON
    ok = kit.req(6, "terminal/create", {**params, "args": ["./main.py"], "cwd": "/ws"})
    out = core.receive(kit.AGENT, ok, 1.0)
    assert kit.sends(out, kit.CLIENT) == [ok]
