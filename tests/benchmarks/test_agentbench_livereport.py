"""The live track's report section on the committed real-model run: strict scoring as the headline, only complete
paired samples of a stopped run, earlier runs beside the current one, and the section replaced in place in
RESULTS.md without touching the rest of the report."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from benchmarks.agentbench.live import load_episodes
from benchmarks.agentbench.livereport import complete_samples, load_run, main, section, splice

COMMITTED = Path(__file__).resolve().parents[2] / "benchmarks" / "live" / "earlier" / "45dce58"
"""A committed run of all 5 planned samples (the current one in ``benchmarks/live`` was stopped after 3)."""


def _stopped_run(folder: Path, keep_of_last: int) -> list[dict[str, object]]:
    """The committed run as if stopped during its last sample (seed 11), after ``keep_of_last`` of its episodes."""
    episodes = load_episodes(COMMITTED / "live-episodes.jsonl")
    last = [e for e in episodes if e["seed"] == 11][:keep_of_last]
    kept = [e for e in episodes if e["seed"] != 11] + last
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "live-episodes.jsonl").write_text("".join(json.dumps(e) + "\n" for e in kept), encoding="utf-8")
    meta = json.loads((COMMITTED / "live-run.json").read_text(encoding="utf-8"))
    (folder / "live-run.json").write_text(json.dumps({**meta, "commit": "abc1234"}), encoding="utf-8")
    return kept


def test_a_stopped_run_is_reported_on_its_complete_paired_samples_only(tmp_path: Path) -> None:
    kept = _stopped_run(tmp_path, keep_of_last=20)  # 12 scenarios x 3 modes: M0 and part of M1 of seed 11
    episodes, dropped = complete_samples(kept)
    assert dropped == [11] and len(episodes) == 4 * 36 and {e["seed"] for e in episodes} == {7, 8, 9, 10}
    run = load_run(tmp_path)
    assert run is not None and run.seeds == [7, 8, 9, 10] and len(run.rows) == 144
    text = section(tmp_path)
    assert "4 complete paired samples of the 5 planned (seeds 7-10" in text
    assert "The unfinished sample (seed 11) is left out of every figure." in text
    assert "144 episodes" in text and "180 episodes" not in text


def test_strict_scoring_is_the_headline_and_the_per_scenario_marks_tell_strict_from_lenient(tmp_path: Path) -> None:
    text = section(COMMITTED)
    table = text.split("| mode | strict success | lenient success |", 1)[1]
    # the committed run, re-scored: 13.3 % strictly, 28.3 % leniently direct
    assert table.split("\n")[2].startswith("| M0 direct | 13.3% [0.0%-30.0%] | 28.3% [10.0%-46.7%] |")
    assert "- M1 - M0, strict: +13.3 pts" in text and "; lenient: +28.3 pts" in text
    # A1 seed 8 through the proxy is a lenient success without every step done: "~", not "✓"
    assert "| C1-read_only-refused_x2-first | ✗✗✗✗✗ | ~~~✓✗ | ~~~✓✗ |" in text
    assert "Where the proxy made this model worse, strictly (" in text


def test_earlier_runs_are_summarised_beside_the_current_one(tmp_path: Path) -> None:
    _stopped_run(tmp_path, keep_of_last=0)
    assert "This run beside the earlier ones" not in section(tmp_path)
    shutil.copytree(COMMITTED, tmp_path / "earlier" / "45dce58")
    text = section(tmp_path)
    assert "| this run | abc1234 | 144 | M0 direct | 16.7%" in text
    assert "| 45dce58 | 180 | M1 proxy, L0 | 26.7% [13.3%-43.3%] | 56.7% [38.3%-75.0%] | +13.3 pts" in text


REPORT = "# Results\n\nintro\n\n## A real model (live track)\n\nold text\n\n| old | table |\n\n## Pooled view\n\nrest\n"


def test_the_section_is_replaced_in_place_and_the_rest_of_the_report_kept(tmp_path: Path) -> None:
    assert splice(REPORT, "## A real model (live track)\n\nnew\n") == (
        "# Results\n\nintro\n\n## A real model (live track)\n\nnew\n\n## Pooled view\n\nrest\n"
    )
    with pytest.raises(ValueError, match="no '## A real model \\(live track\\)' section"):
        splice("# Results\n\n### A real model (live track)\n\nsummary\n", "x")  # a deeper heading is not it
    summary = "# Results\n\n### A real model (live track)\n\nsummary\n"
    assert splice(summary + REPORT[len("# Results\n") :], "## A real model (live track)\n\nnew\n").startswith(
        summary + "\nintro\n\n## A real model (live track)\n\nnew\n\n## Pooled view"
    )
    report = tmp_path / "RESULTS.md"
    report.write_text(REPORT, encoding="utf-8")
    assert main([str(COMMITTED), "--into", str(report)]) == 0
    written = report.read_text(encoding="utf-8")
    assert written.startswith("# Results\n\nintro\n\n## A real model (live track)\n\nModel `qwen2.5")
    assert "old text" not in written and written.endswith("\n\n## Pooled view\n\nrest\n")
    assert written.count("## A real model (live track)") == 1
