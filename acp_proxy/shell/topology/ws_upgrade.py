"""WebSocket URLs, bearer tokens and upgrade checks for ``--listen`` / ``--connect``.

Pure functions (``is_loopback`` may resolve a name), tested without sockets.
:func:`probe_response` answers the health probes (``GET /healthz``,
``GET /readyz``) that share the listen port. Upgrade requests are checked
in this order, each failure an HTTP status: wrong path 404, ``Host`` not
naming the listener 421 (DNS rebinding), ``Origin`` present and not
allowed 403 (a browser page), bearer token missing or wrong 401.
"""

from __future__ import annotations

import hmac
import ipaddress
import re
import socket
from collections.abc import Sequence
from http import HTTPStatus
from urllib.parse import urlsplit

import attrs
import trio

from acp_proxy.errors import StartupError

__all__ = [
    "LOOPBACK_HOSTS",
    "StartupError",
    "WsUrl",
    "accepted_hosts",
    "check_upgrade",
    "is_loopback",
    "parse_ws_url",
    "probe_response",
    "read_token",
    "with_reason_phrase",
]

_TOKEN = re.compile(r"[\x21-\x7e]+")  # visible ASCII: fits an HTTP header as is

#: ``Host`` names accepted on a loopback bind (IPv6 without brackets)
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})

_WILDCARDS = frozenset({"", "0.0.0.0", "::"})


@attrs.frozen
class WsUrl:
    """A parsed ``ws://`` / ``wss://`` URL.

    Attributes:
        secure: ``wss``.
        host: host name or address, without IPv6 brackets.
        port: TCP port (0 = any, for listening).
        path: the path, ``/`` when empty.
        resource: path plus ``?query``, as sent in the request line.
    """

    secure: bool
    host: str
    port: int
    path: str
    resource: str


