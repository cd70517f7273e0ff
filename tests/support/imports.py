"""Reading a module's imports without running it (the purity and layering tests)."""

from __future__ import annotations

import ast
from pathlib import Path

import acp_proxy

PACKAGE_DIR = Path(acp_proxy.__file__).parent


def module_name(path: Path) -> str:
    """The dotted name of the ``acp_proxy`` module at ``path`` (``__init__`` names its package)."""
    parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def imported_modules(path: Path) -> set[str]:
    """Dotted names of every module ``path`` imports, at any nesting level.

    Includes imports under ``if TYPE_CHECKING:`` and inside functions, and
    ``__import__("name")`` calls. Relative imports are resolved against the
    module's own package. ``from X import Y`` yields ``X`` and ``X.Y`` (``Y``
    may be a submodule).
    """
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1])
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names if alias.name != "*")
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "__import__":
            names.update(a.value for a in node.args if isinstance(a, ast.Constant))
    return names


def module_file(name: str) -> Path | None:
    """The source file of an ``acp_proxy`` module, or None for outside modules and non-modules."""
    if name == "acp_proxy":
        return PACKAGE_DIR / "__init__.py"
    if not name.startswith("acp_proxy."):
        return None
    rel = Path(*name.split(".")[1:])
    for candidate in (PACKAGE_DIR / rel.with_suffix(".py"), PACKAGE_DIR / rel / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None
