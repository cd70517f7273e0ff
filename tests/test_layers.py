"""The package tree shows the layers, and every import points down (docs/design.md section 1).

From the top: ``cli`` and ``__main__``; ``demo``; ``shell`` (trio); the core
(``core/chain.py`` over ``core/engine/``, over ``core/session/``, over
``core/wire/``); ``config``; ``errors``. A module may import its own layer or
any layer below it. ``tests/core/test_core_imports.py`` checks, in addition,
that nothing the core imports reaches I/O.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.imports import PACKAGE_DIR, imported_modules, module_name

#: What may stand at the top of the package: the entry points, the errors and the layers.
TOP_FILES = {"__init__.py", "__main__.py", "cli.py", "errors.py", "py.typed"}
LAYERS = {"config", "core", "demo", "shell"}
CORE_PARTS = {"wire", "session", "engine"}

_ABOVE_CORE = ("acp_proxy.shell", "acp_proxy.demo", "acp_proxy.cli", "acp_proxy.__main__")

#: Modules under a prefix (the module itself or below it) -> what they must not import.
RULES: dict[str, tuple[str, ...]] = {
    # the package never reaches the benchmarks or the tests' helpers
    "acp_proxy": ("benchmarks", "tests", "support"),
    "acp_proxy.errors": ("acp_proxy",),
    "acp_proxy.config": ("acp_proxy.core", *_ABOVE_CORE),
    "acp_proxy.core": _ABOVE_CORE,
    "acp_proxy.core.engine": ("acp_proxy.core.chain",),
    "acp_proxy.core.session": ("acp_proxy.core.engine", "acp_proxy.core.chain"),
    "acp_proxy.core.wire": (
        "acp_proxy.core.session",
        "acp_proxy.core.engine",
        "acp_proxy.core.chain",
    ),
    "acp_proxy.shell": ("acp_proxy.demo", "acp_proxy.cli", "acp_proxy.__main__"),
    "acp_proxy.demo": ("acp_proxy.cli", "acp_proxy.__main__"),
}

PACKAGE_FILES = sorted(PACKAGE_DIR.rglob("*.py"))


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def violations(module: str, imported: set[str]) -> list[str]:
    """``"IMPORTED (not below PREFIX)"`` for each import of ``module`` that points up."""
    return sorted(
        f"{name} (not below {prefix})"
        for prefix, forbidden in RULES.items()
        if _under(module, prefix)
        for name in imported
        if any(_under(name, f) for f in forbidden)
    )


def test_the_rules_catch_an_upward_import() -> None:
    """A wire module importing the engine, or config importing the core, is reported."""
    assert violations("acp_proxy.core.wire.framing", {"acp_proxy.core.engine"})
    assert violations("acp_proxy.config.model", {"acp_proxy.core.wire.jsonrpc.parse"})
    assert violations("acp_proxy.core.chain", {"acp_proxy.shell.routing"})
    assert not violations("acp_proxy.core.chain", {"acp_proxy.core.engine", "acp_proxy.config"})


def test_the_scanner_sees_the_package_imports() -> None:
    """Known imports are found (an empty result would otherwise pass every rule)."""
    assert "acp_proxy.core.engine" in imported_modules(PACKAGE_DIR / "core" / "chain.py")
    policy = imported_modules(PACKAGE_DIR / "core" / "session" / "policy.py")
    assert "acp_proxy.config" in policy
    listen = imported_modules(PACKAGE_DIR / "shell" / "topology" / "listen.py")
    assert "acp_proxy.shell.topology.ws_upgrade" in listen


@pytest.mark.parametrize("path", PACKAGE_FILES, ids=lambda p: str(p.relative_to(PACKAGE_DIR)))
def test_every_import_points_down(path: Path) -> None:
    """No module imports a layer above its own."""
    module = module_name(path)
    bad = violations(module, imported_modules(path))
    assert not bad, f"{module} imports {bad}"


def test_package_top_level_holds_only_the_entry_points_and_the_layers() -> None:
    """``acp_proxy/`` holds __init__, __main__, cli, errors, py.typed and the layer folders."""
    entries = {p.name for p in PACKAGE_DIR.iterdir() if p.name != "__pycache__"}
    assert entries == TOP_FILES | LAYERS
    assert all((PACKAGE_DIR / layer / "__init__.py").is_file() for layer in LAYERS)


def test_core_is_made_of_wire_session_and_engine() -> None:
    """The core's folders are the three parts the docs name."""
    core = PACKAGE_DIR / "core"
    parts = {p.name for p in core.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert parts == CORE_PARTS


def test_the_core_reads_the_config_model_without_its_toml_spelling() -> None:
    """``config/`` is a leaf the core imports as data: loading the engine pulls in neither
    the TOML loading and dumping (``config.io``) nor a TOML library."""
    import subprocess
    import sys

    code = (
        "import sys, acp_proxy.core.engine, acp_proxy.core.chain; "
        "print(sorted(m for m in ('acp_proxy.config.io', 'acp_proxy.config.files', "
        "'tomllib', 'tomli_w') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"
