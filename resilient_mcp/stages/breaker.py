"""The breaker stage and the board of circuits it shares: fail fast while an upstream, or one of its tools, is failing.

Circuits are consecutive-failure counters sized for agent traffic (a few dozen calls per task, so no sampling
window): one per upstream and one per (upstream, tool). Only faults that say something about the upstream's health
count (``Fault.counts_against_upstream``: transport, timeout, 5xx-class, D1, E1); a success resets the count, other
faults (argument mistakes, permission refusals, tool errors that executed) neither count nor reset. A fault that is
``tool_level`` (a JSON-RPC internal error from a live upstream: the tool threw) counts toward the tool's circuit only.

    closed ──threshold reached──▶ open ──open_s elapsed──▶ half_open ──probe ok──▶ closed
                                   ▲                           │
                                   └──────probe failed─────────┘

A tool circuit opens at ``breaker.failure_threshold`` consecutive counted failures of that tool. The upstream circuit
opens at the same count when the failures show the upstream, not one tool, is failing: connection-level faults
(connect failure, connection lost, gateway 5xx) or failures spread over at least two tools. One broken tool therefore
does not take its healthy siblings down with it. Connection-level faults of one tool alone may still be that tool's
(a gateway that refuses one route, a per-tool backend that is down): while the upstream circuit holds a single tool's
streak, the first call of *another* tool is its half-open probe at once (a read goes through; a write waits for the
listing probe), so a healthy sibling is never refused on one tool's evidence; when that call fails too, the streak
spans two tools and the circuit refuses every tool until ``open_s`` has passed.

While a circuit is open, calls fail fast with ``PersistentOutage`` (not sent; repair ``switch_tool`` naming the rule's
``fallback`` tools, else ``degrade``; the time until the next probe). When ``open_s`` has passed, one probe runs and
it is never a write: a read-only call goes through as the probe; any other call waits for the board's ``probe``
callable (a ``tools/list`` on the upstream) and proceeds only when that succeeds. State changes are logged.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Protocol

import anyio
import mcp_types as types
import structlog

from ..call.chain import CallNext, ToolCall
from ..faults import ConnectFailure, ConnectionLost, EffectClass, Fault, GatewayError, PersistentOutage, RepairAction
from ..policy import BreakerRule, ToolRule

log = structlog.get_logger(__name__)

Probe = Callable[[str], Awaitable[None]]


class SharedCircuits(Protocol):
    """Open circuits shared by replicas (``breaker.shared``; ``state.redis.RedisStateStore``)."""

    async def circuit_open(self, upstream: str, tool: str) -> tuple[str | None, float, int] | None: ...
    async def publish_circuit(self, upstream: str, tool: str | None, open_s: float, failures: int) -> None: ...


Clock = Callable[[], float]

_UPSTREAM_LEVEL = (ConnectFailure, ConnectionLost, GatewayError)


class CircuitState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


@dataclass(slots=True)
class _Circuit:
    upstream: str
    tool: str | None  # None: the upstream's own circuit
    state: CircuitState = CircuitState.CLOSED
    failures: int = 0
    open_until: float = 0.0
    opened_at: str | None = None
    probing: bool = False
    tools: set[str] = field(default_factory=set)  # upstream circuit: tools in the current failure streak
    upstream_level: bool = False  # upstream circuit: the streak holds a connection-level fault
    published: bool = False  # breaker.shared: this opening was published to the other replicas

    @property
    def kind(self) -> str:
        return "upstream" if self.tool is None else "tool"


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a call may not go through now: the circuit that is open and when it will next be probed."""

    circuit: str  # "upstream" | "tool"
    upstream: str
    tool: str
    opened_at: str | None
    retry_in_ms: int
    consecutive_failures: int
    waiting_for: str | None = None  # "probe_in_flight" | "read_probe" when half-open


@dataclass(frozen=True, slots=True)
class Ticket:
    """A call let through by the board; names the circuits for which it is the half-open probe."""

    upstream: str
    tool: str
    probing: tuple[_Circuit, ...] = ()


