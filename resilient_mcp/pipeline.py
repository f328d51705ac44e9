"""Compiles the chain of one tool from policy, in the fixed order where safety lives.

    observe → guard → validate → access → output → idempotency → retry → breaker → terminal

Retry is never outside access; idempotency is outside retry so every attempt shares one key; retry is outside the
breaker so each attempt is counted and an open breaker ends the retries; observe is outermost so every exception
becomes one observation. The order is code, not configuration. Expensive work (validators, policy resolution) is
done here, once per tool and policy version, never per call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import mcp_types as types

from .chain import CallNext, ToolCall, compose
from .classify import classify_result
from .policy import Policy, ToolRule

if TYPE_CHECKING:
    from .catalog import Entry
    from .proxy import Proxy


@dataclass(frozen=True, slots=True)
class CompiledTool:
    rule: ToolRule
    chain: CallNext
    entry: Entry


class Pipeline:
    def __init__(self, proxy: Proxy) -> None:
        self.proxy = proxy
        self.policy = proxy.policy

    def set_policy(self, policy: Policy) -> None:
        self.policy = policy

    def proxy_tools(self) -> list[types.Tool]:
        return []

    def compile(self, entry: Entry) -> CompiledTool:
        assert entry.tool is not None
        rule = self.policy.resolve(entry.upstream, entry.name, entry.public_name, entry.tool.annotations)
        return CompiledTool(rule=rule, chain=compose([], self._terminal), entry=entry)

    async def _terminal(self, call: ToolCall) -> types.CallToolResult:
        upstream = self.proxy.upstreams[call.upstream]
        host = call.host
        timeouts = call.rule.timeouts
        result = await upstream.call_tool(
            call.upstream_tool,
            call.arguments,
            call.meta,
            timeout_s=call.attempt_timeout_s or timeouts.attempt_s,
            on_progress=host.report_progress if host is not None else None,
            progress_extends=timeouts.progress_extends,
        )
        fault = classify_result(result, tool=call.tool)
        if fault is not None:
            raise fault
        return result
