"""Tool-list and schema drift (catalog A2, A3): what an attempt does when the upstream no longer matches the catalog.

The pipeline's terminal hands every fault of an upstream attempt to ``recover``. Two kinds of fault say that the
proxy's cached view of the upstream may be stale; for those it refreshes that upstream's tool list once
(``Upstream.refresh("tools")``, which also schedules a rebuild of the routing and a ``tools/list_changed`` to the
hosts, both outside this call), bounded by the attempt timeout, and compares:

- **A2** an ``UnknownTool`` rejection (S1) whose upstream message names the tool, although the catalog lists it:
  if the refreshed list still has the name, the call is sent once more (it did not run) and the model is told so in a
  note; if the name is gone, ``StaleToolList`` with ``requested_name``, ``tools_removed``, ``tools_added`` (host-visible
  names; tools the policy hides are never named) and ``candidates``, repair ``refresh_tools``. A renamed tool is never
  called in its place: its semantics may differ. The fault is not transient: the proxy already refreshed, so
  repeating the same name cannot help (and the retry stage must not repeat it).
- **A3** an argument rejection marked ``details.schema_drift_candidate``: if the tool's refreshed ``inputSchema``
  hash differs from the schema the call was validated against, ``SchemaDrift`` with ``schema_diff``,
  ``new_input_schema`` (cut to ``NEW_SCHEMA_CHARS`` of JSON text when larger), the hashes, and the call's
  ``validation_errors`` against the new schema when there are any, repair ``fix_parameter``; if it is unchanged, the
  original fault with ``details.input_schema_unchanged``. A tool that vanished meanwhile is A2.

Every other fault, an upstream that is not connected, and a refresh that fails or times out leave the original fault
as it was. Cancellation is never caught.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
import structlog

from ..call.chain import CallNext, ToolCall
from ..faults import Fault, ProtocolMismatch, RetrySafety, SchemaDrift, StaleToolList, UnknownTool
from ..stages.validate import (
    MAX_REPORTED_ERRORS,
    compile_validator,
    describe,
    schema_diff,
    schema_hash,
    sort_key,
    suggest_tools,
)
from ..text import canonical_json

if TYPE_CHECKING:
    from ..policy import Policy
    from .routing import Router

log = structlog.get_logger(__name__)

NEW_SCHEMA_CHARS = 4000
"""A refreshed input schema longer than this (as compact JSON) is reported as cut JSON text."""
MAX_CANDIDATES = 5


async def recover(router: Router, policy: Policy, call: ToolCall, fault: Fault, send: CallNext) -> types.CallToolResult:
    """The outcome of an attempt that failed with ``fault``: a result of the one re-send A2 allows, or a fault.

    ``send`` performs one upstream attempt (the terminal without this hook); ``policy`` says which tool names the
    host may be told about."""
    if _stale_candidate(call, fault):
        return await _stale(router, policy, call, fault, send)
    if isinstance(fault, ProtocolMismatch) and fault.details.get("variant") == "a":
        return await _renegotiate(router, call, fault, send)
    if fault.details.get("schema_drift_candidate") is True and call.tool is not None:
        raise await _drift(router, policy, call, fault, call.tool)
    raise fault


def _stale_candidate(call: ToolCall, fault: Fault) -> bool:
    named = bool(call.upstream_tool) and call.upstream_tool in (fault.upstream_message or "")
    return isinstance(fault, UnknownTool) and fault.retry_safety is RetrySafety.REJECTED and named


async def _refresh(router: Router, call: ToolCall, why: str) -> tuple[list[types.Tool], list[types.Tool]] | None:
    """The upstream's tools before and after one refresh; None when the upstream cannot be asked."""
    up = router.upstream(call.upstream)
    if up is None or up.state != "ready":
        return None
    before = list(up.catalog.tools)
    limit = call.attempt_timeout_s or call.rule.timeouts.attempt_s
    try:
        with anyio.move_on_after(limit) as scope:
            await up.refresh("tools")
    except Exception as exc:
        log.warning("tool_list_refresh_failed", upstream=call.upstream, error=repr(exc)[:300])
        return None
    if scope.cancelled_caught:
        log.warning("tool_list_refresh_timed_out", upstream=call.upstream, timeout_s=limit)
        return None
    log.info("tool_list_refreshed", upstream=call.upstream, tool=call.name, reason=why)
    return before, list(up.catalog.tools)


# --- A4 (a): unsupported protocol version -------------------------------------------------------------------------


async def _renegotiate(router: Router, call: ToolCall, fault: Fault, send: CallNext) -> types.CallToolResult:
    """Reconnect (a new handshake negotiates the version again) and send the call once more: it did not run."""
    up = router.upstream(call.upstream)
    if up is None or up.state != "ready" or fault.details.get("renegotiated"):
        raise fault
    log.info("upstream_renegotiating", upstream=call.upstream, tool=call.name)
    up.request_restart()
    try:
        await up.wait_ready(call.attempt_timeout_s or call.rule.timeouts.attempt_s)
    except Fault:
        raise fault from None
    call.record.notes.append("The upstream rejected the protocol version; the proxy reconnected and sent it again.")
    try:
        return await send(call)
    except ProtocolMismatch as again:
        raise again.with_details(renegotiated=True) from again.__cause__


