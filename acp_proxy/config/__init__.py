"""The configuration: a leaf the core may import (it imports nothing else of acp-proxy).

:mod:`~acp_proxy.config.model` is the attrs tree (pure data, re-exported
here), :mod:`~acp_proxy.config.io` the strict TOML loading and dumping, and
:mod:`~acp_proxy.config.toml_text` the TOML spelling of keys and values both
use in messages.
"""

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
