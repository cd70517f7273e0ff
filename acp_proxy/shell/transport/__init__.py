"""Trio transports: each moves whole frames between a peer and the relay."""

from acp_proxy.shell.transport.base import Closed, FrameTransport

__all__ = ["Closed", "FrameTransport"]
