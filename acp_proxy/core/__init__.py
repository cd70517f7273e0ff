"""The sans-IO core of acp-proxy: bytes and time in, actions out.

Nothing in this package imports trio, sockets, subprocess or does OS I/O.
"""
