"""The host's side of tasks: ``tasks/get``, ``tasks/update``, ``tasks/cancel`` and the routing-header check.

Registered on the host server (``host.server.HostServer.build``) when the policy enables tasks; ``tasks/result`` and
``tasks/list`` (removed from the extension) stay unknown methods (-32601). A host that did not declare the extension
(on its connection or in the request's ``_meta``) gets -32021 for all three.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import mcp_types as types
from mcp.server import Server
from mcp.shared.exceptions import MCPError
from pydantic import Field

from ..state.stored_outputs import http_principal
from .manager import EXTENSION, MISSING_CAPABILITY, TaskManager, opted_in

HEADER_MISMATCH = -32020
TASK_METHODS = ("tasks/get", "tasks/update", "tasks/cancel")


class TaskParams(types.RequestParams):
    task_id: str = Field(alias="taskId", min_length=1, max_length=256)


class TaskUpdateParams(TaskParams):
    input_responses: dict[str, Any] = Field(default_factory=dict, alias="inputResponses")


def principal(ctx: Any) -> str:
    """Who a task belongs to: over HTTP the request's principal (its bearer token's, else ``anonymous``), so a
    reconnecting host finds its tasks; over stdio the one local host."""
    scope = getattr(ctx.request, "scope", None)
    if isinstance(scope, Mapping) and scope.get("type") == "http":
        return "http:" + http_principal(scope)
    return "local"


def _gate(ctx: Any) -> None:
    if not opted_in(ctx.session.client_capabilities, ctx.meta):
        raise MCPError(
            MISSING_CAPABILITY,
            f"Missing required client capability: declare the {EXTENSION!r} extension to use {ctx.method}",
            {"requiredCapabilities": {"extensions": {EXTENSION: {}}}},
        )


class TaskEndpoints:
    def __init__(self, manager: TaskManager) -> None:
        self.manager = manager

    async def get(self, ctx: Any, params: TaskParams) -> dict[str, Any]:
        _gate(ctx)
        return await self.manager.get(params.task_id, principal(ctx))

    async def update(self, ctx: Any, params: TaskUpdateParams) -> types.EmptyResult:
        _gate(ctx)
        await self.manager.update(params.task_id, principal(ctx), params.input_responses)
        return types.EmptyResult()

    async def cancel(self, ctx: Any, params: TaskParams) -> types.EmptyResult:
        _gate(ctx)
        await self.manager.cancel(params.task_id, principal(ctx))
        return types.EmptyResult()

    def register(self, server: Server[Any]) -> None:
        server.add_request_handler("tasks/get", TaskParams, self.get)
        server.add_request_handler("tasks/update", TaskUpdateParams, self.update)
        server.add_request_handler("tasks/cancel", TaskParams, self.cancel)
        server.extensions[EXTENSION] = {}


def routing_header_mismatch(body: bytes, mcp_name: str | None) -> tuple[Any, str] | None:
    """For a ``tasks/*`` request over HTTP: the request id and the error message when its ``Mcp-Name`` header is not
    its ``params.taskId`` (SEP-2243, extended to tasks by the extension), else ``None``. ``body`` is already bounded
    (``JsonBodyGuard``)."""
    if mcp_name is None or b'"tasks/' not in body:
        return None
    try:
        message = json.loads(body)
    except ValueError:
        return None
    if not isinstance(message, dict) or message.get("method") not in TASK_METHODS:
        return None
    params = message.get("params")
    task_id = params.get("taskId") if isinstance(params, dict) else None
    if mcp_name.strip() == task_id:
        return None
    return message.get("id"), "Header mismatch: Mcp-Name does not match params.taskId"
