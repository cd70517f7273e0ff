"""Permission rules: what an untrusted agent may ask of the client (issue 19).

Pure: no IO, no clock, no trio. The rules are ``[[permissions.rules]]``
(:class:`~acp_proxy.config.model.PermissionRule`; syntax and semantics in
``config/examples/permissions.toml``); this module matches an agent->client
request against them and builds the proxy's answers.

How the engine uses it
----------------------
1. **Policy.** ``policy = Policy(cfg.permissions)`` when the config is
   loaded or reloaded (the policy holds nothing per session, so a reload
   just replaces it). ``policy.active`` is False without rules: skip the rest.
2. **Workspaces.** Keep ``workspaces: dict[str, Workspace]``. For a client
   ``session/new`` request keep ``workspace_from_params(params)`` under the
   request id, and store it under ``result.sessionId`` when the agent's
   answer succeeds; for ``session/load`` / ``session/resume`` store it under
   ``params.sessionId`` at request time (replayed history may ask already),
   and forget it if the answer is an error or the session closes. Bound it
   like the registry's ordinary sessions.
3. **Decide.** For an agent *request* with ``policy.governs(method)``:
   ``ctx = session_context(msg.session_id, registry, workspaces)`` and
   ``d = policy.decide(ctx, msg.method, msg.params, tools=announced)`` (params
   of a large frame read with :func:`~acp_proxy.core.wire.jsonscan.bounded_members`;
   ``announced``: what ``session/update`` tool calls said under the ids it names).
   Then by ``d.disposition``:

   - ``"answer"``: send ``answer_frame(msg.id, d)`` to the agent; never
     forward the request; a later ``$/cancel_request`` for it is dropped
     (audited), not forwarded.
   - ``"refuse"``: send ``answer_frame(msg.id, d)`` (a JSON-RPC error naming
     the rule) to the agent; never forward.
   - ``"forward"``: forward unchanged. If ``d.ask_timeout_seconds`` is set,
     start a timer; on expiry with the request still in flight send
     ``cancelled_frame(msg.id)`` to the agent (optionally a
     ``$/cancel_request`` to the client) and drop the client's late answer.

   Audit ``d.audit_event`` (``"permission_decided"`` / ``"request_refused"``,
   ``None`` when no rule matched) with ``d.audit_fields(include_content=...)``
   plus the request ``id`` and the direction.

Matching (see :class:`Policy` for the decision among rules)
-----------------------------------------------------------
- String matchers are :func:`fnmatch.fnmatchcase` globs: case-sensitive,
  ``*`` also crosses ``/`` (so ``**`` is ``*``), ``?``, ``[...]``, ``[!...]``;
  a list matches when any pattern does. A *deny* rule's globs also match
  case-folded (``/root/.SSH/id_rsa`` meets ``**/.ssh/**``); allow and ask
  rules match exactly (fail closed). A matcher reading a field the
  request lacks (or holds as a non-string) does not match.
- ``session`` reads the context's session id, ``child`` / ``parent`` its
  place in the child tree.
- ``tool_*`` / ``raw_input`` read the tool call: v2 ``subject.toolCall``
  (``subject.type == "tool_call"``), v1 ``toolCall``; both when both are
  present (each shape is matched; any deny denies, allow needs all). ``raw_input`` reads a
  top-level ``rawInput`` key: a string as is, an array of strings joined by
  single spaces (as an argv), anything else does not match.
- ``command`` reads v2 ``subject.command`` (``subject.type == "command"``)
  or, for ``terminal/create``, ``command`` and ``args`` joined by single
  spaces; ``cwd`` the command's cwd (``terminal/create`` without ``cwd``:
  the session's cwd, where the client runs it). A deny rule's ``command`` (and
  ``raw_input``) also reads other spellings (:func:`command_variants`):
  whitespace runs as one space, the executable without its directory, the
  script of ``sh -c`` / ``bash -c`` (also when an argv array names the shell:
  Codex's ``["/bin/bash", "-lc", "sudo ls"]`` is matched on ``sudo ls``, never
  joined and re-split), the argv behind ``env`` / ``exec`` / ``timeout`` and
  the like. Advisory: an agent can always hide a
  command line; the durable control is that everything else asks.
- Paths and cwds must be absolute POSIX paths (ACP requires it; a client
  resolves a relative one against its own working directory): while the
  policy is active, or the proxy has own files to protect (an audit log, a
  config file: which file a relative path names is the client's reading, not
  the proxy's), an ``fs/*`` ``path`` or ``terminal/create`` ``cwd`` that is
  not one (``.bashrc``, ``~/x``, ``file:///x``, ``C:\\x``, a missing path) is
  refused without a rule. Absolute ones are normalised lexically
  (:func:`posixpath.normpath` folds ``.``, ``..`` and repeated ``/``). The
  filesystem is never touched, so a symbolic link inside the workspace that
  points outside is not seen.
- A place that cannot be resolved (a ``terminal/create`` without ``cwd`` in a
  session whose cwd is unknown or relative, a command subject's relative
  ``cwd``) fails closed when a rule for the method reads ``path``, ``cwd`` or
  ``inside_workspace``: fs / terminal requests are refused, a
  request_permission is asked, never allowed. A child announced with a
  relative cwd has an unknown cwd.
- ``inside_workspace``: the resolved path is one of the workspace roots (the
  session's absolute ``cwd`` and ``additionalDirectories``) or below one
  (``/ws-2/x`` is not inside ``/ws``). A path that cannot be resolved
  is not inside any workspace: an
  ``inside_workspace = false`` deny rule refuses it (fail closed), an
  ``inside_workspace = true`` rule does not match.
"""

from __future__ import annotations

import posixpath
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from fnmatch import fnmatchcase
from typing import Any, Literal

