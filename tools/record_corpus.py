"""Re-records the real-agent corpus (``tests/fixtures/corpus/*.jsonl``).

Each transcript is one ACP session between a real ACP client (the Python SDK,
``agent-client-protocol``) and a real agent, with the agent's model API mocked on
loopback by this script, so the session is the same every time and needs no
network or account. The client spawns ``record_corpus.py tee OUT -- AGENT...``,
which copies stdio both ways and writes every line it passes, as JSON lines::

    {"dir": "client->agent" | "agent->client", "line": "<the raw line, no \\n>"}

in the order the tee saw them. The tests replay these lines through the proxy
(``tests/core/test_real_agent_corpus.py``, ``tests/e2e/test_real_agent_corpus.py``);
they need none of the agents.

The scripted session: ``initialize`` (the client advertises ``fs`` read/write and
``terminal``), ``session/new`` in a scratch workspace, then a ``session/prompt``
that the mock model answers in steps: streamed text and a shell command (``echo
corpus-check && ls``), a write of ``notes.txt``, a read of it, then a streamed
final answer with usage. A step is skipped when the agent offers no tool for it;
Claude and Codex also get a command that writes a stamp file, since they run
read-only commands without asking. The client grants every permission request
(``allow_once``), serves ``fs/*`` in the workspace and runs ``terminal/*`` commands
for real there. A second ``session/prompt`` asks for one more such command: at its
permission request the client sends ``session/cancel`` and answers the request
``cancelled``, and the turn ends ``cancelled``. Claude starts in its ``auto`` mode,
which decides permissions itself, so the client first switches it to ``default``
with ``session/set_mode``. ``claude-subagents`` is Claude with subagents: the
client also advertises ``clientCapabilities.subagents`` (ACP's subagents RFD), the
mock model calls Claude's ``Agent`` tool once, and the subagent runs one command
that writes (its permission request comes on the child session); one prompt.
Nothing reads credentials or uses sudo; ``HOME`` is a scratch directory.

Agents (outside the repository, e.g. ``CACHE=/work/.cache-agents``; the versions
of the committed transcripts are in ``tests/fixtures/corpus/README.md``)::

    /root/.pyenv/versions/3.13.0/bin/python -m venv $CACHE/fa/venv   # Python >= 3.13
    $CACHE/fa/venv/bin/pip install fast-agent-mcp==0.10.48 agent-client-protocol==0.12.1
    mkdir -p $CACHE/npm && cd $CACHE/npm && npm init -y && npm install \
        @zed-industries/codex-acp@0.16.0 @agentclientprotocol/claude-agent-acp@0.101.0

Run (with a Python that has ``agent-client-protocol``, e.g. the fast-agent venv)::

    $CACHE/fa/venv/bin/python tools/record_corpus.py --cache $CACHE \
        [--out tests/fixtures/corpus] [--proxy 'acp-proxy --config X --'] \
        [fast-agent] [codex] [claude] [claude-subagents]

``--proxy`` runs the sessions live through a proxy command (put in front of the
agent's); the transcript is then the client's side of it.

Mocks: OpenAI Chat Completions (``/v1/chat/completions``, fast-agent's ``generic``
provider), OpenAI Responses (``/v1/responses``, Codex, a custom model provider in
``CODEX_HOME/config.toml``) and Anthropic Messages (``/v1/messages``, Claude, via
``ANTHROPIC_BASE_URL``), all streaming server-sent events. Every request the mock
gets is logged to ``SCRATCH/AGENT/model-requests.jsonl``, the agent's stderr to
``SCRATCH/AGENT/agent-stderr.log`` (``--scratch``, default ``/srv/acp-corpus``:
Codex refuses a home under ``/tmp``). Exit status 0 when every session completed
as scripted (first turn ``end_turn`` with the file written, second ``cancelled``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, cast

HERE = Path(__file__).resolve()
REPO = HERE.parent.parent
NOTE = "notes.txt"
NOTE_TEXT = "hello from the acp-proxy corpus\n"
SHELL_SCRIPT = "echo corpus-check && ls"
STAMP_SCRIPT = "echo corpus-stamp > stamp.txt"
PROMPT2 = "One more thing: write a second stamp file."
SUB_PROMPT = "Have a subagent write a stamp file in the workspace."
SUB_TASK = "Write the file sub.txt in the workspace with a shell command."
SUB_SCRIPT = "echo from-subagent > sub.txt"
SECOND_SCRIPT = "echo second-turn > stamp2.txt"
PROMPT = (
    "Check the workspace: run a shell command, write notes.txt, read it back, "
    "then tell me what you found."
)

# --------------------------------------------------------------------------- tee


def tee(out: Path, argv: list[str]) -> int:
    """Copies stdin to ``argv``'s stdin and its stdout to ours, recording each line."""
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin is not None
    assert proc.stdout is not None
    lock = threading.Lock()
    log = out.open("w", encoding="utf-8")

    def record(direction: str, raw: bytes) -> None:
        text = raw.rstrip(b"\n").decode("utf-8")
        with lock:
            log.write(json.dumps({"dir": direction, "line": text}, ensure_ascii=False) + "\n")
            log.flush()

    def pump_in() -> None:
        assert proc.stdin is not None
        for raw in sys.stdin.buffer:
            record("client->agent", raw)
            proc.stdin.write(raw)
            proc.stdin.flush()
        proc.stdin.close()

    threading.Thread(target=pump_in, daemon=True).start()
    for raw in proc.stdout:
        record("agent->client", raw)
        sys.stdout.buffer.write(raw)
        sys.stdout.buffer.flush()
    rc = proc.wait()
    log.close()
    return rc


