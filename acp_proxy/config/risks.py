"""Settings that are valid but risky: ``check-config`` warns about them (exit 0).

Issue 32 item 5: an ``allow`` rule with no matcher (it answers every request of
its method, with ``allow_always`` too when listed), a JSON-RPC error code that
the JSON-RPC 2.0 specification (section 5.1) reserves for something else, a
``limits.max_message_bytes`` too small for an ``initialize``, a
``sandbox.allowed_domains`` entry srt never proxies (a loopback or private
address: the sandboxed agent cannot reach it). Pure: a function
of the loaded :class:`~acp_proxy.config.Config`.
"""

from __future__ import annotations

import ipaddress

import attrs

from acp_proxy.config.model import Config, PermissionRule

__all__ = ["MIN_SENSIBLE_MESSAGE_BYTES", "risky_settings"]

#: below this ``limits.max_message_bytes`` (bytes) an agent's ``initialize`` answer
#: (capabilities, auth methods, ``_meta``) may not fit: every session would fail
MIN_SENSIBLE_MESSAGE_BYTES = 64 * 1024

#: codes JSON-RPC 2.0 predefines (parse error, invalid request, method not found,
#: invalid params, internal error)
_PREDEFINED = frozenset((-32700, -32600, -32601, -32602, -32603))

#: what a rule may match on (every :class:`PermissionRule` attribute but these)
_NOT_MATCHERS = frozenset(("action", "name", "method", "option", "ask_timeout_seconds"))


def _rule_label(index: int, rule: PermissionRule) -> str:
    return f"rule {rule.name!r}" if rule.name else f"rule {index + 1} (unnamed)"


def _code_warning(key: str, code: int) -> str | None:
    if code == 0:
        return (
            f"{key} = 0 is not a JSON-RPC error code clients recognise: "
            "use -32601 (method not found) or -32600 (invalid request)"
        )
    if -32768 <= code <= -32000 and code not in _PREDEFINED and not -32099 <= code <= -32000:
        return (
            f"{key} = {code} is in the range JSON-RPC reserves for its own errors "
            "(-32768 to -32100 beside the predefined ones): use -32601, -32600 or a code "
            "from -32099 to -32000"
        )
    return None


#: what srt 0.0.83 puts in the sandboxed agent's NO_PROXY: these are dialled directly,
#: from inside the sandbox, where there is no network
_SRT_NO_PROXY = tuple(
    ipaddress.ip_network(n)
    for n in (
        *("127.0.0.0/8", "::1/128", "169.254.0.0/16"),
        *("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"),
    )
)


def _host_port(entry: str) -> tuple[str, str]:
    """``("127.0.0.1", "11434")`` of ``"127.0.0.1:11434"``; ``"[::1]:443"`` and a bare
    host too (port ``""``)."""
    if entry.startswith("["):
        host, _, rest = entry[1:].partition("]")
        return host, rest.removeprefix(":")
    host, _, port = entry.rpartition(":") if entry.count(":") == 1 else (entry, "", "")
    return host, port


def _direct(host: str) -> bool:
    """Whether srt's NO_PROXY sends ``host`` past its proxy (never reached in the sandbox)."""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return any(address in net for net in _SRT_NO_PROXY)


def _domain_warnings(domains: list[str]) -> list[str]:
    """A sentence per ``sandbox.allowed_domains`` entry no sandboxed agent can reach: a
    loopback or private address (or ``localhost``) with no name listed for its port."""
    named = {port for host, port in map(_host_port, domains) if not _is_literal(host)}
    out = []
    for entry in domains:
        host, port = _host_port(entry)
        if not _direct(host) or (port in named and _is_literal(host)):
            continue
        where = f"{port}" if port else "PORT"
        out.append(
            f"sandbox.allowed_domains entry {entry!r} is never reached: srt's NO_PROXY makes "
            "the agent dial loopback and private addresses directly, and inside the sandbox "
            "it has no network; give the endpoint a name (an /etc/hosts line such as "
            f"'127.0.0.1 model.local'), point the agent at http://model.local:{where} and "
            f"list both 'model.local:{where}' and the address"
        )
    return out


def _is_literal(host: str) -> bool:
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def risky_settings(cfg: Config) -> list[str]:
    """One sentence per risky setting of ``cfg`` (empty: none): the rules in order, then
    the error codes, then the sandbox's domains, then the limits."""
    out: list[str] = []
    for i, rule in enumerate(cfg.permissions.rules):
        if rule.action != "allow":
            continue
        matchers = [
            f.name
            for f in attrs.fields(PermissionRule)
            if f.name not in _NOT_MATCHERS and getattr(rule, f.name) is not None
        ]
        if matchers:
            continue
        always = " including allow_always" if rule.option and "allow_always" in rule.option else ""
        out.append(
            f"{_rule_label(i, rule)} allows every {rule.method} request (it has no matcher), "
            f"answering for the user{always}: add a matcher such as tool_kind, command or path"
        )
    for key, code in (
        ("enforcement.reject_code", cfg.enforcement.reject_code),
        ("permissions.refuse_code", cfg.permissions.refuse_code),
    ):
        warning = _code_warning(key, code)
        if warning is not None:
            out.append(warning)
    out.extend(_domain_warnings(list(cfg.sandbox.allowed_domains)))
    size = cfg.limits.max_message_bytes
    if size < MIN_SENSIBLE_MESSAGE_BYTES:
        out.append(
            f"limits.max_message_bytes = {size} is below {MIN_SENSIBLE_MESSAGE_BYTES} bytes, "
            "too small for an initialize: every session would fail "
            f"(the default is {Config().limits.max_message_bytes})"
        )
    return out