# --- A2: stale tool list ---------------------------------------------------------------------------------------------


async def _stale(router: Router, policy: Policy, call: ToolCall, fault: Fault, send: CallNext) -> types.CallToolResult:
    refreshed = await _refresh(router, call, "unknown_tool")
    if refreshed is None:
        raise fault
    before, after = refreshed
    if any(t.name == call.upstream_tool for t in after):
        call.record.notes.append(
            f"The upstream answered that it has no tool '{call.name}' although it lists it; the proxy refreshed the "
            "tool list, found the tool still there and sent the call once more (the first attempt did not run)."
        )
        try:
            return await send(call)
        except UnknownTool as again:
            raise again.with_details(tool_list_refreshed=True) from again.__cause__
    raise stale_tool_fault(router, policy, call, before, after, fault)


def stale_tool_fault(
    router: Router,
    policy: Policy,
    call: ToolCall,
    before: Sequence[types.Tool],
    after: Sequence[types.Tool],
    cause: Fault,
) -> StaleToolList:
    """The A2 fault for ``call``, whose tool is not in ``after`` (the refreshed list) any more."""
    prefix = router.prefix(call.upstream)
    old = [t.name for t in before]
    if call.upstream_tool not in old:
        old.append(call.upstream_tool)
    new = [t.name for t in after]

    def visible(names: Sequence[str]) -> list[str]:
        return [prefix + n for n in names if policy.is_visible(call.upstream, n, prefix + n)]

    removed = visible([n for n in old if n not in set(new)])
    added = visible([n for n in new if n not in set(old)])
    # The routing in force was built before the refresh (its rebuild waits until the call is over): its names,
    # less what the refresh removed, plus what it added, are what the hosts will be listed.
    listed = [t.name for t in router.routing.visible_tools if t.name not in set(removed)] + added
    candidates = _candidates(call.name, added, listed)
    stale = StaleToolList.of(
        "gone_after_refresh",
        tool=call.name,
        details={"requested_name": call.name, "tools_removed": removed, "tools_added": added, "candidates": candidates},
        transient=False,
        max_retry=0,
        upstream_message=cause.upstream_message,
        upstream_code=cause.upstream_code,
        upstream_result=cause.upstream_result,
    )
    return stale


def _candidates(name: str, added: Sequence[str], listed: Sequence[str]) -> list[str]:
    """New tools first (closest names first), then close names among everything listed."""
    ranked = suggest_tools(name, added, limit=MAX_CANDIDATES)
    out = ranked + [n for n in added if n not in ranked]
    out += [n for n in suggest_tools(name, listed, limit=MAX_CANDIDATES) if n not in out and n != name]
    return out[:MAX_CANDIDATES]


# --- A3: schema drift ------------------------------------------------------------------------------------------------


async def _drift(router: Router, policy: Policy, call: ToolCall, fault: Fault, cached: types.Tool) -> Fault:
    refreshed = await _refresh(router, call, "arguments_rejected")
    if refreshed is None:
        return fault
    before, after = refreshed
    tool = next((t for t in after if t.name == call.upstream_tool), None)
    if tool is None:
        return stale_tool_fault(router, policy, call, before, after, fault)
    old_hash, new_hash = schema_hash(cached.input_schema), schema_hash(tool.input_schema)
    if old_hash == new_hash:
        return fault.with_details(input_schema_unchanged=True)
    details: dict[str, Any] = {
        "schema_diff": schema_diff(cached.input_schema, tool.input_schema),
        **_schema_text(tool.input_schema),
        "input_schema_hash": {"old": old_hash, "new": new_hash},
    }
    errors = validation_errors(tool.input_schema, call.arguments, tool_name=call.name)
    if errors:
        details["validation_errors"] = errors
    drift = SchemaDrift.of(
        "changed",
        tool=call.name,
        details=details,
        upstream_message=fault.upstream_message,
        upstream_code=fault.upstream_code,
        upstream_result=fault.upstream_result,
    )
    return drift


def _schema_text(schema: Mapping[str, Any]) -> dict[str, Any]:
    text = canonical_json(schema)
    if len(text) <= NEW_SCHEMA_CHARS:
        return {"new_input_schema": dict(schema)}
    return {"new_input_schema": text[: NEW_SCHEMA_CHARS - 1] + "…", "new_input_schema_truncated": True}


def validation_errors(schema: Mapping[str, Any], arguments: Any, *, tool_name: str = "") -> list[dict[str, Any]]:
    """The arguments' errors against ``schema``, worded as the validate stage words them (at most 20)."""
    validator = compile_validator(schema, tool_name=tool_name)
    if validator is None:
        return []
    try:
        errors = sorted(validator.iter_errors(arguments if arguments is not None else {}), key=sort_key)
    except Exception as exc:  # an unresolvable $ref: the upstream's word stands
        log.warning("drift_validation_skipped", tool=tool_name, error=repr(exc)[:300])
        return []
    return [entry for err in errors for entry in describe(err, schema)][:MAX_REPORTED_ERRORS]
