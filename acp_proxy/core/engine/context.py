"""The engine context: what the parts of one connection's engine share.

docs/design.md section "The engine context". mitmproxy's ``proxy/context.py``
is the model: a part is built from one context (``Part(ctx)``) instead of a list
of collaborators, and reads the shared state through it. The context holds the
effective configuration, the session state (registry, hold buffer, duplicate
filter), the :class:`~acp_proxy.core.engine.ledger.Ledger` (outcomes, counters,
requests in flight), what ``initialize`` negotiated, and the four gates.

A reload swaps the configuration once (:meth:`EngineContext.reconfigure`): the
context takes the new :class:`~acp_proxy.config.Config` and hands it to every
part that derives something from a policy section. Such a part registers itself
with :meth:`EngineContext.follow` when it is built, so no part can be left
deciding on the old policy.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

import attrs

from acp_proxy.config import Config, LimitsConfig
from acp_proxy.config.records import Described
from acp_proxy.core.engine.counters import Counters
from acp_proxy.core.engine.inflight import InFlight
from acp_proxy.core.engine.ledger import Ledger
from acp_proxy.core.engine.negotiated import Negotiated
from acp_proxy.core.session.dedup import StateDedup
from acp_proxy.core.session.hold import HoldBuffer
from acp_proxy.core.session.registry import Registry
from acp_proxy.core.wire.jsonrpc import Message

if TYPE_CHECKING:
    from acp_proxy.core.engine.admission import AdmissionGate
    from acp_proxy.core.engine.budgets import BudgetGate
    from acp_proxy.core.engine.elicitation import ElicitationGate
    from acp_proxy.core.engine.permissions import PermissionGate

__all__ = ["Configurable", "EngineContext", "EnginePart"]


class Configurable(Protocol):
    """A part that derives values from policy sections of the configuration."""

    def configure(self, config: Config) -> None:
        """Takes the policy sections of ``config`` (at construction and on a reload)."""


@attrs.define(eq=False, repr=False)
class EngineContext(Described):
    """The state and parts one connection's engine shares (one per :class:`ProxyCore`).

    Built by :meth:`open`; the parts never replace a member, only the
    configuration changes (:meth:`reconfigure`).

    Attributes:
        config: the effective configuration (swapped by :meth:`reconfigure`).
        registry: the subagent registry.
        hold: the hold buffer.
        dedup: the duplicate state report filter.
        ledger: outcomes, counters and requests in flight.
        negotiated: what ``initialize`` negotiated.
        gate: the permission gate (``[permissions]``, workspaces, ask timers).
        budgets: the budget gate (``[budgets]``).
        admission: the admission gate (``[admission]``).
        elicitation: the elicitation gate (``[elicitation]``).
    """

    config: Config
    registry: Registry
    hold: HoldBuffer
    dedup: StateDedup
    ledger: Ledger
    negotiated: Negotiated
    gate: PermissionGate = attrs.field(init=False)
    budgets: BudgetGate = attrs.field(init=False)
    admission: AdmissionGate = attrs.field(init=False)
    elicitation: ElicitationGate = attrs.field(init=False)
    _followers: list[Configurable] = attrs.field(init=False, factory=list)

    @classmethod
    def open(cls, config: Config, label: str, reparse: Callable[[bytes], Message]) -> EngineContext:
        """The context of a new connection, its gates built in dependency order.

        Args:
            config: the effective configuration.
            label: what the ledger's life-cycle lines start with (``"connection 1"``).
            reparse: parses a held frame again with the connection's limits.
        """
        from acp_proxy.core.engine.admission import AdmissionGate
        from acp_proxy.core.engine.budgets import BudgetGate
        from acp_proxy.core.engine.elicitation import ElicitationGate
        from acp_proxy.core.engine.permissions import PermissionGate

        limits = config.limits
        registry = Registry(
            limits.max_children,
            max_sessions=limits.max_sessions,
            max_child_bytes=limits.max_child_bytes,
            max_registry_bytes=limits.max_registry_bytes,
        )
        inflight = InFlight(limits.max_pending_requests, limits.max_pending_bytes)
        ctx = cls(
            config,
            registry,
            HoldBuffer(config.hold, reparse),
            StateDedup(limits.max_dedup_bytes),
            Ledger(Counters(), inflight, config.audit.include_content, label),
            Negotiated(),
        )
        ctx.gate = PermissionGate(ctx)
        ctx.budgets = BudgetGate(ctx)  # reads gate.tools
        ctx.admission = AdmissionGate(ctx)
        ctx.elicitation = ElicitationGate(ctx)  # reads gate.answered
        return ctx

    @property
    def limits(self) -> LimitsConfig:
        """``config.limits`` (bound into open buffers: a reload keeps them)."""
        return self.config.limits

    @property
    def inflight(self) -> InFlight:
        """The requests in flight per direction (the ledger's)."""
        return self.ledger.inflight

    @property
    def n(self) -> Counters:
        """The connection's counters (the ledger's)."""
        return self.ledger.n

    @property
    def followers(self) -> tuple[Configurable, ...]:
        """The parts :meth:`reconfigure` hands a new configuration to, in order."""
        return tuple(self._followers)

    def follow(self, part: Configurable) -> None:
        """Registers ``part`` for :meth:`reconfigure` and configures it now."""
        self._followers.append(part)
        part.configure(self.config)

    def reconfigure(self, config: Config) -> None:
        """Swaps the configuration: every member and registered part takes ``config``.

        In one synchronous call, in registration order, so the next message
        is decided wholly under the new policy.
        """
        self.config = config
        self.hold.config = config.hold
        self.ledger.include_content = config.audit.include_content
        for part in self._followers:
            part.configure(config)


class EnginePart:
    """A part built from the engine context, with the context's members under short names.

    The members never change (only :attr:`EngineContext.config` does), so a part
    may keep them: one attribute lookup each on the way of a message.

    Args:
        ctx: the engine context.
    """

    def __init__(self, ctx: EngineContext) -> None:
        self.ctx = ctx
        self.registry = ctx.registry
        self.hold = ctx.hold
        self.dedup = ctx.dedup
        self.ledger = ctx.ledger
        self.inflight = ctx.inflight
        self.n = ctx.n
        self.negotiated = ctx.negotiated
        self.gate = ctx.gate
        self.budgets = ctx.budgets
        self.admission = ctx.admission
        self.elicitation = ctx.elicitation
