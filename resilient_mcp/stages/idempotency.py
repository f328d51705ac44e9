"""The idempotency stage: one agent write call never becomes two side effects, and no write the host meant is lost.

On by default for ``write_unsafe`` and ``destructive`` tools (``replays_writes``); elsewhere the stage passes calls
straight through. It sits outside the retry stage, so every attempt of one call shares one key.

The key of a call, first found:

1. ``_meta`` of the request: ``io.github.resilient-mcp/idempotency-key``, ``idempotency-key`` or ``Idempotency-Key``
   (the IETF header name), a non-empty string or a number;
2. the argument named by ``idempotency.key_argument`` (e.g. ``client_ref``), when the call has it;
3. otherwise an HMAC-SHA-256, keyed with the installation's secret, of the canonical JSON of ``[upstream, upstream
   tool, arguments]`` (``StateStore.call_fingerprint``).

Keys are scoped per upstream tool and per upstream *identity* (``upstream_identity``: its URL, or its command,
arguments and working directory, with its configured name), so two different servers never share a record.

**Explicit keys** (1, 2) have the Stripe/IETF semantics, shared by every session (and every proxy on one store) of
one principal: over HTTP with ``listen.auth_tokens`` a key is scoped to the bearer token that sent it, so another
token's identical key is another record (never told the first one's write ran, never told the key was used):

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

**Derived keys** (3) stand for "the same host asked again". A host session is one host connection
(``proxy.session_key``). An identical call:

=====================================  =========================================================================
while the first runs (same session)    waits and shares its result (one execution, both answered), or 409 with
                                       ``on_in_flight: conflict``
after the first's result was           runs: repeating a write is the host's intent (v1, v2, v1 ends as v1)
delivered to the host
after a success the host never got     the stored result, replayed and marked, within ``window_s``, same session
(it cancelled, timed out or
disconnected first)
after a write whose outcome is         ``StateConflict`` with ``verify_state`` until *this* session has made a
unknown (timeout, lost connection,     verifying call: the ``verify_with`` tool, or any successful read-only call
a proxy stopped mid-call), in any      of the same upstream (``SessionGuards.verified_since``); then it runs.
session, also after a restart          Kept ``unknown_outcome_s`` (a day) at most
=====================================  =========================================================================

For this, a derived-key write keeps two records: its own, per session (in flight, then completed until the result
is delivered: ``CallRecord.on_delivered``, run by ``server.run_tool_call``), and an upstream-wide one, claimed
while the call runs and kept as "outcome unknown" when the outcome is unknown. A claim found in the store that this
process is not running (another proxy process, or one that stopped mid-call) reads as outcome unknown.

How a call ends decides its records: a success is completed (derived keys: until delivered); an ``isError``
result, or a fault that provably did not execute (``not_sent``, ``rejected``, or ``executed_failed`` with nothing
committed), deletes them so the call may be re-issued; anything else (``maybe_executed``, a committed or unknown
side effect, cancellation, a bug) keeps the outcome unknown. With ``idempotency.forward_key_as`` the key also goes
upstream in that ``_meta`` field, and into ``call.record.extra["idempotency_key"]`` (as it does when the key was
explicit). A store that fails is logged and the call runs unguarded rather than failing every write.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import anyio
import mcp_types as types
import structlog

from ..call.chain import CallNext, Decision, ToolCall
from ..call.meta import REPLAY_META
from ..faults import (
    Fault,
    MalformedArguments,
    RepairAction,
    RetrySafety,
    SemanticArgumentRejection,
    SideEffectStatus,
    StateConflict,
)
from ..faults.error_results import answered_by_tool
from ..policy import ToolRule
from ..state import Claim, IdempotencyRecord, IdempotencyStore, StateUnavailable
from ..state.errors import state_fault
from ..state.stored_outputs import owner_principal
from ..text import canonical_json
from ..verdict.repeat import decide_outcome_unknown, verdict_of
from .guard import SessionGuards

log = structlog.get_logger(__name__)

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
        self._marked: dict[str, int] = {}
        """Upstream-wide records of derived-key writes this process is running (key -> calls running it)."""

    def mark(self, marker: str) -> None:
        self._marked[marker] = self._marked.get(marker, 0) + 1

    def unmark(self, marker: str) -> None:
        left = self._marked.get(marker, 0) - 1
        if left > 0:
            self._marked[marker] = left
        else:
            self._marked.pop(marker, None)

    def marked(self, marker: str, *, beyond: int = 0) -> bool:
        """Whether more than ``beyond`` calls of this process are running under ``marker``."""
        return self._marked.get(marker, 0) > beyond

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
    marker: str | None
    """Derived keys: the upstream-wide record of an identical write whose outcome is unknown (any session)."""
    tool: str


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds")


class Idempotency:
    """The idempotency stage; see the module docstring."""

    def __init__(
        self,
        rule: ToolRule,
        store: IdempotencyStore,
        in_flight: InFlight,
        clock: Callable[[], float] = time.time,
        *,
        identity: str = "",
        guards: SessionGuards | None = None,
    ) -> None:
        self.enabled = rule.idempotency_on
        self._rule = rule.idempotency
        self._verify_with = rule.verify_with
        self._in_flight_s = rule.idempotency.window_s + rule.timeouts.total_s
        self._identity = identity
        self._guards = guards
        self._store, self._flights, self._clock = store, in_flight, clock

    async def __call__(self, call: ToolCall, call_next: CallNext, /) -> types.CallToolResult:
        if not self.enabled:
            return await call_next(call)
        args_hash = self._store.call_fingerprint(call)
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
        try:
            if key.marker is not None:
                # Both records in one durable step (a derived key's own record is only ever completed between
                # calls; the store replaces anything else as stale).
                claim = Claim(args_hash, call.name, now, now + self._in_flight_s, now + self._rule.unknown_outcome_s)
                held, marker_held = await self._store.begin_write(key.stored, key.marker, claim)
                if held is not None:
                    return self._from_record(call, key, args_hash, held)
                try:
                    await self._claim_marker(call, key, key.marker, args_hash, now, marker_held)
                except Fault:
                    await self._store.release(key.stored)
                    raise
            else:
                held = await self._claim(call, key, args_hash, now)
                unknown = held is not None and held.status == "unknown" and held.args_hash == args_hash
                if unknown and decide_outcome_unknown(call.rule).safe:  # rule R: the upstream dedupes by the key
                    await self._store.release(key.stored)
                    held = await self._claim(call, key, args_hash, now)
                if held is not None:
                    return self._from_record(call, key, args_hash, held)
        except Fault:
            raise
        except StateUnavailable as exc:
            if self._rule.on_state_unavailable == "refuse":
                call.record.decided_by = "idempotency"
                raise state_fault(exc) from exc
            call.record.notes.append("the shared state was unavailable: sent without duplicate protection")
            log.warning("idempotency_state_unavailable_proceeding", tool=call.name)
            return await call_next(self._forward(call, key))
        except Exception:
            log.exception("idempotency_store_failed", tool=call.name)
            return await call_next(self._forward(call, key))
        try:
            return await self._run(call, call_next, key)
        finally:
            if key.marker is not None:
                self._flights.unmark(key.marker)

    async def _run(self, call: ToolCall, call_next: CallNext, key: _Key) -> types.CallToolResult:
        try:
            result = await call_next(self._forward(call, key))
        except Fault as fault:
            reissuable = _reissuable(fault, verdict_of(call, fault), derived=key.marker is not None)
            await self._settle(key, reissuable=reissuable)
            raise
        except BaseException:  # cancelled, or a bug: the call may have been sent
            await self._settle(key, reissuable=False)
            raise
        if result.is_error:
            await self._settle(key, reissuable=True)
        else:
            await self._settle(key, result=result)
            self._forget_when_delivered(call, key)
        return result

    async def _claim(self, call: ToolCall, key: _Key, args_hash: str, now: float) -> IdempotencyRecord | None:
        """Claim this call's own record (``None``), or get the record that holds its key."""
        return await self._store.begin(
            key.stored, args_hash=args_hash, tool=call.name, now=now, expires_at=now + self._in_flight_s
        )

    async def _claim_marker(
        self, call: ToolCall, key: _Key, marker: str, args_hash: str, now: float, held: IdempotencyRecord | None
    ) -> None:
        """After ``begin_write``: the upstream-wide record of a derived-key write is claimed (``held`` is None), or
        refuse while an identical write's outcome is unknown and this session has not verified since."""
        if held is None or self._flights.marked(marker):  # free, or another session of this process runs it now
            self._flights.mark(marker)
            return
        since = self._unknown_since(held)
        verify_tool = self._verify_with.tool if self._verify_with is not None else None
        by = None
        if self._guards is not None:
            by = self._guards.verified_since(call.session_id, call.upstream, verify_tool, since)
        if by is None and decide_outcome_unknown(call.rule).safe:
            by = "nothing (the upstream honours the forwarded key)"  # rule R: a re-send cannot duplicate the write
        if by is None:
            call.record.decided_by = "idempotency"
            raise self._outcome_unknown(call, key, held)
        call.record.notes.append(
            f"an identical call made at {_iso(held.created_at)} had an unknown outcome; {by} was called since, "
            "so this call was sent"
        )
        await self._store.release(marker)
        await self._store.begin(
            marker, args_hash=args_hash, tool=call.name, now=now, expires_at=now + self._rule.unknown_outcome_s
        )
        self._flights.mark(marker)

    def _unknown_since(self, held: IdempotencyRecord) -> float:
        """When the held write's outcome became unknown: a verifying call must come after it."""
        if held.status == "unknown":
            return max(held.created_at, held.expires_at - self._rule.unknown_outcome_s)
        return held.created_at

    async def _settle(self, key: _Key, *, result: types.CallToolResult | None = None, reissuable: bool = False) -> None:
        """Record how the call ended; shielded, since the call has already happened."""
        with anyio.CancelScope(shield=True):
            try:
                if key.marker is not None:
                    await self._settle_derived(key, key.marker, result, reissuable)
                elif result is not None:
                    await self._store.complete(key.stored, result, expires_at=self._clock() + self._rule.window_s)
                elif reissuable:
                    await self._store.release(key.stored)
                else:
                    await self._store.mark_unknown(key.stored, expires_at=self._clock() + self._rule.window_s)
            except Exception:
                log.exception("idempotency_store_failed", key=key.value)

    async def _settle_derived(
        self, key: _Key, marker: str, result: types.CallToolResult | None, reissuable: bool
    ) -> None:
        now = self._clock()
        if result is not None or reissuable:
            # One step: the own record kept for a replay until the host has it (``_forget_when_delivered``), or
            # released; the upstream-wide record released unless another call of this process still runs it. A
            # store shared with another process has written it when this returns, so that process sees the claim
            # gone before this host has the answer.
            mine = marker if not self._flights.marked(marker, beyond=1) else None
            await self._store.settle_write(key.stored, mine, result, expires_at=now + self._rule.window_s)
            return
        await self._store.release(key.stored)
        # Outcome unknown: the upstream-wide record blocks an identical blind call, in any session, after restarts.
        if await self._store.get(marker, now=now) is None:
            await self._store.begin(
                marker, args_hash=key.value, tool=key.tool, now=now, expires_at=now + self._rule.unknown_outcome_s
            )
        await self._store.mark_unknown(marker, expires_at=now + self._rule.unknown_outcome_s)

    def _forget_when_delivered(self, call: ToolCall, key: _Key) -> None:
        """A derived key's result the host received is never replayed: the next identical call runs."""
        if key.marker is None:
            return
        store, stored = self._store, key.stored

        async def forget() -> None:
            store.forget(stored)  # off the call's path: the store's next operation on the key sees it gone

        call.record.on_delivered.append(forget)

    def _from_record(self, call: ToolCall, key: _Key, args_hash: str, held: IdempotencyRecord) -> types.CallToolResult:
        if held.args_hash != args_hash:
            raise _mismatch(key)
        if held.status == "completed":
            self._forget_when_delivered(call, key)
            undelivered = key.marker is not None
            return _replay(call, key, held.result or _not_kept(held.created_at), held.created_at, undelivered)
        if key.explicit or self._rule.forward_key_as:
            call.record.extra["idempotency_key"] = key.value
        raise self._outcome_unknown(call, key, held)

    def _forward(self, call: ToolCall, key: _Key) -> ToolCall:
        if key.explicit or self._rule.forward_key_as:
            call.record.extra["idempotency_key"] = key.value
        if self._rule.forward_key_as is None:
            return call
        # Scoped to the principal as the proxy's own record is: an upstream that deduplicates by this key must not
        # hand one tenant's result to another that sent the same key (or the same arguments, for a derived key).
        principal = owner_principal(call.owner)
        forwarded = f"{principal}.{key.value}" if principal else key.value
        return replace(call, meta={**(call.meta or {}), self._rule.forward_key_as: forwarded})

    # --- duplicates of a running call ---------------------------------------------------------------------------

    async def _join(self, call: ToolCall, key: _Key, args_hash: str, flight: Flight) -> types.CallToolResult:
        if flight.args_hash != args_hash:
            raise _mismatch(key)
        if self._rule.on_in_flight == "conflict":
            raise _busy(key, flight)
        log.info("idempotency_joined", tool=call.name, key=key.value[:16])
        await flight.done.wait()
        if flight.result is not None:
            self._forget_when_delivered(call, key)
            return _replay(call, key, flight.result, flight.started_at)
        error = flight.error
        if isinstance(error, Fault):
            raise error.with_details(shared_with_identical_call=True)
        raise self._outcome_unknown(call, key, None, flight.started_at)

    # --- keys and refusals --------------------------------------------------------------------------------------

    def _key(self, call: ToolCall, args_hash: str) -> _Key:
        tool = call.upstream_tool or call.name
        scope = f"{call.upstream}@{self._identity}/{tool}" if self._identity else f"{call.upstream}/{tool}"
        explicit = _meta_key(call.meta)
        name = self._rule.key_argument
        if explicit is None and name and isinstance(call.arguments, dict) and name in call.arguments:
            value = call.arguments[name]
            explicit = value if isinstance(value, str) else canonical_json(value)
        if explicit is not None:
            principal = owner_principal(call.owner)  # tenants never share a key's record
            scoped = f"{scope}#by:{principal}#key:{explicit}" if principal else f"{scope}#key:{explicit}"
            return _Key(scoped, explicit, True, None, call.name)
        # A key derived from the arguments only stands for "the same agent asked again": its result is scoped to
        # the session; whether its outcome is unknown is about the server, so that record is upstream-wide.
        return _Key(
            f"{scope}#session:{call.session_id}#hmac:{args_hash}",
            args_hash,
            False,
            f"{scope}#outcome#hmac:{args_hash}",
            call.name,
        )

    def _outcome_unknown(
        self, call: ToolCall, key: _Key, held: IdempotencyRecord | None, started: float = 0.0
    ) -> StateConflict:
        """The refusal of an identical call while an earlier one's outcome is unknown. ``held`` is the earlier call's
        record (``None``: this call joined it in this process and it ended without an outcome). A derived key is
        blocked until this session verifies (``_claim_marker``); an explicit one until its record expires."""
        at = _iso(held.created_at if held else started)
        why = "started_elsewhere" if held is not None and held.status == "in_flight" else "outcome_unknown"
        details: dict[str, Any] = {"idempotency_key": key.value, "conflict": "outcome_unknown", "original_at": at}
        if held is not None:
            details["blocked_until"] = _iso(held.expires_at)
        if key.marker is not None:
            details["unblocked_by"] = "verify_call"
        if self._verify_with is not None:
            details["verify_with"] = self._verify_with.model_dump()
        retry_after_ms: int | None = None
        if held is not None and key.marker is None:
            # Once the window is over an identical call runs again: say when, so the loop guard lets it through.
            retry_after_ms = max(0, int((held.expires_at - self._clock()) * 1000))

        def refuse(suggest: str, **fields: Any) -> StateConflict:
            return StateConflict.of(
                why,
                suggest=suggest,
                at=at,
                **fields,
                details=details,
                retry_safety=RetrySafety.MAYBE_EXECUTED,
                side_effect_status=SideEffectStatus.UNKNOWN,
                repair_action=RepairAction.VERIFY_STATE,
                max_retry=0,
                retry_after_ms=retry_after_ms,
            )

        if key.marker is not None:
            readers = [self._verify_with.tool] if self._verify_with is not None else []
            if call.upstream:
                readers.append(StateConflict.text("any_reader_of", upstream=call.upstream))
            else:
                readers.append(StateConflict.text("any_reader"))
            return refuse("verify_then_repeat", readers=" or ".join(readers))
        until = details.get("blocked_until") or StateConflict.text("the_window")
        if self._verify_with is not None:
            return refuse("verify_with_then_reissue", verify_with=self._verify_with.tool, until=until)
        return refuse("verify_then_reissue", until=until)


