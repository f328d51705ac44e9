"""Checks every frozen hold-out must pass: labels with catalog values only, and records that replay and are scored."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from benchmarks.errors.accuracy import holdout
from benchmarks.errors.replay import load, rules_verdict
from resilient_mcp.faults import BY_TYPE, RepairAction, RetrySafety


def assert_catalog_labels(errors: list[dict[str, Any]], shaped: list[dict[str, Any]], explained: bool = True) -> None:
    """Labels with catalog values only; with ``explained``, each says why (but for the A1/B1/B2 that need no word)."""
    for r in errors + shaped:
        gold = r["gold"]
        assert gold["fault_type"] in BY_TYPE, r["id"]
        assert RepairAction(gold["repair_action"]) and RetrySafety(gold["retry_safety"]), r["id"]
        assert isinstance(gold["transient"], bool), r["id"]
        assert r["success_shaped"] is (r in shaped), r["id"]
        assert not explained or gold["why"] or gold["fault_type"].startswith(("A1", "B1", "B2")), r["id"]
    for r in shaped:  # a success-shaped record is a result that is not flagged as an error
        assert r["raw"]["kind"] == "result" and not r["raw"]["result"].get("isError"), r["id"]


def assert_replayed_and_scored(errors: list[dict[str, Any]], path: Path, shaped_path: Path) -> None:
    verdicts = [rules_verdict(r, loso=True) for r in errors]
    assert len(verdicts) == len(errors)
    report = holdout(path, shaped_path, frozen=False)
    assert f"{len(errors)} records from" in report and "now, LOSO" in report and "as if flagged" in report


def assert_fresh_batch(
    errors: list[dict[str, Any]],
    shaped: list[dict[str, Any]],
    earlier: list[Path],
    languages: set[str],
    sources: Iterable[Any],
    new_sources: bool = True,
) -> None:
    """A fresh hold-out: at least 5 servers and 5 kinds that no earlier set has (nor, with ``new_sources``, any source),
    servers in every language of ``languages``, at least 60 errors and ids that are unique."""
    seen = [r for path in earlier for r in load(path)]
    batch = errors + shaped
    servers = {r["server"] for r in batch}
    assert len(servers) >= 5 and not servers & {r["server"] for r in seen}
    if new_sources:
        assert not {r["source"] for r in batch} & {r["source"] for r in seen}
    new_kinds = {r["kind"] for r in batch} - {r["kind"] for r in seen}
    assert len(new_kinds) >= 5, new_kinds
    assert languages <= {s.language for s in sources}
    assert len(errors) >= 60
    assert len({r["id"] for r in batch}) == len(batch)


def assert_accuracy_option(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], name: str) -> None:
    """``python -m benchmarks.errors.accuracy --NAME`` prints that hold-out's section only."""
    import benchmarks.errors.accuracy as accuracy

    monkeypatch.setattr(accuracy, name, lambda diagnosed=None: f"the section of {name}")
    assert accuracy.main([f"--{name}"]) == 0
    assert f"the section of {name}" in capsys.readouterr().out
