"""The decision keys of each level are written once (core/wire/keys.py), and every
reader of a level reads at least them."""

from __future__ import annotations

from acp_proxy.core.wire import guard, keys, views


def test_the_views_read_every_decision_key_and_its_snake_case_alias() -> None:
    """A large frame's view decodes every key the duplicate guard protects, at its level."""
    top, params, update = keys.DECISION_KEYS
    assert top <= keys.VIEW_TOP
    assert params | keys.SNAKE_PARAMS_KEYS <= keys.VIEW_PARAMS
    assert update | keys.SNAKE_UPDATE_KEYS <= keys.VIEW_UPDATE


def test_every_decision_key_is_a_literal_of_the_byte_precheck() -> None:
    """The byte pre-check counts every decision key of every level (else a repeat could
    hide from the strict decoder)."""
    literals = {lit[1:-1].decode() for lit in keys.DECISION_LITERALS}
    every = set().union(*keys.DECISION_KEYS) | keys.CAPABILITY_KEYS
    assert every <= literals


def test_guard_and_views_share_one_set_of_capability_keys() -> None:
    """``update.capabilities`` keys are defined once and used by both readers."""
    assert guard._CAPABILITY_KEYS is keys.CAPABILITY_KEYS
    assert views._CAPABILITY_KEYS is keys.CAPABILITY_KEYS
