"""Live-model track: the same scenarios, worlds and scoring, with a real model choosing the actions (not run in CI).

The model is reached over an OpenAI-compatible chat-completions endpoint (llama.cpp's ``llama-server``, vLLM,
Ollama or a hosted one). It gets the user's goal in words (never the calls to make, so it can pick a wrong tool or
wrong arguments itself), the episode's MCP tools plus two host actions (``list_tools``: list the tools again with
their schemas; ``wait``: let time pass), and the server's MCP instructions as a host shows them (the proxy's, in
M1-M4). A tool result goes back as what a host shows: its text content (cut at the host's limit). Tool calls are
read from ``tool_calls`` and, leniently, from JSON written in the text (``{"name": ..., "arguments": ...}``, also
inside ``<tool_call>`` tags) as small models do. A read of the verify tool after a failed write is tagged ``verify``
and a call of another read tool after a failed read ``alt``, so scoring credits them as for scripted agents. The
answer is compared type-tolerantly ("40" counts as 40). Each request has ``max_tokens``; each episode a time limit.

Configure with environment variables::

    RESILIENT_MCP_LLM_BASE_URL   e.g. http://127.0.0.1:8080/v1 (llama-server) or http://127.0.0.1:11434/v1 (Ollama)
    RESILIENT_MCP_LLM_MODEL      the model name the endpoint expects
    RESILIENT_MCP_LLM_API_KEY    optional bearer token

    python -m benchmarks.agentbench.live --modes M0,M1,M3 --scenarios live --samples 3 --out benchmarks/live
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types

from .check import MISSING
from .heldout import every
from .metrics import aggregate, rows_of
from .runner import MAX_CALLS, MAX_STEPS, world_options
from .scenarios import generate, quick
from .scoring import score
from .spec import Scenario, Step
from .world import open_world

MAX_TOKENS = 384
EPISODE_TIMEOUT_S = 600.0
READS = ("get_order", "list_orders", "search", "get_stock", "export_orders")
LIVE_SUBSET = (
    "none-read_only-control-mid",
    "none-write_unsafe-control-mid",
    "A1-read_only-typo-first",
    "B2-write_unsafe-type-first",
    "C1-read_only-refused_x2-first",
    "C2-write_unsafe-commit-first",
    "D1-read_only-unavailable_x1-first",
    "D2-read_only-limited_x1-first",
    "E2-read_only-missing_field-first",
    "F2-destructive-approval-first",
    "F4-read_only-set_status-first",
    "C5-read_only-tool_down-first",
)
"""A subset sized for a small model on two CPU cores: controls, and one scenario from most categories."""

SYSTEM = (
    "You are an assistant that completes the user's task by calling tools. You know nothing about the user's "
    "orders, stock or customers except what tool results tell you: never guess a value, call the tool that gives "
    "it. Call one tool at a time and look at each result before the next call. Tool results and error messages "
    "may tell you what went wrong and what to do; use your judgement. Besides the server's tools you can call "
    "list_tools (see every tool and its parameters again) and wait (let some seconds pass). When the task is "
    "finished, or cannot be finished, reply without a tool call. Begin with the tool call for the first step."
)
FINAL_ASK = (
    "Now reply with only one line of JSON: "
    '{"status": "done|failed|asked_user|aborted|degraded", "answer": <the value I asked for, or null>}'
)
"""Asked once the model stops calling tools: the answer's format is not in the system prompt, where a small model
takes it as the first thing to do (it then answers with a guess, without calling any tool)."""
HOST_TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "list_tools",
            "description": "List the available tools again.",
            "parameters": {"type": "object", "properties": {}},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "wait",
            "description": "Wait before the next call.",
            "parameters": {"type": "object", "properties": {"seconds": {"type": "number"}}, "required": ["seconds"]},
        },
    },
]


def goal(step: Step) -> str:
    """One step of the task in the user's words (no tool names, no argument names)."""
    a = step.args
    if step.tool == "get_stock":
        return f"find out how many units of {a['sku']} are in stock"
    if step.tool == "get_order":
        return f"look up order {a['order_id']} and tell me its quantity"
    if step.tool == "search":
        return f"find how many orders mention {a['query']}"
    if step.tool == "list_orders":
        return "list all orders"
    if step.tool == "export_orders":
        return f"export {a['rows']} orders as CSV and tell me the header line"
    if step.tool == "create_order":
        return (
            f"place an order for customer {a['customer']}: {a['qty']} x {a['sku']}, client reference {a['client_ref']}"
        )
    if step.tool == "update_order":
        return f"change the quantity of order {a['order_id']} to {a['qty']}"
    if step.tool == "set_status":
        return f"mark order {a['order_id']} as {a['status']}"
    if step.tool == "delete_order":
        return f"delete order {a['order_id']}"
    return f"use {step.tool} with {json.dumps(step.args)}"


