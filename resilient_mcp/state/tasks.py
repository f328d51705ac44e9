"""Task records and where they are kept: in memory, in SQLite (``state.StateStore``) or in Redis (``RedisStateStore``).

A record is what any replica needs to answer ``tasks/get`` for a task, wherever it runs: who owns it (the principal),
its status, its timestamps and, once terminal, its result or error. Records are written whole (JSON) at every change
of status; the store keeps each until ``expires_at`` and at most ``max_per_principal`` per principal (the oldest
terminal records go first; running ones are never trimmed).
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

TaskStatus = Literal["working", "input_required", "completed", "failed", "cancelled"]
TERMINAL: frozenset[str] = frozenset({"completed", "failed", "cancelled"})


@dataclass(frozen=True, slots=True)
class TaskRecord:
    task_id: str
    principal: str
    tool: str
    status: TaskStatus
    created_at: float
    updated_at: float
    expires_at: float
    ttl_ms: int
    poll_interval_ms: int
    instance: str
    """The proxy process running it: a record left ``working`` by a process that no longer runs reads as unknown."""
    fingerprint: str = ""
    """The call's keyed fingerprint (tool and arguments): an identical call of the same principal joins it."""
    status_message: str | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    input_requests: dict[str, Any] | None = None
    progress: dict[str, Any] | None = field(default=None)
    lease_until: float = 0.0
    """Renewed by the running proxy; past it, nobody runs the task any more."""

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, raw: str | bytes) -> TaskRecord:
        return cls(**json.loads(raw))

    def changed(self, now: float, **updates: Any) -> TaskRecord:
        return replace(self, updated_at=now, **updates)

    def wire(self) -> dict[str, Any]:
        """The task as the extension puts it on the wire (``Task``: no result, error or input requests)."""
        out: dict[str, Any] = {
            "taskId": self.task_id,
            "status": self.status,
            "createdAt": iso(self.created_at),
            "lastUpdatedAt": iso(self.updated_at),
            "ttlMs": self.ttl_ms,
            "pollIntervalMs": self.poll_interval_ms,
        }
        if self.status_message:
            out["statusMessage"] = self.status_message
        return out

    def detailed(self) -> dict[str, Any]:
        """``DetailedTask`` (the ``tasks/get`` answer): the task, and its result, error or pending input requests."""
        out = self.wire()
        if self.status == "completed" and self.result is not None:
            out["result"] = self.result
        elif self.status == "failed" and self.error is not None:
            out["error"] = self.error
        elif self.status == "input_required" and self.input_requests:
            out["inputRequests"] = self.input_requests
        return out


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class TaskStore(Protocol):
    """Where task records live (every state backend implements it)."""

    async def put_task(self, record: TaskRecord, max_per_principal: int) -> None:
        """Write ``record`` whole (insert or replace), then trim its principal's terminal records to the bound."""
        ...

    async def get_task(self, task_id: str) -> TaskRecord | None:
        """The record, unless it expired or never existed."""
        ...

    async def list_tasks(self, principal: str | None = None, limit: int = 100) -> list[TaskRecord]:
        """Live records, newest first (``principal``: only that principal's)."""
        ...


class MemoryTaskStore:
    """Records in this process only (no state store: tests, and a proxy that could not open one)."""

    def __init__(self, clock: Any = time.time) -> None:
        self._records: OrderedDict[str, TaskRecord] = OrderedDict()
        self._clock = clock

    async def put_task(self, record: TaskRecord, max_per_principal: int) -> None:
        self._records[record.task_id] = record
        self._records.move_to_end(record.task_id)
        self._prune(record.principal, max_per_principal)

    def _prune(self, principal: str, bound: int) -> None:
        now = self._clock()
        for key in [k for k, r in self._records.items() if r.expires_at <= now]:
            del self._records[key]
        own = [r for r in self._records.values() if r.principal == principal]
        excess = len(own) - bound
        for r in own:
            if excess <= 0:
                break
            if r.terminal:
                del self._records[r.task_id]
                excess -= 1

    async def get_task(self, task_id: str) -> TaskRecord | None:
        record = self._records.get(task_id)
        return record if record is not None and record.expires_at > self._clock() else None

    async def list_tasks(self, principal: str | None = None, limit: int = 100) -> list[TaskRecord]:
        now = self._clock()
        live = [r for r in reversed(self._records.values()) if r.expires_at > now]
        return [r for r in live if principal is None or r.principal == principal][:limit]
