"""Live-model track: the same scenarios, worlds and scoring, with a real model choosing the actions (not run in CI).

The model is reached over an OpenAI-compatible chat-completions endpoint (a local vLLM or Ollama, or a hosted one)
and uses its native tool calling: the episode's MCP tools are offered as ``tools``, every ``tool_calls`` entry is
sent to the world (directly in M0, through the proxy in M1-M4), and the text the host would show (the tool result's
text content) goes back as the ``tool`` message. The model ends by answering without a tool call; its last line
should be JSON ``{"status": "done|failed|asked_user|aborted|degraded", "answer": <the fact asked for, or null>}``.
Scoring is ``scoring.score``, exactly as for the scripted policies. Configure with environment variables::

    RESILIENT_MCP_LLM_BASE_URL   e.g. http://127.0.0.1:11434/v1 (Ollama) or http://127.0.0.1:8000/v1 (vLLM)
    RESILIENT_MCP_LLM_MODEL      e.g. qwen2.5:7b-instruct
    RESILIENT_MCP_LLM_API_KEY    optional bearer token

    python -m benchmarks.agentbench.live --quick --modes M0,M3     # writes benchmarks/out/live-results.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types

from resilient_mcp.chaos.plan import FaultPlan

from .check import MISSING
from .metrics import aggregate, rows_of
from .runner import DIRECT_HOST_TIMEOUT_S, MAX_CALLS, MAX_STEPS
from .scenarios import generate, quick
from .scoring import score
from .spec import CONTEXT, Scenario
from .world import open_world

SYSTEM = (
    "You are an agent completing a user's task with tools. Call tools as needed, one step at a time. When you are "
    "finished (or cannot go on), reply without a tool call and end with one line of JSON: "
    '{"status": "done|failed|asked_user|aborted|degraded", "answer": <the value asked for, or null>}.'
)


def task_prompt(s: Scenario) -> str:
    steps = "; then ".join(f"call {st.tool} with {json.dumps(st.args)}" for st in s.steps)
    fact = s.target_step.fact
    ask = f" Report as `answer` the value of {fact} (from the {s.target_step.tool} result)." if fact else ""
    return f"Task: {steps}. Context you may use: {json.dumps(CONTEXT)}.{ask}"


def tools_for(tools: list[types.Tool]) -> list[dict[str, Any]]:
    """MCP tools in the chat-completions ``tools`` format."""
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description or "", "parameters": t.input_schema},
        }
        for t in tools
    ]


def build_request(model: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]], seed: int) -> dict[str, Any]:
    return {"model": model, "messages": messages, "tools": tools, "tool_choice": "auto", "temperature": 0, "seed": seed}


def _final(content: str) -> tuple[str, Any]:
    for line in reversed(content.strip().splitlines()):
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict) and "status" in data:
            return str(data["status"]), data.get("answer")
    return "failed", None


async def run_live_episode(http: httpx2.AsyncClient, model: str, s: Scenario, mode: str, seed: int) -> dict[str, Any]:
    ledger = s.ledger()
    events: list[dict[str, Any]] = []
    status, end, answer = "failed", "max_steps", MISSING
    kw = dict(
        server_plan=FaultPlan.model_validate({"seed": seed, "rules": list(s.server_rules)}),
        net_plan=FaultPlan.model_validate({"seed": seed, "rules": list(s.net_rules)}),
        policy=s.policy,
        ledger=ledger,
        seed=seed,
        host_timeout_s=s.attempt_s or DIRECT_HOST_TIMEOUT_S,
    )
    async with open_world(mode, **kw) as world:  # type: ignore[arg-type]
        tools = tools_for(await world.list_tools())
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": task_prompt(s)},
        ]
        calls = 0
        for n in range(MAX_STEPS):
            reply = await http.post("/chat/completions", json=build_request(model, messages, tools, seed))
            reply.raise_for_status()
            message = reply.json()["choices"][0]["message"]
            messages.append({k: v for k, v in message.items() if v is not None})
            if not message.get("tool_calls"):
                status, answer = _final(message.get("content") or "")
                end = "finish"
                events.append({"n": n, "t": world.clock.now(), "kind": "finish", "status": status})
                break
            for tc in message["tool_calls"]:
                if calls >= MAX_CALLS:
                    end = "max_calls"
                    break
                calls += 1
                name, raw = tc["function"]["name"], tc["function"].get("arguments") or "{}"
                try:
                    args: Any = json.loads(raw)
                except ValueError:
                    args = raw
                t = world.clock.now()
                out = await world.call(name, args)
                events.append(
                    {
                        "n": n,
                        "t": t,
                        "kind": "call",
                        "tool": name,
                        "args": args,
                        "purpose": "step",
                        "fp": json.dumps([name, args], sort_keys=True),
                        "ok": out.ok,
                        "size": out.size_bytes,
                        "agent_call": world.tape.agent_call,
                        "text": out.text[:160],
                    }
                )
                messages.append({"role": "tool", "tool_call_id": tc.get("id", ""), "content": out.text})
            if end == "max_calls":
                break
        tape, sim = world.tape, world.clock.now()
    facts = {s.target: answer} if s.target_step.fact else {}
    episode = {
        "scenario": s.id,
        "policy": f"live:{model}",
        "mode": mode,
        "seed": seed,
        "status": status,
        "end": end,
        "events": events,
        "sim_time_s": sim,
    }
    episode["score"] = score(s, episode, facts, ledger, tape)
    return episode


async def run_live(modes: tuple[str, ...], is_quick: bool, limit: int | None, seed: int) -> list[dict[str, Any]]:
    base = os.environ.get("RESILIENT_MCP_LLM_BASE_URL")
    model = os.environ.get("RESILIENT_MCP_LLM_MODEL")
    if not base or not model:
        raise SystemExit("set RESILIENT_MCP_LLM_BASE_URL and RESILIENT_MCP_LLM_MODEL (see the module docstring)")
    key = os.environ.get("RESILIENT_MCP_LLM_API_KEY")
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    scenarios = (quick() if is_quick else generate())[:limit]
    episodes = []
    async with httpx2.AsyncClient(base_url=base.rstrip("/"), headers=headers, timeout=120) as http:
        for s in scenarios:
            for mode in modes:
                episodes.append(await run_live_episode(http, model, s, mode, seed))
    return episodes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.agentbench.live")
    parser.add_argument("--modes", default="M0,M3")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    episodes = anyio.run(run_live, tuple(args.modes.split(",")), args.quick, args.limit, args.seed)
    rows = rows_of(episodes, {s.id: s for s in generate()})
    out = {
        "by_mode": aggregate(rows, ("mode",)),
        "by_category_mode": aggregate(rows, ("category", "mode")),
        "episodes": episodes,
        "wall_s": time.perf_counter() - started,
    }
    path = Path(__file__).resolve().parent.parent / "out" / "live-results.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1, default=str) + "\n", encoding="utf-8")
    for mode, m in out["by_mode"].items():
        sys.stdout.write(f"{mode}: task success {m['task_success_rate']['rate']}, duplicates {m['duplicates']}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
