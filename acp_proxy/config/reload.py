"""What a configuration reload may change (docs/design.md section 3, "Config").

Pure: the shell (:mod:`acp_proxy.shell.reload`) loads the file again and asks
:func:`apply_reload` what the new effective configuration is. Only the
*policy sections* change at run time (:data:`POLICY_SECTIONS`); every other
key (the listen address and its settings, ``limits`` already applied to open
buffers, ``process``, ``audit.path``) keeps its running value, and the keys
whose file value differs are named so the shell can say a restart is
required. This module never imports trio.
"""

from __future__ import annotations

import hashlib
from typing import Any

import attrs

from acp_proxy.config.model import AuditConfig, Config

__all__ = ["POLICY_SECTIONS", "apply_reload", "policy_digest"]

#: The keys a reload applies to live connections (and every new one).
POLICY_SECTIONS: tuple[str, ...] = (
    "enforcement",
    "hold",
    "dedup",
    "audit.include_content",
    "permissions",
    "budgets",
    "policy",
    "admission",
    "elicitation",
)

#: ``budgets`` keys that name the store: bound into the running shell, never reloaded.
STORE_KEYS: tuple[str, ...] = ("store", "key", "key_prefix", "store_fail", "store_timeout_s")


#: sections that are policy as a whole (``audit`` is policy only in ``include_content``)
_WHOLE_POLICY_SECTIONS = frozenset(s for s in POLICY_SECTIONS if "." not in s)


def _policy_only(cfg: Config) -> Config:
    """``cfg``'s policy sections over the defaults of everything else."""
    return Config(
        enforcement=cfg.enforcement,
        hold=cfg.hold,
        dedup=cfg.dedup,
        permissions=cfg.permissions,
        budgets=cfg.budgets,
        policy=cfg.policy,
        admission=cfg.admission,
        elicitation=cfg.elicitation,
        audit=AuditConfig(include_content=cfg.audit.include_content),
    )


def policy_digest(cfg: Config) -> str:
    """``"sha256:HEX"`` of the effective policy (the TOML of :data:`POLICY_SECTIONS`).

    Two configurations that differ only outside the policy sections have the
    same digest; any change of a policy value changes it.
    """
    from acp_proxy.config.io import dump_config  # cattrs: only when a digest is asked for

    text = dump_config(_policy_only(cfg))
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def _changed(old: Any, new: Any, prefix: str) -> list[str]:
    """Dotted keys under ``prefix`` whose values differ between two attrs instances."""
    keys: list[str] = []
    for field in attrs.fields(type(old)):
        a, b = getattr(old, field.name), getattr(new, field.name)
        if a != b:
            keys.append(f"{prefix}.{field.name}")
    return keys


def apply_reload(running: Config, loaded: Config) -> tuple[Config, list[str]]:
    """The configuration to run with after a reload, and the keys that need a restart.

    Args:
        running: the effective configuration in force.
        loaded: the file loaded again (with the same command-line overrides).

    Returns:
        ``(effective, restart_required)``: ``running`` with ``loaded``'s policy
        sections (:data:`POLICY_SECTIONS`); the dotted keys outside them whose
        value in ``loaded`` differs from the running one (ignored until restart).
    """
    restart: list[str] = []
    for section in attrs.fields(Config):  # a section added later needs a restart by default
        if section.name not in _WHOLE_POLICY_SECTIONS:
            old, new = getattr(running, section.name), getattr(loaded, section.name)
            restart += [k for k in _changed(old, new, section.name) if k not in POLICY_SECTIONS]
    effective = attrs.evolve(
        running,
        enforcement=loaded.enforcement,
        hold=loaded.hold,
        dedup=loaded.dedup,
        permissions=loaded.permissions,
        budgets=attrs.evolve(
            loaded.budgets, **{k: getattr(running.budgets, k) for k in STORE_KEYS}
        ),
        policy=loaded.policy,
        admission=loaded.admission,
        elicitation=loaded.elicitation,
        audit=attrs.evolve(running.audit, include_content=loaded.audit.include_content),
    )
    restart += [
        f"budgets.{k}"
        for k in STORE_KEYS
        if getattr(running.budgets, k) != getattr(loaded.budgets, k)
    ]
    return effective, restart
