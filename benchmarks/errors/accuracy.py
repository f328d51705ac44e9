"""How often the rules (and the rules + model diagnosis) are right on the corpus of real MCP errors.

    python -m benchmarks.errors.accuracy                      # rules alone
    python -m benchmarks.errors.accuracy --scripted 0.2       # + diagnosis by a scripted model (gold, 20 % noise)
    python -m benchmarks.errors.accuracy --live URL [--model M] [--api-key-env VAR]
                                                              # + diagnosis by a real OpenAI-compatible endpoint

Axes: fault type (exact catalog type), repair action (after the proxy's repair planning for the tool's effect
class), transient. Per gold fault category and overall; then where the rules are wrong (situation by situation).
With a diagnosis it also counts safety: a verdict must never make retrying looser than the rules' (retry safety,
side-effect status, max_retry) — the clamps guarantee it, the benchmark checks it.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import structlog

from .replay import CORPUS, Verdict, load, rules_verdict

AXES = ("fault_type", "repair_action", "transient")
_GOLD_KEY = {"fault_type": "fault_type", "repair_action": "repair_action", "transient": "transient"}


def category(record: dict[str, Any]) -> str:
    return str(record["gold"]["fault_type"])[0]


def right(record: dict[str, Any], verdict: Verdict, axis: str) -> bool:
    return bool(verdict.get(axis) == record["gold"][_GOLD_KEY[axis]])


def table(records: Sequence[dict[str, Any]], verdicts: dict[str, Sequence[Verdict]]) -> str:
    """Markdown: rows = categories + overall, columns = (run, axis) accuracy in %."""
    groups: dict[str, list[int]] = defaultdict(list)
    for i, rec in enumerate(records):
        groups[category(rec)].append(i)
    head = "| category | n | " + " | ".join(f"{run}: {axis}" for run in verdicts for axis in AXES) + " |"
    sep = "|---|---:|" + "---:|" * (len(verdicts) * len(AXES))
    lines = [head, sep]
    for cat, idx in [*sorted(groups.items()), ("all", list(range(len(records))))]:
        cells = []
        for vs in verdicts.values():
            for axis in AXES:
                ok = sum(right(records[i], vs[i], axis) for i in idx)
                cells.append(f"{100 * ok / len(idx):.0f} %")
        lines.append(f"| {'**all**' if cat == 'all' else cat} | {len(idx)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def misses(records: Sequence[dict[str, Any]], verdicts: Sequence[Verdict]) -> str:
    """Where the rules are wrong, grouped by situation: gold vs given, whether the diagnose step is asked (the error
    is untyped), and one example text."""
    from resilient_mcp.diagnosis.engine import untyped

    from .replay import raw_fault

    rows: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i, (rec, v) in enumerate(zip(records, verdicts, strict=True)):
        if any(not right(rec, v, a) for a in AXES):
            rows[(_source_name(rec), rec["situation"])].append(i)
    lines = [
        "| source / situation | n | gold (type, action, transient) | rules say | diagnosis asked | example error |",
        "|---|---:|---|---|---|---|",
    ]
    for (src, sit), idx in sorted(rows.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        rec = records[idx[0]]
        g = rec["gold"]
        said = Counter(f"{verdicts[i].fault_type}, {verdicts[i].repair_action}, {verdicts[i].transient}" for i in idx)
        asked = "yes" if untyped(raw_fault(rec)) else "no (typed)"
        lines.append(
            f"| {src} / {sit} | {len(idx)} | {g['fault_type']}, {g['repair_action']}, {g['transient']} | "
            f"{'; '.join(f'{k} (x{n})' for k, n in said.most_common())} | {asked} | `{_text(rec)}` |"
        )
    return "\n".join(lines)


def _source_name(record: dict[str, Any]) -> str:
    return re.sub(r"-\d{3}-.*$", "", str(record["id"]))


def _text(record: dict[str, Any]) -> str:
    from .replay import error_text

    flat = " ".join(error_text(record).split()).replace("|", "\\|").replace("`", "'")
    flat = flat.replace("/tmp/rmcp-errors-corpus", "…")
    return flat if len(flat) <= 90 else flat[:89] + "…"


def summary(records: Sequence[dict[str, Any]]) -> str:
    by_source = Counter(r["source"] for r in records)
    by_kind = Counter(r["raw"]["kind"] for r in records)
    parts = [
        f"{len(records)} records from {len(by_source)} sources: "
        + ", ".join(f"{s} {n}" for s, n in sorted(by_source.items())),
        "raw outcomes: " + ", ".join(f"{k} {n}" for k, n in sorted(by_kind.items())),
    ]
    return "\n".join(parts)


def overall(records: Sequence[dict[str, Any]], verdicts: Sequence[Verdict]) -> dict[str, float]:
    return {a: sum(right(r, v, a) for r, v in zip(records, verdicts, strict=True)) / len(records) for a in AXES}


def run(
    path: Path,
    diagnosed: Callable[[list[dict[str, Any]], list[Verdict]], tuple[list[Verdict], str]] | None = None,
) -> str:
    records = load(path)
    rules = [rules_verdict(r) for r in records]
    runs: dict[str, Sequence[Verdict]] = {"rules": rules}
    notes = ""
    if diagnosed is not None:
        with_model, notes = diagnosed(records, rules)
        runs["rules+diagnosis"] = with_model
    out = [summary(records), "", table(records, runs), ""]
    if notes:
        out += [notes, ""]
    out += ["Where the rules are wrong:", "", misses(records, rules)]
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--scripted", type=float, metavar="NOISE", help="diagnosis by a scripted model")
    parser.add_argument("--live", metavar="URL", help="diagnosis by an OpenAI-compatible endpoint (base URL)")
    parser.add_argument("--model", default="gpt-4o-mini")
    parser.add_argument("--api-key-env", default="OPENAI_API_KEY")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    diagnosed = None
    if args.scripted is not None or args.live:
        from .measure import diagnosed_verdicts

        def diagnosed(recs: list[dict[str, Any]], rules: list[Verdict]) -> tuple[list[Verdict], str]:
            return diagnosed_verdicts(
                recs,
                rules,
                noise=args.scripted,
                live=args.live,
                model=args.model,
                api_key_env=args.api_key_env,
                seed=args.seed,
            )

    sys.stdout.write(run(args.corpus, diagnosed) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
