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
)
from benchmarks.errors.holdout4 import HOLDOUT4_SOURCES
from benchmarks.errors.replay import CORPUS, SUCCESS_SHAPED, load
from tests.benchmarks.holdout_checks import (
    assert_accuracy_option,
    assert_catalog_labels,
    assert_fresh_batch,
    assert_replayed_and_scored,
)

FOURTH = load(HOLDOUT4)
FOURTH_SHAPED = load(HOLDOUT4_SHAPED)
EARLIER = [CORPUS, SUCCESS_SHAPED, HOLDOUT, HOLDOUT_SHAPED, HOLDOUT2, HOLDOUT2_SHAPED, HOLDOUT3, HOLDOUT3_SHAPED]


def test_the_fourth_hold_out_is_servers_and_kinds_that_no_earlier_set_has() -> None:
    assert_fresh_batch(FOURTH, FOURTH_SHAPED, EARLIER, {"python", "node", "go"}, HOLDOUT4_SOURCES, new_sources=False)


def test_every_label_of_the_fourth_hold_out_uses_catalog_values_only() -> None:
    assert_catalog_labels(FOURTH, FOURTH_SHAPED)


def test_every_record_of_the_fourth_hold_out_replays_and_the_report_scores_it() -> None:
    assert_replayed_and_scored(FOURTH, HOLDOUT4, HOLDOUT4_SHAPED)


def test_accuracy_has_a_holdout4_option(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    assert_accuracy_option(monkeypatch, capsys, "holdout4")
