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

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_proxy.config import Config
from acp_proxy.config.io import config_from_dict
from acp_proxy.core.engine import ProxyCore
from acp_proxy.core.session.permissions import Policy, SessionContext, Workspace, answer_frame
from acp_proxy.core.session.places import OwnFiles, Unexamined, own_file_refusal
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
