"""The engine: :class:`ProxyCore`, the whole proxy as a pure function of frames, time and state.

:mod:`~acp_proxy.core.engine.proxy` holds the public API, intake and the hot path;
it composes the parts: :mod:`~acp_proxy.core.engine.client` (enforcement),
:mod:`~acp_proxy.core.engine.agent` (hold, registry and dedup),
:mod:`~acp_proxy.core.engine.context` (what the parts share; a reload swaps its config),
:mod:`~acp_proxy.core.engine.ledger` (outcomes and audit records),
:mod:`~acp_proxy.core.engine.inflight` (requests in flight),
:mod:`~acp_proxy.core.engine.counters` and :mod:`~acp_proxy.core.engine.negotiated`.
"""

from acp_proxy.core.engine.proxy import CoreStatistics, ProxyCore

__all__ = ["CoreStatistics", "ProxyCore"]
