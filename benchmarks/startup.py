"""Start-up the proxy adds (issue 29): time from launching to the ``initialize`` answer.

For each agent (the Python demo agent, ``python -m acp_proxy.demo.agent``;
the TypeScript SDK's agent under node, ``tests/interop/ts/agent.mjs``) the
agent is launched directly and as ``python -m acp_proxy -- AGENT``, runs
interleaved; from the spawn to the first line on stdout (the ``initialize``
response to the request written at once). The medians and their difference
(the start-up added) are reported.

The TypeScript SDK is read from ``.cache/ts-sdk`` (where the interop tests
install it with npm); it is installed there the same way when missing.

The package's bytecode is written first (:func:`write_bytecode`), as an
install has it: with ``PYTHONDONTWRITEBYTECODE`` set and no ``__pycache__``,
every launch would compile the whole of acp_proxy again (about +250 ms on the
2-CPU machine), which no installed proxy does. ``acp-proxy --version`` (the
interpreter and the command line's imports) is timed too.

The relay's hop is timed too (:func:`first_hop`): an agent that answers
``initialize`` half a second after reading it (the proxy is set up by then), then
writes three notifications 0.1 s apart, each carrying the time it was written
(``time.monotonic_ns``, one clock for every process); the client reads the time
each took to arrive, directly and through the proxy.

The clone's venv has an editable install, whose import finder ``site`` loads
at every interpreter start (about 50 M of the 88 M instructions of ``python -c
pass`` there), before the proxy can start its agent; an installed proxy has
none. So the same runs are made again in an installed layout
(:func:`installed_layout`): a venv with ``acp_proxy`` copied into its
site-packages, as ``pip install .`` or a wheel leaves it, the dependencies read
from this venv's site-packages through a ``.pth`` line (``installed`` in the
result).

``python -m benchmarks startup [RUNS]`` runs only this part.
"""

from __future__ import annotations

import compileall
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.sandbox_startup import time_to_initialize

__all__ = [
    "first_hop",
    "install_ts_sdk",
    "installed_layout",
    "main",
    "sdk_installed",
    "startup_added",
    "ts_sdk_dir",
    "version_ms",
    "write_bytecode",
]

ROOT = Path(__file__).resolve().parent.parent
TS_SDK_DIR = ROOT / ".cache" / "ts-sdk"
TS_SDK_VERSION = "2.4.0"
INIT = (
    b'{"jsonrpc":"2.0","id":1,"method":"initialize",'
    b'"params":{"protocolVersion":1,"clientCapabilities":{}}}\n'
)


def sdk_installed(sdk_dir: Path) -> bool:
    """True when ``sdk_dir/node_modules`` holds the TypeScript SDK at :data:`TS_SDK_VERSION`
    and zod."""
    pkg = sdk_dir / "node_modules" / "@agentclientprotocol" / "sdk" / "package.json"
    zod = sdk_dir / "node_modules" / "zod" / "package.json"
    return (
        pkg.exists() and zod.exists() and json.loads(pkg.read_text())["version"] == TS_SDK_VERSION
    )


