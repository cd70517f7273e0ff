"""The sans-IO core stays free of I/O libraries (docs/design.md section 1)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.imports import PACKAGE_DIR, imported_modules, module_file

import acp_proxy.core

CORE_DIR = Path(acp_proxy.core.__file__).parent
# Anywhere the core's imports lead: no event loop, sockets or processes.
FORBIDDEN = {"trio", "trio_websocket", "socket", "subprocess", "asyncio", "selectors"}
# In the core itself, no OS access either.
FORBIDDEN_IN_CORE = FORBIDDEN | {"os", "shutil", "pathlib", "io"}
CORE_FILES = sorted(CORE_DIR.rglob("*.py"))


def test_scanner_sees_imports() -> None:
    """The scanner finds plain, from- and nested imports (so an empty result means something)."""
    found = imported_modules(CORE_DIR / "engine" / "proxy.py")
    assert "acp_proxy.config" in found
    assert "acp_proxy.core.wire.jsonrpc" in found


@pytest.mark.parametrize("path", CORE_FILES, ids=lambda p: str(p.relative_to(CORE_DIR)))
def test_core_module_imports_no_io(path: Path) -> None:
    """No core module imports trio, sockets, subprocess or OS access."""
    bad = {m for m in imported_modules(path) if m.split(".")[0] in FORBIDDEN_IN_CORE}
    assert not bad, f"{path.relative_to(CORE_DIR)} imports {sorted(bad)}"


def test_nothing_the_core_imports_pulls_in_io() -> None:
    """Following acp_proxy imports from the core never reaches trio, sockets or subprocess."""
    seen: set[Path] = set()
    todo = list(CORE_FILES)
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for name in imported_modules(path):
            assert name.split(".")[0] not in FORBIDDEN, f"{path} imports {name}"
            target = module_file(name)
            if target is not None and target != PACKAGE_DIR / "__init__.py":
                todo.append(target)
    assert PACKAGE_DIR / "config" / "model.py" in seen
