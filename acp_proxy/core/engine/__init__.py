"""The engine: :class:`ProxyCore`, the whole proxy as a pure function of frames, time and state.

:mod:`~acp_proxy.core.engine.proxy` holds the public API and the hot path,
:mod:`~acp_proxy.core.engine.base` the shared state and request tracking,
:mod:`~acp_proxy.core.engine.client_side` enforcement and
:mod:`~acp_proxy.core.engine.agent_side` hold, registry and dedup.
"""

from acp_proxy.core.engine.proxy import CoreStatistics, ProxyCore

__all__ = ["CoreStatistics", "ProxyCore"]
