"""The fourth fresh hold-out (benchmarks/errors/holdout4.jsonl): servers of kinds neither the corpus nor the first three
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
    HOLDOUT_SHAPED,
    main,
)
from benchmarks.errors.holdout4 import HOLDOUT4_SOURCES
from benchmarks.errors.replay import CORPUS, SUCCESS_SHAPED, load
from tests.benchmarks.holdout_checks import assert_catalog_labels, assert_replayed_and_scored

FOURTH = load(HOLDOUT4)
FOURTH_SHAPED = load(HOLDOUT4_SHAPED)


def test_the_fourth_hold_out_is_servers_and_kinds_that_no_earlier_set_has() -> None:
    earlier = [*load(CORPUS), *load(SUCCESS_SHAPED), *load(HOLDOUT), *load(HOLDOUT_SHAPED)]
    earlier += [*load(HOLDOUT2), *load(HOLDOUT2_SHAPED), *load(HOLDOUT3), *load(HOLDOUT3_SHAPED)]
    fourth = FOURTH + FOURTH_SHAPED
    servers = {r["server"] for r in fourth}
    assert len(servers) >= 5 and not servers & {r["server"] for r in earlier}
    new_kinds = {r["kind"] for r in fourth} - {r["kind"] for r in earlier}
    assert len(new_kinds) >= 5, new_kinds
    assert {"python", "node", "go"} <= {s.language for s in HOLDOUT4_SOURCES}
    assert len(FOURTH) >= 60
    assert len({r["id"] for r in fourth}) == len(fourth)


def test_every_label_of_the_fourth_hold_out_uses_catalog_values_only() -> None:
    assert_catalog_labels(FOURTH, FOURTH_SHAPED)


def test_every_record_of_the_fourth_hold_out_replays_and_the_report_scores_it() -> None:
    assert_replayed_and_scored(FOURTH, HOLDOUT4, HOLDOUT4_SHAPED)


def test_accuracy_has_a_holdout4_option(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import benchmarks.errors.accuracy as accuracy

    monkeypatch.setattr(accuracy, "holdout4", lambda diagnosed=None: "the fourth hold-out's section")
    assert main(["--holdout4"]) == 0
    assert "the fourth hold-out's section" in capsys.readouterr().out
