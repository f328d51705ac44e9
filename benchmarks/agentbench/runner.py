"""The episode loop: one scripted agent, one scenario, one mode; and running many episodes on a few processes.

An episode lists the tools once (the host does), then asks the agent for actions until it finishes or a budget
ends it: ``MAX_STEPS`` actions (calls, waits, listings) and ``MAX_CALLS`` tool calls. A result larger than the
agent's context (``CONTEXT_BYTES``, about 64k tokens) ends the episode: the model could not read it. Every action
is logged with the simulated time it started at; ``scoring.score`` turns the log, the ledger and the tape into the
episode's metrics.

Episodes are independent (each has its own chaos server, ledger, fake clock, proxy and seeded generators), so they
run concurrently within a process and across ``workers`` processes; results come back in a fixed order. Every
episode runs on virtual time (``virtualtime.run_virtual``): a hang meets its timeout at once and an answer always
beats it, so an episode is the same on an idle and on a saturated machine; only ``wall_s`` differs.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from random import Random
from typing import Any

import anyio
import structlog

from resilient_mcp.chaos.plan import FaultPlan
from resilient_mcp.text import canonical_json

from .agents import (
    Agent,
    BlindRetry,
    Call,
    Finish,
    GiveUp,
    KeywordHeuristic,
    ListTools,
    NoisyFollower,
    Overtrusting,
    RepairFollower,
    TextReader,
    Wait,
)
from .heldout import every
from .oracle import OracleAgent
from .scoring import score
from .spec import Scenario
from .strong import StrongReader
from .virtualtime import run_virtual
from .world import HOST_TIMEOUT_S, episode_now, open_world

MAX_STEPS = 16
MAX_CALLS = 12
CONTEXT_BYTES = 256_000
EPISODE_LIMIT_S = 30.0
AGENTS: dict[str, type[Agent]] = {
    "oracle": OracleAgent,
    "strong_reader": StrongReader,
    "text_reader": TextReader,
    "blind_retry": BlindRetry,
    "give_up": GiveUp,
    "keyword_heuristic": KeywordHeuristic,
    "repair_follower": RepairFollower,
    "overtrusting": Overtrusting,
    "noisy_follower": NoisyFollower,
}


@dataclass(frozen=True)
class Job:
    scenario: str
    policy: str
    mode: str
    seed: int

    @property
    def key(self) -> tuple[str, str, str, int]:
        return self.scenario, self.policy, self.mode, self.seed


def _event(n: int, action: Any, t: float, **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"n": n, "t": round(t, 6), "kind": type(action).__name__.lower()}
    if isinstance(action, Call):
        base |= {
            "tool": action.tool,
            "args": action.args,
            "purpose": action.purpose,
            "fp": canonical_json([action.tool, action.args]),
        }
    elif isinstance(action, Wait):
        base["seconds"] = action.seconds
    elif isinstance(action, Finish):
        base["status"] = action.status
    return base | fields


def untyped(rules: tuple[dict[str, Any], ...]) -> list[dict[str, Any]]:
    """The server rules with typed error hints switched off wherever the fault takes ``typed`` (the ablation)."""
    out = []
    for r in rules:
        off = {**r, "params": {**r.get("params", {}), "typed": False}}
        try:
            FaultPlan.model_validate({"rules": [off]})
        except ValueError:
            off = r
        out.append(off)
    return out


def world_options(scenario: Scenario, mode: str, seed: int, ledger: Any) -> dict[str, Any]:
    """``open_world`` keywords for an episode: fault plans, policy, the host's timeout and approvals (the same host
    in every mode), the scenario's domain."""
    rules = untyped(scenario.server_rules) if mode.endswith("u") else list(scenario.server_rules)
    approval = frozenset(t for t, c in scenario.policy.get("tools", {}).items() if c.get("require_approval"))
    return dict(
        server_plan=FaultPlan.model_validate({"seed": seed, "rules": rules}),
        net_plan=FaultPlan.model_validate({"seed": seed, "rules": list(scenario.net_rules)}),
        policy=scenario.policy,
        ledger=ledger,
        seed=seed,
        host_timeout_s=HOST_TIMEOUT_S,
        approval=approval,
        domain=scenario.domain.name,
    )


