"""The second fresh hold-out (benchmarks/errors/holdout2.jsonl): servers of kinds neither the corpus nor the first
hold-out has, well-formed, replayable, and scored by accuracy.py beside the first."""

from __future__ import annotations

from benchmarks.errors.accuracy import HOLDOUT, HOLDOUT2, HOLDOUT2_SHAPED, HOLDOUT_SHAPED, holdout
from benchmarks.errors.holdout2 import HOLDOUT2_SOURCES, one_page_pdf
from benchmarks.errors.replay import CORPUS, SUCCESS_SHAPED, load, rules_verdict
from resilient_mcp.faults import BY_TYPE, RepairAction, RetrySafety

SECOND = load(HOLDOUT2)
SECOND_SHAPED = load(HOLDOUT2_SHAPED)


def test_the_second_hold_out_is_servers_and_kinds_that_neither_the_corpus_nor_the_first_hold_out_has() -> None:
    earlier = load(CORPUS) + load(SUCCESS_SHAPED) + load(HOLDOUT) + load(HOLDOUT_SHAPED)
    second = SECOND + SECOND_SHAPED
    servers = {r["server"] for r in second}
    assert len(servers) >= 5 and not servers & {r["server"] for r in earlier}
    new_kinds = {r["kind"] for r in second} - {r["kind"] for r in earlier}
    assert len(new_kinds) >= 5, new_kinds
    assert {"python", "node"} <= {s.language for s in HOLDOUT2_SOURCES}
    assert len({r["id"] for r in second}) == len(second) >= 80
    for r in second:
        gold = r["gold"]
        assert gold["fault_type"] in BY_TYPE and RepairAction(gold["repair_action"]), r["id"]
        assert RetrySafety(gold["retry_safety"]), r["id"]
        assert r["success_shaped"] is (r in SECOND_SHAPED), r["id"]


def test_every_record_of_the_second_hold_out_replays_and_the_report_scores_it_beside_the_first() -> None:
    verdicts = [rules_verdict(r, loso=True) for r in SECOND]
    assert len(verdicts) == len(SECOND)
    report = holdout(HOLDOUT2, HOLDOUT2_SHAPED, frozen=False)
    assert f"{len(SECOND)} records from" in report and "now, LOSO" in report and "as if flagged" in report


def test_the_hand_written_pdf_has_an_xref_whose_offsets_point_at_its_objects() -> None:
    pdf = one_page_pdf("Invoice")
    xref_at = int(pdf.rsplit(b"startxref\n", 1)[1].split(b"\n", 1)[0])
    assert pdf[xref_at:].startswith(b"xref\n")
    rows = pdf[xref_at:].split(b"\n")[3:8]
    for number, row in enumerate(rows, 1):
        assert pdf[int(row[:10]) :].startswith(b"%d 0 obj" % number)
