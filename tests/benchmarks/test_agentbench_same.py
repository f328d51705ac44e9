"""The same-seed comparison: wall-clock fields are ignored, any outcome difference is found and named."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from benchmarks.agentbench.same import differences, main


def _run() -> dict[str, Any]:
    episode = {"scenario": "s1", "policy": "p", "mode": "M0", "seed": 7, "status": "done", "score": {"success": True}}
    return {
        "meta": {"wall_s": 100.0},
        "latency": {"median_ms": 1.0},
        "by_mode": {"M0": {"task_success_rate": {"k": 1, "n": 1}}},
        "episodes": [episode, {**episode, "mode": "M3", "score": {"success": True}}],
    }


def test_runs_that_differ_only_in_wall_clock_fields_are_the_same(tmp_path: Path) -> None:
    a, b = _run(), _run()
    b["meta"]["wall_s"], b["latency"]["median_ms"] = 250.0, 3.0
    b["episodes"].reverse()  # order of completion is not an outcome
    assert differences(a, b) == (2, 0, [])
    for name, run in (("a", a), ("b", b)):
        (tmp_path / name / "out").mkdir(parents=True)
        (tmp_path / name / "out" / "results.json").write_text(json.dumps(run), encoding="utf-8")
    assert main([str(tmp_path / "a"), str(tmp_path / "b")]) == 0


def test_an_episode_outcome_or_an_aggregate_that_differs_is_named() -> None:
    a = _run()
    b = copy.deepcopy(a)
    b["episodes"][1]["score"]["success"] = False
    b["by_mode"]["M0"]["task_success_rate"]["k"] = 0
    total, differing, notes = differences(a, b)
    assert (total, differing) == (2, 1)
    assert notes == ["('s1', 'p', 'M3', 7): score differ", "aggregate 'by_mode' differs"]
    c = copy.deepcopy(a)
    c["episodes"].pop()
    assert differences(a, c)[1:] == (1, ["only in the first run: ('s1', 'p', 'M3', 7)"])