# ------------------------------------------------------------------ model mock

SHELL_TOOLS = ("execute", "mcp__acp__Bash", "Bash", "shell_command", "exec_command", "shell")
WRITE_TOOLS = ("write_text_file", "mcp__acp__Write", "Write", "apply_patch")
READ_TOOLS = ("read_text_file", "mcp__acp__Read", "Read")


Step = tuple[str, dict[str, Any]]


def shell_step(shell: str, script: str, cwd: str, writes: bool) -> Step:
    """A call of the agent's shell tool ``shell`` running ``script`` in ``cwd``.

    ``writes``: the script writes a file, so the agent must ask first. Claude and
    fast-agent ask for such a command themselves; Codex's read-only preset runs
    commands in a sandbox that cannot write, so the model asks to run it outside
    (``require_escalated``), which needs the user's approval.
    """
    if shell in ("Bash", "mcp__acp__Bash"):
        what = "Write a stamp file" if writes else "List the workspace"
        return shell, {"command": script, "description": what}
    if shell == "exec_command":
        args: dict[str, Any] = {"cmd": script, "workdir": cwd}
        if writes:
            args.update(
                sandbox_permissions="require_escalated",
                justification="Write a stamp file in the workspace?",
            )
        return shell, args
    if shell == "shell":
        return shell, {"command": ["bash", "-lc", script], "workdir": cwd}
    if shell == "shell_command":
        return shell, {"command": script, "workdir": cwd}
    return shell, {"command": script}


def plan(tools: list[str], cwd: str) -> list[Step]:
    """The tool calls of the first turn, for the tools the agent offers."""
    steps: list[Step] = []
    note = f"{cwd}/{NOTE}"
    shell = next((t for t in SHELL_TOOLS if t in tools), None)
    if shell is not None:
        steps.append(shell_step(shell, SHELL_SCRIPT, cwd, writes=False))
        if shell in ("Bash", "mcp__acp__Bash", "exec_command"):
            # Claude runs read-only commands unasked and Codex runs them in its
            # sandbox: one that writes makes them ask.
            steps.append(shell_step(shell, STAMP_SCRIPT, cwd, writes=True))
    write = next((t for t in WRITE_TOOLS if t in tools), None)
    if write == "apply_patch":
        patch = f"*** Begin Patch\n*** Add File: {note}\n+{NOTE_TEXT.rstrip()}\n*** End Patch\n"
        steps.append((write, {"input": patch}))
    elif write == "write_text_file":
        steps.append((write, {"path": note, "content": NOTE_TEXT}))
    elif write is not None:
        steps.append((write, {"file_path": note, "content": NOTE_TEXT}))
    read = next((t for t in READ_TOOLS if t in tools), None)
    if read == "read_text_file":
        steps.append((read, {"path": note}))
    elif read is not None:
        steps.append((read, {"file_path": note}))
    elif shell is not None:
        # Codex reads files with its shell tool.
        steps.append(shell_step(shell, f"cat {NOTE}", cwd, writes=False))
    return steps