class BreakerBoard:
    """Circuit state of every upstream and tool, shared by all breaker stages (and read by diagnostics)."""

    def __init__(self, probe: Probe | None = None, *, clock: Clock = time.monotonic, probe_timeout_s: float = 10.0):
        self._probe = probe
        self._clock = clock
        self._probe_timeout_s = probe_timeout_s
        self._circuits: dict[tuple[str, str | None], _Circuit] = {}
        self.shared: SharedCircuits | None = None
        """Where circuits opened here are published and others' are read (rules with ``breaker.shared``)."""

    def set_probe(self, probe: Probe) -> None:
        """Install the half-open probe when the board was made before whoever can probe (the pipeline)."""
        if self._probe is None:
            self._probe = probe

    def circuit_states(self) -> list[tuple[str, str | None, str, int]]:
        """``(upstream, tool or None for the upstream's circuit, state, consecutive failures)`` of every circuit."""
        return [(c.upstream, c.tool, c.state.value, c.failures) for c in list(self._circuits.values())]

    def _circuit(self, upstream: str, tool: str | None) -> _Circuit:
        key = (upstream, tool)
        circuit = self._circuits.get(key)
        if circuit is None:
            circuit = self._circuits[key] = _Circuit(upstream, tool)
        return circuit

    async def admit(self, upstream: str, tool: str, rule: BreakerRule, *, read_only: bool) -> Ticket | Refusal:
        """Let a call through (possibly as the half-open probe), or say why not. The upstream circuit goes first."""
        probing: list[_Circuit] = []
        for circuit in (self._circuit(upstream, None), self._circuit(upstream, tool)):
            refusal = await self._admit_one(circuit, tool, rule, read_only, probing)
            if refusal is not None:
                for claimed in probing:
                    claimed.probing = False
                return refusal
        return Ticket(upstream, tool, tuple(probing))

    async def _admit_one(
        self, circuit: _Circuit, tool: str, rule: BreakerRule, read_only: bool, probing: list[_Circuit]
    ) -> Refusal | None:
        if circuit.state is CircuitState.CLOSED:
            return None
        now = self._clock()
        if circuit.state is CircuitState.OPEN and now < circuit.open_until and not self._other_tool(circuit, tool):
            return self._refusal(circuit, tool, round((circuit.open_until - now) * 1000))
        if circuit.probing:
            return self._refusal(circuit, tool, 0, "probe_in_flight")
        if circuit.state is CircuitState.OPEN:
            circuit.state = CircuitState.HALF_OPEN
            log.info("breaker_half_open", upstream=circuit.upstream, tool=circuit.tool, failures=circuit.failures)
        if read_only:  # this read is the probe
            circuit.probing = True
            probing.append(circuit)
            return None
        if self._probe is None:  # a write is never the probe: wait for a read
            return self._refusal(circuit, tool, 0, "read_probe")
        return await self._run_probe(circuit, tool, rule)

    @staticmethod
    def _other_tool(circuit: _Circuit, tool: str) -> bool:
        """An upstream circuit opened on one tool's failures alone, asked for another tool: probe it now."""
        return circuit.tool is None and len(circuit.tools) == 1 and tool not in circuit.tools

    async def _run_probe(self, circuit: _Circuit, tool: str, rule: BreakerRule) -> Refusal | None:
        assert self._probe is not None
        circuit.probing = True
        try:
            with anyio.fail_after(self._probe_timeout_s):
                await self._probe(circuit.upstream)
        except Exception as exc:
            circuit.probing = False
            if circuit.tool is None:  # the upstream failed its listing: the evidence is no longer one tool's
                circuit.tools.add(tool)
            self._open(circuit, rule, reason=f"probe failed: {type(exc).__name__}")
            return self._refusal(circuit, tool, round(rule.open_s * 1000))
        except BaseException:
            circuit.probing = False
            raise
        self._close(circuit)
        return None

    def on_success(self, ticket: Ticket) -> None:
        for circuit in (self._circuit(ticket.upstream, None), self._circuit(ticket.upstream, ticket.tool)):
            circuit.failures = 0
            circuit.tools.clear()
            circuit.upstream_level = False
            if circuit in ticket.probing:
                self._close(circuit)

    def on_failure(self, ticket: Ticket, fault: Fault, rule: BreakerRule) -> None:
        if not fault.counts_against_upstream:  # the upstream answered: neither counted nor reset
            self.release(ticket)
            return
        upstream, own = self._circuit(ticket.upstream, None), self._circuit(ticket.upstream, ticket.tool)
        counted = [own]
        if fault.tool_level:  # the tool threw on a live upstream: the upstream answered, so a probe of it passed
            if upstream in ticket.probing:
                self._close(upstream)
        else:
            upstream.tools.add(ticket.tool)
            upstream.upstream_level = upstream.upstream_level or isinstance(fault, _UPSTREAM_LEVEL)
            counted.insert(0, upstream)
        for circuit in counted:
            circuit.failures += 1
            if circuit in ticket.probing:
                circuit.probing = False
                self._open(circuit, rule, reason="probe failed")
            elif circuit.state is CircuitState.CLOSED and self._tripped(circuit, rule):
                self._open(circuit, rule, reason=fault.fault_type)

    def opened_now(self, upstream: str, tool: str) -> list[_Circuit]:
        """The circuits of this call that are open with their full ``open_s`` ahead (just opened)."""
        out = []
        for circuit in (self._circuit(upstream, None), self._circuit(upstream, tool)):
            if circuit.state is CircuitState.OPEN and not circuit.published:
                circuit.published = True
                out.append(circuit)
        return out

    def release(self, ticket: Ticket) -> None:
        """The call ended without evidence either way (cancelled, or a non-counting fault): free its probe slot."""
        for circuit in ticket.probing:
            circuit.probing = False

    def counts(self, upstream: str, tool: str) -> tuple[int, int]:
        """Consecutive counted failures of (this tool, this upstream)."""
        return self._circuit(upstream, tool).failures, self._circuit(upstream, None).failures

    def snapshot(self) -> list[dict[str, Any]]:
        now = self._clock()
        return [
            {
                "upstream": c.upstream,
                "tool": c.tool,
                "state": c.state.value,
                "consecutive_failures": c.failures,
                "opened_at": c.opened_at,
                "retry_in_ms": max(0, round((c.open_until - now) * 1000)) if c.state is CircuitState.OPEN else None,
                "probing": c.probing,
            }
            for c in self._circuits.values()
        ]

    @staticmethod
    def _tripped(circuit: _Circuit, rule: BreakerRule) -> bool:
        if circuit.failures < rule.failure_threshold:
            return False
        return circuit.tool is not None or circuit.upstream_level or len(circuit.tools) >= 2

    def _open(self, circuit: _Circuit, rule: BreakerRule, *, reason: str) -> None:
        circuit.state = CircuitState.OPEN
        circuit.published = False
        circuit.open_until = self._clock() + rule.open_s
        circuit.opened_at = datetime.now(UTC).isoformat(timespec="seconds")
        log.warning(
            "breaker_opened",
            upstream=circuit.upstream,
            tool=circuit.tool,
            circuit=circuit.kind,
            failures=circuit.failures,
            open_s=rule.open_s,
            reason=reason,
        )

    def _close(self, circuit: _Circuit) -> None:
        was = circuit.state
        circuit.state, circuit.probing, circuit.failures = CircuitState.CLOSED, False, 0
        circuit.tools.clear()
        circuit.upstream_level = False
        if was is not CircuitState.CLOSED:
            log.info("breaker_closed", upstream=circuit.upstream, tool=circuit.tool, failures=0)

    @staticmethod
    def _refusal(circuit: _Circuit, tool: str, retry_in_ms: int, waiting_for: str | None = None) -> Refusal:
        return Refusal(
            circuit.kind, circuit.upstream, tool, circuit.opened_at, retry_in_ms, circuit.failures, waiting_for
        )


