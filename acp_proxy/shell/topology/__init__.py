"""Topologies: which transports a relay connects.

:mod:`~acp_proxy.shell.topology.stdio` (stdin/stdout to an agent process),
:mod:`~acp_proxy.shell.topology.listen` (``--listen`` and ``--connect`` over
WebSocket, with :mod:`~acp_proxy.shell.topology.ws_upgrade` checking upgrade
requests) and :mod:`~acp_proxy.shell.topology.chain` (``--chain``, under an
ACP conductor).
"""