TEXTS = [
    "I'll look at the workspace first.",
    "Next I'll record a note.",
    "Now I'll read the note back.",
]
FINAL = "Done: the workspace listing ran, notes.txt was written and it reads back as expected."


def pieces(text: str) -> list[str]:
    words = text.split(" ")
    return [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)]


def sse(event: str | None, data: Any) -> bytes:
    head = f"event: {event}\n" if event else ""
    return (head + "data: " + json.dumps(data) + "\n\n").encode()


class Mock(BaseHTTPRequestHandler):
    """One request to the mocked model API."""

    server: MockServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._log({"method": "GET", "path": self.path})
        if self.path.rstrip("/").endswith("/models"):
            self._json({"object": "list", "data": [{"id": "mock-model", "object": "model"}]})
        else:
            self._json({"error": {"message": "not found"}}, 404)

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        self._log({"method": "POST", "path": self.path, "body": body})
        path = self.path.split("?")[0]
        if path.endswith("/chat/completions"):
            self._stream(self._chat(body))
        elif path.endswith("/responses"):
            self._stream(self._responses(body))
        elif path.endswith("/messages/count_tokens"):
            self._json({"input_tokens": 42})
        elif path.endswith("/messages"):
            self._stream(self._anthropic(body))
        else:
            self._json({"error": {"message": "not found"}}, 404)

    def _log(self, record: dict[str, Any]) -> None:
        with self.server.lock, self.server.log.open("a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")

    def _json(self, obj: Any, status: int = 200) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, events: Iterator[bytes]) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        for chunk in events:
            self.wfile.write(chunk)
            self.wfile.flush()
        self.close_connection = True

    def _next(self, tools: list[str], done: int) -> tuple[str, Step | None]:
        steps = plan(tools, self.server.cwd)
        shell = next((t for t in SHELL_TOOLS if t in tools), None)
        if self.server.second_turn and shell is not None and done <= len(steps):
            # The second prompt: one command that needs approval; the client cancels
            # the turn instead of answering, so its final answer is never asked for.
            call = shell_step(shell, SECOND_SCRIPT, self.server.cwd, writes=True)
            return "Writing the second stamp.", call
        if done < len(steps):
            return TEXTS[min(done, len(TEXTS) - 1)], steps[done]
        return FINAL, None

    def _delegate(self, body: dict[str, Any], done: int) -> tuple[str, Step | None]:
        """Claude with subagents: the parent calls its ``Agent`` tool once; the
        subagent (its first message holds the task) runs one command that writes."""
        if SUB_TASK in json.dumps(body.get("messages", [])[:1]):
            if done == 0:
                call = shell_step("Bash", SUB_SCRIPT, self.server.cwd, writes=True)
                return "I'm the subagent; writing the stamp.", call
            return "Subagent finished: sub.txt is written.", None
        if done == 0:
            args: dict[str, Any] = {"description": "Write a stamp", "prompt": SUB_TASK}
            args.update(subagent_type="general-purpose", run_in_background=False)
            return "I'll hand this to a subagent.", ("Agent", args)
        return "Done: the subagent wrote sub.txt.", None

    # OpenAI Chat Completions ------------------------------------------------
    def _chat(self, body: dict[str, Any]) -> Iterator[bytes]:
        tools = [t["function"]["name"] for t in body.get("tools") or [] if "function" in t]
        done = sum(m.get("role") == "tool" for m in body.get("messages", []))
        text, call = self._next(tools, done) if tools else ("Corpus session", None)
        base = {"id": f"chatcmpl-{done}", "object": "chat.completion.chunk", "created": 0}
        base["model"] = body.get("model", "mock-model")

        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            choice = {"index": 0, "delta": delta, "finish_reason": finish}
            return sse(None, {**base, "choices": [choice]})

        yield chunk({"role": "assistant", "content": ""})
        for p in pieces(text):
            yield chunk({"content": p})
        if call is not None:
            name, args = call
            tc = {"index": 0, "id": f"call_{done}", "type": "function"}
            yield chunk({"tool_calls": [{**tc, "function": {"name": name, "arguments": ""}}]})
            yield chunk({"tool_calls": [{"index": 0, "function": {"arguments": json.dumps(args)}}]})
        yield chunk({}, "tool_calls" if call else "stop")
        usage = {"prompt_tokens": 120 + done, "completion_tokens": 20, "total_tokens": 140 + done}
        yield sse(None, {**base, "choices": [], "usage": usage})
        yield b"data: [DONE]\n\n"

    # OpenAI Responses ---------------------------------------------------------
    def _responses(self, body: dict[str, Any]) -> Iterator[bytes]:
        tools = [t.get("name") or t.get("type", "") for t in body.get("tools") or []]
        outputs = ("function_call_output", "custom_tool_call_output", "local_shell_call_output")
        done = sum(i.get("type") in outputs for i in body.get("input", []))
        text, call = self._next(tools, done) if tools else ("Corpus session", None)
        rid = f"resp_{done}"
        created = {"id": rid, "object": "response", "status": "in_progress", "output": []}
        yield sse("response.created", {"type": "response.created", "response": created})
        msg_id = f"msg_{done}"
        item = {"type": "message", "id": msg_id, "role": "assistant", "content": []}
        yield sse(
            "response.output_item.added",
            {"type": "response.output_item.added", "output_index": 0, "item": item},
        )
        for p in pieces(text):
            delta = {"type": "response.output_text.delta", "item_id": msg_id}
            yield sse("response.output_text.delta", {**delta, "output_index": 0, "delta": p})
        full = {**item, "content": [{"type": "output_text", "text": text, "annotations": []}]}
        yield sse(
            "response.output_item.done",
            {"type": "response.output_item.done", "output_index": 0, "item": full},
        )
        if call is not None:
            name, args = call
            tool_kind = next(
                (t.get("type") for t in body.get("tools") or [] if t.get("name") == name), ""
            )
            if tool_kind == "custom":
                fc = {"type": "custom_tool_call", "id": f"ctc_{done}", "call_id": f"call_{done}"}
                fc.update(name=name, input=args["input"], status="completed")
            else:
                fc = {"type": "function_call", "id": f"fc_{done}", "call_id": f"call_{done}"}
                arguments = json.dumps(args)
                fc.update(name=name, arguments=arguments, status="completed")
            yield sse(
                "response.output_item.done",
                {"type": "response.output_item.done", "output_index": 1, "item": fc},
            )
        usage = {
            "input_tokens": 120 + done,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 20,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 140 + done,
        }
        completed = {"id": rid, "object": "response", "status": "completed", "usage": usage}
        yield sse("response.completed", {"type": "response.completed", "response": completed})

    # Anthropic Messages -------------------------------------------------------
    def _anthropic(self, body: dict[str, Any]) -> Iterator[bytes]:
        tools = [t.get("name", "") for t in body.get("tools") or []]
        done = 0
        for m in body.get("messages", []):
            if m.get("role") == "user" and isinstance(m.get("content"), list):
                done += sum(c.get("type") == "tool_result" for c in m["content"])
        if not tools:
            text, call = "Corpus session", None
        elif self.server.subagents:
            text, call = self._delegate(body, done)
        else:
            text, call = self._next(tools, done)
        usage = {"input_tokens": 120 + done, "output_tokens": 1}
        message = {
            "id": f"msg_{done}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "claude-mock"),
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage,
        }
        yield sse("message_start", {"type": "message_start", "message": message})
        block: dict[str, Any] = {"type": "text", "text": ""}
        yield sse(
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": block},
        )
        for p in pieces(text):
            delta = {"type": "text_delta", "text": p}
            yield sse(
                "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}
            )
        yield sse("content_block_stop", {"type": "content_block_stop", "index": 0})
        if call is not None:
            name, args = call
            block = {"type": "tool_use", "id": f"toolu_{done:02d}", "name": name, "input": {}}
            yield sse(
                "content_block_start",
                {"type": "content_block_start", "index": 1, "content_block": block},
            )
            delta = {"type": "input_json_delta", "partial_json": json.dumps(args)}
            yield sse(
                "content_block_delta", {"type": "content_block_delta", "index": 1, "delta": delta}
            )
            yield sse("content_block_stop", {"type": "content_block_stop", "index": 1})
        stop = {"stop_reason": "tool_use" if call else "end_turn", "stop_sequence": None}
        yield sse(
            "message_delta",
            {"type": "message_delta", "delta": stop, "usage": {"output_tokens": 20}},
        )
        yield sse("message_stop", {"type": "message_stop"})


class MockServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, log: Path, cwd: str) -> None:
        super().__init__(("127.0.0.1", 0), Mock)
        self.log = log
        self.cwd = cwd
        self.lock = threading.Lock()
        self.second_turn = False
        self.subagents = False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


# ---------------------------------------------------------------------- client


def _read(path: str) -> str | None:
    """The text of the file at ``path``, or ``None`` when there is none."""
    file = Path(path)
    return file.read_text(encoding="utf-8") if file.is_file() else None


def _write(path: str, content: str) -> None:
    Path(path).write_text(content, encoding="utf-8")


class CorpusClient:
    """An ``acp.Client``: grants permissions, serves fs and runs terminals in ``cwd``."""

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd
        self.terminals: dict[str, asyncio.subprocess.Process] = {}
        self.output: dict[str, bytearray] = {}
        self.updates: list[Any] = []
        self.conn: Any = None
        self.cancel_on_permission = False

    async def request_permission(
        self, options: list[Any], session_id: str, tool_call: Any, **kwargs: Any
    ) -> Any:
        from acp.schema import AllowedOutcome, DeniedOutcome, RequestPermissionResponse

        if self.cancel_on_permission:
            # The user presses stop while asked: the client cancels the turn and
            # answers the pending request "cancelled" (ACP "Cancellation").
            await self.conn.cancel(session_id=session_id)
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))

        option = next((o for o in options if o.kind == "allow_once"), options[0])
        outcome = AllowedOutcome(outcome="selected", option_id=option.option_id)
        return RequestPermissionResponse(outcome=outcome)

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)

    async def write_text_file(self, content: str, path: str, session_id: str, **kw: Any) -> Any:
        from acp.schema import WriteTextFileResponse

        _write(path, content)
        return WriteTextFileResponse()

    async def read_text_file(self, path: str, session_id: str, **kwargs: Any) -> Any:
        from acp import RequestError
        from acp.schema import ReadTextFileResponse

        content = _read(path)
        if content is None:
            raise RequestError.resource_not_found(path)
        return ReadTextFileResponse(content=content)

    async def create_terminal(
        self,
        command: str,
        session_id: str,
        args: list[str] | None = None,
        cwd: str | None = None,
        **kwargs: Any,
    ) -> Any:
        from acp.schema import CreateTerminalResponse

        tid = f"term-{len(self.terminals) + 1}"
        if args:
            proc = await asyncio.create_subprocess_exec(
                command, *args, cwd=cwd or self.cwd, stdout=-1, stderr=-2
            )
        else:
            proc = await asyncio.create_subprocess_shell(
                command, cwd=cwd or self.cwd, stdout=-1, stderr=-2
            )
        self.terminals[tid] = proc
        self.output[tid] = bytearray()
        return CreateTerminalResponse(terminal_id=tid)

    async def _finish(self, tid: str) -> int:
        proc = self.terminals[tid]
        if proc.returncode is None:
            assert proc.stdout is not None
            self.output[tid] += await proc.stdout.read()
            await proc.wait()
        assert proc.returncode is not None
        return proc.returncode

    async def terminal_output(self, session_id: str, terminal_id: str, **kwargs: Any) -> Any:
        from acp.schema import TerminalExitStatus, TerminalOutputResponse

        rc = await self._finish(terminal_id)
        return TerminalOutputResponse(
            output=self.output[terminal_id].decode(),
            truncated=False,
            exit_status=TerminalExitStatus(exit_code=rc),
        )

    async def wait_for_terminal_exit(self, session_id: str, terminal_id: str, **kw: Any) -> Any:
        from acp.schema import WaitForTerminalExitResponse

        return WaitForTerminalExitResponse(exit_code=await self._finish(terminal_id))

    async def release_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> Any:
        from acp.schema import ReleaseTerminalResponse

        await self._finish(terminal_id)
        return ReleaseTerminalResponse()

    async def kill_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> Any:
        from acp.schema import KillTerminalResponse

        proc = self.terminals[terminal_id]
        if proc.returncode is None:
            proc.kill()
        return KillTerminalResponse()

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {}

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None


