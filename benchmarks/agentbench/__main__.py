"""``python -m benchmarks.agentbench [--seed 7] [--quick]``: run the agent-outcome benchmark and write its report.

Full run: every scenario x 8 policies x 5 modes (noisy_follower with ``--repeats`` seeds), the held-out set (other
domains and the order shop's other templates) with 5 policies in modes M0/M1/M3, then the real-transport latency
measurement; writes ``benchmarks/out/results.json``, ``benchmarks/RESULTS.md`` and ``benchmarks/charts``.
``--quick``: one scenario per fault type, 4 policies, modes M0/M1/M3, a short latency run.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import anyio

from .agents import POLICIES
from .digest import write_digest
from .heldout import every, heldout
from .honest import split
from .metrics import aggregate, rows_of
from .realerrors import real_error_scenarios, write_verdicts
from .report import HERE, heldout_section, real_section, render, write
from .runner import Job, run_jobs
from .scenarios import generate, quick

QUICK_POLICIES = ("oracle", "strong_reader", "text_reader", "blind_retry", "give_up", "repair_follower")
NOTES = [
    "Known limits, stated in advance (§7.5) and measured above: E5 (semantic corruption) passes through the proxy "
    "unless a declared outputSchema catches it (E5 negative stock is caught as an E2 violation of `minimum: 0`, "
    "and the degraded text it offers still carries the wrong number); E3 (incomplete result) is not detected "
    "without per-tool expectations; F4 is blocked only where the taint policy applies (destructive tools): an "
    "injected call to a non-destructive write still runs. Faults that are the agent's own mistakes (A1, B*) "
    "cannot be absorbed; the proxy only describes them. A string `arguments` payload (B3) is refused by the MCP "
    "SDK's request validation before the proxy's chain sees it, so the proxy cannot describe it either.",
    "",
    "What a host shows is modelled the same in every mode: the per-call timeout is the host's 10 s everywhere (the "
    "proxy's own attempt timeouts are policy); text beyond 100,000 characters is cut before the model sees it (as "
    "Claude Code cuts MCP output); a destructive tool the scenario requires approval for is put to the user by the "
    "host when there is no proxy (nobody approves in these tasks). The readers see only text content: "
    "structuredContent of an error result, `_meta` and JSON-RPC `error.data` are not shown to them.",
    "",
    "Loop failures rise with the proxy for blind_retry: its identical repeats are answered by the loop guard or the "
    "idempotency record without upstream traffic (see 'sent' in the retry columns and amplification < 1), so they "
    "cost nothing upstream but the scripted agent still spends its budget.",
    "",
]


PASS_K = 4
"""Seeds per scenario with a probabilistic fault (pass^k)."""
ABLATION = ("strong_reader", "text_reader", "repair_follower")
HELDOUT_POLICIES = ("oracle", "strong_reader", "text_reader", "blind_retry", "give_up", "repair_follower")
"""Policies also run without the chaos server's typed hints (modes M1u, M3u)."""


def jobs_for(seed: int, *, is_quick: bool, repeats: int) -> list[Job]:
    scenarios = quick() if is_quick else generate()
    policies = QUICK_POLICIES if is_quick else POLICIES
    modes = ("M0", "M1", "M3") if is_quick else ("M0", "M1", "M2", "M3", "M4")
    jobs = []
    if not is_quick:  # the held-out set and the real-error scenarios: the reference policies, three modes
        extra = [*heldout(), *real_error_scenarios()]
        jobs += [Job(s.id, p, m, seed) for s in extra for p in HELDOUT_POLICIES for m in ("M0", "M1", "M3")]
    for s in scenarios:
        for p in policies:
            for m in modes + (("M1u", "M3u") if p in ABLATION and not is_quick else ()):
                n = PASS_K if s.probabilistic else repeats if p == "noisy_follower" else 1
                for r in range(n):
                    jobs.append(Job(s.id, p, m, seed + r))
    return jobs