import attrs

from acp_proxy.config.model import PERMISSION_METHODS, PermissionRule, PermissionsConfig
from acp_proxy.config.records import FrozenRecord
from acp_proxy.core.actions import AuditEvent
from acp_proxy.core.session.places import OwnFiles, command_words, own_file_refusal
from acp_proxy.core.session.places import normpath as _normpath
from acp_proxy.core.session.registry import Registry
from acp_proxy.core.session.sdk_reading import TOOL_KINDS, PathResolver, read_args, tool_paths
from acp_proxy.core.session.spellings import (
    _argv_variants,
    _raw_value,
    _raw_variants,
    _unique,
    command_variants,
)
from acp_proxy.core.wire.jsonrpc import JsonId, dumps, error_frame
from acp_proxy.core.wire.views import OPAQUE

__all__ = [
    "DECISION_META_KEY",
    "Decision",
    "Policy",
    "SessionContext",
    "Workspace",
    "answer_frame",
    "cancelled_frame",
    "session_context",
    "workspace_from_params",
]

Disposition = Literal["answer", "refuse", "forward"]

_REQUEST_PERMISSION = "session/request_permission"


@attrs.frozen(eq=False, repr=False)
class Workspace(FrozenRecord):
    """A session's workspace, as the client gave it in session/new | load | resume.

    Attributes:
        cwd: the session's working directory (absolute), or ``None`` unknown:
            relative paths are resolved against it.
        additional_directories: further workspace roots.
        bound: a child session's roots: its root session's, which the client
            gave (``None``: the roots are ``cwd`` and ``additional_directories``).
    """

    cwd: str | None = None
    additional_directories: tuple[str, ...] = ()
    bound: tuple[str, ...] | None = None

    @property
    def roots(self) -> tuple[str, ...]:
        """The absolute roots, normalised (relative or empty ones are ignored); a
        child's are its root session's (:attr:`bound`), never its own."""
        if self.bound is not None:
            return self.bound
        candidates = (self.cwd or "", *self.additional_directories)
        return tuple(_normpath(root) for root in candidates if root.startswith("/"))

    def resolve(self, path: str) -> str | None:
        """``path`` normalised, or ``None`` when it is not an absolute POSIX path.

        A relative path (``.bashrc``, ``~/.bashrc``, ``file:///x``, ``C:\\x``) is
        never joined to ``cwd``: a client resolves it against its own working
        directory, which the proxy does not know.
        """
        if not is_absolute(path):
            return None
        return _normpath(path)

    def contains(self, resolved: str | None, *, fold: bool = False) -> bool:
        """True when the resolved path is a root or below one (``fold``: compared
        case-folded, as a case-insensitive filesystem would)."""
        if resolved is None:
            return False
        if fold:
            resolved = resolved.casefold()
        for root in self.roots:
            if fold:
                root = root.casefold()
            if resolved == root or resolved.startswith(root.rstrip("/") + "/"):
                return True
        return False


def is_absolute(path: str) -> bool:
    """True for an absolute POSIX path (``/`` first, no NUL): what ACP requires."""
    return path.startswith("/") and "\0" not in path


def workspace_from_params(params: Mapping[str, Any] | None) -> Workspace:
    """The workspace a client ``session/new``, ``session/load`` or ``session/resume`` gives.

    Args:
        params: the request's params (``None`` or malformed fields give an
            empty workspace: nothing is inside it).

    Returns:
        ``cwd`` when a string, and the string items of ``additionalDirectories``.
    """
    if params is None:
        return Workspace()
    cwd = params.get("cwd")
    extra = params.get("additionalDirectories")
    return Workspace(
        cwd if isinstance(cwd, str) else None,
        tuple(d for d in extra if isinstance(d, str)) if isinstance(extra, list) else (),
    )


@attrs.frozen(eq=False, repr=False, slots=False)  # made rarely: see config/records.py
class SessionContext(FrozenRecord):
    """Who is asking: the session a request names and what the proxy knows of it.

    Attributes:
        session_id: ``params.sessionId`` when a string, else ``None``.
        child: True for a child announced with ``subagent_update``.
        parent_id: a child's immediate parent, else ``None``.
        workspace: the session's workspace (a child without its own cwd: its
            nearest ancestor's).
    """

    session_id: str | None
    child: bool = False
    parent_id: str | None = None
    workspace: Workspace = Workspace()


def session_context(
    session_id: str | None, registry: Registry, workspaces: Mapping[str, Workspace]
) -> SessionContext:
    """The :class:`SessionContext` of ``session_id`` from the registry and known workspaces.

    A child's workspace never exceeds its root session's, the one the client
    gave (``workspaces``): its roots are the root's roots, whatever cwd or
    ``additionalDirectories`` the agent announced for the child. The child's
    own announced ``cwd`` (or its nearest ancestor child's) is only where a
    relative path or a ``terminal/create`` without ``cwd`` is resolved (the
    client runs it there): outside the root's roots, it is outside the
    workspace. A child cwd that is not an absolute path is unknown: it is
    not replaced by an ancestor's. A child whose root the client never gave has no root at all
    (nothing is inside).
    """
    if session_id is None:
        return SessionContext(None)
    child = registry.child(session_id)
    if child is None:
        return SessionContext(session_id, workspace=workspaces.get(session_id, Workspace()))
    cwd: str | None = None
    announced = False
    root = Workspace()
    for sid in (session_id, *registry.ancestors(session_id)):
        record = registry.child(sid)
        if record is None:
            root = workspaces.get(sid, Workspace())
            break
        if not announced and record.cwd is not None:
            announced = True
            # a relative cwd is unknown (never a base): the client places it, not the proxy
            cwd = record.cwd if is_absolute(record.cwd) else None
    workspace = Workspace(cwd if announced else root.cwd, (), root.roots)
    return SessionContext(session_id, True, child.parent_id, workspace)