def replays_writes(rule: ToolRule, tool: types.Tool | None) -> bool:
    """Whether the idempotency stage runs for this tool.

    Explicit policy wins. By default it runs for write_unsafe and destructive tools, except those whose own
    annotations say they are read-only: replaying the stored result of a read would serve stale data, so that hint
    is honoured even from an untrusted upstream (it can only switch replay off; retries still treat the tool as the
    write its effect class says it is)."""
    if rule.idempotency.enabled is not None:
        return rule.idempotency.enabled
    hinted_read_only = tool is not None and tool.annotations is not None and bool(tool.annotations.read_only_hint)
    return rule.idempotency_on and not hinted_read_only


def identical_call(rule: ToolRule, tool: types.Tool | None) -> dict[str, str]:
    """What the proxy does with a call identical to an earlier one of this tool (``check --connect``, ``explain``)."""
    if not replays_writes(rule, tool):
        why = "idempotency.enabled: false" if rule.idempotency.enabled is False else f"effect {rule.effect.value}"
        if rule.idempotency.enabled is None and rule.idempotency_on:
            why = "the tool's readOnlyHint"
        return {"summary": "run", "why": f"no duplicate protection ({why}): every call is sent"}
    behaviour = {
        "summary": "join / replay-if-undelivered / block-until-verified, else run",
        "while_the_first_runs": "wait and share its result" if rule.idempotency.on_in_flight == "wait" else "409",
        "after_its_result_was_delivered": "run",
        "after_the_host_missed_its_result": f"replay, marked (same session, {rule.idempotency.window_s:g} s)",
        "after_an_unknown_outcome": "block until this session verifies ("
        + (f"{rule.verify_with.tool} or " if rule.verify_with else "")
        + "any read-only call of the upstream)",
        "with_an_explicit_key": "replay while the key is kept; 409 in flight; 422 on other arguments",
    }
    if rule.idempotency.key_argument:
        behaviour["summary"] = f"explicit key from argument {rule.idempotency.key_argument!r}: replay, 409, 422"
    return behaviour


