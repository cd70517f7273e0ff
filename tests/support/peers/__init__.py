"""Peer programs the tests start as subprocesses (stdlib only), and import where useful."""