@attrs.frozen(eq=False, repr=False, slots=False)  # made rarely: see config/records.py
class Decision(FrozenRecord):
    """What the proxy does with one governed agent request.

    Attributes:
        method: the request's method.
        action: the effective action: ``"allow"`` / ``"deny"`` when the proxy
            decides (request_permission: answered with ``option_id``; fs /
            terminal: ``deny`` refuses, ``allow`` forwards), ``"ask"`` when
            the client decides (no rule, an ask rule, or an allow / deny rule
            none of whose option kinds the agent offered).
        rule: the deciding rule's name, or ``rules[N]`` (0-based) when it has
            none; ``None`` when no rule matched.
        rule_action: the deciding rule's own action (``None`` without a rule);
            differs from ``action`` only on the no-fitting-option fallback.
        option_id: the offered ``optionId`` the proxy answers with.
        option_kind: its kind.
        ask_timeout_seconds: answer ``cancelled`` if the client has not
            answered by then (forwarded requests only).
        error_code: JSON-RPC code of a refusal.
        reason: why, in a few words (for the audit log and refusals).
        facts: what the rules read from the request (tool name / kind /
            title, command, cwd, path): content, audited only when asked.
        forced: decided without a rule, failing closed (a field the rules
            read could not be read): audited all the same.
    """

    method: str
    action: Literal["allow", "deny", "ask"]
    rule: str | None = None
    rule_action: str | None = None
    option_id: str | None = None
    option_kind: str | None = None
    ask_timeout_seconds: float | None = None
    error_code: int | None = None
    reason: str = "no rule matched"
    facts: Mapping[str, str] = attrs.field(factory=dict)
    forced: bool = False

    @property
    def disposition(self) -> Disposition:
        """``"answer"`` (the proxy answers with an option), ``"refuse"`` (the proxy
        answers with an error) or ``"forward"`` (the client gets the request)."""
        if self.option_id is not None:
            return "answer"
        if self.error_code is not None:
            return "refuse"
        return "forward"

    @property
    def audit_event(self) -> AuditEvent | None:
        """``request_refused`` for a refusal, ``permission_decided`` otherwise: a
        rule's decision, and also a request no rule decided (``action: "ask"``,
        forwarded for the client to decide): every decision is on the record."""
        if self.error_code is not None:
            return AuditEvent.REQUEST_REFUSED
        return AuditEvent.PERMISSION_DECIDED

    def audit_fields(
        self, session_id: str | None, *, include_content: bool = False
    ) -> dict[str, Any]:
        """The audit record's fields (``None`` values are left out on output).

        Args:
            session_id: the request's session.
            include_content: also record :attr:`facts` (``audit.include_content``).
        """
        fields: dict[str, Any] = {
            "sessionId": session_id,
            "method": self.method,
            "rule": self.rule,
            "action": self.action,
            "ruleAction": self.rule_action if self.rule_action != self.action else None,
            "optionId": self.option_id,
            "optionKind": self.option_kind,
            "askTimeoutSeconds": self.ask_timeout_seconds,
            "reason": self.reason,
        }
        if include_content and self.facts:
            fields["content"] = dict(self.facts)
        return fields