def task_prompt(s: Scenario) -> str:
    steps = "; then ".join(goal(st) for st in s.steps)
    ask = f" In `answer`, give the result of this step: {goal(s.target_step)}." if s.target_step.fact else ""
    return f"Please {steps}.{ask}"


def tools_for(tools: list[types.Tool]) -> list[dict[str, Any]]:
    """MCP tools in the chat-completions ``tools`` format, plus the host's own actions."""
    offered = [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description or "", "parameters": t.input_schema},
        }
        for t in tools
    ]
    return offered + HOST_TOOLS


def build_request(
    model: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]], seed: int, choice: str = "auto"
) -> dict[str, Any]:
    return {
        "model": model,
        "messages": messages,
        "tools": tools,
        "tool_choice": choice,
        "temperature": 0.7,
        "seed": seed,
        "max_tokens": MAX_TOKENS,
    }


_TAGGED = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)


def _objects(text: str) -> list[Any]:
    """Every JSON object written in ``text`` (balanced braces, decoded leniently)."""
    found, decoder, i = [], json.JSONDecoder(), 0
    while (i := text.find("{", i)) != -1:
        try:
            obj, end = decoder.raw_decode(text, i)
        except ValueError:
            i += 1
            continue
        found.append(obj)
        i = end
    return found


def text_tool_calls(content: str, names: set[str]) -> list[dict[str, Any]]:
    """Tool calls a model wrote as JSON in its text: ``{"name": N, "arguments": {...}}`` (also ``parameters``,
    ``args``, or ``{"tool": N, ...}``), bare or in ``<tool_call>`` tags; only names that are offered."""
    calls = []
    chunks = _TAGGED.findall(content) or [content]
    for chunk in chunks:
        for obj in _objects(chunk):
            if not isinstance(obj, dict):
                continue
            name = obj.get("name") or obj.get("tool") or obj.get("function")
            if isinstance(name, dict):
                obj, name = name, name.get("name")
            args = obj.get("arguments", obj.get("parameters", obj.get("args", {})))
            if isinstance(name, str) and name in names:
                calls.append(
                    {
                        "id": f"text-{len(calls)}",
                        "type": "function",
                        "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)},
                    }
                )
    return calls


def _has_status(content: str) -> bool:
    return any(isinstance(obj, dict) and "status" in obj for obj in _objects(content))


def final_of(content: str) -> tuple[str, Any]:
    """(status, answer) from the model's last message: its JSON line, else a lenient reading."""
    for obj in reversed(_objects(content)):
        if isinstance(obj, dict) and "status" in obj:
            return str(obj["status"]), obj.get("answer")
    found = re.search(r'"?status"?\s*[:=]\s*"?(\w+)', content)
    return (found.group(1) if found else "done"), None


def same_answer(answer: Any, truth: Any) -> bool:
    """Type-tolerant: "40" == 40, " pear " == "pear"; a list or dict is never a scalar's answer."""
    if answer is None or isinstance(answer, list | dict):
        return False
    if isinstance(truth, int) and not isinstance(truth, bool):
        try:
            return int(float(str(answer).strip())) == truth
        except ValueError:
            found = re.search(r"-?\d+", str(answer))
            return found is not None and int(found.group()) == truth
    return str(answer).strip().strip('"').lower() == str(truth).strip().lower()


def purpose_of(s: Scenario, tool: str, failed: set[str]) -> str:
    """``verify`` for a read of the verify tool after a write failed; ``alt`` for another read after a read
    failed; else ``step``."""
    if tool == "get_order" and any(f not in READS for f in failed):
        return "verify"
    if tool in READS and failed and tool not in failed and all(f in READS for f in failed):
        return "alt"
    return "step"


