"""WebSocket URLs and upgrade checks (pure functions)."""

from __future__ import annotations

import pytest

from acp_proxy.shell.topology.ws_upgrade import (
    LOOPBACK_HOSTS,
    StartupError,
    accepted_hosts,
    check_upgrade,
    parse_ws_url,
)


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
    """Path 404 before Host 421 before Origin 403 before token 401; a good request is accepted."""

    def check(target: str, *headers: tuple[bytes, bytes], host: str = "127.0.0.1:9") -> int:
        verdict = check_upgrade(
            target,
            host,
            list(headers),
            path="/acp",
            token=b"s3cret",
            allowed_origins=["https://app.example/"],
            allowed_hosts=LOOPBACK_HOSTS,
        )
        return 101 if verdict is None else verdict[0]

    auth = (b"authorization", b"Bearer s3cret")
    good_origin = (b"origin", b"https://app.example")
    assert check("/acp?x=1", auth, good_origin) == 101
    assert check("/acp", (b"Authorization", b"bearer s3cret")) == 101  # no Origin: not a browser
    assert check("/nope", auth, good_origin, host="evil.example") == 404
    assert check("/acp", auth, good_origin, host="evil.example") == 421
    assert check("/acp", auth, (b"origin", b"https://evil.example")) == 403
    assert check("/acp") == 401
    for value in (b"Bearer wrong", b"Basic s3cret", b"s3cret", b"Bearer ", b"Bearer s3cret2"):
        assert check("/acp", (b"authorization", value)) == 401
    assert check("/acp", auth, auth) == 401  # two Authorization headers


def upgrade(
    host: str | None,
    *headers: tuple[bytes, bytes],
    origins: list[str] | None = None,
    hosts: frozenset[str] | None = LOOPBACK_HOSTS,
) -> int:
    """The status :func:`check_upgrade` gives (101 = accepted), without a token."""
    verdict = check_upgrade(
        "/acp",
        host,
        list(headers),
        path="/acp",
        token=None,
        allowed_origins=origins or [],
        allowed_hosts=hosts,
    )
    return 101 if verdict is None else verdict[0]


def test_no_browser_origin_is_allowed_by_default() -> None:
    """Empty allowed_origins refuses every Origin (403); listed ones pass, without case or "/"."""
    assert upgrade("127.0.0.1") == 101
    for origin in (b"https://evil.example", b"null", b"http://localhost:8080", b""):
        assert upgrade("127.0.0.1", (b"origin", origin)) == 403
    listed = ["https://App.example:8443/", "vscode-webview://abc"]
    assert upgrade("localhost", (b"Origin", b"https://app.EXAMPLE:8443"), origins=listed) == 101
    assert upgrade("localhost", (b"origin", b"vscode-webview://abc"), origins=listed) == 101
    assert upgrade("localhost", (b"origin", b"https://app.example"), origins=listed) == 403
    two = ((b"origin", b"vscode-webview://abc"), (b"origin", b"https://evil.example"))
    assert upgrade("localhost", *two, origins=listed) == 403


def test_host_must_name_the_listener() -> None:
    """A loopback bind takes its loopback names with any port or none; anything else is 421."""
    for host in ("127.0.0.1", "127.0.0.1:8765", "LOCALHOST:1", "localhost", "[::1]", "[::1]:9"):
        assert upgrade(host) == 101, host
    bad = ["attacker.example", "attacker.example:8765", "127.0.0.2", "::1", "[::1", "localhost:x"]
    for host in [*bad, "localhost:", "", "local host", "127.0.0.1:8765:1", "l\u043ecalhost"]:
        assert upgrade(host) == 421, host
    assert upgrade(None) == 421
    assert upgrade("attacker.example", hosts=None) == 101  # check off


def test_accepted_hosts() -> None:
    """Which Host names each kind of bind accepts (None: not checked)."""
    loop = accepted_hosts("127.0.0.1", loopback=True, token=False, allowed_hosts=["acp.example"])
    assert loop == LOOPBACK_HOSTS | {"acp.example"}
    assert (
        accepted_hosts("localhost", loopback=True, token=True, allowed_hosts=[]) == LOOPBACK_HOSTS
    )
    ipv6 = accepted_hosts("::1", loopback=True, token=False, allowed_hosts=["[2001:DB8::1]"])
    assert ipv6 == LOOPBACK_HOSTS | {"2001:db8::1"}
    # A non-loopback bind needs a token; with no allowed_hosts, Host is not checked.
    assert accepted_hosts("0.0.0.0", loopback=False, token=True, allowed_hosts=[]) is None
    assert accepted_hosts("10.1.2.3", loopback=False, token=True, allowed_hosts=[]) is None
    wildcard = accepted_hosts("0.0.0.0", loopback=False, token=True, allowed_hosts=["Acp.Example"])
    assert wildcard == LOOPBACK_HOSTS | {"acp.example"}
    named = accepted_hosts("10.1.2.3", loopback=False, token=True, allowed_hosts=["acp.example"])
    assert named == frozenset({"10.1.2.3", "acp.example"})