def run(
    seed: int,
    *,
    is_quick: bool,
    repeats: int = 3,
    workers: int = 2,
    latency_calls: int | None = 200,
    root: Path = HERE,
    command: str = "python -m benchmarks.agentbench",
) -> dict[str, Any]:
    """Run the benchmark and write its report under ``root``; returns the results written to results.json."""
    started = time.perf_counter()
    jobs = jobs_for(seed, is_quick=is_quick, repeats=repeats)
    episodes = run_jobs(jobs, workers=workers)
    scenarios = {s.id: s for s in every()}
    every_row = rows_of(episodes, scenarios)
    rows = [r for r in every_row if r["block"] == "main"]
    held = [r for r in every_row if r["block"] == "heldout"]
    real = [r for r in every_row if r["block"] == "real"]
    lat = None
    if latency_calls:
        from .latency import measure

        lat = anyio.run(measure, latency_calls)
    used = {scenarios[j.scenario].fault for j in jobs}
    meta: dict[str, Any] = {
        "command": command,
        "seed": seed,
        "quick": is_quick,
        "scenarios": len({j.scenario for j in jobs if scenarios[j.scenario].block == "main"}),
        "heldout_scenarios": len({j.scenario for j in jobs if scenarios[j.scenario].block == "heldout"}),
        "real_scenarios": len({j.scenario for j in jobs if scenarios[j.scenario].block == "real"}),
        "fault_types": len(used - {"none"}),
        "episodes": len(episodes),
        "cpus": os.cpu_count(),
        "wall_s": time.perf_counter() - started,
        "notes": NOTES,
    }
    results = {
        "meta": {k: v for k, v in meta.items() if k != "notes"},
        "errors": [e for e in episodes if "error" in e],
        "by_mode": aggregate(rows, ("mode",)),
        "by_category_mode": aggregate(rows, ("category", "mode")),
        "by_fault_mode": aggregate(rows, ("fault", "mode")),
        "by_policy_mode": aggregate(rows, ("policy", "mode")),
        "by_policy_category_mode": aggregate(rows, ("policy", "category", "mode")),
        "latency": lat,
        "episodes": [{k: v for k, v in e.items() if k not in ("events", "wall_s")} for e in episodes],
    }
    results["honest"] = split(rows)
    if held:
        other = [r for r in held if r["domain"] != "orders"]
        results["heldout"] = {
            "honest": split(other),
            "same_domain_honest": split([r for r in held if r["domain"] == "orders"]),
            "by_domain": {d: split([r for r in held if r["domain"] == d]) for d in sorted({r["domain"] for r in held})},
            "by_domain_mode": aggregate(held, ("domain", "mode")),
            "by_policy_mode": aggregate(other, ("policy", "mode")),
        }
        meta["extra"] = heldout_section(rows, held, episodes)
    if real:
        results["real_errors"] = {
            "honest": split(real),
            "by_policy_mode": aggregate(real, ("policy", "mode")),
        }
        meta["extra"] = [*meta.get("extra", []), *real_section(rows, real, episodes)]
    results["paths"] = write(results, rows, render(meta, rows, lat, episodes), root)
    results["paths"]["digest"] = str(write_digest(episodes, root))
    if real:
        results["paths"]["verdicts"] = str(write_verdicts(root))
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.agentbench", description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="one scenario per fault type, 4 policies, 3 modes")
    parser.add_argument("--repeats", type=int, default=3, help="seeds for noisy_follower (default 3)")
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--no-latency", action="store_true", help="skip the real-transport latency measurement")
    parser.add_argument(
        "--out",
        type=Path,
        default=HERE,
        help="folder for RESULTS.md, charts/ and out/results.json (default: benchmarks/); a second run written "
        "elsewhere can be compared with `python -m benchmarks.agentbench.same A B`",
    )
    args = parser.parse_args(argv)
    command = "python -m benchmarks.agentbench " + " ".join(sys.argv[1:] if argv is None else argv)
    calls = None if args.no_latency else (40 if args.quick else 200)
    results = run(
        args.seed,
        is_quick=args.quick,
        repeats=args.repeats,
        workers=args.workers,
        latency_calls=calls,
        root=args.out,
        command=command.strip(),
    )
    m0, m3 = results["by_mode"]["M0"], results["by_mode"]["M3"]
    h = results["honest"]
    sys.stdout.write(
        f"{results['meta']['episodes']} episodes in {results['meta']['wall_s']:.0f} s; "
        f"errors: {len(results['errors'])}\n"
        f"agent-independent gain {100 * h['agent_independent']['diff']:+.1f} pts; {h['reader']} M0 -> M3 "
        f"{100 * h['reading_gain']['diff']:+.1f} pts\n"
        f"task success M0 {m0['task_success_rate']['rate']} -> M3 {m3['task_success_rate']['rate']}; duplicates "
        f"M0 {m0['duplicates']} -> M3 {m3['duplicates']}; proxy useless attempts M3 {m3['proxy_useless_attempts']}\n"
        f"wrote {', '.join(results['paths'].values())}\n"
    )
    return 1 if results["errors"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