def install_ts_sdk(npm: str, sdk_dir: Path = TS_SDK_DIR) -> str:
    """Installs the TypeScript SDK and zod into ``sdk_dir`` with ``npm`` (once; reused);
    returns npm's stderr when it failed, else ``""``."""
    if sdk_installed(sdk_dir):
        return ""
    sdk_dir.mkdir(parents=True, exist_ok=True)
    manifest = sdk_dir / "package.json"
    if not manifest.exists():
        manifest.write_text('{"name": "acp-proxy-ts-sdk-cache", "private": true}\n')
    argv = [npm, "install", "--prefix", str(sdk_dir), "--no-audit", "--no-fund"]
    argv += ["--loglevel=error", f"@agentclientprotocol/sdk@{TS_SDK_VERSION}", "zod@^4"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        return done.stderr[-2000:] or f"npm exited with status {done.returncode}"
    return "" if sdk_installed(sdk_dir) else "npm install did not leave the SDK in place"


def ts_sdk_dir() -> Path | None:
    """The directory whose ``node_modules`` holds the TypeScript SDK (installed with npm
    when missing), or ``None`` without node and npm or when the install fails."""
    npm = shutil.which("npm")
    if sdk_installed(TS_SDK_DIR):
        return TS_SDK_DIR
    if shutil.which("node") is None or npm is None:
        return None
    return None if install_ts_sdk(npm) else TS_SDK_DIR


def _agents() -> dict[str, list[str] | str]:
    node = shutil.which("node")
    sdk = ts_sdk_dir() if node is not None else None
    agents: dict[str, list[str] | str] = {
        "python": [sys.executable, "-m", "acp_proxy.demo.agent"],
    }
    if node is None or sdk is None:
        agents["node"] = "not measured: node, npm or the TypeScript SDK is missing"
    else:
        os.environ["ACP_TS_SDK_DIR"] = str(sdk)
        agents["node"] = [node, str(ROOT / "tests" / "interop" / "ts" / "agent.mjs")]
    return agents


def write_bytecode(root: Path = ROOT) -> bool:
    """Writes ``root/acp_proxy``'s missing or stale bytecode (what an install compiles);
    ``True`` when every module compiled. Written even under ``PYTHONDONTWRITEBYTECODE``."""
    return bool(compileall.compile_dir(str(root / "acp_proxy"), quiet=1))


def version_ms(runs: int, timeout_s: float) -> float:
    """Median wall time (ms) of ``python -m acp_proxy --version``."""
    times: list[float] = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "acp_proxy", "--version"],
            stdout=subprocess.DEVNULL,
            cwd=ROOT,
            timeout=timeout_s,
            check=True,
        )
        times.append(time.perf_counter() - started)
    return round(statistics.median(times) * 1e3, 1)


#: the agent of :func:`first_hop`: ``initialize`` answered after ``argv[1]`` seconds, then
#: three notifications; each line carries the time it was written (ns, monotonic clock)
HOP_AGENT = """
import sys, time
sys.stdin.readline()
time.sleep(float(sys.argv[1]))
line = '{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"t":%d}}'
for _ in range(4):
    sys.stdout.write(line % time.monotonic_ns() + "\\n")
    sys.stdout.flush()
    time.sleep(0.1)
    line = '{"jsonrpc":"2.0","method":"_x/t","params":{"t":%d}}'
sys.stdin.read()
"""


def _hops(argv: list[str], timeout_s: float) -> list[float]:
    """Milliseconds each of the hop agent's four lines took to reach the client."""
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT)
    assert proc.stdin is not None
    assert proc.stdout is not None
    proc.stdin.write(INIT)
    proc.stdin.flush()
    hops = []
    for _ in range(4):
        line = proc.stdout.readline()
        arrived = time.monotonic_ns()
        message = json.loads(line)
        hops.append((arrived - (message.get("result") or message["params"])["t"]) / 1e6)
    proc.stdin.close()
    proc.wait(timeout=timeout_s)
    return hops


def first_hop(runs: int, timeout_s: float) -> dict[str, Any]:
    """Medians (ms) of the time from the agent's write to the client's read, for the
    first line (the ``initialize`` answer) and the later ones, direct and through the
    proxy (set up before the agent writes)."""
    agent = [sys.executable, "-c", HOP_AGENT, "0.5"]
    out: dict[str, Any] = {"runs": runs}
    for name, argv in (
        ("direct", agent),
        ("proxy", [sys.executable, "-m", "acp_proxy", "--", *agent]),
    ):
        rows = [_hops(argv, timeout_s) for _ in range(runs)]
        out[f"{name}_first_ms"] = round(statistics.median(r[0] for r in rows), 3)
        out[f"{name}_later_ms"] = round(statistics.median(h for r in rows for h in r[1:]), 3)
    return out


def installed_layout(dest: Path) -> Path | None:
    """Makes a venv in ``dest`` where ``acp_proxy`` is installed as files (a copy of the
    clone's, bytecode written), its dependencies on this interpreter's site-packages
    (a ``.pth`` line each), and no editable finder; returns its ``python``, or ``None``
    when no venv can be made here."""
    import site

    made = subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(dest)],
        capture_output=True,
        check=False,
    )
    python = dest / "bin" / "python"
    if made.returncode != 0 or not python.exists():
        return None
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    target = Path(purelib)
    (target / "acp-bench-deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    shutil.copytree(
        ROOT / "acp_proxy", target / "acp_proxy", ignore=shutil.ignore_patterns("__pycache__")
    )
    compileall.compile_dir(str(target / "acp_proxy"), quiet=1)
    return python


