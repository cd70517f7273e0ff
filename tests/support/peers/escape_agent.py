"""An ACP agent that tries, with its own code, to escape what the sandbox confines.

Usage: ``escape_agent.py PLAN.json``. The plan names the paths and the port::

    {"home": ..., "workspace": ..., "outside": ..., "audit": ..., "config": ...,
     "port": N, "marker": "..."}

On ``initialize`` it makes every attempt and answers with
``result._meta.attempts``: attempt name -> ``"ok"`` or the error it met. The
daemon attempt double-forks a ``sleep`` whose command line carries
``marker`` (the test looks for it after the proxy has exited). Then it answers
every other request with an empty result until stdin ends.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import subprocess
import sys
import urllib.parse
import urllib.request
from collections.abc import Callable


def _read(path: str) -> None:
    with open(path, "rb") as f:
        f.read()


def _write(path: str, mode: str = "w") -> None:
    with open(path, mode) as f:
        f.write("escaped\n")


def _connect(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=3) as s:
        s.sendall(b"GET /direct HTTP/1.0\r\n\r\n")
        if not s.recv(100):
            raise OSError("no answer")


def _via_proxy_vars(port: int) -> None:
    """A GET for the local server sent to ``$HTTP_PROXY`` itself (its credentials
    included), ignoring ``no_proxy``; straight to the server when no proxy is set."""
    proxy = os.environ.get("HTTP_PROXY") or os.environ.get("http_proxy")
    if not proxy:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/proxied", timeout=5) as answer:
            answer.read()
        return
    url = urllib.parse.urlsplit(proxy)
    user, password = (urllib.parse.unquote(v or "") for v in (url.username, url.password))
    auth = base64.b64encode(f"{user}:{password}".encode()).decode()
    status = ""
    # srt 0.0.83's proxy has answered a request with the right credentials 407 now
    # and then on a loaded machine (before any upstream connection): asked again, as
    # a client would; a refusal of the destination (403) or any other answer stands
    for _ in range(3):
        with socket.create_connection((url.hostname or "localhost", url.port or 80), 5) as s:
            s.sendall(
                f"GET http://127.0.0.1:{port}/proxied HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                f"Proxy-Authorization: Basic {auth}\r\nConnection: close\r\n\r\n".encode()
            )
            status = s.recv(4096).split(b"\r\n", 1)[0].decode(errors="replace")
        if " 407 " not in status:
            break
    if not status.startswith("HTTP/1.1 2") and not status.startswith("HTTP/1.0 2"):
        raise OSError(f"the proxy answered {status!r}")


def _daemon(marker: str) -> None:
    """Double fork: the grandchild is in a new session, out of the agent's group."""
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if os.fork() == 0:
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(devnull, fd)
            os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(60)", marker])
        os._exit(0)
    os.waitpid(pid, 0)


def _workspace(workspace: str) -> None:
    path = os.path.join(workspace, "notes.txt")
    _write(path)
    with open(path) as f:
        if f.read() != "escaped\n":
            raise OSError("read back something else")


def attempts(plan: dict[str, object]) -> dict[str, Callable[[], None]]:
    home, ws, out = str(plan["home"]), str(plan["workspace"]), str(plan["outside"])
    audit, config, port = str(plan["audit"]), str(plan["config"]), int(str(plan["port"]))
    return {
        "read_ssh_key": lambda: _read(f"{home}/.ssh/id_ed25519"),
        "read_aws_credentials": lambda: _read(f"{home}/.aws/credentials"),
        "read_netrc": lambda: _read(f"{home}/.netrc"),
        "write_outside": lambda: _write(f"{out}/new.txt"),
        "append_outside": lambda: _write(f"{out}/existing.txt", "a"),
        "delete_outside": lambda: os.unlink(f"{out}/victim.txt"),
        "write_home_bashrc": lambda: _write(f"{home}/.bashrc", "a"),
        "read_audit_log": lambda: _read(audit),
        "truncate_audit_log": lambda: os.truncate(audit, 0),
        "append_audit_log": lambda: _write(audit, "a"),
        "rename_audit_log": lambda: (
            os.rename(audit, audit + ".moved"),
            os.rename(audit + ".moved", audit),
        ),
        "delete_audit_log": lambda: os.unlink(audit),
        "read_config": lambda: _read(config),
        "write_config": lambda: _write(config),
        "delete_config": lambda: os.unlink(config),
        "connect_direct": lambda: _connect(port),
        "connect_via_proxy_vars": lambda: _via_proxy_vars(port),
        "child_process_connect": lambda: subprocess.run(
            [
                sys.executable,
                "-c",
                f"import socket; socket.create_connection(('127.0.0.1', {port}), 3)",
            ],
            check=True,
            capture_output=True,
            timeout=20,
        ),
        "daemon": lambda: _daemon(str(plan["marker"])),
        "workspace_read_write": lambda: _workspace(ws),
    }


def run(plan: dict[str, object]) -> dict[str, str]:
    report: dict[str, str] = {}
    for name, attempt in attempts(plan).items():
        try:
            attempt()
        except Exception as exc:  # every failure is a result
            report[name] = f"{type(exc).__name__}: {exc}"
        else:
            report[name] = "ok"
    return report


def main() -> None:
    with open(sys.argv[1]) as f:
        plan = json.load(f)
    for line in sys.stdin:
        msg = json.loads(line)
        if "id" not in msg or "method" not in msg:
            continue
        result: dict[str, object] = {}
        if msg["method"] == "initialize":
            result = {
                "protocolVersion": 1,
                "agentCapabilities": {},
                "_meta": {"attempts": run(plan)},
            }
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