class Policy:
    """The compiled ``[permissions]`` section.

    Decision among rules (``config/examples/permissions.toml``): only rules
    for the request's method are read; if any matching rule is ``deny``, the
    first matching deny decides (deny wins wherever both match); otherwise
    the first matching rule; no matching rule means ``ask``.
    """

    def __init__(self, config: PermissionsConfig) -> None:
        self.config = config
        self._by_method: dict[str, list[tuple[str, PermissionRule]]] = {
            method: [] for method in PERMISSION_METHODS
        }
        for index, rule in enumerate(config.rules):
            label = rule.name if rule.name is not None else f"rules[{index}]"
            self._by_method[rule.method].append((label, rule))
        self._reads_location = {
            method: any(
                r.path is not None or r.cwd is not None or r.inside_workspace is not None
                for _, r in rules
            )
            for method, rules in self._by_method.items()
        }
        self._reads_path = {
            method: any(r.path is not None for _, r in rules)
            for method, rules in self._by_method.items()
        }
        self._kind_denied = {
            method: any(r.action == "deny" and r.tool_kind is not None for _, r in rules)
            for method, rules in self._by_method.items()
        }

    @property
    def active(self) -> bool:
        """True when there is at least one rule."""
        return bool(self.config.rules)

    def governs(self, method: str | None) -> bool:
        """True for the agent->client methods a rule may govern."""
        return method in self._by_method

    def has_rules(self, method: str) -> bool:
        """True when at least one rule is for ``method``."""
        return bool(self._by_method.get(method))

    def decide(
        self,
        context: SessionContext,
        method: str,
        params: Mapping[str, Any] | None,
        *,
        tools: Mapping[str, Mapping[str, Any]] | None = None,
        resolve: PathResolver | None = None,
        own: OwnFiles | None = None,
    ) -> Decision:
        """Decides one agent request.

        Args:
            context: who is asking (:func:`session_context`).
            method: the request's method (one :meth:`governs`; any other is ``ask``).
            params: its params (``None`` or malformed fields: matchers that
                read them do not match; a value standing in as
                :data:`~acp_proxy.core.wire.views.OPAQUE`, too large to read,
                fails closed).
            tools: what the agent announced of its tool calls in this session
                (``toolCallId`` -> ``kind`` / ``title`` / ``name`` /
                ``rawInput``): merged under a request_permission's tool call
                with that id (the request's own non-null fields win).
            resolve: resolves a path on the proxy's filesystem (``None``: paths
                are read lexically only). Every place is then read twice, as
                given and resolved, each against the workspace roots as given
                and resolved: the stricter decision wins.
            own: the proxy's own files: a request naming one (as given or
                resolved, or by identity: a hard link to one) is refused
                whatever the rules say; a place that exists but cannot be
                examined is refused too (:func:`~acp_proxy.core.session.places.own_file_refusal`).

        Every shape a request_permission holds is read, whatever version was
        negotiated: the v1 ``toolCall`` and the v2 ``subject``. A deny rule
        matching any shape denies; the proxy answers allow only when every
        shape is allowed; a tool call whose ``kind`` is still unknown is never
        auto-allowed while a deny rule reads ``tool_kind``.

        Returns:
            The :class:`Decision`; never raises on any params.
        """
        p = params or {}
        # with own files to protect, too: what a relative path names, only the client knows
        if (self.active or own) and method in _LOCATED:
            misplaced = _not_absolute(method, p)
            if misplaced is not None:
                facts = _clean({k: _str(p.get(k)) for k in ("path", "cwd", "command")})
                return self._refused(method, misplaced, facts)
        rules = self._by_method.get(method)
        if not rules and not own:
            return Decision(method, "ask")
        shapes, contexts = _read_shapes(method, p, context, tools, resolve)
        audit = _merged_audit(shapes)
        why = _own_file(shapes, own) if own else None
        if why is not None:
            return self._refused(method, why, audit)
        if not rules:
            return Decision(method, "ask")
        picks = [self._pick(rules, s, c) for s, c in zip(shapes, contexts, strict=True)]
        return self._choose(method, picks, shapes, p, audit)

    def _choose(
        self,
        method: str,
        picks: list[tuple[str, PermissionRule] | None],
        shapes: list[_Facts],
        params: Mapping[str, Any],
        audit: Mapping[str, str],
    ) -> Decision:
        """The decision among the rules each shape picked: a deny wins wherever it
        matches; else a request that cannot be decided on its fields fails closed;
        else every shape must have matched (``ask`` otherwise), an ask wins over allow."""
        chosen = next((c for c in picks if c is not None and c[1].action == "deny"), None)
        if chosen is None:
            closed = self._fail_closed(method, shapes, audit)
            if closed is not None:
                return closed
            if any(c is None for c in picks):
                return Decision(method, "ask", facts=audit)
            chosen = next((c for c in picks if c is not None and c[1].action == "ask"), picks[0])
        assert chosen is not None
        return self._by_rule(method, chosen[0], chosen[1], shapes, params, audit)

    def _refused(self, method: str, reason: str, facts: Mapping[str, str]) -> Decision:
        """A deny whatever the rules say (``forced``), with ``permissions.refuse_code``."""
        return Decision(
            method,
            "deny",
            error_code=self.config.refuse_code,
            reason=reason,
            facts=facts,
            forced=True,
        )

    def _fail_closed(
        self, method: str, shapes: list[_Facts], audit: Mapping[str, str]
    ) -> Decision | None:
        """No deny rule matched, but the request cannot be decided on its fields:
        refused (a request other than request_permission, or one the SDKs read
        differently) or asked; ``None`` when it can be decided."""
        refuse = method != _REQUEST_PERMISSION
        disagreement = next((s.disagreement for s in shapes if s.disagreement), None)
        if disagreement is not None:
            why, refuse = f"read differently by the SDKs: {disagreement}", True
        elif any(s.incomplete or (s.paths_incomplete and self._reads_path[method]) for s in shapes):
            why = UNREADABLE_REASON  # too large to read: refused, or asked (never allowed)
        elif self._reads_location[method] and any(shape.unresolved for shape in shapes):
            why = UNRESOLVED_REASON
        else:
            return None
        if refuse:
            return self._refused(method, f"{why}: fail closed", audit)
        return Decision(method, "ask", reason=f"{why}: asked", facts=audit, forced=True)

    def _by_rule(
        self,
        method: str,
        label: str,
        rule: PermissionRule,
        shapes: list[_Facts],
        params: Mapping[str, Any],
        audit: Mapping[str, str],
    ) -> Decision:
        """What the chosen rule decides: its action; for a request_permission the
        option to answer with (asked when none fits, or the tool call's kind is unknown
        while a deny rule reads ``tool_kind``)."""
        base = Decision(
            method, rule.action, label, rule.action, reason=f"rule {label}", facts=audit
        )
        if rule.action == "ask":
            return attrs.evolve(base, ask_timeout_seconds=rule.ask_timeout_seconds)
        if method != _REQUEST_PERMISSION:
            if rule.action == "deny":
                return attrs.evolve(base, error_code=self.config.refuse_code)
            return base
        if (
            rule.action == "allow"
            and self._kind_denied[method]
            and any(shape.kind_unknown for shape in shapes)
        ):
            return attrs.evolve(
                base,
                action="ask",
                reason=f"rule {label}: the tool call's kind is unknown and a deny rule "
                "reads tool_kind: asked",
            )
        picked = choose_option(params.get("options"), rule.options)
        if picked is None:
            wanted = " or ".join(rule.options)
            return attrs.evolve(
                base, action="ask", reason=f"rule {label}: the agent offered no {wanted} option"
            )
        return attrs.evolve(base, option_id=picked[0], option_kind=picked[1])

    @staticmethod
    def _pick(
        rules: list[tuple[str, PermissionRule]], facts: _Facts, context: SessionContext
    ) -> tuple[str, PermissionRule] | None:
        """The first matching deny rule, else the first matching rule, else ``None``."""
        chosen: tuple[str, PermissionRule] | None = None
        for label, rule in rules:
            if _matches(rule, facts, context):
                if rule.action == "deny":
                    return label, rule
                if chosen is None:
                    chosen = (label, rule)
        return chosen


