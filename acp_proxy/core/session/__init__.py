"""Session state and the rules over it: patch, schema views, registry,
policy (enforcement), hold and dedup.
"""
