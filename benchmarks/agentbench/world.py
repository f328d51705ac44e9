"""One episode's world: a chaos server with its ledger and fake clock, and the agent's connection to it.

Mode M0 connects the agent's MCP client straight to the chaos server (``transports.connect``); M1-M4 put the proxy
in between (built like ``tests/harness.py``: a real ``Proxy`` and ``build_server``, the client in legacy mode, so
every call crosses real JSON-RPC framing twice) with the observation level L0-L3. Faults come from two plans:

- server rules go to the chaos server (it answers, hangs, dies, corrupts, renames tools, as a real server would);
- network rules (C1, C4, C5, HTTP 429/401/403) act where the network would be: in front of the chaos server. With
  the proxy that is the proxy's own chaos-mode ``FaultInjector`` at the upstream seam; without it, ``DirectNetwork``
  gives the agent what an MCP client over streamable HTTP gets (the SDK turns every HTTP error status into
  ``-32603 "Server returned an error response"``; a refused connection is an ``OSError``).

Every upstream attempt and every fault that fired is written on the episode's ``Tape`` with the number of the agent
call it belongs to, so scoring can count proxy retries and upstream traffic. Waits (the proxy's backoff and
Retry-After sleeps, the agent's waits, the server's simulated latencies) run on one ``FakeClock``; only hangs (C3,
some E1) wait on the event loop's clock, which is virtual too (``virtualtime``), bounded by the scenario's short
attempt timeout; ``episode_now`` (the two added) is the clock of the proxy's retry deadline and breaker countdown.
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from random import Random
from typing import Any

import anyio
import mcp_types as types
import structlog
from mcp import Client
from mcp.shared.exceptions import MCPError

from resilient_mcp.chaos.clock import FakeClock
from resilient_mcp.chaos.inject import FaultInjector
from resilient_mcp.chaos.ledger import Ledger
from resilient_mcp.chaos.plan import Decision, FaultPlan, Planner
from resilient_mcp.chaos.server import ChaosServer
from resilient_mcp.chaos.transports import connect
from resilient_mcp.faults.error_results import FAULT_META_KEY
from resilient_mcp.host.server import build_server
from resilient_mcp.policy import Policy, PolicyFile
from resilient_mcp.policy.config import ProxyConfig
from resilient_mcp.proxy import pipeline as pipeline_module
from resilient_mcp.proxy.pipeline import Pipeline, Services
from resilient_mcp.proxy.proxy import Proxy
from resilient_mcp.proxy.routing import Router
from resilient_mcp.stages.breaker import BreakerBoard
from resilient_mcp.stages.guard import Guard

try:
    from resilient_mcp.verdict.observations import INSTRUCTIONS as PROXY_INSTRUCTIONS
except ImportError:  # the module moved: the live track then shows the model no proxy instructions
    PROXY_INSTRUCTIONS = None

log = structlog.get_logger(__name__)

MODES: dict[str, str | None] = {"M0": None, "M1": "L0", "M2": "L1", "M3": "L2", "M4": "L3", "M1u": "L0", "M3u": "L2"}
"""Proxy mode -> observation level (None: no proxy). ``M1u``/``M3u``: the no-typed-hint ablation (the chaos
server's errors carry no ``_meta`` hint; see ``runner.untyped``)."""
UPSTREAM = "shop"
REPLAY_META_KEY = "io.github.resilient-mcp/replay"
HOST_TIMEOUT_S = 10.0
"""The agent host's own per-call timeout, the same in every mode (with the proxy it is not expected to fire)."""
HOST_TEXT_LIMIT = 100_000
"""Hosts cut long tool output before the model sees it (about 25k tokens, as Claude Code does for MCP tools)."""
HOST_CUT = "\n[output truncated by the host]"


@dataclass(frozen=True, slots=True)
class Outcome:
    """What the agent got back from one tool call."""

    ok: bool
    text: str
    structured: dict[str, Any] | None = None
    observation: dict[str, Any] | None = None
    """The proxy's structured observation (L1-L3), if any."""
    error_code: int | None = None
    """The JSON-RPC error code when the call ended in a protocol error."""
    size_bytes: int = 0
    """Size of what the agent received (the result or error as JSON)."""
    replayed: bool = False
    """The proxy answered with the stored result of an identical earlier write (it did not run again)."""


@dataclass
class Tape:
    """Upstream traffic of one episode, each entry tagged with the agent call it served."""

    agent_call: int = 0
    attempts: list[tuple[int, str, str | None]] = field(default_factory=list)
    """Every upstream attempt at the network seam: (agent call, tool, network fault injected or None)."""
    server: list[tuple[int, str, str | None]] = field(default_factory=list)
    """Every call that reached the chaos server: (agent call, tool, server fault injected or None)."""


@dataclass
class TaggedPlanner(Planner):
    """A ``Planner`` that writes each decision on the tape."""

    tape: Tape = field(default_factory=Tape)
    where: str = "server"

    def decide(self, tool: str, args: Any, *, upstream: str | None = None) -> Decision | None:
        decision = super().decide(tool, args, upstream=upstream)
        entry = (self.tape.agent_call, tool, decision.fault if decision else None)
        (self.tape.attempts if self.where == "net" else self.tape.server).append(entry)
        return decision


class BenchPipeline(Pipeline):
    """The product pipeline with the loop guard and the idempotency stage on the episode's fake clock, so that a
    simulated wait (an agent waiting out ``retry_after`` or an idempotency window) counts as elapsed time for them.
    ``Services`` injects sleep and jitter but no clock: this is the one place the benchmark reaches past the public
    seam (``Guard`` and ``Idempotency`` both take a clock; the pipeline does not pass one)."""

    WALL0 = 1_800_000_000.0
    """The idempotency stage's wall clock at the start of every episode (fixed: runs are reproducible)."""

    def __init__(self, router: Router, policy: Policy, services: Services, clock: FakeClock) -> None:
        self._bench_clock = clock
        self._ticks = 0
        super().__init__(router, policy, services)

    def _wall(self) -> float:
        # A real wall clock never stands still between two events; the episode's fake clock does while no one
        # sleeps. One microsecond per reading keeps the order of events (a write's unknown outcome, then the read
        # that verifies it) as a real clock shows it, deterministically.
        self._ticks += 1
        return self.WALL0 + self._bench_clock.now() + self._ticks * 1e-6

    def _compile_shared(self) -> None:
        super()._compile_shared()
        # Both of the guard's clocks: ``wall`` dates the session's verifying calls, which the idempotency stage
        # compares with its own (wall) record times; left on the real clock, no verification ever counted here.
        self._guard = Guard(self.policy.session, self.services.guards, clock=self._bench_clock.now, wall=self._wall)

    def compile(self, entry: Any) -> Any:
        # Swapped for this synchronous call only (no other task runs meanwhile): the idempotency stage dates its
        # records on the episode's wall clock, the retry stage measures its call deadline on the episode's clock.
        idempotency, retry = pipeline_module.Idempotency, pipeline_module.Retry
        pipeline_module.Idempotency = partial(idempotency, clock=self._wall)  # type: ignore[misc]
        pipeline_module.Retry = partial(retry, clock=partial(episode_now, self._bench_clock))  # type: ignore[misc]
        try:
            return super().compile(entry)
        finally:
            pipeline_module.Idempotency, pipeline_module.Retry = idempotency, retry  # type: ignore[misc]


class EpisodeClock(FakeClock):
    """The episode's fake clock, which also knows when on the event loop's clock the episode began."""

    def __init__(self) -> None:
        super().__init__()
        self.loop_start = anyio.current_time()


def episode_now(clock: FakeClock) -> float:
    """The episode's own time since it began: its simulated sleeps (the fake clock) plus its waits on the event
    loop's virtual clock (hangs meeting their timeouts). Neither depends on how fast the machine runs, nor on the
    episodes running beside it; every clock the proxy reads in an episode (retry deadline, breaker countdown, loop
    guard, idempotency records) is this one or the fake clock itself."""
    start = clock.loop_start if isinstance(clock, EpisodeClock) else anyio.current_time()
    return clock.now() + anyio.current_time() - start


_TIMINGS = re.compile(r'"(elapsed_ms|latency_ms|timeout_ms|delay_before_ms)":\s*-?\d+')


def stable_size(text: str) -> int:
    """Bytes of a JSON text with measured durations written as 0: sizes do not depend on how fast the run was."""
    return len(_TIMINGS.sub(r'"\1":0', text).encode())


def outcome_of(result: types.CallToolResult) -> Outcome:
    text = "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))
    size = stable_size(result.model_dump_json(by_alias=True, exclude_none=True))
    obs = (result.meta or {}).get(FAULT_META_KEY)
    structured = result.structured_content if isinstance(result.structured_content, dict) else None
    replayed = REPLAY_META_KEY in (result.meta or {})
    return Outcome(not result.is_error, text, structured, obs if isinstance(obs, dict) else None, None, size, replayed)


def outcome_of_error(exc: BaseException) -> Outcome:
    if isinstance(exc, MCPError):
        data = exc.error.data
        obs = data if isinstance(data, dict) and "fault_type" in data else None
        body = {"code": exc.error.code, "message": exc.error.message, "data": data}
        text = f"Error {exc.error.code}: {exc.error.message}"
        return Outcome(False, text, None, obs, exc.error.code, stable_size(json.dumps(body, default=str)))
    text = f"{type(exc).__name__}: {exc}"
    return Outcome(False, text, None, None, None, len(text.encode()))


def host_view(out: Outcome) -> Outcome:
    """What the host passes on to the model: text beyond ``HOST_TEXT_LIMIT`` is cut (in every mode)."""
    if len(out.text) <= HOST_TEXT_LIMIT:
        return out
    text = out.text[:HOST_TEXT_LIMIT] + HOST_CUT
    return Outcome(out.ok, text, None, out.observation, out.error_code, len(text.encode()), out.replayed)


class DirectNetwork:
    """Network faults in front of the chaos server when there is no proxy: what a plain MCP client would get."""

    def __init__(self, plan: FaultPlan, tape: Tape) -> None:
        self.planner = TaggedPlanner(plan, tape=tape, where="net")

    def decide(self, name: str, args: Any) -> tuple[bool, Outcome | None]:
        """(forward the call first?, the outcome to return instead of the real one)."""
        decision = self.planner.decide(name, args if isinstance(args, dict) else None)
        if decision is None:
            return True, None
        kind, p = decision.fault[:2], decision.params
        if kind in ("C1", "C5"):
            return False, outcome_of_error(ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 8931)"))
        forward = bool(getattr(p, "forward", False))
        return forward, outcome_of_error(MCPError(types.INTERNAL_ERROR, "Server returned an error response"))


@dataclass
class World:
    """The agent's side of one episode: call tools, list them; plus the ground truth scoring reads."""

    chaos: ChaosServer
    clock: FakeClock
    tape: Tape
    mode: str
    host_timeout_s: float
    client: Client | None = None
    network: DirectNetwork | None = None
    stack: AsyncExitStack | None = None
    proxy: Proxy | None = None
    approval: frozenset[str] = frozenset()
    """Tools the host itself asks the user to approve (without the proxy; with it the proxy's policy asks)."""

    @property
    def ledger(self) -> Ledger:
        return self.chaos.ledger

    async def list_tools(self) -> list[types.Tool]:
        client = await self._client()
        return list((await client.list_tools()).tools)

    @property
    def instructions(self) -> str | None:
        """The server's MCP instructions (the proxy's, with it), which a host shows the model."""
        return None if self.client is None else self.client.instructions

    async def call(self, name: str, args: Any) -> Outcome:
        return host_view(await self._call(name, args))

    async def _call(self, name: str, args: Any) -> Outcome:
        self.tape.agent_call += 1
        if self.proxy is None and name in self.approval:  # the host asks the user; in these tasks nobody approves
            return Outcome(
                False,
                f"The user declined to run {name}: this tool call needs approval and it was not given.",
                size_bytes=90,
            )
        if self.network is None:
            return await self._send(name, args)
        forward, replaced = self.network.decide(name, args)
        if forward:
            real = await self._send(name, args)
            if replaced is None:
                return real
        assert replaced is not None
        return replaced

    async def _send(self, name: str, args: Any) -> Outcome:
        client = await self._client()
        try:
            if isinstance(args, dict) or args is None:
                result = await client.call_tool(name, args, read_timeout_seconds=self.host_timeout_s)
            else:  # what a model that double-encodes its arguments sends (B3); the SDK would refuse to build it
                params = types.CallToolRequestParams.model_construct(name=name, arguments=args)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", UserWarning)
                    result = await client.session.send_request(
                        types.CallToolRequest(params=params),
                        types.CallToolResult,
                        request_read_timeout_seconds=self.host_timeout_s,
                    )
        except Exception as exc:
            if self.proxy is None and getattr(self.chaos.link, "died", False):
                await self._drop()
            return outcome_of_error(exc)
        return outcome_of(result)

    async def _client(self) -> Client:
        if self.client is None:  # M0 after the server died: the host starts it again (same ledger)
            self.stack = AsyncExitStack()
            self.client = await self.stack.enter_async_context(Client(connect(self.chaos), mode="legacy", cache=None))
        return self.client

    async def _drop(self) -> None:
        stack, self.stack, self.client = self.stack, None, None
        if stack is not None:  # closed in the task that opened it, in no new cancel scope (scopes must nest)
            try:
                await stack.aclose()
            except Exception as exc:  # a dead connection's teardown errors mean nothing here
                log.debug("direct_client_teardown", error=repr(exc))

    async def aclose(self) -> None:
        await self._drop()


def _bench_proxy(world: World, policy: dict[str, Any], level: str, net_plan: FaultPlan, seed: int) -> Proxy:
    cfg = ProxyConfig.model_validate({"upstreams": {UPSTREAM: {"command": "in-memory"}}, "state_dir": ":memory:"})
    pol = Policy(PolicyFile.model_validate({**policy, "observations": {"level": level}}))
    board = BreakerBoard(clock=partial(episode_now, world.clock))  # the countdown an agent reads is the episode's
    services = Services(sleep=world.clock.sleep, random=Random(seed), board=board)

    def pipeline(router: Router, policy: Policy) -> Pipeline:
        return BenchPipeline(router, policy, services, world.clock)

    injector = FaultInjector(net_plan, clock=world.clock, source="benchmark network rules")
    injector.planner = TaggedPlanner(net_plan, tape=world.tape, where="net")
    return Proxy(cfg, pol, pipeline, transports={UPSTREAM: lambda: connect(world.chaos)}, calls=injector.bind)


@asynccontextmanager
async def open_world(
    mode: str,
    *,
    server_plan: FaultPlan,
    net_plan: FaultPlan,
    policy: dict[str, Any],
    ledger: Ledger,
    seed: int,
    host_timeout_s: float = HOST_TIMEOUT_S,
    approval: frozenset[str] = frozenset(),
    domain: str = "orders",
) -> AsyncIterator[World]:
    """A running world for one episode in ``mode`` (M0-M4), the chaos server serving ``domain``'s tools."""
    clock = EpisodeClock()
    tape = Tape()
    chaos = ChaosServer(server_plan, ledger=ledger, clock=clock, domain=domain)
    chaos.planner = TaggedPlanner(server_plan, tape=tape, where="server")
    level = MODES[mode]
    if level is None:
        world = World(
            chaos, clock, tape, mode, host_timeout_s, network=DirectNetwork(net_plan, tape), approval=approval
        )
        try:
            yield world
        finally:
            await world.aclose()
        return
    world = World(chaos, clock, tape, mode, host_timeout_s)
    proxy = world.proxy = _bench_proxy(world, policy, level, net_plan, seed)
    server = build_server(proxy, instructions=PROXY_INSTRUCTIONS)  # what the proxy tells a host, as `serve` does
    async with proxy.running(startup_timeout_s=5), Client(server, mode="legacy", cache=None) as client:
        world.client = client
        yield world
