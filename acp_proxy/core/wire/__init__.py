"""Bytes to messages, nothing about sessions: framing, JSON-RPC, the
parser-differential guard, views of large frames and the pass-through fast path.
"""
