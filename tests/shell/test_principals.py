"""--tokens-file, the authenticator and the generated token (issue 26)."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

import pytest

from acp_proxy.config import Config, ListenConfig
from acp_proxy.errors import StartupError
from acp_proxy.shell.topology.principals import (
    Authenticator,
    generate_token,
    listen_token,
    read_tokens_file,
    runtime_dir,
)


def _file(path: Path, text: str, mode: int = 0o600) -> str:
    path.write_text(text)
    path.chmod(mode)
    return str(path)


def _auth(token: str) -> list[tuple[bytes, bytes]]:
    return [(b"authorization", f"Bearer {token}".encode())]


def test_names_and_tokens_or_their_digests(tmp_path: Path) -> None:
    digest = hashlib.sha256(b"tok-b").hexdigest()
    path = _file(tmp_path / "t", f"# comment\n\nalice tok-a\n  bob sha256:{digest.upper()}  \n")
    principals = read_tokens_file(path)
    assert sorted(principals) == ["alice", "bob"]
    auth = Authenticator(principals=principals)
    assert auth.check(_auth("tok-a")) == (True, "alice")
    assert auth.check(_auth("tok-b")) == (True, "bob")
    assert auth.check(_auth(f"sha256:{digest}")) == (False, None)  # the digest is not the token
    assert auth.check(_auth("tok-")) == (False, None)
    assert auth.check([]) == (False, None)
    assert auth.check([*_auth("tok-a"), *_auth("tok-a")]) == (False, None)  # two headers
    assert auth.check([(b"Authorization", b"Basic tok-a")]) == (False, None)


def test_a_single_token_and_principals_together() -> None:
    auth = Authenticator(token=b"one", principals={"a": hashlib.sha256(b"two").digest()})
    assert auth.check(_auth("one")) == (True, None)
    assert auth.check(_auth("two")) == (True, "a")
    assert Authenticator().check([]) == (True, None)  # nothing required


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("alice\n", "NAME TOKEN"),
        ("alice a b\n", "NAME TOKEN"),
        ("al ice tok\n", "NAME TOKEN"),
        ("-x tok\n", "NAME TOKEN"),
        ("alice a\nalice b\n", "given twice"),
        ("# nobody\n", "names no principal"),
    ],
)
def test_bad_files_are_refused_naming_the_line(tmp_path: Path, text: str, words: str) -> None:
    with pytest.raises(StartupError, match=words):
        read_tokens_file(_file(tmp_path / "t", text))


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o660, 0o666])
def test_a_file_others_may_read_or_write_is_refused(tmp_path: Path, mode: int) -> None:
    with pytest.raises(StartupError, match="chmod 600"):
        read_tokens_file(_file(tmp_path / "t", "alice tok\n", mode))


def test_a_symlink_to_a_private_file_is_followed(tmp_path: Path) -> None:
    target = _file(tmp_path / "real", "alice tok\n", 0o400)
    (tmp_path / "link").symlink_to(target)
    assert list(read_tokens_file(str(tmp_path / "link"))) == ["alice"]


def test_the_runtime_dir_is_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    private = tmp_path / "run"
    private.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(private))
    assert runtime_dir() == str(private)
    private.chmod(0o755)  # others may enter: not used, the /tmp fallback is
    fallback = runtime_dir()
    assert fallback == f"/tmp/acp-proxy-{os.getuid()}"
    assert stat.S_IMODE(os.stat(fallback).st_mode) == 0o700
    path = generate_token(str(private), "t.token")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    token = Path(path).read_text().strip()
    assert len(token) >= 40
    assert Path(generate_token(str(private), "t.token")).read_text().strip() != token


def test_listen_token_generates_only_on_loopback_without_a_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    private = tmp_path / "run"
    private.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(private))
    cfg, path = listen_token(Config(), "ws://127.0.0.1:8765/acp", no_token=False)
    assert path == str(private / "listen-8765.token")
    assert cfg.listen.token_file == path
    assert listen_token(Config(), "ws://127.0.0.1:8765/acp", no_token=True) == (Config(), None)
    assert listen_token(Config(), "ws://0.0.0.0:8765/acp", no_token=False) == (Config(), None)
    given = Config(listen=ListenConfig(tokens_file="/x"))
    assert listen_token(given, "ws://127.0.0.1:1/acp", no_token=False) == (given, None)
    with pytest.raises(StartupError, match="--no-token contradicts"):
        listen_token(given, "ws://127.0.0.1:1/acp", no_token=True)