def _added(
    agents: dict[str, list[str] | str], proxy: list[str], runs: int, cwd: str, timeout_s: float
) -> dict[str, Any]:
    """Each agent's medians (ms), direct and through ``proxy``, runs interleaved."""
    out: dict[str, Any] = {}
    for name, agent in agents.items():
        if isinstance(agent, str):
            out[name] = agent
            continue
        direct: list[float] = []
        through: list[float] = []
        for _ in range(runs):
            direct.append(time_to_initialize(agent, cwd, timeout_s, INIT))
            through.append(time_to_initialize([*proxy, *agent], cwd, timeout_s, INIT))
        d = statistics.median(direct) * 1e3
        p = statistics.median(through) * 1e3
        out[name] = {
            "runs": runs,
            "direct_ms": round(d, 1),
            "proxy_ms": round(p, 1),
            "added_ms": round(p - d, 1),
        }
    return out


def _installed_added(runs: int, timeout_s: float) -> dict[str, Any] | str:
    """:func:`_added` in the :func:`installed_layout` (from its own directory, without
    the clone on ``PYTHONPATH``)."""
    with tempfile.TemporaryDirectory(prefix="acp-bench-installed-") as tmp:
        python = installed_layout(Path(tmp))
        if python is None:
            return "not measured: no venv could be made"
        agents = _agents()
        agents["python"] = [str(python), "-m", "acp_proxy.demo.agent"]
        old = os.environ.pop("PYTHONPATH", None)
        try:
            return _added(agents, [str(python), "-m", "acp_proxy", "--"], runs, tmp, timeout_s)
        finally:
            if old is not None:
                os.environ["PYTHONPATH"] = old


def startup_added(runs: int, timeout_s: float) -> dict[str, Any]:
    """Medians (ms) of the time to the ``initialize`` answer, direct and through the proxy.

    Args:
        runs: runs of each variant, interleaved.
        timeout_s: longest wait for one process to exit.

    Returns:
        ``{agent: {"runs", "direct_ms", "proxy_ms", "added_ms"}}`` (or why not measured),
        ``"installed"``: the same in the :func:`installed_layout`, ``"version_ms"``,
        ``"first_hop"``.
    """
    proxy = [sys.executable, "-m", "acp_proxy", "--"]
    out: dict[str, Any] = {"bytecode_written": write_bytecode()}
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(ROOT) + (os.pathsep + old if old else "")
    try:
        out.update(_added(_agents(), proxy, runs, str(ROOT), timeout_s))
        out["installed"] = _installed_added(runs, timeout_s)
        out["version_ms"] = version_ms(runs, timeout_s)
        out["first_hop"] = first_hop(runs, timeout_s)
    finally:
        if old is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = old
    return out


def main(argv: list[str]) -> int:
    """``python -m benchmarks startup [RUNS]``: the start-up rows and their JSON, with the
    load average before and after; returns the exit status."""
    if len(argv) > 1 or (argv and not argv[0].isdigit()):
        print("usage: python -m benchmarks startup [RUNS]", file=sys.stderr)
        return 2
    load = round(os.getloadavg()[0], 2)
    res: dict[str, Any] = {"startup": startup_added(int(argv[0]) if argv else 9, 30.0)}
    res["load_avg_1m"] = {"start": load, "end": round(os.getloadavg()[0], 2)}
    from benchmarks.report import startup_lines

    print("\n".join(startup_lines(res)))
    hop = res["startup"]["first_hop"]
    print(
        f"agent line to client, ms (median): direct first {hop['direct_first_ms']} / later "
        f"{hop['direct_later_ms']}; proxy first {hop['proxy_first_ms']} / later "
        f"{hop['proxy_later_ms']}"
    )
    print(json.dumps(res, separators=(", ", ": ")), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
