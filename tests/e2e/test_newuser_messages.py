"""Issue 32 item 6: the messages a new user hits, each asserted as the exact sentence."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import pytest
import trio
from support.e2ekit import open_proxy, proxy_command, req

TIMEOUT = 30

SIGINT_AGENT = (
    "import os, signal, sys\nsignal.signal(signal.SIGINT, signal.SIG_DFL)\n"
    "sys.stdin.readline()\nos.kill(os.getpid(), signal.SIGINT)\n"
)


async def test_agent_killed_by_sigint_is_named_alike_in_log_audit_and_error(
    tmp_path: Path,
) -> None:
    """The log, the audit and the client's -32603 all say "killed by signal 2 (SIGINT)",
    never "exited with status 130"."""
    audit = tmp_path / "audit.jsonl"
    cmd = [
        *proxy_command("--log-level", "info", "--audit-log", str(audit)),
        sys.executable,
        "-c",
        SIGINT_AGENT,
    ]
    with trio.fail_after(TIMEOUT):
        async with open_proxy(cmd) as proxy:
            await proxy.send(req(0, "initialize", {"protocolVersion": 1}))
            answer = await proxy.out.recv_json()
            assert answer["error"]["code"] == -32603
            assert answer["error"]["data"]["reason"] == "agent was killed by signal 2 (SIGINT)"
            await proxy.wait()
            assert proxy.process.returncode == -signal.SIGINT
            err = (await proxy.all_stderr()).decode()
    assert "was killed by signal 2 (SIGINT)" in err
    assert "status 130" not in err
    text = audit.read_text()
    assert "agent was killed by signal 2 (SIGINT)" in text
    assert "status 130" not in text
    assert all(json.loads(line) for line in text.splitlines())


@pytest.mark.parametrize(
    ("shebang", "says"),
    [
        (
            "#!/nonexistent/bin/zsh",
            "starts with #!/nonexistent/bin/zsh, which does not exist: install that interpreter",
        ),
        (
            "#!/usr/bin/env -S no-such-node-xyz --flag",
            "starts with #!/usr/bin/env -S "
            "no-such-node-xyz --flag, and 'no-such-node-xyz' was not found on PATH: install it",
        ),
    ],
    ids=["absolute", "env"],
)
async def test_script_with_missing_interpreter_is_named_so(
    tmp_path: Path, shebang: str, says: str
) -> None:
    """A script whose #! interpreter is missing: exit 2 with the sentence naming the
    interpreter, not "No such file or directory" about the script."""
    script = tmp_path / "agent.sh"
    script.write_text(f"{shebang}\necho hi\n")
    script.chmod(0o755)
    with trio.fail_after(TIMEOUT):
        async with open_proxy([*proxy_command(), str(script)]) as proxy:
            await proxy.wait()
            err = (await proxy.all_stderr()).decode()
    assert proxy.process.returncode == 2
    assert (
        err == f"acp-proxy: agent command {str(script)!r} {says} or correct the script's #! line\n"
    )


async def test_sighup_without_config_logs_and_the_session_goes_on() -> None:
    """SIGHUP without --config: one warning that there is nothing to reload; the agent
    does not get it and the session keeps relaying."""
    agent = (
        "import json, signal, sys\n"
        "signal.signal(signal.SIGHUP, lambda *a: sys.stderr.write('agent: SIGHUP\\n'))\n"
        "for line in sys.stdin:\n"
        "    i = json.loads(line)['id']\n"
        "    print(json.dumps({'jsonrpc': '2.0', 'id': i, 'result': {}}), flush=True)\n"
    )
    cmd = [*proxy_command(), sys.executable, "-c", agent]
    with trio.fail_after(TIMEOUT):
        async with open_proxy(cmd) as proxy:
            for i in range(2):  # the first answer: the proxy is relaying, its handlers set
                await proxy.send(req(i, "_vendor/echo", {}))
                assert (await proxy.out.recv_json()) == {"jsonrpc": "2.0", "id": i, "result": {}}
                if i == 0:
                    proxy.process.send_signal(signal.SIGHUP)
                    await proxy.wait_for_stderr("nothing to reload")
            await proxy.close_stdin()
            await proxy.wait()
            err = (await proxy.all_stderr()).decode()
    assert err == (
        "acp-proxy: WARNING: SIGHUP: there is nothing to reload without --config, so the "
        "session goes on (start the proxy with --config FILE to reload its policy on SIGHUP)\n"
    )


async def test_otel_without_a_collector_shuts_down_once() -> None:
    """--otel with nothing listening: the export fails, but the providers are shut down
    once (no "shutdown can only be called once" from an atexit shutdown after ours)."""
    env = {
        **os.environ,
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1",
        "OTEL_EXPORTER_OTLP_TIMEOUT": "1",
    }
    agent = "import sys\nsys.stdin.readline()\n"
    with trio.fail_after(TIMEOUT):
        done = await trio.run_process(
            [*proxy_command("--otel"), sys.executable, "-c", agent],
            stdin=req(0, "initialize", {"protocolVersion": 1}),
            capture_stdout=True,
            capture_stderr=True,
            env=env,
            check=False,
        )
    assert done.returncode == 0
    assert json.loads(done.stdout)["error"]["data"]["reason"] == "agent exited with status 0"
    assert b"shutdown can only be called once" not in done.stderr