# ---------------------------------------------------------------------- agents


def agent_setup(name: str, cache: Path, home: Path, url: str) -> tuple[list[str], dict[str, str]]:
    """The agent's command line and environment for a mock at ``url``."""
    env = {
        "HOME": str(home),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
    }
    npm_bin = cache / "npm" / "node_modules" / ".bin"
    if name == "fast-agent":
        cfg = home / "fastagent.config.yaml"
        cfg.write_text(
            f"default_model: generic.mock-model\n"
            f"generic:\n  api_key: mock-key\n  base_url: {url}/v1\n"
            "logger:\n  progress_display: false\n  show_chat: false\n  show_tools: false\n",
            encoding="utf-8",
        )
        fast_agent = cache / "fa" / "venv" / "bin" / "fast-agent"
        argv = [str(fast_agent), "--no-update-check", "acp", "--config-path", str(cfg)]
        return [*argv, "--model", "generic.mock-model", "--shell"], env
    if name == "codex":
        codex_home = home / ".codex"
        codex_home.mkdir(parents=True, exist_ok=True)
        (codex_home / "config.toml").write_text(
            'model = "gpt-5.4"\nmodel_provider = "mock"\n'
            f'[model_providers.mock]\nname = "mock"\nbase_url = "{url}/v1"\n'
            'env_key = "MOCK_API_KEY"\nwire_api = "responses"\n',
            encoding="utf-8",
        )
        env.update(CODEX_HOME=str(codex_home), MOCK_API_KEY="mock-key")
        return [str(npm_bin / "codex-acp")], env
    if name in ("claude", "claude-subagents"):
        env.update(
            ANTHROPIC_BASE_URL=url,
            ANTHROPIC_API_KEY="mock-key",
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
            DISABLE_AUTOUPDATER="1",
            DISABLE_TELEMETRY="1",
        )
        return [str(npm_bin / "claude-agent-acp")], env
    raise SystemExit(f"unknown agent {name!r}: use fast-agent, codex or claude")


