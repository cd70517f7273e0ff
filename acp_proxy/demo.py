"""``acp-proxy demo``: a scripted client and agent talk ACP through the real proxy.

The demo starts ``python -m acp_proxy --audit-log FILE -- python -m
acp_proxy.demo_agent`` as a subprocess, plays a short ACP session on its
stdin/stdout, then prints a readable transcript (every message, who sent it,
what the proxy did to it), the audit trail and a list of checks. Exit status
0 means every check passed.

What the proxy is shown doing (see :mod:`acp_proxy.demo_agent`):

- holding an update the agent sends before the client can know its session,
  and releasing it right after the message that makes the session known;
- registering child sessions announced with ``subagent_update``;
- removing duplicate state reports;
- letting a permitted ``session/cancel`` reach a child, and answering a
  forbidden ``session/prompt`` on a child itself with ``-32601``.

``--json`` prints the raw transcript as JSON lines instead (for tests and tools).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, Any

from acp_proxy.demo_agent import LOG_ENV

__all__ = ["run_demo"]

TIMEOUT_SECONDS = 30.0
"""The whole demo, proxy start to proxy exit."""
SETTLE_SECONDS = 5.0
"""Longest wait for an update that follows a response."""
EXPECTED_AUDIT = ("child_announced", "held", "released", "duplicate_dropped", "mutation_rejected")

C2P = "client->proxy"
P2C = "proxy->client"
ARROWS = {C2P: "client -> proxy", P2C: "proxy -> client", "dropped": "agent -> proxy "}
WIDTH = max(72, min(110, shutil.get_terminal_size((100, 24)).columns - 1))
COL = 25  # where message summaries start


def _key(msg: Any) -> str:
    return json.dumps(msg, sort_keys=True, separators=(",", ":"))


# --------------------------------------------------------------- transcript


@dataclass
class Event:
    """One line of the transcript.

    Attributes:
        kind: ``"step"`` (a heading), ``"message"`` or ``"note"`` (client remark).
        direction: ``client->proxy`` / ``proxy->client`` for messages.
        message: the decoded JSON message (or the raw line if it was not JSON).
        text: heading or remark text.
    """

    kind: str
    direction: str = ""
    message: Any = None
    text: str = ""


@dataclass
class Run:
    """Everything observed by one demo run."""

    command: list[str]
    events: list[Event] = field(default_factory=list)
    agent_log: list[dict[str, Any]] = field(default_factory=list)
    audit: list[dict[str, Any]] = field(default_factory=list)
    stderr: str = ""
    status: int | None = None
    errors: list[str] = field(default_factory=list)
    child1: str | None = None
    child2: str | None = None


class ProxyPeer:
    """The proxy subprocess, seen from the client: send lines, collect replies.

    A reader thread appends every line the proxy writes to ``run.events``;
    waits never pass the global deadline.
    """

    def __init__(self, run: Run, env: dict[str, str], stderr: IO[bytes], deadline: float) -> None:
        self.run = run
        self.deadline = deadline
        self._cond = threading.Condition()
        self._eof = False
        self.proc = subprocess.Popen(
            run.command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=env,
        )
        self._reader = threading.Thread(target=self._read, name="demo-reader", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            if not line:
                continue
            try:
                msg: Any = json.loads(line)
            except ValueError:
                msg = line
            with self._cond:
                self.run.events.append(Event("message", P2C, msg))
                self._cond.notify_all()
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    def step(self, title: str) -> None:
        """Starts a new section of the transcript."""
        with self._cond:
            self.run.events.append(Event("step", text=title))

    def send(self, msg: dict[str, Any]) -> None:
        """Sends one message to the proxy."""
        assert self.proc.stdin is not None
        with self._cond:
            self.run.events.append(Event("message", C2P, msg))
        try:
            self.proc.stdin.write(json.dumps(msg).encode() + b"\n")
            self.proc.stdin.flush()
        except OSError as exc:
            self.run.errors.append(f"could not write to the proxy: {exc}")

    def wait_for(
        self, what: str, pred: Callable[[Any], bool], limit: float | None = None
    ) -> Any | None:
        """Waits for a received message matching ``pred``; records an error on timeout."""
        deadline = self.deadline if limit is None else min(self.deadline, time.monotonic() + limit)
        with self._cond:
            while True:
                for ev in self.run.events:
                    if ev.kind == "message" and ev.direction == P2C and pred(ev.message):
                        return ev.message
                left = deadline - time.monotonic()
                if self._eof or left <= 0:
                    why = "the proxy closed its stdout" if self._eof else "timed out"
                    self.run.errors.append(f"never received {what} ({why})")
                    return None
                self._cond.wait(left)

    def response(self, rid: int, what: str) -> Any | None:
        """Waits for the response to request ``rid``."""
        return self.wait_for(
            f"the response to {what} [{rid}]",
            lambda m: isinstance(m, dict) and m.get("id") == rid and "method" not in m,
        )

    def close(self) -> None:
        """Closes the proxy's stdin, waits for its stdout to end and for it to exit."""
        assert self.proc.stdin is not None
        with contextlib.suppress(OSError):
            self.proc.stdin.close()
        self._reader.join(max(0.5, self.deadline - time.monotonic()))
        try:
            self.run.status = self.proc.wait(max(0.5, self.deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.run.errors.append("the proxy did not exit in time; killed it")
            self.proc.kill()
            self.proc.wait()


def _update_of(msg: Any) -> tuple[str | None, dict[str, Any]]:
    """``(params.sessionId, params.update)`` of a ``session/update``, else ``(None, {})``."""
    if isinstance(msg, dict) and msg.get("method") == "session/update":
        params = msg.get("params")
        if isinstance(params, dict):
            upd = params.get("update")
            sid = params.get("sessionId")
            return (sid if isinstance(sid, str) else None), (upd if isinstance(upd, dict) else {})
    return None, {}


def _request(rid: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}


def _play(peer: ProxyPeer, cwd: str) -> None:
    """The scripted client. Stops at the first missing answer (errors are recorded)."""
    run = peer.run
    peer.step("1. initialize: client and agent agree on protocol version 2")
    init = {
        "protocolVersion": 2,
        "info": {"name": "acp-proxy-demo-client", "version": "1.0.0"},
        "capabilities": {},
    }
    peer.send(_request(1, "initialize", init))
    if peer.response(1, "initialize") is None:
        return

    peer.step("2. session/new: the agent talks about the new session before saying it exists")
    peer.send(_request(2, "session/new", {"cwd": cwd, "mcpServers": []}))
    resp = peer.response(2, "session/new")
    if resp is None:
        return
    result = resp.get("result")
    sid = result.get("sessionId") if isinstance(result, dict) else None
    if not isinstance(sid, str):
        run.errors.append("session/new returned no sessionId")
        return
    peer.wait_for(
        f'the "warming up" update of {sid}',
        lambda m: _update_of(m)[0] == sid,
        SETTLE_SECONDS,
    )

    peer.step("3. session/prompt: the agent starts two subagents (child sessions)")
    prompt = [{"type": "text", "text": "Find the session/new docs and review my patch."}]
    peer.send(_request(3, "session/prompt", {"sessionId": sid, "prompt": prompt}))
    if peer.response(3, "session/prompt") is None:
        return
    children: list[str] = []
    for ev in run.events:
        _, upd = _update_of(ev.message)
        cid = upd.get("sessionId")
        if upd.get("sessionUpdate") == "subagent_update" and isinstance(cid, str):
            children.extend([] if cid in children else [cid])
    if len(children) < 2:
        run.errors.append(f"expected two child sessions to be announced, saw {children}")
        return
    run.child1, run.child2 = children[0], children[1]

    c1, c2 = run.child1, run.child2
    peer.step(f"4. session/cancel on child {c1}: permitted (it has the cancel capability)")
    peer.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": c1}})

    def cancelled_mirror(m: Any) -> bool:
        psid, upd = _update_of(m)
        state = upd.get("state")
        return (
            psid == sid
            and upd.get("sessionId") == c1
            and isinstance(state, dict)
            and state.get("stopReason") == "cancelled"
        )

    peer.wait_for(f"the agent's report that {c1} was cancelled", cancelled_mirror, SETTLE_SECONDS)

    peer.step(f"5. session/prompt on child {c2}: forbidden (it has no capabilities)")
    ask = [{"type": "text", "text": "Also check the tests."}]
    peer.send(_request(4, "session/prompt", {"sessionId": c2, "prompt": ask}))
    peer.response(4, "session/prompt")


def _read_json_lines(path: str) -> list[dict[str, Any]]:
    """The JSON objects of a JSON-lines file (a missing file or bad line counts as nothing)."""
    out: list[dict[str, Any]] = []
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    obj = json.loads(line)
                except ValueError:
                    continue
                if isinstance(obj, dict):
                    out.append(obj)
    except OSError:
        pass
    return out


def execute(timeout: float = TIMEOUT_SECONDS, agent: list[str] | None = None) -> Run:
    """Runs the proxy with the demo agent and the scripted client; returns what was seen.

    Args:
        timeout: for the whole run; past it the proxy is killed.
        agent: the agent command (default: ``python -m acp_proxy.demo_agent``).
    """
    with tempfile.TemporaryDirectory(prefix="acp-proxy-demo-") as tmp:
        audit_path = os.path.join(tmp, "audit.jsonl")
        agent_log_path = os.path.join(tmp, "agent.jsonl")
        command = [
            sys.executable, "-m", "acp_proxy", "--audit-log", audit_path,
            "--", *(agent or [sys.executable, "-m", "acp_proxy.demo_agent"]),
        ]  # fmt: skip
        run = Run(command)
        env = dict(os.environ)
        env[LOG_ENV] = agent_log_path
        pkg_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env["PYTHONPATH"] = os.pathsep.join(p for p in (pkg_root, env.get("PYTHONPATH", "")) if p)
        stderr_path = os.path.join(tmp, "stderr.txt")
        with open(stderr_path, "wb") as stderr:
            try:
                peer = ProxyPeer(run, env, stderr, time.monotonic() + timeout)
            except OSError as exc:
                run.errors.append(f"cannot start the proxy: {exc}")
                return run
            try:
                _play(peer, tmp)
            finally:
                peer.close()
        with open(stderr_path, encoding="utf-8", errors="replace") as f:
            run.stderr = f.read()
        run.audit = _read_json_lines(audit_path)
        run.agent_log = _read_json_lines(agent_log_path)
    return run


# ----------------------------------------------------------------- analysis


@dataclass
class Analysis:
    """How the client's view relates to what the agent sent and received.

    Attributes:
        received: indices into ``run.events`` of proxy->client messages, in order.
        origin: for each of ``received``, the index in ``agent_out`` it matches,
            or ``None`` when the proxy wrote it itself.
        agent_out: the agent's sent messages (agent-log entries) in order.
        agent_in: the messages the agent received, in order.
        dropped: indices in ``agent_out`` of messages that never reached the client.
        held: received position -> the received position of the message that
            overtook it (the agent sent the overtaker later, the proxy delivered it first).
        reached_agent: indices into ``run.events`` of client messages the agent received.
    """

    received: list[int]
    origin: list[int | None]
    agent_out: list[dict[str, Any]]
    agent_in: list[Any]
    dropped: list[int]
    held: dict[int, int]
    reached_agent: set[int]


def analyse(run: Run) -> Analysis:
    """Matches the client's transcript against the agent's own log."""
    agent_out = [e for e in run.agent_log if e.get("dir") == "out"]
    agent_in = [e.get("message") for e in run.agent_log if e.get("dir") == "in"]
    received = [
        i for i, ev in enumerate(run.events) if ev.kind == "message" and ev.direction == P2C
    ]
    used: set[int] = set()
    origin: list[int | None] = []
    for i in received:
        k = _key(run.events[i].message)
        match = next(
            (j for j, e in enumerate(agent_out) if j not in used and _key(e.get("message")) == k),
            None,
        )
        if match is not None:
            used.add(match)
        origin.append(match)
    dropped = [j for j in range(len(agent_out)) if j not in used]
    held: dict[int, int] = {}
    for pos, a in enumerate(origin):
        if a is None:
            continue
        for prev in range(pos - 1, -1, -1):
            b = origin[prev]
            if b is not None and b > a:
                held[pos] = prev
                break
    reached: set[int] = set()
    in_used: set[int] = set()
    for i, ev in enumerate(run.events):
        if ev.kind == "message" and ev.direction == C2P:
            k = _key(ev.message)
            for j, m in enumerate(agent_in):
                if j not in in_used and _key(m) == k:
                    in_used.add(j)
                    reached.add(i)
                    break
    return Analysis(received, origin, agent_out, agent_in, dropped, held, reached)


@dataclass
class Check:
    """One expectation of the demo."""

    name: str
    ok: bool
    detail: str = ""


def _is_rejection(msg: Any, capability: str) -> bool:
    if not isinstance(msg, dict):
        return False
    err = msg.get("error")
    if not isinstance(err, dict):
        return False
    data = err.get("data")
    return (
        err.get("code") == -32601
        and isinstance(data, dict)
        and data.get("capability") == capability
    )


def checks(run: Run, an: Analysis) -> list[Check]:
    """The expectations, each with what was observed."""
    out: list[Check] = []
    events = run.events
    received_msgs = [events[i].message for i in an.received]
    early = [j for j, e in enumerate(an.agent_out) if e.get("note") == "early"]
    dups = [j for j, e in enumerate(an.agent_out) if e.get("note") == "duplicate"]
    rest = [j for j in range(len(an.agent_out)) if j not in early and j not in dups]

    # The update the agent sent before its session/new response.
    resp2 = next((p for p, m in enumerate(received_msgs) if _is_response(m, 2)), None)
    warm = _pos_of(an, early[0]) if early else None
    out.append(
        Check(
            "the update sent before the session/new response was held, then delivered "
            "right after the response",
            resp2 is not None and warm is not None and warm == resp2 + 1,
            f"response at position {resp2}, update at {warm}",
        )
    )
    # The child's message sent before the child's announcement.
    chunk = _pos_of(an, early[1]) if len(early) > 1 else None
    announced = None
    if chunk is not None:
        child, _ = _update_of(received_msgs[chunk])
        announced = next(
            (
                p
                for p, m in enumerate(received_msgs)
                if _update_of(m)[1].get("sessionUpdate") == "subagent_update"
                and _update_of(m)[1].get("sessionId") == child
            ),
            None,
        )
    out.append(
        Check(
            "the child's message sent before the child was announced was held, then "
            "delivered right after the announcement",
            chunk is not None and announced is not None and chunk == announced + 1,
            f"announcement at position {announced}, message at {chunk}",
        )
    )
    dropped_dups = [j for j in dups if j in an.dropped]
    out.append(
        Check(
            "duplicate state reports were removed",
            bool(dups) and len(dropped_dups) == len(dups),
            f"{len(dropped_dups)} of {len(dups)} duplicates removed",
        )
    )
    lost = [j for j in rest + early if j in an.dropped]
    out.append(
        Check(
            "every other agent message reached the client unchanged",
            bool(an.agent_out) and not lost,
            f"{len(lost)} lost" if lost else f"{len(rest) + len(early)} delivered",
        )
    )
    c1, c2 = run.child1 or "(child 1)", run.child2 or "(child 2)"
    cancel_seen = _agent_got(an, "session/cancel", c1)
    out.append(
        Check(
            f"the permitted session/cancel on child {c1} reached the agent",
            cancel_seen,
        )
    )
    resp4 = next((m for m in received_msgs if _is_response(m, 4)), None)
    err4 = resp4.get("error") if isinstance(resp4, dict) else None
    out.append(
        Check(
            f"the forbidden session/prompt on child {c2} got error -32601 with "
            'data.capability == "prompt"',
            _is_rejection(resp4, "prompt"),
            f"code {err4.get('code')}, data {json.dumps(err4.get('data'))}"
            if isinstance(err4, dict)
            else "no error response",
        )
    )
    leaked = _agent_got(an, "session/prompt", c2)
    out.append(
        Check(
            f"the agent never received the forbidden session/prompt on {c2}",
            run.child2 is not None and bool(an.agent_in) and not leaked,
        )
    )
    events_seen = {r.get("event") for r in run.audit}
    missing = [e for e in EXPECTED_AUDIT if e not in events_seen]
    out.append(
        Check(
            "the audit trail records " + ", ".join(EXPECTED_AUDIT),
            not missing,
            f"missing: {', '.join(missing)}" if missing else f"{len(run.audit)} records",
        )
    )
    out.append(
        Check(
            "the proxy exited with the agent's status 0 after the client closed stdin",
            run.status == 0,
            f"exit status {run.status}",
        )
    )
    return [Check(err, False) for err in run.errors] + out


def _agent_got(an: Analysis, method: str, session_id: str | None) -> bool:
    """True when the agent received ``method`` on ``session_id``."""
    return session_id is not None and any(
        isinstance(m, dict)
        and m.get("method") == method
        and isinstance(m.get("params"), dict)
        and m["params"].get("sessionId") == session_id
        for m in an.agent_in
    )


def _is_response(msg: Any, rid: int) -> bool:
    return isinstance(msg, dict) and msg.get("id") == rid and "method" not in msg


def _pos_of(an: Analysis, agent_index: int) -> int | None:
    return next((p for p, a in enumerate(an.origin) if a == agent_index), None)


# ------------------------------------------------------------------ output


def _short(text: Any, limit: int = 60) -> str:
    s = str(text)
    return s if len(s) <= limit else s[: limit - 3] + "..."


def _state(state: Any) -> str:
    if state is None:
        return "null (unconfirmed)"
    if not isinstance(state, dict):
        return json.dumps(state)
    s = str(state.get("state"))
    if state.get("stopReason"):
        s += f" ({state['stopReason']})"
    return s


def summarize(msg: Any) -> str:
    """A one-line human summary of a JSON-RPC message."""
    if not isinstance(msg, dict):
        return f"(not JSON) {_short(msg)}"
    method = msg.get("method")
    params = msg.get("params") if isinstance(msg.get("params"), dict) else {}
    assert isinstance(params, dict)
    if method == "session/update":
        sid, upd = _update_of(msg)
        kind = upd.get("sessionUpdate")
        head = f"session/update {sid}: {kind}"
        if kind in ("agent_message_chunk", "user_message_chunk", "agent_thought_chunk"):
            content = upd.get("content")
            text = content.get("text") if isinstance(content, dict) else None
            return f'{head} "{_short(text)}"'
        if kind == "state_update":
            return f"{head} {_state(upd)}"
        if kind == "subagent_update":
            parts = [f"{head} child {upd.get('sessionId')}"]
            if "title" in upd:
                parts.append(f'"{upd["title"]}"')
            if "capabilities" in upd:
                caps = upd["capabilities"]
                names = ", ".join(caps) if isinstance(caps, dict) else "null"
                parts.append(f"capabilities {{{names}}}")
            if "state" in upd:
                parts.append(f"state {_state(upd['state'])}")
            if "_meta" in upd:
                parts.append("+_meta")
            return ", ".join(parts)
        return head
    if method is not None:
        sid = params.get("sessionId")
        head = f"{method}" + (f" {sid}" if sid else "")
        if method == "initialize":
            return f"{head}  protocolVersion {params.get('protocolVersion')}"
        if method == "session/prompt":
            blocks = params.get("prompt")
            text = ""
            if isinstance(blocks, list) and blocks and isinstance(blocks[0], dict):
                text = str(blocks[0].get("text", ""))
            return f'{head}  "{_short(text)}"'
        if "id" not in msg:
            head += "  (notification: no reply expected)"
        return head
    if "error" in msg:
        err = msg["error"] if isinstance(msg["error"], dict) else {}
        return f"error {err.get('code')}: {err.get('message')}"
    result = msg.get("result")
    if isinstance(result, dict):
        if "protocolVersion" in result:
            info = result.get("info") if isinstance(result.get("info"), dict) else {}
            assert isinstance(info, dict)
            return (
                f"result: protocolVersion {result['protocolVersion']}, "
                f"agent {info.get('name')} {info.get('version')}"
            )
        if set(result) == {"sessionId"}:
            return f"result: sessionId {result['sessionId']}"
        if set(result) == {"messageId"}:
            return f"result: prompt accepted (user message {result['messageId']})"
    return f"result: {_short(json.dumps(result))}"


def _wrap(text: str, first: str, indent: int, hang: int | None = None) -> list[str]:
    return textwrap.wrap(
        text,
        WIDTH,
        initial_indent=" " * indent + first,
        subsequent_indent=" " * (indent + len(first) if hang is None else hang),
        break_on_hyphens=False,
    )


def _msg_lines(arrow: str, msg: Any) -> list[str]:
    rid = msg.get("id") if isinstance(msg, dict) else None
    tag = f"[{rid}]" if rid is not None else ""
    head = f"  {arrow}  {tag:<4} "
    return textwrap.wrap(
        summarize(msg),
        WIDTH,
        initial_indent=head,
        subsequent_indent=" " * (len(head) + 2),
        break_on_hyphens=False,
    )


def _overtaker(msg: Any) -> str:
    if isinstance(msg, dict) and "method" not in msg and "id" in msg:
        return f"the response [{msg['id']}]"
    _, upd = _update_of(msg)
    if upd.get("sessionUpdate") == "subagent_update":
        return f"the announcement of child {upd.get('sessionId')}"
    return "the message above"


def _held_note(run: Run, an: Analysis, pos: int) -> str:
    msg = run.events[an.received[pos]].message
    sid, _ = _update_of(msg)
    over = run.events[an.received[an.held[pos]]].message
    return (
        f"HELD, then RELEASED: the agent sent this before {_overtaker(over)}, while the "
        f"client could not know session {sid} yet. The proxy held it and delivered it "
        "right after (audit: held, released)."
    )


def _dropped_note(reasons: list[tuple[str, str]]) -> str:
    event, why = reasons.pop(0) if reasons else ("?", "no audit record")
    if event == "duplicate_dropped":
        return (
            f"DUPLICATE REMOVED: the agent sent this, but it {why}, so it says nothing "
            "new and the proxy does not pass it on (audit: duplicate_dropped)."
        )
    return f"DROPPED by the proxy: {why} (audit: {event})."


def _client_note(run: Run, an: Analysis, i: int) -> str | None:
    msg = run.events[i].message
    if not isinstance(msg, dict):
        return None
    method = msg.get("method")
    params = msg.get("params") if isinstance(msg.get("params"), dict) else {}
    assert isinstance(params, dict)
    sid = params.get("sessionId")
    if i not in an.reached_agent and sid is not None and sid in (run.child1, run.child2):
        cap = next(
            (r.get("capability") for r in run.audit if r.get("event") == "mutation_rejected"),
            "?",
        )
        return (
            f'MUTATION REJECTED: {sid} is a child whose capabilities lack "{cap}", which '
            f"{method} needs. The proxy does not forward the request: it answers it itself, "
            "below (audit: mutation_rejected)."
        )
    if method == "session/cancel" and sid == run.child1 and i in an.reached_agent:
        return (
            f'PERMITTED: {sid} was announced with capabilities {{"cancel": {{}}}}, so the '
            "proxy forwarded this notification; the agent received it."
        )
    return None


def _answered_note(msg: Any) -> str:
    err = msg.get("error") if isinstance(msg, dict) else None
    data = err.get("data") if isinstance(err, dict) else None
    return f"ANSWERED BY THE PROXY: the agent never saw the request. error.data: {json.dumps(data)}"


def render(run: Run, an: Analysis, results: list[Check]) -> str:
    """The human-readable report."""
    lines: list[str] = []
    add = lines.append
    shown_cmd = shlex.join(["python" if a == sys.executable else a for a in run.command]).replace(
        _audit_dir(run), "$TMP"
    )
    add("acp-proxy demo")
    add("==============")
    lines.extend(
        _wrap(
            "A scripted ACP client (this command) talks to a scripted ACP agent through the "
            "real proxy, which runs as a subprocess:",
            "",
            0,
        )
    )
    add("")
    add(f"  {shown_cmd}")
    add("")
    lines.extend(
        _wrap(
            "The agent misbehaves on purpose, as real agents do: it talks about sessions "
            "before the client can know them, and repeats state reports (a session's "
            "state_update, and the \"mirror\" of a child's state on its parent's "
            "subagent_update). It starts two subagents (child sessions): the client may "
            "cancel the first, and may not change the second at all. Below is every message "
            "the client sent and received, and what the proxy did on the way.",
            "",
            0,
        )
    )
    add("")
    add("  client -> proxy   sent by the client")
    add("  proxy -> client   delivered to the client (written by the agent unless noted)")
    add("  agent -> proxy    written by the agent, stopped by the proxy")
    add("  [n]               JSON-RPC request id (requests and their responses)")
    add("  *                 what the proxy did, from the audit log and the agent's own log")
    add("  ($TMP is a temporary directory, removed when the demo ends.)")

    # A dropped agent message is shown after the delivered one the agent sent just before it
    # (keys: indices in an.agent_out; -1: before everything).
    drops_after: dict[int, list[int]] = {}
    for j in an.dropped:
        prev = max((a for a in an.origin if a is not None and a < j), default=-1)
        drops_after.setdefault(prev, []).append(j)
    reasons = [
        (str(r.get("event")), str(r.get("reason", "")))
        for r in run.audit
        if r.get("direction") == "agent->client"
        and r.get("event") in ("duplicate_dropped", "notification_dropped", "invalid_message")
    ]
    pos_of_event = {ev_index: pos for pos, ev_index in enumerate(an.received)}
    note_col = COL - 2

    def show_drops(after: int) -> None:
        for j in drops_after.get(after, []):
            lines.extend(_msg_lines(ARROWS["dropped"], an.agent_out[j].get("message")))
            lines.extend(_wrap(_dropped_note(reasons), "* ", note_col))

    show_drops(-1)
    for i, ev in enumerate(run.events):
        if ev.kind == "step":
            add("")
            add(ev.text)
            add("-" * min(WIDTH, len(ev.text)))
            continue
        lines.extend(_msg_lines(ARROWS[ev.direction], ev.message))
        if ev.direction == C2P:
            note = _client_note(run, an, i)
            if note:
                lines.extend(_wrap(note, "* ", note_col))
            continue
        pos = pos_of_event[i]
        msg = ev.message
        _, upd = _update_of(msg)
        if an.origin[pos] is None:
            lines.extend(_wrap(_answered_note(msg), "* ", note_col))
        if pos in an.held:
            lines.extend(_wrap(_held_note(run, an, pos), "* ", note_col))
        cid = upd.get("sessionId")
        if upd.get("sessionUpdate") == "subagent_update" and _first_mention(run, an, pos, cid):
            parent, _ = _update_of(msg)
            caps = upd.get("capabilities")
            allowed = (
                f"the client may only {' or '.join(caps)} it"
                if isinstance(caps, dict) and caps
                else "no capabilities: the client may not change it, only read it"
            )
            lines.extend(
                _wrap(
                    f"CHILD ANNOUNCED: the proxy registers {cid} as a child of {parent}; "
                    f"{allowed} (audit: child_announced).",
                    "* ",
                    note_col,
                )
            )
        origin = an.origin[pos]
        if origin is not None:
            show_drops(origin)

    add("")
    add("6. the client closes stdin: the proxy closes the agent's stdin and exits")
    add("-" * 72)
    add(f"  proxy exit status: {run.status} (the agent's own exit status)")
    lines.extend(
        _wrap(
            f"the agent received {len(an.agent_in)} messages: "
            + ", ".join(summarize(m).split("  ")[0] for m in an.agent_in)
            + (
                f" (never the forbidden session/prompt on {run.child2})"
                if run.child2 and not _agent_got(an, "session/prompt", run.child2)
                else ""
            ),
            "",
            2,
            4,
        )
    )

    add("")
    add("Audit trail: the JSON lines written to --audit-log, one per event")
    add('("ts" left out; direction shown as a->c = agent->client, c->a = client->agent)')
    add("-" * 72)
    for rec in run.audit:
        rest = {k: v for k, v in rec.items() if k not in ("ts", "event", "direction")}
        arrow = {"client->agent": "c->a", "agent->client": "a->c"}.get(
            str(rec.get("direction")), "    "
        )
        head = f"{rec.get('event', '?'):<18} {arrow}  "
        lines.extend(_wrap(json.dumps(rest), head, 2, 2 + len(head) + 1))
    if not run.audit:
        add("  (empty)")

    if run.stderr.strip():
        add("")
        add("Proxy stderr")
        add("-" * 72)
        lines.extend("  " + ln for ln in run.stderr.rstrip().splitlines())

    n = _counts(run, an)
    add("")
    add("Summary")
    add("-" * 72)
    lines.extend(
        _wrap(
            f"The client sent {n['sent']} messages and received {n['received']}; the agent sent "
            f"{len(an.agent_out)} and received {len(an.agent_in)}. The proxy held and released "
            f"{len(an.held)} early messages, removed {n['dup']} duplicate state reports, "
            f"registered {n['children']} child sessions and rejected {n['rejected']} forbidden "
            f"mutation(s).",
            "",
            2,
        )
    )
    add("")
    for c in results:
        mark = "ok  " if c.ok else "FAIL"
        lines.extend(_wrap(c.name + (f" [{c.detail}]" if c.detail else ""), f"[{mark}] ", 2))
    add("")
    if all(c.ok for c in results):
        add("PASS: the proxy did everything shown above.")
        add("Use it: put `acp-proxy [--audit-log FILE] --` in front of your agent's command.")
        add("`acp-proxy demo --json` prints the raw messages of this run as JSON lines.")
    else:
        add("FAIL: some expectations were not met (see [FAIL] above).")
    return "\n".join(lines) + "\n"


def _audit_dir(run: Run) -> str:
    i = run.command.index("--audit-log")
    return os.path.dirname(run.command[i + 1])


def _first_mention(run: Run, an: Analysis, pos: int, cid: Any) -> bool:
    for p in range(pos):
        _, upd = _update_of(run.events[an.received[p]].message)
        if upd.get("sessionUpdate") == "subagent_update" and upd.get("sessionId") == cid:
            return False
    return isinstance(cid, str)


def _counts(run: Run, an: Analysis) -> dict[str, int]:
    events = [r.get("event") for r in run.audit]
    return {
        "sent": sum(1 for e in run.events if e.kind == "message" and e.direction == C2P),
        "received": len(an.received),
        "dup": events.count("duplicate_dropped"),
        "children": events.count("child_announced"),
        "rejected": events.count("mutation_rejected"),
    }


def render_json(run: Run, results: list[Check]) -> str:
    """The raw transcript as JSON lines."""
    out: list[dict[str, Any]] = []
    for ev in run.events:
        if ev.kind == "message":
            out.append({"type": "message", "direction": ev.direction, "message": ev.message})
    for e in run.agent_log:
        out.append({"type": "agent", **e})
    for rec in run.audit:
        out.append({"type": "audit", "record": rec})
    for c in results:
        out.append({"type": "check", "name": c.name, "ok": c.ok, "detail": c.detail})
    out.append({"type": "result", "ok": all(c.ok for c in results), "proxy_status": run.status})
    return "".join(json.dumps(o) + "\n" for o in out)


def run_demo(args: list[str]) -> int:
    """Entry point of ``acp-proxy demo [--json]``; returns 0 when every check passed."""
    parser = argparse.ArgumentParser(
        prog="acp-proxy demo",
        description="Run a scripted ACP client and agent through the proxy and show "
        "what the proxy does.",
    )
    parser.add_argument(
        "--json", action="store_true", help="print the raw transcript as JSON lines"
    )
    try:
        opts = parser.parse_args(args)
    except SystemExit as exc:
        return 0 if exc.code == 0 else 2
    run = execute()
    an = analyse(run)
    results = checks(run, an)
    text = render_json(run, results) if opts.json else render(run, an, results)
    sys.stdout.write(text)
    sys.stdout.flush()
    return 0 if all(c.ok for c in results) else 1