def upstream_identity(config: object) -> str:
    """What makes an upstream the server it is, hashed: its URL, or its command, arguments and working directory.

    Records are namespaced by it (with the configured name), so two different servers never share one, even when
    two proxies on one state directory both call theirs "upstream"."""
    url = getattr(config, "url", None)
    if url:
        parts: list[Any] = ["url", str(url)]
    else:
        cwd = getattr(config, "cwd", None)
        where = os.path.abspath(os.path.expanduser(cwd)) if cwd else os.getcwd()
        parts = ["stdio", getattr(config, "command", ""), list(getattr(config, "args", []) or []), where]
    return hashlib.sha256(canonical_json(parts).encode()).hexdigest()[:16]


def _reissuable(fault: Fault, verdict: Decision, *, derived: bool = False) -> bool:
    """Whether an identical call may run after this failure (its record is released rather than kept unknown).

    Explicit keys: only when the failed call provably changed nothing (rule R's ``nothing_done``). Derived keys:
    also when the tool itself answered with a failure (an ``isError`` result, ``executed_failed``): its outcome is
    what the server said, not unknown (a timeout, a lost connection, a chained proxy's unknown outcome are), and a
    repeat is the host's decision (the loop guard answers identical failures that cannot change). An untrusted
    server's claim that a write did not run is not such an answer: rule R counts it as maybe executed (``verdict``:
    rule R's decision on ``fault``)."""
    if verdict.nothing_done:
        return True
    if not derived or verdict.reason == "untrusted_claim":
        return False
    return answered_by_tool(fault) or fault.retry_safety is RetrySafety.EXECUTED_FAILED


