"""The state store as the stages see it: its records, its protocols and its bounds (the backends are beside it).

The stages see only the narrow protocols ``IdempotencyStore``, ``OutputStore`` and ``AuditStore`` (and the records
they exchange), so a call's path enters the backend that serves it, never this face. Two backends implement them:

- ``sqlite.StateStore``: the embedded store (the default), one SQLite file in the state directory
  (``default_state_dir()``), with its worker thread and in-memory index; ``schema`` holds its tables and queries;
- ``redis.RedisStateStore``: a shared store that several proxy replicas use at once (``state.backend: redis``).

``StateLimits`` bounds either backend; ``errors`` maps their failures to the fault tree.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import mcp_types as types

from .errors import StateError, StateUnavailable

if TYPE_CHECKING:
    from ..call.chain import ToolCall

__all__ = [
    "AuditFields",
    "AuditStore",
    "Claim",
    "IdempotencyRecord",
    "IdempotencyStore",
    "OutputStore",
    "StateError",
    "StateLimits",
    "StateUnavailable",
    "default_state_dir",
    "output_key",
]

IdempotencyStatus = Literal["in_flight", "completed", "unknown"]


# --- records and protocols -----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class IdempotencyRecord:
    """A write call holding an idempotency key."""

    key: str
    args_hash: str
    tool: str
    status: IdempotencyStatus
    """in_flight: running (or its proxy stopped mid-call) · completed: has a result · unknown: may have executed."""
    created_at: float
    expires_at: float
    result: types.CallToolResult | None = None
    """The stored result of a completed call; None when it was larger than ``idempotency_max_result_bytes``."""


class AuditFields(Protocol):
    """What the audit trail keeps of one call (``stages.observe.AuditEntry`` has this shape)."""

    @property
    def ts(self) -> float: ...
    @property
    def session(self) -> str: ...
    @property
    def upstream(self) -> str: ...
    @property
    def tool(self) -> str: ...
    @property
    def argument_keys(self) -> Sequence[str]: ...
    @property
    def arguments_hash(self) -> str: ...
    @property
    def outcome(self) -> str: ...
    @property
    def fault_type(self) -> str | None: ...
    @property
    def attempts(self) -> int: ...
    @property
    def latency_ms(self) -> int: ...
    @property
    def decided_by(self) -> str | None: ...


class IdempotencyStore(Protocol):
    """Idempotency records. Times are wall-clock seconds given by the caller, so one clock decides expiry."""

    async def begin(
        self, key: str, *, args_hash: str, tool: str, now: float, expires_at: float
    ) -> IdempotencyRecord | None:
        """Claim ``key`` as in flight, atomically: None when claimed, else the unexpired record that holds it."""
        ...

    async def begin_write(self, key: str, marker: str, claim: Claim) -> tuple[IdempotencyRecord | None, ...]:
        """A derived-key write's claims in one durable step: its own record ``key`` and the upstream-wide ``marker``.

        ``(own, None)``: ``key`` holds a completed result (a replay), nothing claimed. Otherwise ``key`` is claimed
        (a stale record of it replaced) and the second item is ``None`` when ``marker`` was claimed too, else the
        unexpired record that holds it (``key`` stays claimed)."""
        ...

    async def settle_write(
        self, key: str, marker: str | None, result: types.CallToolResult | None, *, expires_at: float
    ) -> None:
        """How a derived-key write ended, in one step: ``key`` completed with ``result`` (kept until ``expires_at``)
        or, without one, released; ``marker`` (when given) released."""
        ...

    def forget(self, key: str) -> None:
        """Release ``key`` off the caller's path (a write-behind or background delete); every later operation of
        this store on ``key`` sees it gone. For the own record of a write whose result the host has received."""
        ...

    async def complete(self, key: str, result: types.CallToolResult, *, expires_at: float) -> None: ...
    async def mark_unknown(self, key: str, *, expires_at: float) -> None: ...
    async def release(self, key: str) -> None: ...
    async def get(self, key: str, *, now: float) -> IdempotencyRecord | None: ...
    def call_fingerprint(self, call: ToolCall) -> str:
        """What identifies ``call`` (upstream, tool, arguments) in stored records: keyed, so not reversible."""
        ...


def output_key(handle: str, owner: str) -> str:
    """Where a stored output is kept: its handle bound to its owner, so another owner's lookup finds nothing."""
    return hashlib.sha256(f"{owner}\n{handle}".encode()).hexdigest()[:32]


class OutputStore(Protocol):
    """Full copies of capped results: paged UTF-8 text plus a JSON manifest of everything else."""

    async def put_output(self, tool: str, parts: Sequence[str], manifest: str, owner: str = "") -> str | None:
        """Store the text ``parts`` back to back and the manifest; the new handle, or None if it is too large.

        Only ``owner`` (see ``proxy.output_owner``) finds it again by that handle."""
        ...

    async def read_output(self, handle: str, offset: int, length: int, owner: str = "") -> tuple[bytes, int] | None:
        """Bytes ``[offset, offset + length)`` of the stored text and its total size; None if unknown, expired or
        stored for another owner."""
        ...

    async def output_manifest(self, handle: str, owner: str = "") -> str | None: ...


class AuditStore(Protocol):
    def record(self, entry: AuditFields) -> None:
        """Queue one entry; never blocks, never raises for a full queue (the entry is dropped and counted)."""
        ...

    async def flush(self) -> None: ...
    def recent_audit(self, limit: int = 50, session: str | None = None) -> list[dict[str, Any]]: ...


def default_state_dir() -> Path:
    """``$XDG_STATE_HOME/resilient-mcp`` (when set and absolute), else ``~/.local/state/resilient-mcp``."""
    base = os.environ.get("XDG_STATE_HOME", "")
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".local" / "state"
    return root / "resilient-mcp"


@dataclass(frozen=True, slots=True)
class StateLimits:
    """Bounds of the store. Every table expires rows and is trimmed (oldest first) to its row and byte bounds."""

    idempotency_max_rows: int = 50_000
    idempotency_max_bytes: int = 64_000_000
    idempotency_max_result_bytes: int = 1_000_000
    """A completed result larger than this (as JSON) is not kept: its replay only says that the write completed."""
    outputs_max_rows: int = 200
    outputs_max_bytes: int = 256_000_000
    """Also the largest single stored output."""
    output_ttl_s: float = 3600.0
    audit_max_rows: int = 100_000
    audit_ttl_s: float = 30 * 86_400.0
    audit_queue: int = 10_000
    """Audit entries waiting for the worker; more are dropped and counted (``StateStore.audit_dropped``)."""
    audit_batch: int = 256
    flush_interval_s: float = 0.5
    prune_interval_s: float = 60.0


@dataclass(frozen=True, slots=True)
class Claim:
    """What ``IdempotencyStore.begin_write`` writes: the call's fingerprint and tool, when, and the two expiries."""

    args_hash: str
    tool: str
    now: float
    expires_at: float
    """Of the call's own record (in flight: the window plus the call's total timeout)."""
    marker_expires_at: float
    """Of the upstream-wide record (``unknown_outcome_s``)."""
