"""The fifth fresh hold-out (benchmarks/errors/holdout5.jsonl): servers of kinds neither the corpus nor the first four
hold-outs have, well-formed, labelled with catalog values only, replayable, and scored by accuracy.py."""

from __future__ import annotations

import pytest

from benchmarks.errors.accuracy import (
    HOLDOUT,
    HOLDOUT2,
    HOLDOUT2_SHAPED,
    HOLDOUT3,
    HOLDOUT3_SHAPED,
    HOLDOUT4,
    HOLDOUT4_SHAPED,
    HOLDOUT5,
    HOLDOUT5_SHAPED,
    HOLDOUT_SHAPED,
    holdout,
    main,
)
from benchmarks.errors.holdout5 import HOLDOUT5_SOURCES
from benchmarks.errors.replay import CORPUS, SUCCESS_SHAPED, load, rules_verdict
from resilient_mcp.faults import BY_TYPE, RepairAction, RetrySafety

FIFTH = load(HOLDOUT5)
FIFTH_SHAPED = load(HOLDOUT5_SHAPED)


def test_the_fifth_hold_out_is_servers_and_kinds_that_no_earlier_set_has() -> None:
    earlier = [*load(CORPUS), *load(SUCCESS_SHAPED), *load(HOLDOUT), *load(HOLDOUT_SHAPED)]
    earlier += [*load(HOLDOUT2), *load(HOLDOUT2_SHAPED), *load(HOLDOUT3), *load(HOLDOUT3_SHAPED)]
    earlier += [*load(HOLDOUT4), *load(HOLDOUT4_SHAPED)]
    fifth = FIFTH + FIFTH_SHAPED
    servers = {r["server"] for r in fifth}
    assert len(servers) >= 5 and not servers & {r["server"] for r in earlier}
    assert not {r["source"] for r in fifth} & {r["source"] for r in earlier}
    new_kinds = {r["kind"] for r in fifth} - {r["kind"] for r in earlier}
    assert len(new_kinds) >= 5, new_kinds
    assert {"python", "node"} <= {s.language for s in HOLDOUT5_SOURCES}
    assert len(FIFTH) >= 60
    assert len({r["id"] for r in fifth}) == len(fifth)


def test_every_label_of_the_fifth_hold_out_uses_catalog_values_only() -> None:
    for r in FIFTH + FIFTH_SHAPED:
        gold = r["gold"]
        assert gold["fault_type"] in BY_TYPE, r["id"]
        assert RepairAction(gold["repair_action"]) and RetrySafety(gold["retry_safety"]), r["id"]
        assert isinstance(gold["transient"], bool), r["id"]
        assert r["success_shaped"] is (r in FIFTH_SHAPED), r["id"]
        assert gold["why"] or gold["fault_type"].startswith(("A1", "B1", "B2")), r["id"]
    for r in FIFTH_SHAPED:  # a success-shaped record is a result that is not flagged as an error
        assert r["raw"]["kind"] == "result" and not r["raw"]["result"].get("isError"), r["id"]


def test_every_record_of_the_fifth_hold_out_replays_and_the_report_scores_it() -> None:
    verdicts = [rules_verdict(r, loso=True) for r in FIFTH]
    assert len(verdicts) == len(FIFTH)
    report = holdout(HOLDOUT5, HOLDOUT5_SHAPED, frozen=False)
    assert f"{len(FIFTH)} records from" in report and "now, LOSO" in report and "as if flagged" in report


def test_accuracy_has_a_holdout5_option(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import benchmarks.errors.accuracy as accuracy

    monkeypatch.setattr(accuracy, "holdout5", lambda diagnosed=None: "the fifth hold-out's section")
    assert main(["--holdout5"]) == 0
    assert "the fifth hold-out's section" in capsys.readouterr().out