async def complete(
    http: httpx2.AsyncClient, request: dict[str, Any], tokens: Counter[str], deadline: float
) -> dict[str, Any]:
    """One chat completion before ``deadline`` (``time.monotonic``): the reply's message; the usage is added to
    ``tokens``. ``TimeoutError`` once the deadline has passed."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError
    reply = await http.post("/chat/completions", json=request, timeout=left)
    reply.raise_for_status()
    body = reply.json()
    usage = body.get("usage") or {}
    tokens["prompt"] += int(usage.get("prompt_tokens") or 0)
    tokens["completion"] += int(usage.get("completion_tokens") or 0)
    message: dict[str, Any] = body["choices"][0]["message"]
    return message


async def run_live_episode(
    http: httpx2.AsyncClient, model: str, s: Scenario, mode: str, seed: int, *, timeout_s: float = EPISODE_TIMEOUT_S
) -> dict[str, Any]:
    ledger = s.ledger()
    events: list[dict[str, Any]] = []
    status, end, answer = "failed", "max_steps", MISSING
    started = time.perf_counter()
    tokens: Counter[str] = Counter()
    async with open_world(mode, **world_options(s, mode, seed, ledger)) as world:
        tools = tools_for(await world.list_tools())
        # the server's instructions first, so the system prompt ends with the same words in every mode
        system = (
            f"Instructions from the tool server:\n{world.instructions}\n\n" if world.instructions else ""
        ) + SYSTEM
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": system},
            {"role": "user", "content": task_prompt(s)},
        ]
        calls, failed, replies = 0, set[str](), list[Any]()
        # a deadline checked per request, not a cancel scope: the direct world reopens its connection inside the
        # episode when the server dies, and that connection's task group must not straddle a scope's edge
        deadline = time.monotonic() + timeout_s
        try:
            for n in range(MAX_STEPS):
                message = await complete(http, build_request(model, messages, tools, seed), tokens, deadline)
                content = message.get("content") or ""
                names = {t["function"]["name"] for t in tools}
                native = message.get("tool_calls") or []
                tool_calls = native or text_tool_calls(content, names)
                replies.append(content if not native else {"content": content, "tool_calls": native})
                # calls written as text go back into the history as the structured calls they were read as, so
                # the chat template shows each call once, followed by its result
                shown = content if native or not tool_calls else ""
                messages.append(
                    {"role": "assistant", "content": shown, **({"tool_calls": tool_calls} if tool_calls else {})}
                )
                if not tool_calls:
                    if not _has_status(content):
                        messages.append({"role": "user", "content": FINAL_ASK})
                        request = build_request(model, messages, tools, seed, "none")
                        content = (await complete(http, request, tokens, deadline)).get("content") or ""
                        replies.append(content)
                        messages.append({"role": "assistant", "content": content})
                    status, answer = final_of(content)
                    end = "finish"
                    events.append({"n": n, "t": world.clock.now(), "kind": "finish", "status": status})
                    break
                for tc in tool_calls:  # every call of the reply, in order, as hosts run parallel calls
                    name, raw = tc["function"]["name"], tc["function"].get("arguments") or "{}"
                    try:
                        args: Any = json.loads(raw) if isinstance(raw, str) else raw
                    except ValueError:
                        args = raw
                    t = world.clock.now()
                    if name == "list_tools":
                        listed = await world.list_tools()
                        tools = tools_for(listed)
                        text = json.dumps([{"name": x.name, "parameters": x.input_schema} for x in listed])
                        events.append({"n": n, "t": t, "kind": "listtools"})
                    elif name == "wait":
                        seconds = float(args.get("seconds", 1)) if isinstance(args, dict) else 1.0
                        await world.clock.sleep(min(max(seconds, 0.0), 120.0))
                        text = f"waited {seconds:g} s"
                        events.append({"n": n, "t": t, "kind": "wait", "seconds": seconds})
                    else:
                        if calls >= MAX_CALLS:
                            end = "max_calls"
                            break
                        calls += 1
                        purpose = purpose_of(s, name, failed)
                        out = await world.call(name, args)
                        (failed.discard if out.ok else failed.add)(name)
                        text = out.text
                        events.append(
                            {
                                "n": n,
                                "t": t,
                                "kind": "call",
                                "tool": name,
                                "args": args,
                                "purpose": purpose,
                                "fp": json.dumps([name, args], sort_keys=True),
                                "ok": out.ok,
                                "size": out.size_bytes,
                                "agent_call": world.tape.agent_call,
                                "text": out.text[:300],
                            }
                        )
                    messages.append({"role": "tool", "tool_call_id": tc.get("id", ""), "content": text})
                if end == "max_calls":
                    break
        except (TimeoutError, httpx2.TimeoutException):
            end = "timeout"
        tape, sim = world.tape, world.clock.now()
    facts: dict[int, Any] = {}
    if s.target_step.fact:
        from .check import truth

        right = truth(s.target_step.fact, ledger)
        facts = {s.target: right if same_answer(answer, right) else answer}
    episode = {
        "scenario": s.id,
        "policy": f"live:{model}",
        "mode": mode,
        "seed": seed,
        "status": status,
        "end": end,
        "events": events,
        "sim_time_s": sim,
        "answer": None if answer is MISSING else answer,
        "wall_s": round(time.perf_counter() - started, 1),
        "prompt_tokens": tokens["prompt"],
        "completion_tokens": tokens["completion"],
        "transcript": messages,
        "replies": replies,
    }
    episode["score"] = score(s, episode, facts, ledger, tape)
    return episode


def pick(names: str, is_quick: bool, limit: int | None) -> list[Scenario]:
    known = {s.id: s for s in every()}
    if names == "live":
        chosen = [known[i] for i in LIVE_SUBSET]
    elif names:
        chosen = [known[i] for i in names.split(",")]
    else:
        chosen = quick() if is_quick else generate()
    return chosen[:limit]


def episode_key(e: dict[str, Any]) -> tuple[str, str, int]:
    return (e["scenario"], e["mode"], int(e["seed"]))


def load_episodes(path: Path) -> list[dict[str, Any]]:
    """The episodes already written to a JSON-lines file (a torn last line, from a killed run, is skipped)."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def resume(journal: Path) -> list[dict[str, Any]]:
    """The journal's episodes; a torn last line from a killed run is closed so the next episode starts its own."""
    if journal.exists() and not journal.read_bytes().endswith(b"\n"):
        with journal.open("a", encoding="utf-8") as f:
            f.write("\n")
    return load_episodes(journal)


