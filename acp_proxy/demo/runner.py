"""Runs the real proxy with the demo agent and plays the scripted client against it.

:func:`execute` starts ``python -m acp_proxy --audit-log FILE -- python -m
acp_proxy.demo.agent`` as a subprocess, plays a short ACP session on its
stdin/stdout (:class:`ProxyPeer`), and returns the :class:`~acp_proxy.demo.transcript.Run`
with the transcript, the agent's own log and the audit records.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import IO, Any

from acp_proxy.demo.transcript import C2P, P2C, Event, Run, update_of

__all__ = ["SETTLE_SECONDS", "TIMEOUT_SECONDS", "ProxyPeer", "execute"]

TIMEOUT_SECONDS = 30.0
"""The whole demo, proxy start to proxy exit."""
SETTLE_SECONDS = 5.0
"""Longest wait for an update that follows a response."""


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

    def send(self, msg: dict[str, Any], mark: str | None = None) -> int:
        """Sends one message to the proxy; returns its index in ``run.events``
        (recorded in ``run.marks[mark]`` when ``mark`` is given)."""
        assert self.proc.stdin is not None
        with self._cond:
            index = len(self.run.events)
            self.run.events.append(Event("message", C2P, msg))
            if mark is not None:
                self.run.marks[mark] = index
        try:
            self.proc.stdin.write(json.dumps(msg).encode() + b"\n")
            self.proc.stdin.flush()
        except OSError as exc:
            self.run.errors.append(f"could not write to the proxy: {exc}")
        return index

    def wait_for(
        self,
        what: str,
        pred: Callable[[Any], bool],
        limit: float | None = None,
        since: int = 0,
    ) -> Any | None:
        """Waits for a received message matching ``pred`` at index ``since`` or later in
        ``run.events``; records an error on timeout."""
        deadline = self.deadline if limit is None else min(self.deadline, time.monotonic() + limit)
        with self._cond:
            while True:
                for ev in self.run.events[since:]:
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
        """Closes the proxy's stdin, waits for its stdout to end and for it to exit,
        then closes its stdout."""
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
        self._reader.join(0.5)
        if self.proc.stdout is not None and not self._reader.is_alive():
            self.proc.stdout.close()


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
        lambda m: update_of(m)[0] == sid,
        SETTLE_SECONDS,
    )

    peer.step("3. session/prompt: the agent starts two subagents (child sessions)")
    prompt = [{"type": "text", "text": "Find the session/new docs and review my patch."}]
    peer.send(_request(3, "session/prompt", {"sessionId": sid, "prompt": prompt}))
    if peer.response(3, "session/prompt") is None:
        return
    children: list[str] = []
    for ev in run.events:
        _, upd = update_of(ev.message)
        cid = upd.get("sessionId")
        if upd.get("sessionUpdate") == "subagent_update" and isinstance(cid, str):
            children.extend([] if cid in children else [cid])
    if len(children) < 2:
        run.errors.append(f"expected two child sessions to be announced, saw {children}")
        return
    run.child1, run.child2 = children[0], children[1]

    c1, c2 = run.child1, run.child2
    peer.step(f"4. session/cancel on child {c1}: permitted (it has the cancel capability)")
    peer.send(_cancel(c1), "cancel")

    def cancelled_mirror(m: Any) -> bool:
        psid, upd = update_of(m)
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
    if peer.response(4, "session/prompt") is None:
        return
    _reload(peer, cwd, sid, c1, cancelled_mirror)


def _reload(
    peer: ProxyPeer, cwd: str, sid: str, c1: str, cancelled_mirror: Callable[[Any], bool]
) -> None:
    """Steps 6-10: a refused resume of child ``c1``, then the freshness boundary at a
    resume of the parent ``sid``: ``c1``'s cancel is refused until the agent
    re-announces it (which this agent does on the next prompt), then permitted.

    The client waits for each answer before sending the next message, and the
    proxy reads the client's messages in order, so the stale cancel (step 8)
    is judged before the prompt that makes the agent re-announce (step 9)
    reaches the agent: the verdicts do not depend on timing.
    """
    resume = {"cwd": cwd, "mcpServers": []}
    peer.step(f"6. session/resume on child {c1}: refused (a child is never resumed directly)")
    peer.send(_request(5, "session/resume", {"sessionId": c1, **resume}), "resume_child")
    if peer.response(5, "session/resume") is None:
        return

    peer.step(f"7. session/resume on {sid}: the agent replays its children (history), answers")
    replay = {"sessionId": sid, **resume, "replayFrom": {"type": "start"}}
    peer.send(_request(6, "session/resume", replay), "resume_parent")
    if peer.response(6, "session/resume") is None:
        return

    peer.step(f"8. session/cancel on child {c1}: refused now (the resume revoked its grant)")
    peer.send(_cancel(c1), "stale_cancel")

    peer.step(f"9. session/prompt on {sid}: the agent re-announces its children (grants again)")
    go_on = [{"type": "text", "text": "Carry on with the search."}]
    peer.send(_request(7, "session/prompt", {"sessionId": sid, "prompt": go_on}), "resume_prompt")
    if peer.response(7, "session/prompt") is None:
        return

    peer.step(f"10. session/cancel on child {c1}: permitted again (re-announced with cancel)")
    since = peer.send(_cancel(c1), "fresh_cancel")
    peer.wait_for(
        f"the agent's report that {c1} was cancelled again", cancelled_mirror, SETTLE_SECONDS, since
    )
    _permissions(peer, sid)


#: The demo's ``[permissions]`` policy (``acp-proxy demo`` runs the proxy with it).
POLICY = """\
[[permissions.rules]]
name = "no-network-tools"
action = "deny"
tool_kind = "fetch"
"""


def _permissions(peer: ProxyPeer, sid: str) -> None:
    """Step 11: the agent asks permission for a web fetch (the policy denies it: the
    proxy answers the agent, the client never sees it) and for an edit (no rule: the
    client is asked, and allows it)."""
    peer.step(
        f"11. session/prompt on {sid} asking for tools: the agent asks permission twice; "
        "the proxy denies the web fetch itself, the edit is forwarded to the client"
    )
    tools = [{"type": "text", "text": "Use your tools: fetch the page, then edit README.md."}]
    since = peer.send(_request(8, "session/prompt", {"sessionId": sid, "prompt": tools}))
    ask = peer.wait_for(
        "the forwarded session/request_permission for the edit",
        lambda m: isinstance(m, dict) and m.get("method") == "session/request_permission",
        SETTLE_SECONDS,
        since,
    )
    if ask is None:
        return
    allow = {"outcome": {"outcome": "selected", "optionId": "allow"}}
    peer.send({"jsonrpc": "2.0", "id": ask.get("id"), "result": allow}, "permission_answer")
    peer.response(8, "session/prompt")


def _cancel(session_id: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session_id}}


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


def execute(
    timeout: float = TIMEOUT_SECONDS, agent: list[str] | None = None, trace: str | None = None
) -> Run:
    """Runs the proxy with the demo agent and the scripted client; returns what was seen.

    Args:
        timeout: for the whole run; past it the proxy is killed.
        agent: the agent command (default: ``python -m acp_proxy.demo.agent``).
        trace: also write a wire trace with content here (``--trace --trace-content``).
    """
    # Imported here, not at the top: ``python -m acp_proxy.demo.agent`` imports
    # this package first, and runpy warns when the module it is about to run
    # has already been imported.
    from acp_proxy.demo.agent import LOG_ENV

    with tempfile.TemporaryDirectory(prefix="acp-proxy-demo-") as tmp:
        audit_path = os.path.join(tmp, "audit.jsonl")
        agent_log_path = os.path.join(tmp, "agent.jsonl")
        policy_path = os.path.join(tmp, "permissions.toml")
        with open(policy_path, "w", encoding="utf-8") as f:
            f.write(POLICY)
        tracing = ["--trace", trace, "--trace-content"] if trace else []
        command = [
            sys.executable, "-m", "acp_proxy", "--config", policy_path,
            "--audit-log", audit_path, *tracing,
            "--", *(agent or [sys.executable, "-m", "acp_proxy.demo.agent"]),
        ]  # fmt: skip
        run = Run(command)
        env = dict(os.environ)
        env[LOG_ENV] = agent_log_path
        pkg_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
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
