"""Gold labels: one labelling function per provoked situation (we know what we provoked).

A label says what the error *is* (a catalog fault type), whether waiting and repeating the identical call can help
(transient), whether the failed call ran (retry safety), what the model should do next (repair action, for the
tool's effect class) and which names a good suggestion mentions (a tool to use instead, the argument to change).
The reasoning for the hard cases is in LABELS.md.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Gold:
    fault_type: str
    transient: bool
    retry_safety: str
    repair_action: str
    names: tuple[str, ...] = field(default=())
    """Words a good suggestion contains (a tool to call instead, the argument to change)."""
    why: str = ""

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["names"] = list(self.names)
        return out


# --- the labelling functions, by kind of situation ------------------------------------------------------------------


def not_found(*names: str, why: str = "the thing the call names does not exist: look it up with another tool") -> Gold:
    return Gold("D4_permanent_execution_error", False, "executed_failed", "switch_tool", names, why)


def bad_value(
    *names: str, why: str = "the server ran its own checks and rejected a value: change that argument"
) -> Gold:
    return Gold("B4_semantic_argument_rejection", False, "executed_failed", "fix_parameter", names, why)


def schema(*names: str, why: str = "the arguments break the tool's input schema") -> Gold:
    return Gold("B2_schema_violation", False, "rejected", "fix_parameter", names, why)


def missing_arg(*names: str) -> Gold:
    return Gold(
        "B1_missing_required_argument", False, "rejected", "fix_parameter", names, "a required argument is absent"
    )


def conflict(*names: str, why: str = "the world is not in the state the call assumes: re-read, then decide") -> Gold:
    return Gold("D5_state_conflict", False, "executed_failed", "verify_state", names, why)


def sandbox(*names: str, why: str = "outside what the server may touch: pick an argument inside its sandbox") -> Gold:
    return Gold("F2_permission_denied_or_approval_required", False, "rejected", "fix_parameter", names, why)


def forbidden(
    *names: str, why: str = "a policy of the server or the site refuses it: only the user can decide"
) -> Gold:
    return Gold("F2_permission_denied_or_approval_required", False, "rejected", "ask_user", names, why)


def remote_transient(*names: str, why: str = "a service behind the tool failed for now: wait and retry") -> Gold:
    return Gold("D1_transient_execution_error", True, "maybe_executed", "backoff_retry", names, why)


def server_broken(*names: str, why: str = "the server itself is broken (its data or setup): no call fixes it") -> Gold:
    return Gold("D4_permanent_execution_error", False, "executed_failed", "ask_user", names, why)


def unknown_tool(*names: str) -> Gold:
    return Gold("A1_unknown_tool", False, "rejected", "switch_tool", names, "the server has no tool by this name")


def custom(fault_type: str, transient: bool, retry_safety: str, repair: str, *names: str, why: str = "") -> Gold:
    return Gold(fault_type, transient, retry_safety, repair, names, why)
