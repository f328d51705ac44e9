"""Checks every frozen hold-out must pass: labels with catalog values only, and records that replay and are scored."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.errors.accuracy import holdout
from benchmarks.errors.replay import rules_verdict
from resilient_mcp.faults import BY_TYPE, RepairAction, RetrySafety


def assert_catalog_labels(errors: list[dict[str, Any]], shaped: list[dict[str, Any]]) -> None:
    for r in errors + shaped:
        gold = r["gold"]
        assert gold["fault_type"] in BY_TYPE, r["id"]
        assert RepairAction(gold["repair_action"]) and RetrySafety(gold["retry_safety"]), r["id"]
        assert isinstance(gold["transient"], bool), r["id"]
        assert r["success_shaped"] is (r in shaped), r["id"]
        assert gold["why"] or gold["fault_type"].startswith(("A1", "B1", "B2")), r["id"]
    for r in shaped:  # a success-shaped record is a result that is not flagged as an error
        assert r["raw"]["kind"] == "result" and not r["raw"]["result"].get("isError"), r["id"]


def assert_replayed_and_scored(errors: list[dict[str, Any]], path: Path, shaped_path: Path) -> None:
    verdicts = [rules_verdict(r, loso=True) for r in errors]
    assert len(verdicts) == len(errors)
    report = holdout(path, shaped_path, frozen=False)
    assert f"{len(errors)} records from" in report and "now, LOSO" in report and "as if flagged" in report
