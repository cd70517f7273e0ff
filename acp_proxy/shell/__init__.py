"""The trio shell: moves bytes and carries out the sans-IO core's actions.

:mod:`~acp_proxy.shell.relay` (one nursery per connection),
:mod:`~acp_proxy.shell.routing` (action routing and the timer the relays
share), :mod:`~acp_proxy.shell.audit` (the audit log),
:mod:`~acp_proxy.shell.transport` (ndjson, stdio, agent process, WebSocket)
and :mod:`~acp_proxy.shell.topology` (which transports a relay connects).
"""
