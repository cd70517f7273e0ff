"""Every reference to a document resolves (docs/design.md, docs/protocol.md).

A docstring, comment or README line that names a ``.md`` document must name
one that exists in the repository, and a ``docs/x.md section N`` reference
(``sections 3 and 4``; optionally followed by a quoted subsection title,
``section 3, "Config"``) must name a section that ``docs/x.md`` has. One
failing test lists every offending place as ``path:line: reference: problem``.

This file is left out of the scan: its own references are fixtures.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: What is scanned, relative to the repository root (directories recursively).
SCANNED = ("acp_proxy", "benchmarks", "tests", "docs", "config", "README.md")
SUFFIXES = {".py", ".md", ".toml"}

#: A path ending in ``.md``, then what may follow it: ``section 3``,
#: ``sections 1 and 6``, ``section 3, "Config"`` or just ``"Title"``. Between
#: the name and the section, blanks and comment markers (``#``, ``#:``) may
#: stand, so a reference wrapped over two comment lines is still read whole.
_REF = re.compile(
    r"""(?<![\w./-])(?P<doc>(?:[\w.-]+/)*[\w.-]+\.md)\b
    (?:
        [\s#:]*\bsections?\s+(?P<nums>\d+(?:\s*(?:,|and|&)\s*\d+)*)
        (?:,\s*"(?P<title>[^"\n]+)")?
      |
        [\s#:]*"(?P<bare_title>[A-Z][^"\n]*)"
    )?""",
    re.VERBOSE,
)
_HEADING = re.compile(r"^(#{2,6})\s+(.*?)\s*$", re.MULTILINE)
_NUMBERED = re.compile(r"(\d+)\.\s+(.*)")


def sections(text: str) -> dict[int, list[str]]:
    """Section number -> the titles in it (its own, then its subsections').

    A section is a ``## N. Title`` heading; its subsections are the deeper
    headings up to the next ``##``.
    """
    out: dict[int, list[str]] = {}
    current: int | None = None
    for match in _HEADING.finditer(text):
        level, title = len(match.group(1)), match.group(2)
        if level == 2:
            numbered = _NUMBERED.fullmatch(title)
            current = int(numbered.group(1)) if numbered else None
            if numbered:
                out[int(numbered.group(1))] = [numbered.group(2)]
        elif current is not None:
            out[current].append(title)
    return out


def _titled(titles: list[str], title: str) -> bool:
    """True if some heading starts with ``title`` (``"Config"`` names ``Config (TOML)``)."""
    return any(t.startswith(title) for t in titles)


def problems(text: str, root: Path = ROOT) -> Iterator[tuple[int, str, str]]:
    """``(line, reference, problem)`` for each reference in ``text`` that does not resolve.

    A document is looked up relative to ``root``.
    """
    for match in _REF.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        ref = " ".join(match.group(0).replace("#:", " ").replace("#", " ").split())
        doc = root / match.group("doc")
        if not doc.is_file():
            yield line, ref, f"no document {match.group('doc')} in the repository"
            continue
        have = sections(doc.read_text(encoding="utf-8"))
        nums = [int(n) for n in re.findall(r"\d+", match.group("nums") or "")]
        for num in nums:
            if num not in have:
                yield line, ref, f"{match.group('doc')} has no section {num}"
        title = match.group("title")
        known = all(n in have for n in nums)
        if title and known and not any(_titled(have[n], title) for n in nums):
            yield line, ref, f'no heading "{title}" in that section'
        bare = match.group("bare_title")
        if bare and not any(_titled(titles, bare) for titles in have.values()):
            yield line, ref, f'{match.group("doc")} has no heading "{bare}"'


def scanned_files() -> list[Path]:
    """The files whose references are checked (this test file excepted)."""
    files: list[Path] = []
    for name in SCANNED:
        path = ROOT / name
        if path.is_file():
            files.append(path)
        else:
            files += [p for p in path.rglob("*") if p.suffix in SUFFIXES and p.is_file()]
    here = Path(__file__).resolve()
    return sorted(p for p in files if p.resolve() != here and "__pycache__" not in p.parts)


# --- the checker itself ------------------------------------------------------


def _fixture_root(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "guide.md").write_text(
        "# Guide\n\n## 1. The wire\n\ntext\n\n## 2. Contracts\n\n### Config (TOML)\n\n"
        "### Audit log\n\n## Appendix\n\n### Not numbered\n",
        encoding="utf-8",
    )
    return tmp_path


def test_sections_are_read_with_their_subsections(tmp_path: Path) -> None:
    """``## N. Title`` opens section N; deeper headings belong to it."""
    text = (_fixture_root(tmp_path) / "docs" / "guide.md").read_text(encoding="utf-8")
    assert sections(text) == {1: ["The wire"], 2: ["Contracts", "Config (TOML)", "Audit log"]}


def test_good_references_pass(tmp_path: Path) -> None:
    """Existing documents, sections and headings give no problem, whatever the spelling."""
    root = _fixture_root(tmp_path)
    text = (
        '"""The wire (docs/guide.md section 1).\n'
        'See docs/guide.md sections 1 and 2; docs/guide.md section 2, "Config".\n'
        "#: a comment naming docs/guide.md\n#: section 2, the contracts.\n"
        'docs/guide.md "Audit log"; a bare docs/guide.md.\n'
    )
    assert list(problems(text, root)) == []


def test_bad_references_are_each_reported_with_their_line(tmp_path: Path) -> None:
    """A missing document, section or heading is a problem at the line it starts on."""
    root = _fixture_root(tmp_path)
    text = (
        "first line\n"
        '"""Framing (UPSTREAM.md section 1).\n'
        "docs/guide.md section 3 and docs/guide.md sections 1 and 7.\n"
        'docs/guide.md section 1, "Config" and docs/guide.md "Enforcement".\n'
        "#: wrapped docs/guide.md\n#: section 9 here\n"
        "docs/other.md\n"
    )
    assert list(problems(text, root)) == [
        (2, "UPSTREAM.md section 1", "no document UPSTREAM.md in the repository"),
        (3, "docs/guide.md section 3", "docs/guide.md has no section 3"),
        (3, "docs/guide.md sections 1 and 7", "docs/guide.md has no section 7"),
        (4, 'docs/guide.md section 1, "Config"', 'no heading "Config" in that section'),
        (4, 'docs/guide.md "Enforcement"', 'docs/guide.md has no heading "Enforcement"'),
        (5, "docs/guide.md section 9", "docs/guide.md has no section 9"),
        (7, "docs/other.md", "no document docs/other.md in the repository"),
    ]


def test_the_scan_reaches_the_package_benchmarks_tests_and_readme() -> None:
    """The scan covers the places the docs are cited from, and finds citations there
    (an empty scan would pass anything)."""
    files = {p.relative_to(ROOT).as_posix() for p in scanned_files()}
    assert {"README.md", "acp_proxy/core/wire/guard.py", "tests/test_layers.py"} <= files
    assert any(f.startswith("benchmarks/") for f in files)
    assert "tests/test_docs.py" not in files
    guard = (ROOT / "acp_proxy" / "core" / "wire" / "guard.py").read_text(encoding="utf-8")
    assert [m.group(0) for m in _REF.finditer(guard.splitlines()[0])] == [
        "docs/design.md section 4",
        "docs/protocol.md section 8",
    ]


# --- the repository ------------------------------------------------------------


def test_every_document_reference_resolves() -> None:
    """No file cites a document that is not in the repository, or a section it lacks."""
    found = [
        f"{path.relative_to(ROOT).as_posix()}:{line}: {ref}: {problem}"
        for path in scanned_files()
        for line, ref, problem in problems(path.read_text(encoding="utf-8"))
    ]
    assert not found, f"{len(found)} unresolved document references:\n" + "\n".join(found)


# --- what the README says the project needs ----------------------------------------


def _readme_paragraph(containing: str) -> str:
    (para,) = [
        " ".join(p.split())
        for p in (ROOT / "README.md").read_text(encoding="utf-8").split("\n\n")
        if containing in p
    ]
    return para


def test_the_readme_names_every_runtime_dependency() -> None:
    """The wheel's install note names each of pyproject.toml's dependencies."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    names = [re.split(r"[<>=!~ \[;]", d, maxsplit=1)[0] for d in project["dependencies"]]
    assert len(names) >= 8
    note = _readme_paragraph("runtime dependencies")
    assert [n for n in names if n not in note] == []


def test_the_readme_says_what_the_typescript_interop_tests_need() -> None:
    """node, npm, the SDK version the tests install, and that they fail offline."""
    # the interop tests install the SDK through the benchmark's helper (one pin)
    installer = (ROOT / "benchmarks" / "startup.py").read_text(encoding="utf-8")
    version = re.search(r'TS_SDK_VERSION = "([^"]+)"', installer)
    assert version is not None
    note = _readme_paragraph(".cache/ts-sdk")
    assert f"`@agentclientprotocol/sdk` {version.group(1)}" in note
    assert "node" in note
    assert "npm registry" in note
    assert "they fail" in note


def test_the_otel_install_commands_name_the_otel_extra() -> None:
    """Issue 32 item 1: the README's pipx inject line installs exactly the otel extra."""
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]["otel"]
    readme = (ROOT / "README.md").read_text()
    line = next(ln for ln in readme.splitlines() if ln.startswith("pipx inject acp-proxy "))
    assert sorted(re.findall(r"'([^']+)'", line)) == sorted(extra)
    assert "pip install '.[otel]'" in readme
    assert "file:///path/to/clone" in readme