def plan(modes: tuple[str, ...], scenarios: list[Scenario], samples: int, seed: int) -> list[tuple[Scenario, str, int]]:
    """Sample by sample, and within a sample mode by mode: a run stopped early still holds complete, paired samples,
    and the episodes of one mode run together, sharing the system prompt and tool list, so an endpoint that caches
    the prompt's prefix (llama-server does) evaluates it once per mode and sample, not once per episode."""
    return [(s, mode, seed + k) for k in range(samples) for mode in modes for s in scenarios]


async def run_live(
    modes: tuple[str, ...],
    scenarios: list[Scenario],
    samples: int,
    seed: int,
    timeout_s: float = EPISODE_TIMEOUT_S,
    journal: Path | None = None,
) -> list[dict[str, Any]]:
    """Run the plan; with a ``journal`` each episode is appended as it ends, and episodes already there are
    kept and not run again (a long run on a small machine can be stopped and resumed)."""
    base = os.environ.get("RESILIENT_MCP_LLM_BASE_URL")
    model = os.environ.get("RESILIENT_MCP_LLM_MODEL")
    if not base or not model:
        raise SystemExit("set RESILIENT_MCP_LLM_BASE_URL and RESILIENT_MCP_LLM_MODEL (see the module docstring)")
    key = os.environ.get("RESILIENT_MCP_LLM_API_KEY")
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    episodes = resume(journal) if journal else []
    done = {episode_key(e) for e in episodes}
    todo = [job for job in plan(modes, scenarios, samples, seed) if (job[0].id, job[1], job[2]) not in done]
    async with httpx2.AsyncClient(base_url=base.rstrip("/"), headers=headers, timeout=timeout_s) as http:
        for i, (s, mode, k) in enumerate(todo, 1):
            e = await run_live_episode(http, model, s, mode, k, timeout_s=timeout_s)
            episodes.append(e)
            if journal:
                with journal.open("a", encoding="utf-8") as f:
                    f.write(json.dumps(e, default=str) + "\n")
            sys.stderr.write(
                f"[{i}/{len(todo)}] {s.id} {mode} seed {k}: success={e['score']['success']} "
                f"end={e['end']} {e['wall_s']} s\n"
            )
    return episodes


def summary(episodes: list[dict[str, Any]], model: str | None, wall_s: float | None) -> dict[str, Any]:
    """The run's aggregates; the episodes themselves are in the journal (``live-episodes.jsonl``), not copied here."""
    rows = rows_of(episodes, {s.id: s for s in every()})
    return {
        "model": model,
        "episodes": len(episodes),
        "by_mode": aggregate(rows, ("mode",)),
        "by_category_mode": aggregate(rows, ("category", "mode")),
        "wall_s": wall_s,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.agentbench.live")
    parser.add_argument("--modes", default="M0,M1,M3")
    parser.add_argument("--scenarios", default="live", help="'live' (the two-core subset), ids, or '' for all")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--samples", type=int, default=3, help="seeds per scenario and mode (sampling at T=0.7)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--timeout", type=float, default=EPISODE_TIMEOUT_S, help="seconds per episode")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent.parent / "out"))
    parser.add_argument(
        "--fresh", action="store_true", help="start over instead of resuming from <out>/live-episodes.jsonl"
    )
    args = parser.parse_args(argv)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    journal = out_dir / "live-episodes.jsonl"
    if args.fresh:
        journal.unlink(missing_ok=True)
    started = time.perf_counter()
    scenarios = pick(args.scenarios, args.quick, args.limit)
    episodes = anyio.run(
        run_live, tuple(args.modes.split(",")), scenarios, args.samples, args.seed, args.timeout, journal
    )
    out = summary(episodes, os.environ.get("RESILIENT_MCP_LLM_MODEL"), time.perf_counter() - started)
    path = out_dir / "live-results.json"
    path.write_text(json.dumps(out, indent=1, default=str) + "\n", encoding="utf-8")
    for mode, m in out["by_mode"].items():
        sys.stdout.write(f"{mode}: task success {m['task_success_rate']}, duplicates {m['duplicates']}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
