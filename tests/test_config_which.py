"""``config.files.which``: the agent command's lookup without :mod:`shutil` (issue 29)
finds what ``shutil.which`` finds."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from acp_proxy.config.files import which


def _tree(tmp_path: Path) -> dict[str, str]:
    """Directories for PATH: an executable, a plain file, a directory, a link, of one name."""
    made = {}
    for name in ("a", "b", "c", "d"):
        (tmp_path / name).mkdir()
        made[name] = str(tmp_path / name)
    (tmp_path / "a" / "tool").write_text("")  # not executable
    (tmp_path / "b" / "tool").mkdir()  # a directory
    (tmp_path / "c" / "tool").write_text("#!/bin/sh\n")
    (tmp_path / "c" / "tool").chmod(0o755)
    (tmp_path / "d" / "tool").symlink_to(tmp_path / "c" / "tool")
    (tmp_path / "d" / "dangling").symlink_to(tmp_path / "nowhere")
    (tmp_path / "c" / "other").write_text("")
    (tmp_path / "c" / "other").chmod(0o755)
    return made


PATHS = [
    "{a}:{b}:{c}",
    "{a}:{b}",
    "{d}:{c}",
    "{c}:{c}",
    "",
    ":",
    "{a}::{c}",
    "{b}/:{c}/",
    "relative/nowhere:{c}",
    None,
]
COMMANDS = ["tool", "other", "dangling", "missing", "{c}/tool", "{a}/tool", "./tool", "{b}/tool"]


@pytest.mark.parametrize("path", PATHS)
def test_which_finds_what_shutil_finds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str | None
) -> None:
    """Same answer for every command on every PATH (unset, empty, ``:``, repeated
    entries, trailing slashes; not executable, a directory, a link, a dangling link)."""
    dirs = _tree(tmp_path)
    monkeypatch.chdir(dirs["c"])
    if path is None:
        monkeypatch.delenv("PATH", raising=False)
    else:
        monkeypatch.setenv("PATH", path.format(**dirs))
    for command in COMMANDS:
        name = command.format(**dirs)
        assert which(name) == shutil.which(name), (path, name)
