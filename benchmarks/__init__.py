"""Benchmarks of acp-proxy (not shipped in the wheel).

``python -m benchmarks`` runs :mod:`benchmarks.bench` (the proxy's cost
against a direct pipe and a zero-inspection relay, with :mod:`benchmarks.peer`
as the agent); ``python -m benchmarks.memprobe`` measures the peak RSS of a
real proxy for one large message per shape.
"""
