"""WebSocket URLs and upgrade checks (pure functions)."""

from __future__ import annotations

import pytest

from acp_proxy.ws_upgrade import StartupError, check_upgrade, parse_ws_url


def test_parse_ws_url_defaults() -> None:
    """An empty host means the default host, an empty path "/", a missing port 80/443."""
    url = parse_ws_url("ws://:0/acp", default_host="127.0.0.1")
    assert (url.host, url.port, url.path) == ("127.0.0.1", 0, "/acp")
    url = parse_ws_url("wss://example.org?x=1", default_host=None)
    assert (url.secure, url.host, url.port, url.path, url.resource) == (
        True,
        "example.org",
        443,
        "/",
        "/?x=1",
    )
    assert parse_ws_url("ws://[::1]:9/", default_host=None).host == "::1"


@pytest.mark.parametrize("url", ["http://h:1/", "ws://h:99999/", "ws:///x", "h:1"])
def test_parse_ws_url_rejects(url: str) -> None:
    """Other schemes, bad ports and (without a default) missing hosts are usage errors."""
    with pytest.raises(StartupError):
        parse_ws_url(url, default_host=None)


def test_check_upgrade_order_and_token() -> None:
    """Path 404 before Origin 403 before token 401; a good request is accepted."""

    def check(target: str, *headers: tuple[bytes, bytes]) -> int:
        verdict = check_upgrade(
            target,
            list(headers),
            path="/acp",
            token=b"s3cret",
            allowed_origins=["https://app.example/"],
        )
        return 101 if verdict is None else verdict[0]

    auth = (b"authorization", b"Bearer s3cret")
    good_origin = (b"origin", b"https://app.example")
    assert check("/acp?x=1", auth, good_origin) == 101
    assert check("/acp", (b"Authorization", b"bearer s3cret")) == 101  # no Origin: not a browser
    assert check("/nope", auth, good_origin) == 404
    assert check("/acp", auth, (b"origin", b"https://evil.example")) == 403
    assert check("/acp") == 401
    for value in (b"Bearer wrong", b"Basic s3cret", b"s3cret", b"Bearer ", b"Bearer s3cret2"):
        assert check("/acp", (b"authorization", value)) == 401
    assert check("/acp", auth, auth) == 401  # two Authorization headers
