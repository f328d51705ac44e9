"""Reference tables generated from the models, so the policy and config reference (docs/reference.md) cannot drift.

``scripts/update_readme.py`` writes them into docs/reference.md; a test checks that it contains them verbatim.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from . import (
    BreakerRule,
    CacheRule,
    FieldCheck,
    IdempotencyRule,
    ObservationRule,
    OutputRule,
    PolicyFile,
    ResultInvariants,
    RetryRule,
    SessionRule,
    TimeoutRule,
    ToolRule,
    UpstreamPolicy,
    ValidationRule,
    VerifyWith,
)
from .config import ListenConfig, LoggingConfig, ProxyConfig, RemoteUpstream, StdioUpstream
from .diagnosis_settings import DiagnosisRule
from .ops_settings import MetricsConfig, StatusConfig, TracingConfig

POLICY_SECTIONS: list[tuple[str, type[BaseModel]]] = [
    ("policy file (top level)", PolicyFile),
    ("`session`", SessionRule),
    ("`observations`", ObservationRule),
    ("`diagnosis`", DiagnosisRule),
    ("`upstreams.<name>`", UpstreamPolicy),
    ("tool rule (`defaults`, `upstreams.<name>.defaults`, `…tools.<glob>`, `tools.<glob>`)", ToolRule),
    ("`validation`", ValidationRule),
    ("`timeouts`", TimeoutRule),
    ("`retry`", RetryRule),
    ("`breaker`", BreakerRule),
    ("`idempotency`", IdempotencyRule),
    ("`output`", OutputRule),
    ("`cache`", CacheRule),
    ("`verify_with`", VerifyWith),
    ("`result_invariants`", ResultInvariants),
    ("`result_invariants.fields.<path>`", FieldCheck),
]

CONFIG_SECTIONS: list[tuple[str, type[BaseModel]]] = [
    ("config file (top level)", ProxyConfig),
    ("stdio upstream", StdioUpstream),
    ("remote upstream", RemoteUpstream),
    ("`listen`", ListenConfig),
    ("`logging`", LoggingConfig),
    ("`metrics`", MetricsConfig),
    ("`status`", StatusConfig),
    ("`tracing`", TracingConfig),
]


def _default(field: Any) -> str:
    if field.default_factory is not None:
        value = field.default_factory()
    elif field.default is PydanticUndefined:
        return "required"
    else:
        value = field.default
    if isinstance(value, BaseModel):
        return "(section)"
    if hasattr(value, "value"):
        value = value.value
    return f"`{json.dumps(value)}`"


def table(model: type[BaseModel]) -> str:
    rows = ["| key | default | meaning |", "|---|---|---|"]
    for name, field in model.model_fields.items():
        if field.exclude:
            continue
        key = name
        doc = " ".join((field.description or "").split()).replace("|", "\\|")
        rows.append(f"| `{key}` | {_default(field)} | {doc} |")
    return "\n".join(rows)


def reference(sections: list[tuple[str, type[BaseModel]]]) -> str:
    return "\n\n".join(f"#### {title}\n\n{table(model)}" for title, model in sections)


def policy_reference() -> str:
    return reference(POLICY_SECTIONS)


def config_reference() -> str:
    return reference(CONFIG_SECTIONS)
