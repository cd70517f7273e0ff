"""URLs and host globs compared by their parsed parts (issue 26), pure.

A URL is read once, strictly, into :class:`ParsedUrl`; anything a browser or
an HTTP client could read differently from :func:`urllib.parse.urlsplit`
(whitespace or control characters, a backslash, a percent sign or a user
name in the authority, a host that is not a valid name) is not a URL here:
:func:`parse_url` returns the reason instead, and the caller fails closed.

A host is compared as its canonical name: lower-cased, IDNA-encoded
(``bücher.example`` is ``xn--bcher-kva.example``; a Cyrillic look-alike gets
another punycode name), one trailing dot removed. A host glob
(:func:`host_matches`) is matched against that name whole, so
``docs.example.com`` never matches ``docs.example.com.evil.example`` and
``*.example.com`` matches names under ``example.com`` only.
"""

from __future__ import annotations

import fnmatch
import re
from urllib.parse import urlsplit

import attrs

from acp_proxy.config.records import FrozenRecord

__all__ = ["ParsedUrl", "canonical_host", "host_matches", "parse_url", "url_matches"]

#: characters never accepted anywhere in a URL read here
_BAD_CHARS = re.compile(r"[\x00-\x20\x7f\\]")
#: a DNS label after IDNA encoding (or an IPv4 address's part)
_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")


@attrs.frozen(eq=False, repr=False)
class ParsedUrl(FrozenRecord):
    """The parts of a URL a rule compares.

    Attributes:
        scheme: lower-cased, e.g. ``"https"``.
        host: :func:`canonical_host` of the authority's host (an IPv6 address
            without brackets).
        port: the port given, or the scheme's default (80 / 443), or ``None``.
        path: the path (``"/"`` when empty).
    """

    scheme: str
    host: str
    port: int | None
    path: str


def canonical_host(host: str) -> str | None:
    """``host`` lower-cased, IDNA-encoded, one trailing dot removed; ``None`` if invalid."""
    if host.startswith("[") and host.endswith("]"):
        inner = host[1:-1].lower()
        return inner if inner and re.fullmatch(r"[0-9a-f:.]+", inner) else None
    if host.endswith("."):
        host = host[:-1]
    if not host or "%" in host:
        return None
    try:
        name = host.encode("idna").decode("ascii").lower()
    except UnicodeError:
        return None
    labels = name.split(".")
    if any(not _LABEL.fullmatch(label) for label in labels):
        return None
    return name


def parse_url(url: object, schemes: tuple[str, ...] = ("http", "https")) -> ParsedUrl | str:
    """``url`` read into its parts, or a reason (``str``) it is refused.

    Args:
        url: the value given (anything: a non-string is refused).
        schemes: the schemes accepted.

    Returns:
        A :class:`ParsedUrl`, or one sentence saying why the URL is not accepted.
    """
    if type(url) is not str:
        return "the URL is not a string"
    if _BAD_CHARS.search(url):
        return "the URL holds whitespace, a control character or a backslash"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return "the URL cannot be parsed"
    scheme = parts.scheme.lower()
    if scheme not in schemes:
        return f"the URL's scheme is not one of {', '.join(schemes)}"
    netloc = parts.netloc
    if "@" in netloc:
        return "the URL names a user before its host"
    host = netloc.rsplit(":", 1)[0] if not netloc.endswith("]") else netloc
    if ":" in host and not host.startswith("["):
        return "the URL's authority cannot be parsed"
    name = canonical_host(host)
    if name is None:
        return "the URL's host is not a valid host name"
    if port is None:
        port = {"http": 80, "https": 443}.get(scheme)
    return ParsedUrl(scheme, name, port, parts.path or "/")


def host_matches(host: str, patterns: tuple[str, ...] | list[str]) -> bool:
    """True when canonical ``host`` matches one of the host globs ``patterns``.

    Each pattern is canonicalised like a host (its ``*`` / ``?`` kept) and
    matched against the whole name with :func:`fnmatch.fnmatchcase`.
    """
    for pattern in patterns:
        if pattern == "*":
            return True
        canonical = _canonical_pattern(pattern)
        if canonical is not None and fnmatch.fnmatchcase(host, canonical):
            return True
    return False


def _canonical_pattern(pattern: str) -> str | None:
    if pattern.endswith("."):
        pattern = pattern[:-1]
    try:
        labels = [
            label if any(c in label for c in "*?[") else label.encode("idna").decode("ascii")
            for label in pattern.split(".")
        ]
    except UnicodeError:
        return None
    return ".".join(labels).lower()


def url_matches(url: ParsedUrl, pattern: str) -> bool:
    """True when ``url`` matches the URL glob ``pattern`` (``scheme://HOST[:PORT]/PATH``).

    Compared part by part: the scheme exactly, the host with :func:`host_matches`,
    the port (``*`` any; none given = the scheme's default), the path with
    :func:`fnmatch.fnmatchcase` (a pattern without a path matches any path).
    A glob that cannot be read this way matches nothing.
    """
    scheme, sep, rest = pattern.partition("://")
    if not sep or scheme.lower() != url.scheme:
        return False
    authority, slash, path = rest.partition("/")
    path = slash + path if slash else "*"
    host, port = authority, ""
    if authority.startswith("["):
        end = authority.find("]")
        host, port = authority[: end + 1], authority[end + 1 :].removeprefix(":")
    elif ":" in authority:
        host, port = authority.rsplit(":", 1)
    if host.startswith("["):
        host_ok = url.host == host[1:-1].lower()
    else:
        host_ok = host_matches(url.host, (host,))
    if not host_ok:
        return False
    if port == "*":
        port_ok = True
    elif port:
        port_ok = port.isdigit() and int(port) == url.port
    else:
        port_ok = url.port == {"http": 80, "https": 443}.get(url.scheme)
    return port_ok and fnmatch.fnmatchcase(url.path, path)
