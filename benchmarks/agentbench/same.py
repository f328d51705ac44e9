"""Are two runs of the benchmark with the same seed the same? Every episode, compared field by field.

    python -m benchmarks.agentbench --seed 7 --out /tmp/run-a
    python -m benchmarks.agentbench --seed 7 --out /tmp/run-b      # e.g. while the machine is busy
    python -m benchmarks.agentbench.same /tmp/run-a /tmp/run-b

Wall-clock fields (the run's duration, the latency table) are not outcomes and are left out; everything else in
``out/results.json`` (each episode's status, end, facts, score and simulated time, and every aggregate) must be
equal. Exit status 0 when the runs are identical, 1 when they differ (the first differences are printed).

Against the committed run, whose results file is not committed: its digest (``benchmarks/DIGEST.tsv``, one hash of
the scored fields per episode; ``digest.py``) is compared with a new run's episodes, which may be a subset:

    python -m benchmarks.agentbench.same benchmarks/DIGEST.tsv /tmp/run-a
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from .digest import compare, read_digest

WALL = ("latency", "meta", "paths")


def _load(folder: Path) -> dict[str, Any]:
    path = folder / "out" / "results.json" if folder.is_dir() else folder
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def _key(e: dict[str, Any]) -> tuple[str, str, str, int]:
    return (e["scenario"], e["policy"], e["mode"], int(e["seed"]))


def differences(a: dict[str, Any], b: dict[str, Any]) -> tuple[int, int, list[str]]:
    """(episodes compared, episodes that differ, every difference: episodes first, then aggregates)."""
    ea = {_key(e): e for e in a["episodes"]}
    eb = {_key(e): e for e in b["episodes"]}
    notes = [f"only in the first run: {k}" for k in sorted(set(ea) - set(eb))]
    notes += [f"only in the second run: {k}" for k in sorted(set(eb) - set(ea))]
    differing = len(set(ea) ^ set(eb))
    for k in sorted(set(ea) & set(eb)):
        if ea[k] != eb[k]:
            differing += 1
            fields = sorted(f for f in set(ea[k]) | set(eb[k]) if ea[k].get(f) != eb[k].get(f))
            notes.append(f"{k}: {', '.join(fields)} differ")
    for part in sorted((set(a) | set(b)) - set(WALL) - {"episodes"}):
        if a.get(part) != b.get(part):
            notes.append(f"aggregate {part!r} differs")
    return len(set(ea) | set(eb)), differing, notes


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        sys.stderr.write(
            "usage: python -m benchmarks.agentbench.same RUN_A RUN_B (folders or results.json files; RUN_A may be "
            "a digest, e.g. benchmarks/DIGEST.tsv)\n"
        )
        return 2
    if args[0].endswith(".tsv"):
        episodes = _load(Path(args[1]))["episodes"]
        notes = compare(read_digest(Path(args[0])), episodes)
        sys.stdout.write(f"{len(episodes)} episodes compared with {args[0]}: {len(notes)} differ\n")
        for line in notes[:20]:
            sys.stdout.write(f"  {line}\n")
        return 1 if notes else 0
    total, differing, notes = differences(_load(Path(args[0])), _load(Path(args[1])))
    sys.stdout.write(f"{total} episodes compared: {differing} differ; {len(notes)} differences\n")
    for line in notes[:20]:
        sys.stdout.write(f"  {line}\n")
    return 1 if notes else 0


if __name__ == "__main__":
    raise SystemExit(main())
