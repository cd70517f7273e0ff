"""EngineContext: one context for the engine parts; a reload swaps its configuration once."""

from __future__ import annotations

import attrs

from acp_proxy.config import Config, DedupConfig
from acp_proxy.core.engine import ProxyCore
from acp_proxy.core.engine.context import EngineContext
from acp_proxy.core.wire.jsonrpc import parse


@attrs.define
class _Part:
    seen: list[Config] = attrs.Factory(list)

    def configure(self, config: Config) -> None:
        self.seen.append(config)


def test_a_part_that_follows_is_configured_now_and_on_every_reconfigure() -> None:
    first = Config()
    ctx = EngineContext.open(first, "connection 1", parse)
    part = _Part()
    ctx.follow(part)
    assert part.seen == [first]
    second = Config(dedup=DedupConfig(state_reports=False))
    ctx.reconfigure(second)
    assert part.seen == [first, second]
    assert ctx.config is second
    assert ctx.hold.config is second.hold


def test_every_part_of_the_core_with_a_policy_follows_its_context() -> None:
    core = ProxyCore(Config())
    ctx = core.ctx
    parts = [core.agent, core.client, ctx.gate, ctx.budgets, ctx.admission, ctx.elicitation]
    assert [id(p) for p in parts if hasattr(p, "configure")] == [id(p) for p in parts]
    assert {id(p) for p in ctx.followers} == {id(p) for p in parts}
    # everything that can take a policy, on the core or in the context, is a follower
    members = [*vars(core).values(), *(getattr(ctx, f.name) for f in attrs.fields(EngineContext))]
    configurable = {id(v) for v in members if callable(getattr(v, "configure", None))}
    assert configurable == {id(p) for p in ctx.followers}


def test_the_core_and_its_parts_share_one_context() -> None:
    core = ProxyCore(Config())
    ctx = core.ctx
    assert core.agent.ctx is ctx
    assert core.client.ctx is ctx
    assert core.registry is ctx.registry is core.agent.registry is core.client.registry
    assert core.permissions is ctx.gate is core.agent.gate is core.client.gate
    assert core.budgets is ctx.budgets is core.agent.budgets is core.client.budgets
    assert ctx.budgets.registry is ctx.registry
    assert ctx.gate.ledger is ctx.ledger
    new = Config(dedup=DedupConfig(state_reports=False))
    core.reconfigure(new)
    assert core.config is new is ctx.config