async def record(name: str, cache: Path, scratch: Path, out: Path, proxy: list[str]) -> bool:
    from acp import PROTOCOL_VERSION, spawn_agent_process, text_block
    from acp.schema import ClientCapabilities, FileSystemCapabilities, Implementation

    base = scratch / name
    shutil.rmtree(base, ignore_errors=True)
    ws, home = base / "ws", base / "home"
    ws.mkdir(parents=True)
    home.mkdir()
    (ws / "README.md").write_text("# corpus workspace\n", encoding="utf-8")
    server = MockServer(base / "model-requests.jsonl", str(ws))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    argv, env = agent_setup(name, cache, home, server.url)
    server.subagents = name == "claude-subagents"
    transcript = out / f"{name}.jsonl"
    client = CorpusClient(ws)
    errlog = (base / "agent-stderr.log").open("wb")
    cmd = [sys.executable, str(HERE), "tee", str(transcript), "--", *proxy, *argv]
    ok = False
    try:
        async with spawn_agent_process(
            cast(Any, client),
            cmd[0],
            *cmd[1:],
            env=env,
            cwd=str(ws),
            transport_kwargs={"stderr": errlog},
        ) as (conn, _proc):
            caps = ClientCapabilities(
                fs=FileSystemCapabilities(read_text_file=True, write_text_file=True),
                terminal=True,
            )
            info = Implementation(name="acp-proxy-corpus", version="1.0")
            if server.subagents:
                # The SDK's ClientCapabilities has no ``subagents`` (ACP's subagents
                # RFD) and drops the key, so this initialize is written as JSON.
                params = {
                    "protocolVersion": PROTOCOL_VERSION,
                    "clientCapabilities": {
                        **caps.model_dump(by_alias=True, exclude_none=True),
                        "subagents": {},
                    },
                    "clientInfo": info.model_dump(by_alias=True, exclude_none=True),
                }
                init = conn._conn.send_request("initialize", params)
            else:
                init = conn.initialize(
                    protocol_version=PROTOCOL_VERSION, client_capabilities=caps, client_info=info
                )
            await asyncio.wait_for(init, 60)
            sess = await asyncio.wait_for(conn.new_session(cwd=str(ws), mcp_servers=[]), 60)
            modes = sess.modes
            ids = [m.id for m in modes.available_modes] if modes else []
            if modes and modes.current_mode_id != "default" and "default" in ids:
                # Claude starts in "auto" (it decides permissions itself): the
                # manual mode makes it ask the client, as an IDE user's would.
                await conn.set_session_mode(session_id=sess.session_id, mode_id="default")
            first = SUB_PROMPT if server.subagents else PROMPT
            result = await asyncio.wait_for(
                conn.prompt(session_id=sess.session_id, prompt=[text_block(first)]), 180
            )
            print(f"{name}: stopReason {result.stop_reason}", file=sys.stderr)
            if server.subagents:
                return result.stop_reason == "end_turn" and (ws / "sub.txt").exists()
            client.conn, client.cancel_on_permission = conn, True
            server.second_turn = True
            second = await asyncio.wait_for(
                conn.prompt(session_id=sess.session_id, prompt=[text_block(PROMPT2)]), 180
            )
            print(f"{name}: second turn stopReason {second.stop_reason}", file=sys.stderr)
            ok = result.stop_reason == "end_turn" and second.stop_reason == "cancelled"
    finally:
        server.shutdown()
        errlog.close()
    return ok and (ws / NOTE).exists()


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["tee"]:
        out, sep, *cmd = args[1:]
        assert sep == "--", "usage: record_corpus.py tee OUT -- AGENT..."
        return tee(Path(out), cmd)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "agents", nargs="*", default=["fast-agent", "codex", "claude", "claude-subagents"]
    )
    parser.add_argument("--cache", type=Path, default=Path("/work/.cache-agents"))
    parser.add_argument("--scratch", type=Path, default=Path("/srv/acp-corpus"))
    parser.add_argument("--out", type=Path, default=REPO / "tests" / "fixtures" / "corpus")
    parser.add_argument(
        "--proxy",
        default="",
        help="a proxy command line put in front of the agent's (e.g. 'acp-proxy --config"
        " strict.toml --'): the session then runs live through it, and the transcript is"
        " the client's side of the proxy",
    )
    opts = parser.parse_args(args)
    opts.out.mkdir(parents=True, exist_ok=True)
    failed = [
        a
        for a in opts.agents
        if not asyncio.run(record(a, opts.cache, opts.scratch, opts.out, shlex.split(opts.proxy)))
    ]
    for a in failed:
        print(f"{a}: the session did not complete (see {opts.scratch / a})", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
