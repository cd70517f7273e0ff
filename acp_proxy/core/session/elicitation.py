"""Rules on agent ``elicitation/create`` requests (issue 26; docs/protocol.md section 8), pure.

:class:`ElicitationRules` is built from ``[elicitation]``; :meth:`ElicitationRules.decide`
reads one request's params and returns a :class:`Verdict`: the rule that
declines it and why, or ``None`` (forward unchanged). The engine answers a
declined request to the agent with ``{"action": "decline"}``
(:func:`decline_frame`); the client never sees it.

- ``url_hosts``: a URL-mode request (``mode: "url"``) whose ``url`` does not
  parse strictly (:func:`~acp_proxy.core.session.hosts.parse_url`) or whose
  host matches none of the globs is declined (rule ``elicitation.url_hosts``).
- ``secret_fields = "decline"``: a form-mode request whose
  ``requestedSchema.properties`` has a field whose name, title or
  description names a secret (:data:`SECRET_PATTERNS`, the one list) is
  declined (rule ``elicitation.secret_fields``).
- A mode other than ``form`` / ``url`` is declined while either rule is on
  (rule ``elicitation.mode``): a future mode may carry either. So is a
  ``params._meta.mode``: the Python SDK's client router calls the handler with
  ``message`` and ``mode`` and then ``kwargs.update(_meta)``, so it replaces the
  mode (its url, its schema) the client acts on.
"""

from __future__ import annotations

import re
from typing import Any

import attrs

from acp_proxy.config import ElicitationConfig
from acp_proxy.config.records import FrozenRecord
from acp_proxy.core.wire.jsonrpc import dumps

__all__ = ["SECRET_PATTERNS", "ElicitationRules", "Verdict", "decline_frame", "names_secret"]

#: What names or describes a secret, matched as whole words in a field's name,
#: title or description after camelCase and separators are split into spaces
#: and the text lower-cased (``apiKey``, ``API_KEY`` and ``api-key`` are all
#: ``api key``). The one list of the secret-field rule.
SECRET_PATTERNS: tuple[str, ...] = (
    r"pass ?(?:word|wd|phrase|code)s?",
    r"pwd",
    r"token",
    r"(?:api|access|secret|private|signing|ssh|license) ?keys?",
    r"apikeys?",
    r"secrets?",
    r"credentials?",
    r"client ?secret",
)
# patterns compiled on first use (``re``'s cache), not at import: a run whose agent
# never asks for an elicitation never reads them (issue 29: start-up)
_SECRET = r"\b(?:" + "|".join(SECRET_PATTERNS) + r")\b"
_CAMEL = r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])"
_SEPARATORS = r"[^0-9a-z]+"
#: longest text of one field read for secret words (longer text is cut)
MAX_TEXT_CHARS = 4096


def _words(text: str) -> str:
    """``text`` as lower-case words separated by single spaces."""
    split = re.sub(_CAMEL, " ", text[:MAX_TEXT_CHARS])
    return re.sub(_SEPARATORS, " ", split.lower()).strip()


def names_secret(text: object) -> bool:
    """True when ``text`` (a field name, title or description) names a secret."""
    return type(text) is str and re.search(_SECRET, _words(text)) is not None


@attrs.frozen(eq=False, repr=False, slots=False)  # made rarely: see config/records.py
class Verdict(FrozenRecord):
    """Why the proxy declines one elicitation.

    Attributes:
        rule: ``"elicitation.url_hosts"``, ``"elicitation.secret_fields"`` or
            ``"elicitation.mode"``.
        verdict: ``"decline"`` (a value, so an observe mode can record it instead).
        reason: one sentence for the audit record.
        mode: the request's ``mode``.
        host: the URL's canonical host (URL mode), when it parsed.
        field: the form field that names a secret (form mode).
    """

    rule: str
    reason: str
    mode: str | None
    verdict: str = "decline"
    host: str | None = None
    field: str | None = None

    def audit_fields(self) -> dict[str, Any]:
        """The fields of its ``elicitation_declined`` audit record (no agent-given text
        besides the host and the field name)."""
        return {
            "rule": self.rule,
            "verdict": self.verdict,
            "mode": self.mode,
            "host": self.host,
            "field": self.field,
            "reason": self.reason,
        }


class ElicitationRules:
    """``[elicitation]`` compiled.

    Args:
        config: the ``[elicitation]`` section.

    Attributes:
        active: some rule can decline a request (else :meth:`decide` is never needed).
    """

    def __init__(self, config: ElicitationConfig) -> None:
        self.hosts = tuple(config.url_hosts)
        self.any_host = "*" in self.hosts
        self.secrets = config.secret_fields == "decline"
        self.active = self.secrets or not self.any_host

    def decide(self, params: Any) -> Verdict | None:
        """The verdict on one ``elicitation/create``'s ``params``; ``None``: forward it."""
        if not self.active:
            return None
        p = params if type(params) is dict else {}
        mode = p.get("mode")
        shown = mode if type(mode) is str else None
        meta = p.get("_meta")
        if type(meta) is dict and "mode" in meta:  # the Python SDK's router: kwargs.update(_meta)
            return Verdict(
                "elicitation.mode",
                "_meta.mode replaces the mode a client reads (fail closed)",
                shown,
            )
        if mode == "url":
            return self._url(p.get("url"))
        if mode == "form":
            if not self.secrets:
                return None
            if "requested_schema" in p:  # an SDK reading snake_case aliases would show it
                return Verdict(
                    "elicitation.secret_fields",
                    "requested_schema is an alias a client could read (fail closed)",
                    "form",
                )
            return self._form(p.get("requestedSchema"))
        return Verdict("elicitation.mode", "the mode is neither form nor url (fail closed)", shown)

    def _url(self, url: Any) -> Verdict | None:
        if self.any_host:
            return None
        from acp_proxy.core.session.hosts import host_matches, parse_url  # issue 29: start-up

        parsed = parse_url(url)
        if isinstance(parsed, str):
            return Verdict("elicitation.url_hosts", parsed, "url")
        if host_matches(parsed.host, self.hosts):
            return None
        return Verdict(
            "elicitation.url_hosts",
            "the URL's host is not in elicitation.url_hosts",
            "url",
            host=parsed.host,
        )

    @staticmethod
    def _form(schema: Any) -> Verdict | None:
        props = schema.get("properties") if type(schema) is dict else None
        if type(props) is not dict:
            if schema is None or props is None:
                return None  # nothing is asked for
            return Verdict(
                "elicitation.secret_fields", "requestedSchema cannot be read (fail closed)", "form"
            )
        for name, prop in props.items():
            texts = [name]
            if type(prop) is dict:
                texts += [prop.get("title"), prop.get("description")]
            if any(names_secret(text) for text in texts):
                return Verdict(
                    "elicitation.secret_fields",
                    "a form field names or describes a secret",
                    "form",
                    field=name[:200],
                )
        return None


def decline_frame(rid: Any) -> bytes:
    """The proxy's answer to a declined elicitation: ``{"action": "decline"}`` under ``rid``."""
    return dumps({"jsonrpc": "2.0", "id": rid, "result": {"action": "decline"}})