def choose_option(options: object, kinds: Sequence[str]) -> tuple[str, str] | None:
    """The first offered option whose kind comes first in ``kinds``.

    Args:
        options: the request's ``options`` (anything: only a list of objects
            with a string ``optionId`` and ``kind`` is read).
        kinds: acceptable kinds, most preferred first.

    Returns:
        ``(optionId, kind)`` of an offered option, or ``None`` when none fits.
        An ``optionId`` offered more than once with different kinds is never
        chosen (its meaning to the agent is ambiguous).
    """
    if not isinstance(options, list):
        return None
    offered: list[tuple[str, str]] = []
    kind_of: dict[str, str | None] = {}
    for option in options:
        if not isinstance(option, dict):
            continue
        oid, kind = option.get("optionId"), option.get("kind")
        if not isinstance(oid, str) or not isinstance(kind, str):
            continue
        if oid in kind_of and kind_of[oid] != kind:
            kind_of[oid] = None  # ambiguous: never chosen
        else:
            kind_of.setdefault(oid, kind)
        offered.append((oid, kind))
    for wanted in kinds:
        for oid, kind in offered:
            if kind == wanted and kind_of[oid] == kind:
                return oid, kind
    return None


def _read_shapes(
    method: str,
    params: Mapping[str, Any],
    context: SessionContext,
    tools: Mapping[str, Mapping[str, Any]] | None,
    resolve: PathResolver | None,
) -> tuple[list[_Facts], list[SessionContext]]:
    """Every shape of a request the rules read, each with the context it is read in:
    as given, then (with ``resolve``) every shape whose places resolve elsewhere,
    read against the roots as given and resolved."""
    if method == _REQUEST_PERMISSION:
        shapes = _shapes(params, context, tools)
    else:
        shapes = [_facts(method, params, context)]
    contexts = [context] * len(shapes)
    if resolve is not None:
        extra = [r for r in (_resolved(shape, resolve) for shape in shapes) if r is not None]
        if extra:
            shapes += extra
            contexts += [_resolved_context(context, resolve)] * len(extra)
    return shapes, contexts


def _merged_audit(shapes: list[_Facts]) -> dict[str, str]:
    """The audit fields of every shape (the first shape's value of a key wins)."""
    audit: dict[str, str] = {}
    for shape in shapes:
        for key, value in shape.audit.items():
            audit.setdefault(key, value)
    return audit


def _own_file(shapes: list[_Facts], own: OwnFiles) -> str | None:
    """Why a shape names the proxy's own file (a place, by path or identity, or in a
    command line, as text or a word joined to its cwd), or ``None``:
    :func:`~acp_proxy.core.session.places.own_file_refusal`."""
    return own_file_refusal(
        (x for s in shapes for x in (s.path, s.cwd, *s.paths) if x is not None),
        (x for s in shapes for x in (s.command, *s.commands) if x is not None),
        own,
        [
            (s.cwd, command_words(s.commands, s.argv))
            for s in shapes
            if s.command is not None or s.commands
        ],
    )


# --- facts and matching --------------------------------------------------------


@attrs.frozen(eq=False, repr=False, slots=False)  # made rarely: see config/records.py
class _Facts(FrozenRecord):
    """What the matchers read from one request shape (``None``: the request lacks it)."""

    tool: Mapping[str, Any] | None = None
    command: str | None = None
    cwd: str | None = None  # resolved
    path: str | None = None  # resolved
    has_location: bool = False  # a path or cwd the request names (resolved or not)
    audit: Mapping[str, str] = attrs.field(factory=dict)
    incomplete: bool = False  # a field the rules read is too large to read (OPAQUE)
    kind_unknown: bool = False  # a tool call whose kind is missing (or not a string)
    unresolved: bool = False  # a path or cwd that is not absolute (or an unknown cwd)
    commands: tuple[str, ...] = ()  # command line spellings deny rules also read
    paths: tuple[str, ...] = ()  # a tool call's locations and diff paths (normalised)
    disagreement: str | None = None  # why the SDKs read a governed field differently
    paths_incomplete: bool = False  # locations / content too large to read (OPAQUE)
    raw_path: str | None = None  # the place as given, before normalisation
    raw_cwd: str | None = None
    raw_paths: tuple[str, ...] = ()
    argv: tuple[str, ...] = ()  # a terminal's command, args and env values (own files' words)


#: Why a governed request could not be decided on its fields.
UNREADABLE_REASON = "a field the permission rules read is too large to read"
#: Why a governed request could not be placed.
UNRESOLVED_REASON = "a path or cwd the permission rules read is not an absolute path"
#: The methods whose ``path`` / ``cwd`` the client resolves: ACP requires them absolute.
_LOCATED = {"fs/read_text_file": "path", "fs/write_text_file": "path", "terminal/create": "cwd"}
#: The tool call fields the agent's session/update announcements are remembered for.
TOOL_FIELDS = ("kind", "title", "name", "rawInput")


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _tool_facts(tool: object, tools: Mapping[str, Mapping[str, Any]] | None) -> _Facts:
    """A tool call shape: the request's own fields over what the agent announced of it."""
    if not isinstance(tool, dict):
        return _Facts(incomplete=tool is OPAQUE)
    tcid = tool.get("toolCallId")
    known = tools.get(tcid) if tools is not None and isinstance(tcid, str) else None
    if known:
        merged = dict(known)
        merged.update((k, v) for k, v in tool.items() if v is not None)
        tool = merged
    raw = tool.get("rawInput")
    named = tool_paths(tool)
    incomplete = any(tool.get(k) is OPAQUE for k in TOOL_FIELDS) or (
        isinstance(raw, dict) and any(v is OPAQUE for v in raw.values())
    )
    audit = {k: tool[k] for k in ("name", "kind", "title") if isinstance(tool.get(k), str)}
    if named.paths:
        audit["paths"] = " ".join(named.paths)
    paths = tuple(_normpath(p) if is_absolute(p) else p for p in named.paths)
    commands, argv = _raw_command(raw)
    return _Facts(
        tool,
        audit=audit,
        commands=commands,
        argv=argv,
        incomplete=incomplete,
        # the SDKs read a kind outside the schema's ToolKind values as no kind
        kind_unknown=tool.get("kind") not in TOOL_KINDS,
        unresolved=any(not is_absolute(p) for p in paths),
        paths=paths,
        paths_incomplete=named.incomplete,
        raw_paths=named.paths,
    )


