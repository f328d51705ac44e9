"""Smoke test of the agent-outcome benchmark (``benchmarks/agentbench``): coverage, safety and reproducibility.

A small subset (one scenario per fault type, two policies, direct and proxied at L2) runs in this process twice with
the same seed; the full run is ``python -m benchmarks.agentbench``. No matplotlib needed: charts are skipped.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2
import pytest

from benchmarks.agentbench.live import build_request, run_live_episode
from benchmarks.agentbench.metrics import aggregate, rows_of, wilson
from benchmarks.agentbench.report import render, write
from benchmarks.agentbench.runner import Job, run_jobs
from benchmarks.agentbench.scenarios import generate, quick
from resilient_mcp.faults import CATALOG

SUBSET_POLICIES = ("blind_retry", "repair_follower")


def _subset(seed: int) -> list[dict[str, Any]]:
    jobs = [Job(s.id, p, m, seed) for s in quick() for p in SUBSET_POLICIES for m in ("M0", "M3")]
    return run_jobs(jobs, workers=1, concurrency=16)


def _deterministic(episodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in e.items() if k != "wall_s"} for e in episodes]


@pytest.fixture(scope="module")
def runs() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    return _subset(7), _subset(7)


def test_every_one_of_the_27_fault_types_has_a_scenario() -> None:
    covered = {s.fault for s in generate()}
    assert {c.fault_type for c in CATALOG} <= covered
    assert len(generate()) >= 120 and len({s.id for s in generate()}) == len(generate())


def test_two_runs_with_the_same_seed_give_identical_episodes_and_metrics(runs: Any) -> None:
    first, second = runs
    assert not [e for e in first if "error" in e]
    assert json.dumps(_deterministic(first), default=str) == json.dumps(_deterministic(second), default=str)
    scenarios = {s.id: s for s in generate()}
    assert aggregate(rows_of(first, scenarios), ("mode",)) == aggregate(rows_of(second, scenarios), ("mode",))


def test_the_proxy_makes_no_duplicate_side_effects_and_no_useless_retries(runs: Any) -> None:
    proxied = [e["score"] for e in runs[0] if e["mode"] == "M3"]
    assert sum(s["duplicates"] for s in proxied) == 0
    assert sum(s["proxy_useless_attempts"] for s in proxied) == 0


def test_a_blind_agent_duplicates_an_ambiguous_write_without_the_proxy_and_not_with_it() -> None:
    scenario = "C2-write_unsafe-commit-first"
    episodes = run_jobs([Job(scenario, "blind_retry", m, 7) for m in ("M0", "M3")], workers=1)
    by_mode = {e["mode"]: e["score"] for e in episodes}
    assert by_mode["M0"]["duplicates"] == 1 and by_mode["M3"]["duplicates"] == 0


def test_the_report_is_written_without_matplotlib_charts_when_it_is_missing(runs: Any, tmp_path: Path) -> None:
    rows = rows_of(runs[0], {s.id: s for s in generate()})
    meta = {
        "command": "test",
        "seed": 7,
        "scenarios": 28,
        "fault_types": 27,
        "episodes": len(rows),
        "cpus": 1,
        "wall_s": 1.0,
    }
    paths = write({"rows": len(rows)}, rows, render(meta, rows, None), tmp_path)
    text = (tmp_path / "RESULTS.md").read_text(encoding="utf-8")
    assert "## Headline" in text and Path(paths["json"]).exists()
    assert "charts/" in text or "Charts skipped" in text
    # A second run keeps the hand-written summary block (every benchmark's figures) under the title.
    summary = "<!-- BEGIN summary (hand-written) -->\n\n## Summary\n\nfigures\n\n<!-- END summary -->"
    (tmp_path / "RESULTS.md").write_text(text.replace("\n\n", f"\n\n{summary}\n\n", 1), encoding="utf-8")
    write({"rows": len(rows)}, rows, render(meta, rows, None), tmp_path)
    again = (tmp_path / "RESULTS.md").read_text(encoding="utf-8")
    assert again.count(summary) == 1 and again.index(summary) < again.index("## Headline")
    assert again.replace(summary + "\n\n", "") == text


def test_wilson_interval_brackets_the_rate() -> None:
    m = wilson(8, 10)
    assert m["lo"] < m["rate"] == 0.8 < m["hi"] and wilson(0, 0)["rate"] is None


@pytest.mark.anyio
async def test_the_live_track_sends_native_tool_calls_and_scores_the_ledger() -> None:
    """A fake chat-completions endpoint (no network): one tool call, then a final JSON answer."""
    scenario = next(s for s in generate() if s.id == "none-read_only-control-mid")
    sent: list[dict[str, Any]] = []

    def reply(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        sent.append(body)
        step = sum(1 for m in body["messages"] if m["role"] == "tool")
        if step < len(scenario.steps):
            st = scenario.steps[step]
            call = {
                "id": f"c{step}",
                "type": "function",
                "function": {"name": st.tool, "arguments": json.dumps(st.args)},
            }
            return httpx2.Response(200, json={"choices": [{"message": {"role": "assistant", "tool_calls": [call]}}]})
        final = {"role": "assistant", "content": 'ok\n{"status": "done", "answer": 40}'}
        return httpx2.Response(200, json={"choices": [{"message": final}]})

    async with httpx2.AsyncClient(base_url="http://model.test/v1", transport=httpx2.MockTransport(reply)) as http:
        episode = await run_live_episode(http, "fake", scenario, "M3", 7)
    assert episode["score"]["success"] and episode["status"] == "done"
    assert sent[0] == build_request("fake", sent[0]["messages"], sent[0]["tools"], 7)
    assert {t["function"]["name"] for t in sent[0]["tools"]} >= {"get_stock", "create_order"}