async def run_episode(scenario: Scenario, policy: str, mode: str, seed: int) -> dict[str, Any]:
    """One episode; its log, end state and score."""
    agent = AGENTS[policy](scenario, Random(f"{seed}:{scenario.id}:{policy}:{mode}"))
    ledger = scenario.ledger()
    events: list[dict[str, Any]] = []
    status, end = "failed", "max_steps"
    started = time.perf_counter()
    world_kw = world_options(scenario, mode, seed, ledger)
    with anyio.fail_after(EPISODE_LIMIT_S):
        async with open_world(mode, **world_kw) as world:
            agent.known(await world.list_tools())
            result: Any = None
            calls = 0
            for n in range(MAX_STEPS):
                action = agent.act(result)
                t = episode_now(world.clock)
                if isinstance(action, Finish):
                    status, end = action.status, "finish"
                    events.append(_event(n, action, t))
                    break
                if isinstance(action, Call):
                    if calls >= MAX_CALLS:
                        end = "max_calls"
                        break
                    calls += 1
                    result = await world.call(action.tool, action.args)
                    events.append(
                        _event(
                            n,
                            action,
                            t,
                            ok=result.ok,
                            size=result.size_bytes,
                            agent_call=world.tape.agent_call,
                            text=result.text[:160],
                            obs_fault=(result.observation or {}).get("fault_type"),
                        )
                    )
                    if result.size_bytes > CONTEXT_BYTES:
                        end = "context_overflow"
                        break
                elif isinstance(action, Wait):
                    await world.clock.sleep(action.seconds)
                    result = None
                    events.append(_event(n, action, t))
                elif isinstance(action, ListTools):
                    result = await world.list_tools()
                    events.append(_event(n, action, t))
            sim_time = episode_now(world.clock)
            tape = world.tape
    episode = {
        "scenario": scenario.id,
        "policy": policy,
        "mode": mode,
        "seed": seed,
        "status": status,
        "end": end,
        "events": events,
        "facts": {str(k): v for k, v in agent.facts.items() if isinstance(v, int | str)},
        "sim_time_s": round(sim_time, 6),
        "wall_s": time.perf_counter() - started,
    }
    episode["score"] = score(scenario, episode, agent.facts, ledger, tape)
    return episode


def quiet() -> None:
    """No log output from the chaos server, the proxy or the SDK (a benchmark run prints its own summary)."""
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL))
    logging.disable(logging.CRITICAL)


async def _run_many(jobs: list[Job], concurrency: int) -> list[dict[str, Any]]:
    by_id = {s.id: s for s in every()}
    out: list[dict[str, Any] | None] = [None] * len(jobs)
    limit = anyio.Semaphore(concurrency)

    async def one(i: int, job: Job) -> None:
        async with limit:
            try:
                out[i] = await run_episode(by_id[job.scenario], job.policy, job.mode, job.seed)
            except Exception as exc:  # a harness failure is reported, never hidden
                out[i] = {
                    "scenario": job.scenario,
                    "policy": job.policy,
                    "mode": job.mode,
                    "seed": job.seed,
                    "error": f"{type(exc).__name__}: {exc}",
                }

    async with anyio.create_task_group() as tg:
        for i, job in enumerate(jobs):
            tg.start_soon(one, i, job)
    return [e for e in out if e is not None]


def _worker(jobs: list[Job], concurrency: int, silence: bool = True) -> list[dict[str, Any]]:
    if silence:
        quiet()
    return run_virtual(_run_many, jobs, concurrency)


def run_jobs(jobs: list[Job], *, workers: int = 2, concurrency: int = 8) -> list[dict[str, Any]]:
    """Run ``jobs`` (in ``workers`` processes; 1 = in this process) and return their episodes in job order."""
    if workers <= 1:  # in this process: its logging is left as it is (a test session's own configuration)
        return _worker(jobs, concurrency, silence=False)
    chunks = [jobs[i::workers] for i in range(workers)]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        parts = list(pool.map(_worker, chunks, [concurrency] * workers))
    done = {(e["scenario"], e["policy"], e["mode"], e["seed"]): e for part in parts for e in part}
    return [done[j.key] for j in jobs]
