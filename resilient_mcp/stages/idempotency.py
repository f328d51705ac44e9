"""The idempotency stage: one agent write call never becomes two side effects.

On by default for ``write_unsafe`` and ``destructive`` tools (``ToolRule.idempotency_on``); elsewhere the stage passes
calls straight through. It sits outside the retry stage, so every attempt of one call shares one key.

The key of a call, first found:

1. ``_meta`` of the request: ``io.github.resilient-mcp/idempotency-key``, ``idempotency-key`` or ``Idempotency-Key``
   (the IETF header name), a non-empty string or a number;
2. the argument named by ``idempotency.key_argument`` (e.g. ``client_ref``), when the call has it;
3. otherwise SHA-256 of the canonical JSON of ``[upstream, upstream tool, arguments]`` (``fingerprint.fingerprint``):
   an identical call of the same host session within ``idempotency.window_s`` (60 s) is the same write.

Keys are scoped per upstream tool. Explicit keys (1, 2) are shared by every session of the proxy (and every proxy on
one state store), so that a host reconnecting after a proxy restart still finds its write; derived keys (3) carry the
host session too, so two agents making the same call are not mistaken for one. What a call finds under its key:

=====================================  =========================================================================
nothing (or expired)                   runs; a success is stored as completed for ``window_s`` and replayed
same key, different arguments          ``SemanticArgumentRejection`` (IETF 422), nothing runs
running in this process                waits for it and shares its outcome (``on_in_flight: wait``), or
                                       ``StateConflict`` (IETF 409, transient) with ``on_in_flight: conflict``
completed                              the stored result, ``_meta["io.github.resilient-mcp/replay"] = {key,
                                       original_at}`` and a note; the tool is not called again
outcome unknown, or in flight in the   ``StateConflict``: side effect unknown, repair ``verify_state``; nothing
store but not in this process          runs until the record expires (``window_s``) or the arguments change
=====================================  =========================================================================

How a call ends decides its record: a success (not ``isError``) is stored as completed; an ``isError`` result, or a
fault that provably did not execute (``not_sent``, ``rejected``, or ``executed_failed`` with nothing committed),
deletes it so the call may be re-issued; anything else (``maybe_executed``, a committed or unknown side effect,
cancellation, a bug) keeps it as outcome unknown. With ``idempotency.forward_key_as`` the key also goes upstream in
that ``_meta`` field, and into ``call.record.extra["idempotency_key"]`` (as it does when the key was explicit).
A store that fails is logged and the call runs unguarded rather than failing every write.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import anyio
import mcp_types as types
import structlog

from ..chain import CallNext, ToolCall
from ..faults import (
    Fault,
    MalformedArguments,
    RepairAction,
    RetrySafety,
    SemanticArgumentRejection,
    SideEffectStatus,
    StateConflict,
)
from ..fingerprint import canonical_json, fingerprint
from ..policy import ToolRule
from ..repeat import decide, decide_outcome_unknown
from ..state import IdempotencyRecord, IdempotencyStore

log = structlog.get_logger(__name__)

REPLAY_META = "io.github.resilient-mcp/replay"
KEY_META_FIELDS = ("io.github.resilient-mcp/idempotency-key", "idempotency-key", "Idempotency-Key")


@dataclass(eq=False)
class Flight:
    """One keyed call running in this process; duplicates wait on ``done`` and share its outcome."""

    args_hash: str
    started_at: float
    done: anyio.Event = field(default_factory=anyio.Event)
    result: types.CallToolResult | None = None
    error: BaseException | None = None


class InFlight:
    """The keyed write calls running in this process (key -> ``Flight``); one object shared by every chain."""

    def __init__(self) -> None:
        self._flights: dict[str, Flight] = {}

    def __len__(self) -> int:
        return len(self._flights)

    def get(self, key: str) -> Flight | None:
        return self._flights.get(key)

    def start(self, key: str, args_hash: str, now: float) -> Flight:
        flight = self._flights[key] = Flight(args_hash, now)
        return flight

    def finish(self, key: str, flight: Flight) -> None:
        flight.done.set()
        if self._flights.get(key) is flight:
            del self._flights[key]


@dataclass(frozen=True, slots=True)
class _Key:
    stored: str
    """The key in the store: scoped by upstream and tool."""
    value: str
    """The key as the host (or the upstream it is forwarded to) knows it."""
    explicit: bool


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds")


class Idempotency:
    """The idempotency stage; see the module docstring."""

    def __init__(
        self, rule: ToolRule, store: IdempotencyStore, in_flight: InFlight, clock: Callable[[], float] = time.time
    ) -> None:
        self.enabled = rule.idempotency_on
        self._rule = rule.idempotency
        self._verify_with = rule.verify_with
        self._in_flight_s = rule.idempotency.window_s + rule.timeouts.total_s
        self._store, self._flights, self._clock = store, in_flight, clock

    async def __call__(self, call: ToolCall, call_next: CallNext, /) -> types.CallToolResult:
        if not self.enabled:
            return await call_next(call)
        args_hash = fingerprint(call)
        key = self._key(call, args_hash)
        flight = self._flights.get(key.stored)
        if flight is not None:
            return await self._join(call, key, args_hash, flight)
        flight = self._flights.start(key.stored, args_hash, self._clock())
        try:
            flight.result = await self._lead(call, call_next, key, args_hash, flight)
            return flight.result
        except BaseException as exc:
            flight.error = exc
            raise
        finally:
            self._flights.finish(key.stored, flight)

    # --- the first call under a key -----------------------------------------------------------------------------

    async def _lead(
        self, call: ToolCall, call_next: CallNext, key: _Key, args_hash: str, flight: Flight
    ) -> types.CallToolResult:
        now = flight.started_at
        expires_at = now + self._in_flight_s
        try:
            held = await self._claim(call, key, args_hash, now, expires_at)
            unknown = held is not None and held.status == "unknown" and held.args_hash == args_hash
            if unknown and decide_outcome_unknown(call.rule).safe:  # rule R: the upstream dedupes by the sent key
                await self._store.release(key.stored)
                held = await self._claim(call, key, args_hash, now, expires_at)
        except Exception:
            log.exception("idempotency_store_failed", tool=call.name)
            return await call_next(self._forward(call, key))
        if held is not None:
            return self._from_record(call, key, args_hash, held)
        try:
            result = await call_next(self._forward(call, key))
        except Fault as fault:
            await self._settle(key, reissuable=decide(fault, call.rule).nothing_done)
            raise
        except BaseException:  # cancelled, or a bug: the call may have been sent
            await self._settle(key, reissuable=False)
            raise
        if result.is_error:
            await self._settle(key, reissuable=True)
        else:
            await self._settle(key, result=result)
        return result

    async def _claim(
        self, call: ToolCall, key: _Key, args_hash: str, now: float, expires_at: float
    ) -> IdempotencyRecord | None:
        return await self._store.begin(key.stored, args_hash=args_hash, tool=call.name, now=now, expires_at=expires_at)

    async def _settle(self, key: _Key, *, result: types.CallToolResult | None = None, reissuable: bool = False) -> None:
        """Record how the call ended; shielded, since the call has already happened."""
        with anyio.CancelScope(shield=True):
            try:
                if result is not None:
                    await self._store.complete(key.stored, result, expires_at=self._clock() + self._rule.window_s)
                elif reissuable:
                    await self._store.release(key.stored)
                else:
                    await self._store.mark_unknown(key.stored, expires_at=self._clock() + self._rule.window_s)
            except Exception:
                log.exception("idempotency_store_failed", key=key.value)

    def _from_record(self, call: ToolCall, key: _Key, args_hash: str, held: IdempotencyRecord) -> types.CallToolResult:
        if held.args_hash != args_hash:
            raise _mismatch(key)
        if held.status == "completed":
            return _replay(call, key, held.result or _not_kept(held.created_at), held.created_at)
        if key.explicit or self._rule.forward_key_as:
            call.record.extra["idempotency_key"] = key.value
        raise self._outcome_unknown(key, held)

    def _forward(self, call: ToolCall, key: _Key) -> ToolCall:
        if key.explicit or self._rule.forward_key_as:
            call.record.extra["idempotency_key"] = key.value
        if self._rule.forward_key_as is None:
            return call
        return replace(call, meta={**(call.meta or {}), self._rule.forward_key_as: key.value})

    # --- duplicates of a running call ---------------------------------------------------------------------------

    async def _join(self, call: ToolCall, key: _Key, args_hash: str, flight: Flight) -> types.CallToolResult:
        if flight.args_hash != args_hash:
            raise _mismatch(key)
        if self._rule.on_in_flight == "conflict":
            raise _busy(key, flight)
        await flight.done.wait()
        if flight.result is not None:
            return _replay(call, key, flight.result, flight.started_at)
        error = flight.error
        if isinstance(error, Fault):
            shared = copy.copy(error)
            shared.details = {**error.details, "shared_with_identical_call": True}
            raise shared
        raise self._outcome_unknown(key, None, flight.started_at)

    # --- keys and refusals --------------------------------------------------------------------------------------

    def _key(self, call: ToolCall, args_hash: str) -> _Key:
        scope = f"{call.upstream}/{call.upstream_tool or call.name}"
        explicit = _meta_key(call.meta)
        name = self._rule.key_argument
        if explicit is None and name and isinstance(call.arguments, dict) and name in call.arguments:
            value = call.arguments[name]
            explicit = value if isinstance(value, str) else canonical_json(value)
        if explicit is not None:
            return _Key(f"{scope}#key:{explicit}", explicit, True)
        # A key derived from the arguments only stands for "the same agent asked again": scoped to the session.
        return _Key(f"{scope}#session:{call.session_id}#sha256:{args_hash}", args_hash, False)

    def _outcome_unknown(self, key: _Key, held: IdempotencyRecord | None, started: float = 0.0) -> StateConflict:
        at = _iso(held.created_at if held else started)
        if held is not None and held.status == "in_flight":
            why = "was started by a resilient-mcp process that is gone (or another one that is still running it)"
        else:
            why = "may have executed, but its outcome is unknown"
        details: dict[str, Any] = {"idempotency_key": key.value, "conflict": "outcome_unknown", "original_at": at}
        retry_after_ms: int | None = None
        if held is not None:
            details["blocked_until"] = _iso(held.expires_at)
            # Once the window is over an identical call runs again: say when, so the loop guard lets it through.
            retry_after_ms = max(0, int((held.expires_at - self._clock()) * 1000))
        check = "Check whether it took effect"
        if self._verify_with is not None:
            check = f"Call {self._verify_with.tool} to check whether it took effect"
            details["verify_with"] = self._verify_with.model_dump()
        return StateConflict(
            f"An identical call made at {at} {why}; it was not run again.",
            details=details, retry_safety=RetrySafety.MAYBE_EXECUTED, side_effect_status=SideEffectStatus.UNKNOWN,
            repair_action=RepairAction.VERIFY_STATE, max_retry=0, retry_after_ms=retry_after_ms,
            suggestion=f"{check} before doing anything else. If it did not, re-issue it after "
            f"{details.get('blocked_until', 'the idempotency window')} or with changed arguments.",
        )  # fmt: skip


def _meta_key(meta: dict[str, Any] | None) -> str | None:
    for name in KEY_META_FIELDS:
        value = (meta or {}).get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, str | int | float) or value == "":
            raise MalformedArguments(
                f"the idempotency key in _meta[{name!r}] must be a non-empty string",
                details={"field": f"_meta.{name}"}, max_retry=0,
            )  # fmt: skip
        return str(value)
    return None


def _replay(call: ToolCall, key: _Key, result: types.CallToolResult, original: float) -> types.CallToolResult:
    call.record.decided_by = "idempotency"
    replayed = (result.meta or {}).get(REPLAY_META)
    at = str(replayed.get("original_at")) if isinstance(replayed, dict) else _iso(original)
    note = (
        f"resilient-mcp: an identical call made at {at} already ran; this is its result, replayed. "
        "The tool was not called again."
    )
    if replayed is not None:  # a replay shared with a waiting duplicate: already marked
        return result
    meta = {**(result.meta or {}), REPLAY_META: {"key": key.value, "original_at": at}}
    content = [*result.content, types.TextContent(text=f"[{note}]")]
    return result.model_copy(update={"meta": meta, "content": content})


def _not_kept(created_at: float) -> types.CallToolResult:
    text = f"The identical call made at {_iso(created_at)} completed; its result was too large to keep for replay."
    return types.CallToolResult(content=[types.TextContent(text=text)])


def _mismatch(key: _Key) -> SemanticArgumentRejection:
    return SemanticArgumentRejection(
        f"The idempotency key {key.value!r} was already used with different arguments; nothing was run.",
        details={"idempotency_key": key.value, "conflict": "key reused with different arguments"},
        retry_safety=RetrySafety.NOT_SENT, side_effect_status=SideEffectStatus.NONE, max_retry=0,
        suggestion="Use a new idempotency key for a different request, or repeat the original arguments exactly.",
    )  # fmt: skip


def _busy(key: _Key, flight: Flight) -> StateConflict:
    at = _iso(flight.started_at)
    return StateConflict(
        f"An identical call started at {at} is still running; this one was not run.",
        details={"idempotency_key": key.value, "conflict": "in_flight", "original_at": at},
        transient=True, retry_safety=RetrySafety.NOT_SENT, side_effect_status=SideEffectStatus.NONE,
        repair_action=RepairAction.BACKOFF_RETRY, max_retry=1,
        suggestion="Wait for the running call to finish, then repeat this one: it will return the same result "
        "without running the tool again.",
    )  # fmt: skip
