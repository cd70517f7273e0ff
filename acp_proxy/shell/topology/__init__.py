"""Topologies: which transports a relay connects.

:mod:`~acp_proxy.shell.topology.stdio` (stdin/stdout to an agent process),
:mod:`~acp_proxy.shell.topology.listen` (``--listen``, a WebSocket server,
with :mod:`~acp_proxy.shell.topology.ws_upgrade` checking upgrade requests),
:mod:`~acp_proxy.shell.topology.connect` (``--connect``, a WebSocket client)
and :mod:`~acp_proxy.shell.topology.chain` (``--chain``, under an ACP
conductor).
"""
