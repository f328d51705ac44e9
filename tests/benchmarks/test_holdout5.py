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
)
from benchmarks.errors.holdout5 import HOLDOUT5_SOURCES
from benchmarks.errors.replay import CORPUS, SUCCESS_SHAPED, load
from tests.benchmarks.holdout_checks import (
    assert_accuracy_option,
    assert_catalog_labels,
    assert_fresh_batch,
    assert_replayed_and_scored,
)

FIFTH = load(HOLDOUT5)
FIFTH_SHAPED = load(HOLDOUT5_SHAPED)
EARLIER = [
    CORPUS,
    SUCCESS_SHAPED,
    HOLDOUT,
    HOLDOUT_SHAPED,
    HOLDOUT2,
    HOLDOUT2_SHAPED,
    HOLDOUT3,
    HOLDOUT3_SHAPED,
    HOLDOUT4,
    HOLDOUT4_SHAPED,
]


def test_the_fifth_hold_out_is_servers_and_kinds_that_no_earlier_set_has() -> None:
    assert_fresh_batch(FIFTH, FIFTH_SHAPED, EARLIER, {"python", "node"}, HOLDOUT5_SOURCES)


def test_every_label_of_the_fifth_hold_out_uses_catalog_values_only() -> None:
    assert_catalog_labels(FIFTH, FIFTH_SHAPED)


def test_every_record_of_the_fifth_hold_out_replays_and_the_report_scores_it() -> None:
    assert_replayed_and_scored(FIFTH, HOLDOUT5, HOLDOUT5_SHAPED)


def test_accuracy_has_a_holdout5_option(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    assert_accuracy_option(monkeypatch, capsys, "holdout5")