def parse_ws_url(url: str, *, default_host: str | None) -> WsUrl:
    """Parses ``ws://HOST:PORT/PATH``.

    Args:
        url: the URL.
        default_host: host when the URL has none (``None``: a host is required).

    Raises:
        StartupError: not a ws/wss URL, no host, or a bad port.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("ws", "wss"):
        raise StartupError(f"{url!r} is not a ws:// or wss:// URL")
    try:
        port = parts.port
    except ValueError as exc:
        raise StartupError(f"{url!r}: bad port ({exc})") from None
    host = parts.hostname or default_host
    if not host:
        raise StartupError(f"{url!r} has no host")
    secure = parts.scheme == "wss"
    path = parts.path or "/"
    resource = f"{path}?{parts.query}" if parts.query else path
    return WsUrl(secure, host, (443 if secure else 80) if port is None else port, path, resource)


def read_token(path: str) -> bytes:
    """The bearer token in ``path`` (surrounding whitespace removed).

    Raises:
        StartupError: unreadable, empty, or not one run of visible ASCII.
    """
    try:
        with open(path, encoding="ascii") as file:
            token = file.read().strip()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise StartupError(f"cannot read the token file {path!r}: {reason}") from None
    if not _TOKEN.fullmatch(token):
        raise StartupError(f"token file {path!r} must hold one token of visible ASCII characters")
    return token.encode("ascii")


async def is_loopback(host: str) -> bool:
    """True when every address ``host`` resolves to is a loopback address."""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        infos = await trio.socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError:
        return False
    addresses = {info[4][0] for info in infos}
    return bool(addresses) and all(
        ipaddress.ip_address(str(a).split("%")[0]).is_loopback for a in addresses
    )


def _host_key(host: str) -> str:
    """``host`` lower-cased, IPv6 brackets removed."""
    host = host.lower()
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


def accepted_hosts(
    bound_host: str, *, loopback: bool, token: bool, allowed_hosts: Sequence[str]
) -> frozenset[str] | None:
    """The ``Host`` names an upgrade request may carry (pure; see :func:`check_upgrade`).

    Args:
        bound_host: the host of the ``--listen`` URL (name or address).
        loopback: the bind is loopback only (:func:`is_loopback`).
        token: a bearer token is required.
        allowed_hosts: ``listen.allowed_hosts``.

    Returns:
        Lower-cased names, IPv6 addresses without brackets: the bound host
        (unless a wildcard such as ``0.0.0.0``), :data:`LOOPBACK_HOSTS` on a
        loopback or wildcard bind, and ``allowed_hosts``. ``None`` (``Host``
        not checked) only for a non-loopback bind with a token and no
        ``allowed_hosts``: browsers cannot send an ``Authorization`` header on
        a WebSocket upgrade, so the token already keeps web pages out.
    """
    if token and not loopback and not allowed_hosts:
        return None
    names = {_host_key(h) for h in allowed_hosts}
    key = _host_key(bound_host)
    if key not in _WILDCARDS:
        names.add(key)
    if loopback or key in _WILDCARDS:
        names |= LOOPBACK_HOSTS
    return frozenset(names)


def _host_name(value: str) -> str | None:
    """The host part of a ``Host`` header (lower-cased, no brackets); ``None`` if malformed."""
    text = value.strip().lower()
    if not text.isascii():
        return None
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        if not sep:
            return None
    elif text.count(":") > 1:
        return None  # an IPv6 address must be bracketed
    else:
        host, sep, port = text.partition(":")
        rest = sep + port
    if rest and not (rest[0] == ":" and rest[1:].isdigit() and rest[1:].isascii()):
        return None
    return host or None


def _values(headers: Sequence[tuple[bytes, bytes]], name: bytes) -> list[bytes]:
    return [v.strip() for k, v in headers if k.lower() == name]


def check_upgrade(
    target: str,
    host: str | None,
    headers: Sequence[tuple[bytes, bytes]],
    *,
    path: str,
    token: bytes | None,
    allowed_origins: Sequence[str],
    allowed_hosts: frozenset[str] | None,
) -> tuple[int, str] | None:
    """Decides on an upgrade request (pure).

    Args:
        target: the request target (path and query).
        host: the ``Host`` header's value (wsproto keeps it apart from the
            other headers and requires it), or ``None`` when absent.
        headers: the other request headers.
        path: the path served.
        token: the bearer token required, or ``None``.
        allowed_origins: browser origins allowed (``listen.allowed_origins``,
            compared without case or a trailing ``/``); empty allows none. A
            request without an Origin header (not a browser) is not subject to
            the list; two Origin headers are refused.
        allowed_hosts: names the ``Host`` header may carry, with any port or
            none (:func:`accepted_hosts`); ``None`` skips the check. A missing
            or malformed ``Host`` is refused.

    Returns:
        ``None`` to accept, else ``(HTTP status, reason)``; the reason never
        contains a header value.
    """
    if urlsplit(target).path != path:
        return 404, "no ACP endpoint at this path"
    if allowed_hosts is not None and (host is None or _host_name(host) not in allowed_hosts):
        return 421, "Host header does not name this listener (see listen.allowed_hosts)"
    origins = _values(headers, b"origin")
    if origins:
        allowed = {o.rstrip("/").lower() for o in allowed_origins}
        if len(origins) > 1 or origins[0].decode("latin-1").lower() not in allowed:
            return 403, "browser origin not allowed (see listen.allowed_origins)"
    if token is not None:
        auth = _values(headers, b"authorization")
        scheme, _, given = auth[0].partition(b" ") if len(auth) == 1 else (b"", b"", b"")
        if scheme.lower() != b"bearer" or not hmac.compare_digest(given.strip(), token):
            return 401, "missing or wrong bearer token"
    return None


#: the paths of the health probes served on the listen port, besides the ACP endpoint
PROBE_PATHS = ("/healthz", "/readyz")


_STATUS_LINE = re.compile(rb"HTTP/1\.[01] (\d{3}) \r\n")


def with_reason_phrase(data: bytes) -> bytes:
    """``data``, an HTTP response, with the standard reason phrase put in its status
    line when it has none (wsproto writes ``HTTP/1.1 404 `` for the answers the
    handshake makes: refusals and ``101``)."""
    m = _STATUS_LINE.match(data)
    if m is None:
        return data
    try:
        phrase = HTTPStatus(int(m.group(1))).phrase.encode("ascii")
    except ValueError:
        return data
    return data[: m.end() - 2] + phrase + data[m.end() - 2 :]


def probe_response(head: bytes, *, ready: bool) -> bytes | None:
    """The HTTP answer to a health probe, or ``None`` when ``head`` is not one (pure).

    A probe is ``GET /healthz`` or ``GET /readyz`` (any query) without an
    ``Upgrade`` header. ``/healthz`` is 200 while the process serves;
    ``/readyz`` is 200, or 503 when not ``ready`` (draining after SIGTERM).

    Args:
        head: the request's bytes read so far (request line and headers).
        ready: the listener accepts new connections.
    """
    line, _, rest = head.partition(b"\r\n")
    parts = line.split(b" ")
    if len(parts) != 3 or parts[0] != b"GET" or not parts[2].startswith(b"HTTP/1."):
        return None
    path = urlsplit(parts[1].decode("latin-1")).path
    if path not in PROBE_PATHS:
        return None
    if any(h.partition(b":")[0].strip().lower() == b"upgrade" for h in rest.split(b"\r\n")):
        return None
    status, body = (200, b"ok\n") if ready or path == "/healthz" else (503, b"draining\n")
    reason = HTTPStatus(status).phrase.encode("ascii")
    return (
        b"HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n"
        b"Cache-Control: no-store\r\nConnection: close\r\n\r\n" % (status, reason, len(body))
    ) + body