def _meta_key(meta: dict[str, Any] | None) -> str | None:
    for name in KEY_META_FIELDS:
        value = (meta or {}).get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, str | int | float) or value == "":
            raise MalformedArguments.of(
                "bad_idempotency_key",
                field=name,
                details={"field": f"_meta.{name}"},
                max_retry=0,
            )
        return str(value)
    return None


def _replay(
    call: ToolCall, key: _Key, result: types.CallToolResult, original: float, undelivered: bool = False
) -> types.CallToolResult:
    call.record.decided_by = "idempotency"
    replayed = (result.meta or {}).get(REPLAY_META)
    at = str(replayed.get("original_at")) if isinstance(replayed, dict) else _iso(original)
    if undelivered:
        note = (
            f"resilient-mcp: an identical call made at {at} ran, but its result never reached you (cancelled, timed "
            "out or disconnected first); this is that result, replayed. The tool was not called again."
        )
    else:
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
    return SemanticArgumentRejection.of(
        "key_reused",
        suggest="new_key_or_same_arguments",
        key=key.value,
        details={"idempotency_key": key.value, "conflict": "key reused with different arguments"},
        retry_safety=RetrySafety.NOT_SENT,
        side_effect_status=SideEffectStatus.NONE,
        max_retry=0,
    )


def _busy(key: _Key, flight: Flight) -> StateConflict:
    at = _iso(flight.started_at)
    return StateConflict.of(
        "in_flight",
        suggest="wait_for_running",
        at=at,
        details={"idempotency_key": key.value, "conflict": "in_flight", "original_at": at},
        transient=True,
        retry_safety=RetrySafety.NOT_SENT,
        side_effect_status=SideEffectStatus.NONE,
        repair_action=RepairAction.BACKOFF_RETRY,
        max_retry=1,
    )
