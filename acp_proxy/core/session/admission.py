"""Rules on what a client may open a session with (issue 26; docs/protocol.md section 8), pure.

:class:`AdmissionPolicy` is built from ``[admission]``. :meth:`AdmissionPolicy.decide`
reads one ``session/new`` / ``session/load`` / ``session/resume`` /
``session/fork`` request's params for a connection (its principal, whether
it is remote) and returns a :class:`Decision`: the rule that refuses it and
why, or ``None`` (forward it unchanged). The engine answers a refusal with a
JSON-RPC error under the request's id (:meth:`Decision.error_data`) and
audits it; an observe mode could record the same value instead.

The rules, in order (the first failing one is the verdict):

- ``mcp_stdio``: an ``mcpServers`` entry with a ``command`` (or ``type:
  "stdio"``) makes the agent start a process: refused unless ``"allow"``;
- ``mcp_http_allow``: an ``http`` / ``sse`` entry whose ``url`` matches none of
  the URL globs (:func:`~acp_proxy.core.session.hosts.url_matches`) is
  refused; so is an entry of any other transport type, or one that is not an
  object (rule ``mcp_servers``: the proxy cannot tell what it makes the agent do);
- ``roots``: ``cwd`` and every ``additionalDirectories`` entry must lie in one
  of the roots, compared after the shell's ``resolve`` (``..`` and symbolic
  links of the proxy's filesystem; the core's default is lexical):
  :func:`outside_roots`.

The Python SDK's router spreads ``params._meta`` into the handler's arguments
(``kwargs.update(_meta)``): a ``_meta.mcp_servers``, ``_meta.cwd`` or
``_meta.additional_directories`` (:data:`META_SESSION_ARGS`) replaces the field
the agent acts on, so it is refused like the snake_case aliases (rule
``mcp_servers``, and ``roots`` when roots are set).

``[[admission.rules]]`` refine the section for the principals they match
(first match wins); the rule's name then prefixes the rule refusing.
"""

from __future__ import annotations

import fnmatch
import posixpath
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from acp_proxy.config import AdmissionConfig
from acp_proxy.config.records import FrozenRecord

__all__ = [
    "ADMITTED_METHODS",
    "META_SESSION_ARGS",
    "AdmissionPolicy",
    "Decision",
    "lexical_resolve",
    "outside_roots",
]

#: The client requests the rules apply to.
ADMITTED_METHODS = frozenset({"session/new", "session/load", "session/resume", "session/fork"})
#: ``mcpServers`` entries read per request (more are refused: fail closed).
MAX_MCP_SERVERS = 256

Resolve = Callable[[str], str]
_ALIAS = "is a snake_case alias an SDK could read as the field (fail closed)"
_META = (
    "names a parameter the Python SDK hands the agent in place of the field "
    "(kwargs.update(_meta)): fail closed"
)
#: ``params._meta`` keys the Python SDK router (0.12) spreads into the session handlers'
#: arguments in place of the fields admission judges (their Python names; ``mcpServers``
#: or vendor keys in ``_meta`` go to ``**kwargs``: content).
META_SESSION_ARGS = ("mcp_servers", "cwd", "additional_directories")


def lexical_resolve(path: str) -> str:
    """``path`` with ``.``, ``..`` and repeated slashes removed (no symlinks: pure)."""
    return posixpath.normpath(path) if path.startswith("/") else path


def outside_roots(path: Any, roots: Sequence[str], resolve: Resolve) -> str | None:
    """Why ``path`` is not inside one of ``roots``, or ``None`` when it is.

    Args:
        path: the directory a client gave (anything: a non-string is refused).
        roots: absolute directories (resolved with ``resolve`` too); empty = anywhere.
        resolve: absolute path -> its resolved form (the shell follows
            symlinks; :func:`lexical_resolve` does not).

    Returns:
        ``None``, or one sentence for the refusal.
    """
    if not roots:
        return None
    if type(path) is not str or not path.startswith("/") or "\x00" in path:
        return "not an absolute path"
    real = resolve(path)
    for root in roots:
        base = resolve(root).rstrip("/") or "/"
        if real == base or real.startswith(base if base == "/" else base + "/"):
            return None
    return f"resolves to {real[:200]!r}, outside admission roots"


@attrs.frozen(eq=False, repr=False, slots=False)  # made rarely: see config/records.py
class Decision(FrozenRecord):
    """A refusal of one request.

    Attributes:
        rule: the rule that refuses, e.g. ``"admission.mcp_stdio"`` or
            ``"admission.rules[ci].roots"``.
        reason: one sentence.
        field: where in params, e.g. ``"mcpServers[0]"``, ``"cwd"``,
            ``"additionalDirectories[1]"``.
        verdict: ``"refuse"``.
    """

    rule: str
    reason: str
    field: str
    verdict: str = "refuse"

    @property
    def message(self) -> str:
        """The refusal's error message."""
        return f"acp-proxy: refused by {self.rule}: {self.field} {self.reason}"

    def error_data(self, method: str) -> dict[str, Any]:
        """The error's ``data`` (and the audit record's fields)."""
        return {"rule": self.rule, "field": self.field, "method": method, "reason": self.reason}


