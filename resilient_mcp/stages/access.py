"""Access stage: human approval for tools the admin marked ``require_approval`` (catalog F2).

``Access`` is built once per tool from its ``ToolRule``. For a tool that needs approval it asks the person at the
host through MCP elicitation (a message naming the tool, its upstream and a short summary of the arguments, and a
form with one boolean ``approve`` field) and lets the call through only on an explicit accept with ``approve: true``.
A decline, a cancel, an unchecked box, a failed elicitation or a host that cannot elicit all end in
``PermissionDenied`` with ``ask_user``, before anything is sent upstream.

Denied tools are hidden and refused before the chain (``Policy.is_visible``); ``denied_fault`` builds the fault the
server raises when a host calls one of them anyway.
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
import structlog

from ..call.chain import CallNext, ToolCall
from ..faults import PermissionDenied, RepairAction, RetrySafety, SideEffectStatus
from ..policy import ToolRule

_log = structlog.get_logger(__name__)

ARGUMENT_SUMMARY_CHARS = 400
"""How much of the arguments the approval message shows; the rest is cut with an ellipsis."""

APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approve": {
            "type": "boolean",
            "title": "Approve this call",
            "description": "Check to let the tool run with these arguments; leave unchecked to refuse.",
            "default": False,
        }
    },
    "required": ["approve"],
}


class Access:
    """Asks the human before a tool that requires approval runs; see the module docstring."""

    def __init__(self, rule: ToolRule) -> None:
        self._needs_approval = rule.require_approval
        self._effect = rule.effect

    async def __call__(self, call: ToolCall, call_next: CallNext, /) -> types.CallToolResult:
        if self._needs_approval:
            await self._approve(call)
        return await call_next(call)

    async def _approve(self, call: ToolCall) -> None:
        if call.host is None or not call.host.supports_elicitation:
            raise _refused(
                call, "approval_unsupported", {"approval": "required", "reason": "host does not support elicitation"}
            )
        try:
            answer = await call.host.elicit(approval_message(call, self._effect.value), APPROVAL_SCHEMA)
        except Exception as exc:  # the host failed to ask: not an approval
            _log.warning("approval_elicitation_failed", tool=call.name, error=repr(exc)[:300])
            raise _refused(call, "approval_failed", {"approval": "unavailable"}) from exc
        if answer.action == "accept" and (answer.content or {}).get("approve") is True:
            call.record.extra["approval"] = "granted"
            return
        outcome = "cancelled" if answer.action == "cancel" else "declined"
        raise _refused(call, "approval_refused", {"approval": outcome}, outcome=outcome)


def approval_message(call: ToolCall, effect: str) -> str:
    """The question shown to the person: tool, upstream, effect class and a compact summary of the arguments."""
    upstream = f" on '{call.upstream}'" if call.upstream else ""
    return (
        f"Allow the tool '{call.name}'{upstream} ({effect.replace('_', ' ')}) to run with these arguments?\n"
        f"{summarize_arguments(call.arguments)}"
    )


def summarize_arguments(arguments: Any, limit: int = ARGUMENT_SUMMARY_CHARS) -> str:
    text = json.dumps(arguments or {}, ensure_ascii=False, separators=(", ", ": "), default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _refused(call: ToolCall, why: str, details: dict[str, Any], **fields: Any) -> PermissionDenied:
    """The refusal ``why`` (a ``PermissionDenied`` template, with its ``_advice``) of ``call``."""
    call.record.decided_by = "access"
    return PermissionDenied.of(
        why,
        suggest=f"{why}_advice",
        tool=call.name,
        **fields,
        details=details,
        repair_action=RepairAction.ASK_USER,
        retry_safety=RetrySafety.NOT_SENT,
        side_effect_status=SideEffectStatus.NONE,
    )


def denied_fault(name: str) -> PermissionDenied:
    """The refusal for a tool the policy hides (deny list, or not on an allow list) that a host called anyway."""
    return PermissionDenied.of(
        "policy_denied",
        suggest="policy_denied_advice",
        tool=name,
        details={"policy_rule": "deny", "tool": name},
        repair_action=RepairAction.ABORT,
        retry_safety=RetrySafety.NOT_SENT,
        side_effect_status=SideEffectStatus.NONE,
    )
