"""The real-model section of the report, from a live run's episodes (``live.py``'s ``live-episodes.jsonl``).

The same statistics as the scripted policies (``honest.py``): rates with intervals resampled by scenario variant,
paired comparisons (same scenario and sample seed, two modes) with a variant-bootstrap interval and an exact
McNemar test. Strict scoring (``strict.py``) is the headline, the track's lenient scoring beside it; then the cells
where the proxy turned a direct (strict) success into a failure, with how each episode ended. Only complete
samples count (every scenario in every mode of the run): a run stopped early is reported on the paired samples it
finished. Earlier runs kept in ``<folder>/earlier/<name>/`` are summarised beside the current one.

    python -m benchmarks.agentbench.livereport benchmarks/live                           # prints the section
    python -m benchmarks.agentbench.livereport benchmarks/live --into benchmarks/RESULTS.md   # replaces it there
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .heldout import every
from .honest import fmt_paired, fmt_rate, paired
from .live import load_episodes
from .metrics import aggregate, rows_of
from .strict import strict_verdict

MODES = {"M0": "direct", "M1": "proxy, L0", "M2": "proxy, L1", "M3": "proxy, L2", "M4": "proxy, L3"}
HEADING = "A real model (live track)"
EARLIER = "earlier"
"""Subfolder of a live folder holding earlier runs, one folder each (their journal and ``live-run.json``)."""
ROOT = Path(__file__).resolve().parent.parent.parent


@dataclass
class Run:
    """One live run, scored both ways, on its complete samples only."""

    folder: Path
    meta: dict[str, Any]
    episodes: list[dict[str, Any]]
    rows: list[dict[str, Any]]
    strict: list[dict[str, Any]]
    verdicts: dict[tuple[str, str, int], tuple[bool, list[str]]]
    policy: str
    modes: list[str]
    seeds: list[int]
    dropped: list[int]
    """Seeds of samples the run did not finish (left out of every figure)."""


def _meta(folder: Path) -> dict[str, Any]:
    path = folder / "live-run.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def complete_samples(episodes: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[int]]:
    """The episodes of samples (seeds) that hold every scenario in every mode of the run, and the seeds left out.
    A stopped run's last sample is partial: counting it would pair some scenarios and not others."""
    cells = {(e["scenario"], e["mode"]) for e in episodes}
    by_seed: dict[int, set[tuple[str, str]]] = defaultdict(set)
    for e in episodes:
        by_seed[int(e["seed"])].add((e["scenario"], e["mode"]))
    full = {seed for seed, have in by_seed.items() if have == cells}
    return [e for e in episodes if int(e["seed"]) in full], sorted(set(by_seed) - full)


def load_run(folder: Path) -> Run | None:
    """The run kept in ``folder``, or None when it holds no complete sample."""
    episodes, dropped = complete_samples(load_episodes(folder / "live-episodes.jsonl"))
    if not episodes:
        return None
    scenarios = {s.id: s for s in every()}
    rows = rows_of(episodes, scenarios)
    verdicts = {
        (e["scenario"], e["mode"], int(e["seed"])): strict_verdict(scenarios[e["scenario"]], e) for e in episodes
    }
    strict = [{**r, "success": verdicts[(r["scenario"], r["mode"], int(r["seed"]))][0]} for r in rows]
    return Run(
        folder=folder,
        meta=_meta(folder),
        episodes=episodes,
        rows=rows,
        strict=strict,
        verdicts=verdicts,
        policy=rows[0]["policy"],
        modes=[m for m in MODES if any(r["mode"] == m for r in rows)],
        seeds=sorted({int(r["seed"]) for r in rows}),
        dropped=dropped,
    )


def _shown(path: Path) -> str:
    try:
        return path.resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return str(path)


def _mark(ok_strict: bool, ok_lenient: bool) -> str:
    return "✓" if ok_strict else "~" if ok_lenient else "✗"