@attrs.frozen(eq=False, repr=False, slots=False)  # made rarely: see config/records.py
class _Effective(FrozenRecord):
    stdio: bool
    http: tuple[str, ...]
    roots: tuple[str, ...]
    # which key each value came from ("admission" or the rule's prefix)
    origin: dict[str, str]


class AdmissionPolicy:
    """``[admission]`` compiled.

    Args:
        config: the ``[admission]`` section.
    """

    def __init__(self, config: AdmissionConfig) -> None:
        self.config = config
        self.refuse_code = config.refuse_code
        self._all = config.applies_to == "all"

    def applies(self, remote: bool) -> bool:
        """True when the rules apply to a connection (remote: of ``--listen``)."""
        return self._all or remote

    def _effective(self, principal: str | None) -> _Effective:
        c = self.config
        values: dict[str, Any] = {
            "mcp_stdio": c.mcp_stdio,
            "mcp_http_allow": c.mcp_http_allow,
            "roots": c.roots,
        }
        origin = dict.fromkeys(values, "admission")
        if principal is not None:
            for index, rule in enumerate(c.rules):
                if any(fnmatch.fnmatchcase(principal, g) for g in rule.principal):
                    prefix = f"admission.rules[{rule.name or index}]"
                    for key in values:
                        given = getattr(rule, key)
                        if given is not None:
                            values[key] = given
                            origin[key] = prefix
                    break
        return _Effective(
            values["mcp_stdio"] == "allow",
            tuple(values["mcp_http_allow"]),
            tuple(values["roots"]),
            origin,
        )

    def decide(
        self, params: Any, principal: str | None, resolve: Resolve = lexical_resolve
    ) -> Decision | None:
        """The refusal of one request (a method of :data:`ADMITTED_METHODS`), or ``None``.

        Args:
            params: its params (a dict, or anything a peer sent).
            principal: the connection's principal, or ``None``.
            resolve: how a directory is resolved (the shell injects the real one).
        """
        eff = self._effective(principal)
        p = params if type(params) is dict else {}
        if "mcp_servers" in p:  # an SDK reading snake_case aliases would start these
            return Decision("admission.mcp_servers", _ALIAS, "mcp_servers")
        meta = p.get("_meta")
        meta = meta if type(meta) is dict else {}
        if "mcp_servers" in meta:
            return Decision("admission.mcp_servers", _META, "_meta.mcp_servers")
        refusal = self._mcp(eff, p.get("mcpServers"))
        if refusal is not None or not eff.roots:
            return refusal
        where = eff.origin["roots"] + ".roots"
        for key in META_SESSION_ARGS[1:]:
            if key in meta:
                return Decision(where, _META, f"_meta.{key}")
        if "additional_directories" in p:
            return Decision(where, _ALIAS, "additional_directories")
        why = outside_roots(p.get("cwd"), eff.roots, resolve)  # required by every method
        if why is not None:
            return Decision(where, why, "cwd")
        extra = p.get("additionalDirectories")
        if extra is None:
            return None
        if type(extra) is not list or len(extra) > MAX_MCP_SERVERS:
            return Decision(where, "is not a list of absolute paths", "additionalDirectories")
        for index, path in enumerate(extra):
            why = outside_roots(path, eff.roots, resolve)
            if why is not None:
                return Decision(where, why, f"additionalDirectories[{index}]")
        return None

    @staticmethod
    def _mcp(eff: _Effective, servers: Any) -> Decision | None:
        if servers is None:
            return None
        if type(servers) is not list or len(servers) > MAX_MCP_SERVERS:
            return Decision(
                "admission.mcp_servers", "is not a list the proxy can read", "mcpServers"
            )
        for index, entry in enumerate(servers):
            field = f"mcpServers[{index}]"
            if type(entry) is not dict:
                return Decision("admission.mcp_servers", "is not an object", field)
            kind = entry.get("type")
            if "command" in entry or kind == "stdio":
                if not eff.stdio:
                    rule = eff.origin["mcp_stdio"] + ".mcp_stdio"
                    return Decision(rule, "is a stdio MCP server (a command to run)", field)
                if kind is None or kind == "stdio":
                    continue
            if kind not in ("http", "sse"):
                return Decision(
                    "admission.mcp_servers", "has an MCP transport the proxy cannot judge", field
                )
            rule = eff.origin["mcp_http_allow"] + ".mcp_http_allow"
            from acp_proxy.core.session.hosts import parse_url, url_matches  # issue 29: start-up

            parsed = parse_url(entry.get("url"))
            if isinstance(parsed, str):
                return Decision(rule, f"is refused: {parsed}", field)
            if not any(url_matches(parsed, g) for g in eff.http):
                return Decision(rule, "has a URL outside admission.mcp_http_allow", field)
        return None