def _raw_command(raw: object) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A tool call's ``rawInput.command`` as the own files' check reads it: its spellings
    (:func:`command_variants`; an argv list's too, as a ``terminal/create``'s) and
    its argv, or two empty tuples (no command, or not a string nor a list of strings).
    Read by the own files' check only: command rules match ``rawInput`` as ``raw_input``."""
    command = raw.get("command") if isinstance(raw, dict) else None
    line = _raw_value(command)  # as the raw_input deny rules read it
    if not line:  # none, or empty: nothing to read
        return (), ()
    argv = tuple(command) if isinstance(command, list) else ()
    return _raw_variants(command, line), argv


def _shapes(
    params: Mapping[str, Any],
    context: SessionContext,
    tools: Mapping[str, Mapping[str, Any]] | None,
) -> list[_Facts]:
    """Every shape a request_permission holds: the v1 ``toolCall``, the v2 ``subject``."""
    shapes: list[_Facts] = []
    if "toolCall" in params:
        shapes.append(_tool_facts(params["toolCall"], tools))
    if "subject" in params:
        subject = params["subject"]
        kind = subject.get("type") if isinstance(subject, dict) else None
        if isinstance(subject, dict) and kind == "tool_call":
            shapes.append(_tool_facts(subject.get("toolCall"), tools))
        elif isinstance(subject, dict) and kind == "command":
            raw_command, raw_cwd = subject.get("command"), subject.get("cwd")
            command, cwd_text = _str(raw_command), _str(raw_cwd)
            cwd = context.workspace.resolve(cwd_text) if cwd_text is not None else None
            audit = _clean({"command": command, "cwd": cwd_text})
            incomplete = raw_command is OPAQUE or raw_cwd is OPAQUE
            shapes.append(
                _Facts(
                    None,
                    command,
                    cwd,
                    None,
                    cwd_text is not None,
                    audit,
                    incomplete,
                    unresolved=cwd_text is not None and cwd is None,
                    commands=command_variants(command) if command is not None else (),
                    raw_cwd=cwd_text,
                    disagreement=_subject_problem(raw_command, raw_cwd),
                )
            )
        else:
            shapes.append(_Facts(incomplete=subject is OPAQUE or kind is OPAQUE))
    if params.get("options") is OPAQUE and shapes:
        shapes[0] = attrs.evolve(shapes[0], incomplete=True)
    return shapes or [_Facts()]


def _subject_problem(command: object, cwd: object) -> str | None:
    """Why both SDKs refuse a v2 command subject (``command`` and ``cwd`` are
    required strings), or ``None``; a value too large to read is left to the caller."""
    for key, value in (("command", command), ("cwd", cwd)):
        if not isinstance(value, str) and value is not OPAQUE:
            return f"subject.{key} is not a string (both SDKs refuse the request)"
    return None


def _facts(method: str, params: Mapping[str, Any], context: SessionContext) -> _Facts:
    """The one shape of an ``fs/*`` or ``terminal/create`` request."""
    ws = context.workspace
    if method == "terminal/create":
        raw_command, raw_args = params.get("command"), params.get("args")
        # args as the Python SDK reads them (non-string items dropped): see sdk_reading
        args, disagreement = (None, None) if raw_args is OPAQUE else read_args(raw_args)
        if not isinstance(raw_command, str) and raw_command is not OPAQUE:
            disagreement = "command is not a string (both SDKs refuse the request)"
        command = _command_line(raw_command, args)
        raw_cwd = params.get("cwd")
        env_values, env_opaque = _env_values(params.get("env"))
        incomplete = (
            raw_command is OPAQUE
            or raw_args is OPAQUE
            or raw_cwd is OPAQUE
            or env_opaque
            or (isinstance(raw_args, list) and any(a is OPAQUE for a in raw_args))
        )
        if raw_cwd is None:
            raw_cwd = ws.cwd  # the client runs it in the session's cwd
        cwd_text = _str(raw_cwd)
        cwd = ws.resolve(cwd_text) if cwd_text is not None else None
        audit = _clean({"command": command, "cwd": cwd_text})
        commands: tuple[str, ...] = ()
        argv: list[str] = []
        if command is not None:
            argv = [command] if args is None else [str(raw_command), *args]
            commands = _unique((*_argv_variants(argv, 0), *command_variants(command)))
        return _Facts(
            None,
            command,
            cwd,
            None,
            True,
            audit,
            incomplete,
            unresolved=cwd is None,
            commands=commands,
            disagreement=disagreement,
            raw_cwd=cwd_text,
            argv=(*argv, *env_values),
        )
    raw = params.get("path")
    raw_path = _str(raw)
    path = ws.resolve(raw_path) if raw_path is not None else None
    return _Facts(
        path=path,
        has_location=raw_path is not None,
        audit=_clean({"path": raw_path}),
        incomplete=raw is OPAQUE,
        raw_path=raw_path,
    )


