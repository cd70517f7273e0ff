"""The configuration: a leaf the core may import (it imports nothing else of acp-proxy).

:mod:`~acp_proxy.config.model` is the attrs tree (pure data, re-exported
here), :mod:`~acp_proxy.config.io` the strict TOML loading and dumping, and
:mod:`~acp_proxy.config.toml_text` the TOML spelling of keys and values both
use in messages.

The tree is imported when one of the names below is first read (PEP 562), not
with the package: :mod:`~acp_proxy.config.files` (paths, the agent command)
needs neither attrs nor the tree, and the command line starts the agent of
the default configuration before it builds one (issue 29).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing is not imported before the agent's early start (issue 29)
if TYPE_CHECKING:
    from typing import Any

    from acp_proxy.config.model import (
        DEFAULT_CHILD_MUTATIONS,
        DEFAULT_CHILD_READ_ONLY,
        NEVER_ON_CHILD,
        AdmissionConfig,
        AdmissionRule,
        AuditConfig,
        BudgetsConfig,
        Config,
        ConfigError,
        DedupConfig,
        ElicitationConfig,
        EnforcementConfig,
        HoldConfig,
        LimitsConfig,
        ListenConfig,
        PermissionRule,
        PermissionsConfig,
        PolicyConfig,
        ProcessConfig,
        TelemetryConfig,
        TraceConfig,
    )

__all__ = [
    "DEFAULT_CHILD_MUTATIONS",
    "DEFAULT_CHILD_READ_ONLY",
    "NEVER_ON_CHILD",
    "AdmissionConfig",
    "AdmissionRule",
    "AuditConfig",
    "BudgetsConfig",
    "Config",
    "ConfigError",
    "DedupConfig",
    "ElicitationConfig",
    "EnforcementConfig",
    "HoldConfig",
    "LimitsConfig",
    "ListenConfig",
    "PermissionRule",
    "PermissionsConfig",
    "PolicyConfig",
    "ProcessConfig",
    "TelemetryConfig",
    "TraceConfig",
]


def __getattr__(name: str) -> Any:
    """The names of :data:`__all__`, read from :mod:`~acp_proxy.config.model` on first use.

    Raises:
        AttributeError: ``name`` is not one of them (a submodule is then imported
            by the import system itself).
    """
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from acp_proxy.config import model

    value = getattr(model, name)
    globals()[name] = value
    return value
