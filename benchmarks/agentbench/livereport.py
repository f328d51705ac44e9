"""The real-model section of the report, from a live run's episodes (``live.py``'s ``live-episodes.jsonl``).

The same statistics as the scripted policies (``honest.py``): rates with intervals resampled by scenario variant,
paired comparisons (same scenario and sample seed, two modes) with a variant-bootstrap interval and an exact
McNemar test; then the cells where the proxy turned a direct success into a failure, with how each episode ended,
and where the model's harness failed (no final answer, out of steps, time limit).

    python -m benchmarks.agentbench.livereport benchmarks/live   # prints the Markdown section
"""

from __future__ import annotations

import json
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from .heldout import every
from .honest import fmt_paired, fmt_rate, paired
from .live import load_episodes
from .metrics import aggregate, rows_of
from .strict import strict_verdict

MODES = {"M0": "direct", "M1": "proxy, L0", "M2": "proxy, L1", "M3": "proxy, L2", "M4": "proxy, L3"}


def _meta(folder: Path) -> dict[str, Any]:
    path = folder / "live-run.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def _ok(r: dict[str, Any]) -> str:
    return "✓" if r["success"] else "✗"


def section(folder: Path, heading: str = "##") -> str:
    """The Markdown section for the live run kept in ``folder`` (empty if it holds no episodes)."""
    episodes = load_episodes(folder / "live-episodes.jsonl")
    if not episodes:
        return ""
    meta = _meta(folder)
    scenarios = {s.id: s for s in every()}
    rows = rows_of(episodes, scenarios)
    policy = rows[0]["policy"]
    modes = [m for m in MODES if any(r["mode"] == m for r in rows)]
    seeds = sorted({r["seed"] for r in rows})
    by_mode = aggregate(rows, ("mode",))
    lines = [f"{heading} A real model (live track)", ""]
    lines.append(
        f"Model `{meta.get('model', policy.removeprefix('live:'))}`"
        + (f" (GGUF SHA-256 `{meta['sha256'][:16]}…`)" if meta.get("sha256") else "")
        + (f", served by {meta['server']}" if meta.get("server") else "")
        + f"; {len({r['scenario'] for r in rows})} scenarios x {len(seeds)} samples (seeds {seeds[0]}-{seeds[-1]},"
        f" temperature 0.7) x modes {', '.join(modes)}: {len(rows)} episodes"
        + (f" in {meta['wall_min']:.0f} min of wall time on {meta['machine']}" if meta.get("wall_min") else "")
        + ". Command: `"
        + meta.get("command", "python -m benchmarks.agentbench.live")
        + "`. Raw episodes with transcripts: `benchmarks/live/live-episodes.jsonl`."
        + (f" Code: {meta['code']}." if meta.get("code") else "")
        + (f" {meta['note']}" if meta.get("note") else "")
    )
    lines += [
        "",
        "| mode | task success | fault fired | loop failures | duplicates | lost writes | calls / episode "
        "| tokens / episode |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    fired = Counter(r["mode"] for r in rows if r["fired"] and r["fault"] != "none")
    for m in modes:
        g = by_mode[m]
        mine = [e for e in episodes if e["mode"] == m]
        tokens = sum(e.get("prompt_tokens", 0) + e.get("completion_tokens", 0) for e in mine) / len(mine)
        lines.append(
            f"| {m} {MODES[m]} | {fmt_rate(rows, policy, m)} | {fired[m]}/{g['episodes']} "
            f"| {g['loop_failure_rate']['k']}/{g['episodes']} | "
            f"{g['duplicates']} | {g['lost_writes']} | {g['agent_calls'] / g['episodes']:.1f} | {tokens:,.0f} |"
        )
    lines += [
        "",
        "A fault fires only when the model makes the call it is planted on: scenarios whose fault rides on a "
        "scripted agent's mistake (A1's typo, B2's wrong type) fire only if the model makes that mistake itself.",
        "",
    ]
    for m in modes[1:]:
        lines.append(
            f"- {m} - M0 (paired by scenario and sample): {fmt_paired(paired(rows, (policy, 'M0'), (policy, m)))}"
        )
    lines += _strict_lines(episodes, rows, scenarios, policy, modes)
    ends = Counter((e["mode"], e["end"]) for e in episodes)
    lines.append(
        "- How episodes ended: "
        + "; ".join(
            f"{m}: " + ", ".join(f"{end} {n}" for (mm, end), n in sorted(ends.items()) if mm == m) for m in modes
        )
        + "."
    )
    lines += ["", "Per scenario (✓ success, ✗ failure; one mark per sample):", ""]
    lines.append("| scenario | " + " | ".join(modes) + " |")
    lines.append("|---|" + "---|" * len(modes))
    cells: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in sorted(rows, key=lambda r: r["seed"]):
        cells[(r["scenario"], r["mode"])].append(r)
    for sid in sorted({r["scenario"] for r in rows}):
        lines.append(f"| {sid} | " + " | ".join("".join(_ok(r) for r in cells[(sid, m)]) for m in modes) + " |")
    worse = _worse(episodes, modes)
    lines += ["", f"Where the proxy made this model worse ({len(worse)} cells: direct success, proxy failure):", ""]
    lines += worse or ["- none"]
    return "\n".join(lines) + "\n"


def _strict_lines(
    episodes: list[dict[str, Any]], rows: list[dict[str, Any]], scenarios: dict[str, Any], policy: str, modes: list[str]
) -> list[str]:
    """Strict next to lenient (``strict.py``): every step done, the answer exact, no invented tool result."""
    verdicts = {(e["scenario"], e["mode"], e["seed"]): strict_verdict(scenarios[e["scenario"]], e) for e in episodes}
    strict = [{**r, "success": verdicts[(r["scenario"], r["mode"], r["seed"])][0]} for r in rows]
    lines = [
        "",
        "Strict scoring (`benchmarks/agentbench/strict.py`): a success also needs every step of the user's request "
        "done (each read step's tool answered; the faulted step may use an alternative read), the answer exact "
        "(the value, not a sentence holding it) and found in a tool result, and no tool result the model made up "
        "in its reply. The "
        "lenient rate is the track's own (answer read type-tolerantly, a sentence by its first integer).",
        "",
        "| mode | lenient success | strict success | lenient successes that fail strictly: why |",
        "|---|---|---|---|",
    ]
    for m in modes:
        why: Counter[str] = Counter()
        for (_, mode, _), (ok, reasons) in verdicts.items():
            if mode == m and not ok and "lenient" not in reasons:
                why.update({("step not done" if r.startswith("step ") else r) for r in reasons})
        lines.append(
            f"| {m} {MODES[m]} | {fmt_rate(rows, policy, m)} | {fmt_rate(strict, policy, m)} | "
            + (", ".join(f"{k} {n}" for k, n in sorted(why.items())) or "-")
            + " |"
        )
    lines.append("")
    for m in modes[1:]:
        lines.append(
            f"- strict, {m} - M0: {fmt_paired(paired(strict, (policy, 'M0'), (policy, m)))}; lenient: "
            f"{fmt_paired(paired(rows, (policy, 'M0'), (policy, m)))}"
        )
    return lines


def _worse(episodes: list[dict[str, Any]], modes: list[str]) -> list[str]:
    by = {(e["scenario"], e["mode"], e["seed"]): e for e in episodes}
    out = []
    for (sid, mode, seed), e in sorted(by.items()):
        if mode == "M0" or e["score"]["success"]:
            continue
        direct = by.get((sid, "M0", seed))
        if direct is None or not direct["score"]["success"]:
            continue
        calls = [ev for ev in e["events"] if ev["kind"] == "call"]
        failed = [ev for ev in calls if not ev["ok"]]
        why = (
            f"first error seen: {failed[0]['tool']}: {failed[0]['text'][:140]!r}"
            if failed
            else "no error seen (the prompt differs from direct only by the proxy's instructions; sampling)"
        )
        out.append(
            f"- {sid}, {mode}, seed {seed}: ended `{e['end']}` with status `{e['status']}`, answer "
            f"{json.dumps(e.get('answer'))}, {len(calls)} calls; {why}"
        )
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    folder = Path(args[0] if args else Path(__file__).resolve().parent.parent / "live")
    sys.stdout.write(section(folder) or f"no episodes in {folder}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
