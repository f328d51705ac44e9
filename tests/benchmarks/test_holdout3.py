"""The third fresh hold-out (benchmarks/errors/holdout3.jsonl): servers of kinds neither the corpus nor the first two
hold-outs have, well-formed, labelled with catalog values only, replayable, and scored by accuracy.py."""

from __future__ import annotations

from benchmarks.errors.accuracy import (
    HOLDOUT,
    HOLDOUT2,
    HOLDOUT2_SHAPED,
    HOLDOUT3,
    HOLDOUT3_SHAPED,
    HOLDOUT_SHAPED,
    holdout,
)
from benchmarks.errors.holdout3 import HOLDOUT3_SOURCES
from benchmarks.errors.replay import CORPUS, SUCCESS_SHAPED, load, rules_verdict
from resilient_mcp.faults import BY_TYPE, RepairAction, RetrySafety

THIRD = load(HOLDOUT3)
THIRD_SHAPED = load(HOLDOUT3_SHAPED)


def test_the_third_hold_out_is_servers_and_kinds_that_no_earlier_set_has() -> None:
    earlier = [*load(CORPUS), *load(SUCCESS_SHAPED), *load(HOLDOUT), *load(HOLDOUT_SHAPED)]
    earlier += [*load(HOLDOUT2), *load(HOLDOUT2_SHAPED)]
    third = THIRD + THIRD_SHAPED
    servers = {r["server"] for r in third}
    assert len(servers) >= 5 and not servers & {r["server"] for r in earlier}
    new_kinds = {r["kind"] for r in third} - {r["kind"] for r in earlier}
    assert len(new_kinds) >= 5, new_kinds
    assert {"python", "node"} <= {s.language for s in HOLDOUT3_SOURCES}
    assert len(THIRD) >= 60
    assert len({r["id"] for r in third}) == len(third)


def test_every_label_of_the_third_hold_out_uses_catalog_values_only() -> None:
    for r in THIRD + THIRD_SHAPED:
        gold = r["gold"]
        assert gold["fault_type"] in BY_TYPE, r["id"]
        assert RepairAction(gold["repair_action"]) and RetrySafety(gold["retry_safety"]), r["id"]
        assert isinstance(gold["transient"], bool), r["id"]
        assert r["success_shaped"] is (r in THIRD_SHAPED), r["id"]
    for r in THIRD_SHAPED:  # a success-shaped record is a result that is not flagged as an error
        assert r["raw"]["kind"] == "result" and not r["raw"]["result"].get("isError"), r["id"]


def test_every_record_of_the_third_hold_out_replays_and_the_report_scores_it() -> None:
    verdicts = [rules_verdict(r, loso=True) for r in THIRD]
    assert len(verdicts) == len(THIRD)
    report = holdout(HOLDOUT3, HOLDOUT3_SHAPED, frozen=False)
    assert f"{len(THIRD)} records from" in report and "now, LOSO" in report and "as if flagged" in report