class Breaker:
    """Per attempt (inside retry): refuse fast while a circuit is open, count what the attempt says about health."""

    def __init__(self, rule: ToolRule, board: BreakerBoard) -> None:
        self._rule = rule.breaker
        self._read_only = rule.effect is EffectClass.READ_ONLY
        self._fallback = list(rule.fallback)
        self._board = board

    async def __call__(self, call: ToolCall, call_next: CallNext, /) -> types.CallToolResult:
        if not self._rule.enabled:
            return await call_next(call)
        shared = self._board.shared if self._rule.shared else None
        if shared is not None:
            await self._shared_refusal(call, shared)
        admitted = await self._board.admit(call.upstream, call.upstream_tool, self._rule, read_only=self._read_only)
        if isinstance(admitted, Refusal):
            call.record.decided_by = "breaker"
            raise self._outage(call, admitted)
        try:
            result = await call_next(call)
        except Fault as fault:
            self._board.on_failure(admitted, fault, self._rule)
            if shared is not None:
                await self._publish(call, shared)
            raise
        except BaseException:  # cancellation (or a bug): no evidence about the upstream
            self._board.release(admitted)
            raise
        self._board.on_success(admitted)
        return result

    async def _shared_refusal(self, call: ToolCall, shared: SharedCircuits) -> None:
        """Fail fast when another replica published an open circuit (an unreachable state is no evidence)."""
        try:
            found = await shared.circuit_open(call.upstream, call.upstream_tool)
        except Exception as exc:
            log.debug("breaker_shared_unreadable", error=str(exc))
            return
        if found is not None:
            tool, left_s, failures = found
            call.record.decided_by = "breaker"
            circuit = "tool" if tool else "upstream"
            refusal = Refusal(circuit, call.upstream, call.upstream_tool, None, round(left_s * 1000), failures, None)
            raise self._outage(call, refusal)

    async def _publish(self, call: ToolCall, shared: SharedCircuits) -> None:
        for circuit in self._board.opened_now(call.upstream, call.upstream_tool):
            try:
                await shared.publish_circuit(circuit.upstream, circuit.tool, self._rule.open_s, circuit.failures)
            except Exception as exc:
                log.warning("breaker_not_shared", upstream=circuit.upstream, error=str(exc))

    def _outage(self, call: ToolCall, refusal: Refusal) -> PersistentOutage:
        if refusal.circuit == "upstream":
            circuit = PersistentOutage.text("upstream_circuit", upstream=refusal.upstream)
        else:
            circuit = PersistentOutage.text("tool_circuit", tool=call.name)
        if refusal.waiting_for == "read_probe":
            retest = PersistentOutage.text("retest_by_read")
        elif refusal.waiting_for == "probe_in_flight":
            retest = PersistentOutage.text("retest_now")
        else:
            retest = PersistentOutage.text("retest_in", seconds=max(1, -(-refusal.retry_in_ms // 1000)))
        details: dict[str, Any] = {
            "circuit": refusal.circuit,
            "opened_at": refusal.opened_at,
            "retry_in_ms": refusal.retry_in_ms,
            "fallback": list(self._fallback),
            "consecutive_failures": refusal.consecutive_failures,
        }
        if refusal.waiting_for is not None:
            details["waiting_for"] = refusal.waiting_for
        return PersistentOutage.of(
            "circuit_open",
            circuit=circuit,
            failures=refusal.consecutive_failures,
            retest=retest,
            alternatives=PersistentOutage.text("alternatives", tools=", ".join(self._fallback))
            if self._fallback
            else "",
            details=details,
            repair_action=RepairAction.SWITCH_TOOL if self._fallback else RepairAction.DEGRADE,
            retry_after_ms=refusal.retry_in_ms,
        )
