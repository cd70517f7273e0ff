"""The package installs from a built wheel and runs without the repository (issue 20).

The wheel is built from a copy of the sources (never in the working tree)
without build isolation, so no index is needed; it is installed, not
editable, into a fresh venv without pip. The venv reaches the dependencies
already installed in the test environment through a ``.pth`` line (a plain
path: the editable finder of the test environment is not loaded), and runs
from a directory outside the repository.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from support.srt import srt_engine

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("pyproject.toml", "setup.py", "README.md", "LICENSE", "acp_proxy")


def _copy_sources(dest: Path) -> None:
    for name in SOURCES:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
        else:
            shutil.copy2(src, dest / name)


def _check(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=180, check=False)
    assert r.returncode == 0, f"{cmd}: {r.stdout}\n{r.stderr}"
    return r


def _install(top: Path, env: dict[str, str] | None = None) -> Path:
    """The ``bin`` directory of a fresh venv with acp-proxy installed from a wheel
    built from a copy of the sources (``env``: the build's environment)."""
    src, wheels, venv = top / "src", top / "wheels", top / "venv"
    src.mkdir()
    _copy_sources(src)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    build = [*pip, "wheel", ".", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels)]
    r = subprocess.run(build, cwd=src, env=env, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, f"{build}: {r.stdout}\n{r.stderr}"
    [wheel] = wheels.glob("acp_proxy-*.whl")
    _check([sys.executable, "-m", "venv", "--without-pip", str(venv)], top)
    python = venv / "bin" / "python"
    _check([*pip, "--python", str(python), "install", "--no-deps", "--no-index", str(wheel)], top)
    site = _check(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], top
    )
    deps = sysconfig.get_path("purelib")  # where trio, attrs, ... are in this environment
    (Path(site.stdout.strip()) / "acp_proxy_test_deps.pth").write_text(deps + "\n")
    return venv / "bin"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ``bin`` directory of a fresh venv with acp-proxy installed from its wheel."""
    return _install(tmp_path_factory.mktemp("install"))


@pytest.fixture(scope="module")
def installed_without_a_compiler(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """As :func:`installed`, built where no C compiler runs (``CC`` fails at once)."""
    false = shutil.which("false")
    assert false is not None
    env = dict(os.environ, CC=false, LDSHARED=false)
    return _install(tmp_path_factory.mktemp("install-no-cc"), env)


@pytest.fixture(scope="module")
def installed_pure(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """As :func:`installed`, built with ``ACP_PROXY_PURE_PYTHON=1`` (the README's
    wheel for any Python 3.11+ and platform)."""
    env = dict(os.environ, ACP_PROXY_PURE_PYTHON="1")
    return _install(tmp_path_factory.mktemp("install-pure"), env)


def _wheel_names(bin_dir: Path) -> set[str]:
    wheel = next((bin_dir.parent.parent / "wheels").glob("*.whl"))
    listing = subprocess.run(
        [sys.executable, "-m", "zipfile", "-l", str(wheel)], capture_output=True, text=True
    )
    return set(listing.stdout.split())


_SCANNER = "import acp_proxy.core.wire.runs as r; print(r.fast_stretch is not None)"


def test_the_wheel_holds_the_compiled_scanner(installed: Path) -> None:
    """Built with a compiler (as here), the wheel carries the C run path, and it runs."""
    names = _wheel_names(installed)
    assert any(n.startswith("acp_proxy/core/wire/_chunkscan.") and n.endswith(".so") for n in names)
    assert "acp_proxy/core/wire/_chunkscan.c" in names  # its source: the build is checked
    r = _check([str(installed / "python"), "-c", _SCANNER], installed)
    assert r.stdout.strip() == "True"


def test_without_a_compiler_the_install_works_on_pure_python(
    installed_without_a_compiler: Path, tmp_path: Path
) -> None:
    """No compiler: the build goes on without the extension, and the proxy runs the
    pure-Python run path (the demo's every check passes)."""
    bin_dir = installed_without_a_compiler
    assert not any(n.endswith((".so", ".pyd")) for n in _wheel_names(bin_dir))
    r = _check([str(bin_dir / "python"), "-c", _SCANNER], tmp_path)
    assert r.stdout.strip() == "False"
    demo = _check([str(bin_dir / "acp-proxy"), "demo"], tmp_path)
    assert "PASS" in demo.stdout
    assert "[FAIL]" not in demo.stdout


def test_the_wheel_holds_the_configs_and_the_license(installed: Path) -> None:
    names = _wheel_names(installed)
    assert {"acp_proxy/config/default.toml", "acp_proxy/config/strict.toml"} <= names
    examples = {
        "acp_proxy/config/examples/budgets.toml",
        "acp_proxy/config/examples/permissions.toml",
    }
    assert examples <= names
    assert any(n.endswith("/LICENSE") for n in names)
    assert not any(n.startswith(("tests/", "benchmarks/")) for n in names)


def test_installed_package_is_the_wheel_not_the_checkout(installed: Path) -> None:
    r = _check(
        [str(installed / "python"), "-c", "import acp_proxy; print(acp_proxy.__file__)"], installed
    )
    assert Path(r.stdout.strip()).is_relative_to(installed.parent)


def test_installed_demo_runs(installed: Path, tmp_path: Path) -> None:
    r = _check([str(installed / "acp-proxy"), "demo"], tmp_path)
    assert "MUTATION REJECTED" in r.stdout
    assert "PASS" in r.stdout
    assert "[FAIL]" not in r.stdout


def test_installed_config_budgets_prints_the_example(installed: Path, tmp_path: Path) -> None:
    """The budgets example is reachable from the wheel, not only from a clone."""
    r = _check([str(installed / "acp-proxy"), "config", "budgets"], tmp_path)
    assert r.stdout == (ROOT / "config" / "examples" / "budgets.toml").read_text()


def test_installed_config_strict_prints_the_shipped_file(installed: Path, tmp_path: Path) -> None:
    r = _check([str(installed / "acp-proxy"), "config", "strict"], tmp_path)
    assert r.stdout == (ROOT / "config" / "strict.toml").read_text()
    (tmp_path / "strict.toml").write_text(r.stdout)
    # strict turns the sandbox on: check-config runs the engine (srt on PATH) once ...
    env = dict(os.environ, PATH=f"{srt_engine().parent}{os.pathsep}{os.environ['PATH']}")
    cmd = [str(installed / "acp-proxy"), "check-config", "strict.toml"]
    checked = subprocess.run(
        cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180
    )
    assert checked.returncode == 0, checked.stderr
    assert 'on_expire = "drop"' in checked.stdout
    assert "# sandbox: " in checked.stdout
    # ... and without it says, in one sentence, that the sandbox cannot start (fail closed)
    missing = subprocess.run(
        cmd, cwd=tmp_path, env=dict(env, PATH="/nonexistent"), capture_output=True, text=True
    )
    assert missing.returncode == 2
    assert missing.stderr.startswith("acp-proxy: the sandbox cannot start: the sandbox engine")


def _runtime_requirements(name: str, seen: set[str]) -> set[str]:
    """Normalized names of every distribution ``name`` needs at run time, recursively."""
    from importlib import metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    for line in metadata.requires(name) or []:
        req = Requirement(line)
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        dep = canonicalize_name(req.name)
        if dep not in seen:
            seen.add(dep)
            _runtime_requirements(dep, seen)
    return seen


def test_the_image_pins_every_runtime_dependency() -> None:
    """docker/constraints.txt pins (==) every runtime dependency; the Dockerfile uses it."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    pinned: dict[str, str] = {}
    for line in (ROOT / "docker" / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            req = Requirement(line)
            [spec] = req.specifier
            assert spec.operator == "==", line
            pinned[canonicalize_name(req.name)] = spec.version
    assert _runtime_requirements("acp-proxy", set()) <= set(pinned)
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "pip install -c /src/constraints.txt /wheels/acp_proxy-" in dockerfile
    assert "COPY pyproject.toml setup.py " in dockerfile  # the wheel is built with setup.py


def test_a_pure_python_build_gives_a_wheel_for_any_python(
    installed_pure: Path, tmp_path: Path
) -> None:
    """``ACP_PROXY_PURE_PYTHON=1`` at build: no extension, a ``py3-none-any`` wheel,
    the pure-Python run path (the compiler is there: it is not used)."""
    [wheel] = (installed_pure.parent.parent / "wheels").glob("*.whl")
    assert wheel.name == "acp_proxy-0.1.0-py3-none-any.whl"
    r = _check([str(installed_pure / "python"), "-c", _SCANNER], tmp_path)
    assert r.stdout.strip() == "False"
    demo = _check([str(installed_pure / "acp-proxy"), "demo"], tmp_path)
    assert "PASS" in demo.stdout