def _env_values(env: object) -> tuple[tuple[str, ...], bool]:
    """A ``terminal/create``'s ``env`` values, read as words of its command (a script
    can write to ``"$LOG"``), and whether a part of it is too large to read.

    Args:
        env: ``params.env``: a list of ``{"name", "value"}`` objects (ACP's
            ``EnvVariable``); anything else holds no value.

    Returns:
        The string values, in order; True when ``env``, an item or a value is
        :data:`~acp_proxy.core.wire.views.OPAQUE` (then the request is
        incomplete: it is refused, fail closed, wherever a rule reads it).
    """
    if env is OPAQUE:
        return (), True
    if not isinstance(env, list):
        return (), False
    values: list[str] = []
    opaque = False
    for item in env:
        value = item.get("value") if isinstance(item, dict) else item
        if value is OPAQUE:
            opaque = True
        elif isinstance(value, str):
            values.append(value)
    return tuple(values), opaque


def _resolved(shape: _Facts, resolve: PathResolver) -> _Facts | None:
    """``shape`` with every place it names resolved on the proxy's filesystem (from
    the place as given, so ``..`` after a link is read as the client's open does), or
    ``None`` when nothing resolves elsewhere."""

    def one(raw: str | None, current: str | None) -> str | None:
        return _normpath(resolve(raw)) if raw is not None and is_absolute(raw) else current

    path, cwd = one(shape.raw_path, shape.path), one(shape.raw_cwd, shape.cwd)
    paths = tuple(one(r, c) or c for r, c in zip(shape.raw_paths, shape.paths, strict=True))
    if (path, cwd, paths) == (shape.path, shape.cwd, shape.paths):
        return None
    places = [x for x in (path, cwd, *paths) if x is not None]
    audit = {**shape.audit, "resolved": " ".join(places)}
    return attrs.evolve(shape, path=path, cwd=cwd, paths=paths, audit=audit)


def _resolved_context(context: SessionContext, resolve: PathResolver) -> SessionContext:
    """``context`` whose workspace roots are the roots as given and resolved."""
    roots = context.workspace.roots
    both = _unique((*roots, *(_normpath(resolve(r)) for r in roots)))
    return attrs.evolve(context, workspace=attrs.evolve(context.workspace, bound=both))


def _not_absolute(method: str, params: Mapping[str, Any]) -> str | None:
    """Why an fs / terminal request's path or cwd is refused (not an absolute POSIX
    path: the client would resolve it against its own working directory), or ``None``.

    A ``terminal/create`` without ``cwd`` runs in the session's (read later); a
    value too large to read is left to the fail-closed check of the rules.
    """
    key = _LOCATED[method]
    value = params.get(key)
    if value is OPAQUE or (value is None and key == "cwd"):
        return None
    if isinstance(value, str) and is_absolute(value):
        return None
    return f"{key} is not an absolute path"


def _clean(fields: Mapping[str, str | None]) -> dict[str, str]:
    return {k: v for k, v in fields.items() if v}


def _command_line(command: object, args: object) -> str | None:
    """``command`` and ``args`` joined by single spaces; ``None`` when malformed."""
    if not isinstance(command, str):
        return None
    if args is None:
        return command
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        return None
    return " ".join([command, *args])


def _glob(value: str | None, patterns: Sequence[str]) -> bool:
    return value is not None and any(fnmatchcase(value, p) for p in patterns)


def _deny_glob(value: str | None, patterns: Sequence[str]) -> bool:
    """A deny rule's glob: exact, or case-folded (``/root/.SSH/id_rsa`` is ``**/.ssh/**``)."""
    if value is None:
        return False
    folded = value.casefold()
    return any(fnmatchcase(value, p) or fnmatchcase(folded, p.casefold()) for p in patterns)


def platform_path(path: str) -> str:
    """``path`` as Windows and HFS+ clients read it, for deny rules only.

    Backslashes become separators, Unicode format characters (zero-width
    joiners and the like, which HFS+ ignores) are removed, trailing dots and
    spaces of each component are dropped (Windows drops them), and the result
    is normalised (``..`` folded). A deny rule matching this spelling refuses
    the request too (fail closed); allow rules never read it.
    """
    text = "".join(ch for ch in path.replace("\\", "/") if unicodedata.category(ch) != "Cf")
    parts = [p if p in (".", "..") else p.rstrip(". ") for p in text.split("/")]
    return posixpath.normpath("/".join(parts))


def _deny_path_glob(value: str | None, patterns: Sequence[str]) -> bool:
    """A deny rule's path glob: as :func:`_deny_glob`, also on :func:`platform_path`."""
    return value is not None and (
        _deny_glob(value, patterns) or _deny_glob(platform_path(value), patterns)
    )


def _matches(rule: PermissionRule, facts: _Facts, context: SessionContext) -> bool:
    """Every matcher the rule gives matches (AND; :data:`_MATCHERS`).

    A deny rule's globs also match case-folded, and its ``command`` (and any
    ``raw_input`` value) is read in every spelling :func:`command_variants`
    gives; allow and ask rules match exactly (fail closed).
    """
    deny = rule.action == "deny"
    for field, matcher in _MATCHERS:
        if getattr(rule, field) is not None and not matcher(rule, facts, context, deny):
            return False
    return True


# Each matcher is called only when its rule field is given (not ``None``);
# ``deny``: the rule is a deny rule.


def _match_session(rule: PermissionRule, facts: _Facts, ctx: SessionContext, deny: bool) -> bool:
    assert rule.session is not None
    return (_deny_glob if deny else _glob)(ctx.session_id, rule.session)


def _match_child(rule: PermissionRule, facts: _Facts, ctx: SessionContext, deny: bool) -> bool:
    return rule.child == ctx.child


