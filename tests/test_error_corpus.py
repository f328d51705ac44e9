"""The committed error corpus (benchmarks/errors/corpus.jsonl): well-formed, replayable through the rules, and the
diagnose step measured on it with a scripted model never loosens retry safety, whatever the model answers."""

from __future__ import annotations

from collections import Counter

import pytest

from benchmarks.errors.accuracy import AXES, overall, right, run
from benchmarks.errors.measure import ScriptedModel, measure
from benchmarks.errors.replay import CORPUS, SUCCESS_SHAPED, error_text, load, rules_verdict
from resilient_mcp.diagnosis.engine import signature
from resilient_mcp.faults import BY_TYPE, RepairAction, RetrySafety

RECORDS = load(CORPUS)
SHAPED = load(SUCCESS_SHAPED)


def test_the_corpus_holds_at_least_300_real_errors_from_several_servers_with_catalog_labels() -> None:
    assert len(RECORDS) >= 300
    sources = Counter(r["source"] for r in RECORDS)
    assert len(sources) >= 8 and max(sources.values()) < len(RECORDS) / 3
    assert len({r["id"] for r in RECORDS}) == len(RECORDS)
    for r in RECORDS:
        gold = r["gold"]
        assert gold["fault_type"] in BY_TYPE, r["id"]
        assert RepairAction(gold["repair_action"]) and RetrySafety(gold["retry_safety"])
        assert isinstance(gold["transient"], bool)
        assert r["raw"]["kind"] in ("result", "mcp_error", "http_status", "exception", "proxy_fault")


def test_every_record_replays_through_the_rules_and_the_report_names_where_they_are_wrong() -> None:
    verdicts = [rules_verdict(r) for r in RECORDS]
    wrong = [r["situation"] for r, v in zip(RECORDS, verdicts, strict=True) if not right(r, v, "fault_type")]
    assert wrong, "a corpus the rules get all right measures nothing"
    report = run(CORPUS)
    assert "| **all** | " in report and "Where the rules are wrong" in report
    assert all(s in report for s in set(wrong))


def test_the_corpus_spans_at_least_25_real_servers_of_many_kinds_and_names_each_records_server() -> None:
    # Leave-one-server-out groups by `server`; the project's own chaos server and fault shim are not real servers.
    real = Counter(r["server"] for r in RECORDS + SHAPED if r["kind"] != "fault injector")
    assert len(real) >= 25, sorted(real)
    kinds = {r["kind"] for r in RECORDS if r["kind"] != "fault injector"}
    assert {"database", "cache", "shell", "editor", "office", "web", "vcs", "search", "queue", "api"} <= kinds
    assert all(isinstance(r["server"], str) and r["server"] and not r["success_shaped"] for r in RECORDS)


def test_success_shaped_failures_are_successful_results_labelled_as_the_failure_they_are() -> None:
    # What `result_errors` policies are measured on: the server said success, the situation was a failure.
    assert len(SHAPED) >= 30 and len({r["server"] for r in SHAPED}) >= 4
    for r in SHAPED:
        assert r["success_shaped"] is True and r["raw"]["kind"] == "result", r["id"]
        assert not r["raw"]["result"].get("isError", False), r["id"]
        assert r["gold"]["fault_type"] in BY_TYPE, r["id"]
    assert not {r["id"] for r in SHAPED} & {r["id"] for r in RECORDS}


@pytest.mark.anyio
@pytest.mark.parametrize("noise", [0.0, 0.2, 1.0])
async def test_a_scripted_model_never_loosens_retry_safety_and_a_right_one_improves_accuracy(noise: float) -> None:
    rules = [rules_verdict(r) for r in RECORDS]
    measured = await measure(RECORDS, rules, ScriptedModel(noise, seed=7))
    assert measured.loosened == 0
    assert measured.asked > 0 and measured.stats["calls"] + measured.stats["cache_hits"] == measured.asked
    before, after = overall(RECORDS, rules), overall(RECORDS, measured.verdicts)
    assert set(AXES) == set(before)
    if noise == 0.0:  # a model that is always right fixes what it is asked about, on every axis it sets
        assert after["fault_type"] > before["fault_type"] and after["repair_action"] > before["repair_action"]
        # Except where two situations reach the proxy as the very same words (LABELS.md, hard cases: e.g. a CSV and
        # a broken workbook both "zip: not a valid zip file"): their verdict is cached by that signature.
        golds: dict[str, set[tuple[str, bool]]] = {}
        for r in RECORDS:
            key = signature(r["tool"]["name"], error_text(r))
            golds.setdefault(key, set()).add((r["gold"]["fault_type"], r["gold"]["transient"]))
        for r, v, ruled in zip(RECORDS, measured.verdicts, rules, strict=True):
            if v is not ruled and len(golds[signature(r["tool"]["name"], error_text(r))]) == 1:
                assert right(r, v, "fault_type") and right(r, v, "transient"), r["id"]