def section(folder: Path, heading: str = "##") -> str:
    """The Markdown section for the live run kept in ``folder`` (empty if it holds no complete sample), with the
    earlier runs kept under ``folder/earlier`` beside it."""
    run = load_run(folder)
    if run is None:
        return ""
    meta, rows, strict, policy, modes, seeds = run.meta, run.rows, run.strict, run.policy, run.modes, run.seeds
    by_mode = aggregate(rows, ("mode",))
    planned = meta.get("samples_planned")
    done = (
        f"{len(seeds)} complete paired samples of the {planned} planned (seeds {seeds[0]}-{seeds[-1]}"
        if planned and planned != len(seeds)
        else f"{len(seeds)} samples (seeds {seeds[0]}-{seeds[-1]}"
    )
    lines = [f"{heading} {HEADING}", ""]
    lines.append(
        f"Model `{meta.get('model', policy.removeprefix('live:'))}`"
        + (f" (GGUF SHA-256 `{meta['sha256'][:16]}…`)" if meta.get("sha256") else "")
        + (f", served by {meta['server']}" if meta.get("server") else "")
        + f"; {len({r['scenario'] for r in rows})} scenarios x {done}, temperature 0.7) x modes {', '.join(modes)}:"
        f" {len(rows)} episodes"
        + (f" in {meta['wall_min']:.0f} min of wall time on {meta['machine']}" if meta.get("wall_min") else "")
        + ". Command: `"
        + meta.get("command", "python -m benchmarks.agentbench.live")
        + f"`. Raw episodes with transcripts: `{_shown(folder / 'live-episodes.jsonl')}`."
        + (f" Code: {meta['code']}." if meta.get("code") else "")
        + (f" {meta['note']}" if meta.get("note") else "")
        + (
            f" The unfinished sample{'s' if len(run.dropped) > 1 else ''} (seed "
            f"{', '.join(map(str, run.dropped))}) {'are' if len(run.dropped) > 1 else 'is'} left out of every figure."
            if run.dropped
            else ""
        )
    )
    lines += [
        "",
        "Strict scoring (`benchmarks/agentbench/strict.py`) is the headline: a success needs every step of the "
        "user's request done (each read step's tool answered; the faulted step may use an alternative read), the "
        "answer exact (the value, not a sentence holding it) and found in a tool result, and no tool result the "
        "model made up in its reply. The lenient rate beside it is the track's own (answer read type-tolerantly, a "
        "sentence by its first integer).",
        "",
        "| mode | strict success | lenient success | fault fired | loop failures | duplicates | lost writes "
        "| calls / episode | tokens / episode |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    fired = Counter(r["mode"] for r in rows if r["fired"] and r["fault"] != "none")
    for m in modes:
        g = by_mode[m]
        mine = [e for e in run.episodes if e["mode"] == m]
        tokens = sum(e.get("prompt_tokens", 0) + e.get("completion_tokens", 0) for e in mine) / len(mine)
        lines.append(
            f"| {m} {MODES[m]} | {fmt_rate(strict, policy, m)} | {fmt_rate(rows, policy, m)} "
            f"| {fired[m]}/{g['episodes']} | {g['loop_failure_rate']['k']}/{g['episodes']} | "
            f"{g['duplicates']} | {g['lost_writes']} | {g['agent_calls'] / g['episodes']:.1f} | {tokens:,.0f} |"
        )
    lines += [
        "",
        "A fault fires only when the model makes the call it is planted on: scenarios whose fault rides on a "
        "scripted agent's mistake (A1's typo, B2's wrong type) fire only if the model makes that mistake itself.",
        "",
        "Paired by scenario and sample:",
        "",
    ]
    for m in modes[1:]:
        lines.append(
            f"- {m} - M0, strict: {fmt_paired(paired(strict, (policy, 'M0'), (policy, m)))}; lenient: "
            f"{fmt_paired(paired(rows, (policy, 'M0'), (policy, m)))}"
        )
    lines += _why_lines(run)
    ends = Counter((e["mode"], e["end"]) for e in run.episodes)
    lines.append(
        "- How episodes ended: "
        + "; ".join(
            f"{m}: " + ", ".join(f"{end} {n}" for (mm, end), n in sorted(ends.items()) if mm == m) for m in modes
        )
        + "."
    )
    lines += _earlier_lines(run, folder)
    lines += ["", "Per scenario (✓ strict success, ~ lenient success only, ✗ failure; one mark per sample):", ""]
    lines.append("| scenario | " + " | ".join(modes) + " |")
    lines.append("|---|" + "---|" * len(modes))
    cells: dict[tuple[str, str], list[str]] = defaultdict(list)
    for r in sorted(rows, key=lambda r: r["seed"]):
        ok = run.verdicts[(r["scenario"], r["mode"], int(r["seed"]))][0]
        cells[(r["scenario"], r["mode"])].append(_mark(ok, r["success"]))
    for sid in sorted({r["scenario"] for r in rows}):
        lines.append(f"| {sid} | " + " | ".join("".join(cells[(sid, m)]) for m in modes) + " |")
    worse = _worse(run)
    lines += [
        "",
        f"Where the proxy made this model worse, strictly ({len(worse)} cells: direct strict success, proxy failure):",
        "",
    ]
    lines += worse or ["- none"]
    return "\n".join(lines) + "\n"


def _why_lines(run: Run) -> list[str]:
    """Why lenient successes fail strictly, per mode."""
    lines = ["", "| mode | lenient successes that fail strictly: why |", "|---|---|"]
    for m in run.modes:
        why: Counter[str] = Counter()
        for (_, mode, _), (ok, reasons) in run.verdicts.items():
            if mode == m and not ok and "lenient" not in reasons:
                why.update({("step not done" if r.startswith("step ") else r) for r in reasons})
        lines.append(f"| {m} {MODES[m]} | " + (", ".join(f"{k} {n}" for k, n in sorted(why.items())) or "-") + " |")
    return [*lines, ""]


def _earlier_lines(run: Run, folder: Path) -> list[str]:
    """This run and the earlier ones kept under ``folder/earlier``, side by side (strict, then lenient)."""
    earlier = [r for r in (load_run(f) for f in sorted((folder / EARLIER).glob("*"))) if r is not None]
    if not earlier:
        return []
    lines = [
        "",
        "This run beside the earlier ones (same model, server, scenarios and seeds unless said; each row scored by "
        "the current code):",
        "",
        "| run | code | episodes | mode | strict success | lenient success | strict vs M0 | lenient vs M0 |",
        "|---|---|---:|---|---|---|---|---|",
    ]
    for i, r in enumerate([run, *earlier]):
        name = "this run" if i == 0 else f"`{_shown(r.folder)}`"
        code = r.meta.get("commit", "?")
        for m in r.modes:
            vs = [
                "-" if m == "M0" else fmt_paired(paired(rows, (r.policy, "M0"), (r.policy, m)))
                for rows in (r.strict, r.rows)
            ]
            lines.append(
                f"| {name} | {code} | {len(r.rows)} | {m} {MODES[m]} | {fmt_rate(r.strict, r.policy, m)} "
                f"| {fmt_rate(r.rows, r.policy, m)} | {vs[0]} | {vs[1]} |"
            )
    for r in earlier:
        lines.append("")
        lines.append(
            f"`{_shown(r.folder)}`: {len(r.rows)} episodes; command `{r.meta.get('command', '?')}`"
            + (f"; code: {r.meta['code']}" if r.meta.get("code") else "")
            + "."
        )
    return lines


def _worse(run: Run) -> list[str]:
    by = {(e["scenario"], e["mode"], int(e["seed"])): e for e in run.episodes}
    out = []
    for (sid, mode, seed), e in sorted(by.items()):
        ok, reasons = run.verdicts[(sid, mode, seed)]
        if mode == "M0" or ok:
            continue
        if (sid, "M0", seed) not in by or not run.verdicts[(sid, "M0", seed)][0]:
            continue
        calls = [ev for ev in e["events"] if ev["kind"] == "call"]
        failed = [ev for ev in calls if not ev["ok"]]
        why = (
            f"first error seen: {failed[0]['tool']}: {failed[0]['text'][:140]!r}"
            if failed
            else "no error seen (the prompt differs from direct only by the proxy's instructions; sampling)"
        )
        strictly = "" if "lenient" in reasons else f" (a lenient success; strictly: {', '.join(reasons)})"
        out.append(
            f"- {sid}, {mode}, seed {seed}: ended `{e['end']}` with status `{e['status']}`, answer "
            f"{json.dumps(e.get('answer'))}, {len(calls)} calls{strictly}; {why}"
        )
    return out


def splice(report: str, text: str) -> str:
    """``report`` with its live-track section (from its heading to the next ``## `` heading) replaced by ``text``."""
    start = report.find(f"\n## {HEADING}\n") + 1  # a line of its own, not a deeper heading ending alike
    if start == 0:
        raise ValueError(f"the report has no '## {HEADING}' section to replace; regenerate it with the full run")
    end = report.find("\n## ", start + 1)
    rest = report[end + 1 :] if end != -1 else ""
    return report[:start] + text.rstrip("\n") + "\n" + ("\n" + rest if rest else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.agentbench.livereport", description=__doc__.split("\n")[0]
    )
    parser.add_argument("folder", nargs="?", type=Path, default=ROOT / "benchmarks" / "live")
    parser.add_argument("--into", type=Path, help="replace the live-track section of this report (RESULTS.md)")
    args = parser.parse_args(argv)
    text = section(args.folder)
    if not args.into:
        sys.stdout.write(text or f"no complete sample in {args.folder}\n")
        return 0
    if not text:
        sys.stderr.write(f"no complete sample in {args.folder}: {args.into} left as it is\n")
        return 1
    try:
        args.into.write_text(splice(args.into.read_text(encoding="utf-8"), text), encoding="utf-8")
    except ValueError as exc:
        sys.stderr.write(f"{exc}\n")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