def _match_parent(rule: PermissionRule, facts: _Facts, ctx: SessionContext, deny: bool) -> bool:
    assert rule.parent is not None
    return ctx.child and (_deny_glob if deny else _glob)(ctx.parent_id, rule.parent)


def _tool_matcher(key: str, field: str) -> _Matcher:
    """The matcher of rule ``field`` (``tool_name``...) on the tool call's ``key``."""

    def match(rule: PermissionRule, facts: _Facts, ctx: SessionContext, deny: bool) -> bool:
        tool = facts.tool
        glob = _deny_glob if deny else _glob
        return tool is not None and glob(_str(tool.get(key)), getattr(rule, field))

    return match


def _match_raw_input(rule: PermissionRule, facts: _Facts, ctx: SessionContext, deny: bool) -> bool:
    assert rule.raw_input is not None
    raw = facts.tool.get("rawInput") if facts.tool is not None else None
    if not isinstance(raw, dict):
        return False
    for key, patterns in rule.raw_input.items():
        value = _raw_value(raw.get(key))
        if not deny:
            if not _glob(value, patterns):
                return False
        elif value is None or not any(
            _deny_glob(v, patterns) for v in _raw_variants(raw.get(key), value)
        ):
            return False
    return True


def _match_command(rule: PermissionRule, facts: _Facts, ctx: SessionContext, deny: bool) -> bool:
    assert rule.command is not None
    if not deny:
        return _glob(facts.command, rule.command)
    return facts.command is not None and any(
        _deny_glob(v, rule.command) for v in (facts.command, *facts.commands)
    )


def _match_cwd(rule: PermissionRule, facts: _Facts, ctx: SessionContext, deny: bool) -> bool:
    assert rule.cwd is not None
    return (_deny_path_glob if deny else _glob)(facts.cwd, rule.cwd)


def _match_path(rule: PermissionRule, facts: _Facts, ctx: SessionContext, deny: bool) -> bool:
    assert rule.path is not None
    place = _deny_path_glob if deny else _glob
    if facts.tool is None:
        return place(facts.path, rule.path)
    # a tool call: its locations and diff paths (deny: any of them; else all, and some)
    hits = [place(p, rule.path) for p in facts.paths]
    return any(hits) if deny else bool(hits) and all(hits)


def _match_inside_workspace(
    rule: PermissionRule, facts: _Facts, ctx: SessionContext, deny: bool
) -> bool:
    if not facts.has_location:
        return False  # nothing to place: a tool_call subject, no path at all
    located = facts.path if rule.method.startswith("fs/") else facts.cwd
    ws = ctx.workspace
    inside = ws.contains(located)
    alt = platform_path(located) if deny and located is not None else None
    if deny and rule.inside_workspace:
        inside = (
            inside
            or ws.contains(located, fold=True)
            or ws.contains(alt)
            or ws.contains(alt, fold=True)
        )
    elif deny:  # denied outside: outside if either spelling is
        inside = inside and ws.contains(alt)
    return inside == rule.inside_workspace


_Matcher = Callable[[PermissionRule, _Facts, SessionContext, bool], bool]

#: Rule field -> its matcher; a rule matches when every matcher of a field it
#: gives matches (pure functions: the order only saves work).
_MATCHERS: tuple[tuple[str, _Matcher], ...] = (
    ("session", _match_session),
    ("child", _match_child),
    ("parent", _match_parent),
    ("tool_name", _tool_matcher("name", "tool_name")),
    ("tool_kind", _tool_matcher("kind", "tool_kind")),
    ("tool_title", _tool_matcher("title", "tool_title")),
    ("raw_input", _match_raw_input),
    ("command", _match_command),
    ("cwd", _match_cwd),
    ("path", _match_path),
    ("inside_workspace", _match_inside_workspace),
)


# --- answers -------------------------------------------------------------------


#: the ``_meta`` key of the proxy's own answer to a permission request (namespaced:
#: ACP's extensibility rules reserve unprefixed keys)
DECISION_META_KEY = "acp-proxy/decision"


def answer_frame(rid: JsonId, decision: Decision) -> bytes:
    """The proxy's answer to the agent for an ``"answer"`` or ``"refuse"`` decision.

    ``"answer"``: ``{"outcome": {"outcome": "selected", "optionId": ...},
    "_meta": {"acp-proxy/decision": {"rule": ..., "action": ...}}}`` (the same
    in v1 and v2, whose ``RequestPermissionResponse`` allows ``_meta``), so an
    agent or client that shows ``_meta`` can say which rule answered.
    ``"refuse"``: a JSON-RPC error whose message names the rule and whose
    ``data`` holds ``rule``, ``method``.

    Raises:
        ValueError: the decision forwards the request (nothing to answer).
    """
    if decision.option_id is not None:
        outcome = {"outcome": "selected", "optionId": decision.option_id}
        why = {"rule": decision.rule, "action": decision.rule_action or decision.action}
        result = {"outcome": outcome, "_meta": {DECISION_META_KEY: why}}
        return dumps({"jsonrpc": "2.0", "id": rid, "result": result})
    if decision.error_code is not None:
        message = (
            f"acp-proxy: {decision.method} refused by permission rule {decision.rule}"
            if decision.rule is not None
            else f"acp-proxy: {decision.method} refused: {decision.reason}"
        )
        data = {"rule": decision.rule, "method": decision.method}
        return error_frame(rid, decision.error_code, message, data)
    raise ValueError(f"a forwarded {decision.method} request has no proxy answer")


def cancelled_frame(rid: JsonId) -> bytes:
    """The answer to a ``session/request_permission`` whose ask timed out (v1 and v2)."""
    return dumps({"jsonrpc": "2.0", "id": rid, "result": {"outcome": {"outcome": "cancelled"}}})
