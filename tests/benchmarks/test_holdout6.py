"""The sixth fresh hold-out (benchmarks/errors/holdout6.jsonl): servers of kinds neither the corpus nor the first five
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
    HOLDOUT6,
    HOLDOUT6_SHAPED,
    HOLDOUT_SHAPED,
    main,
)
from benchmarks.errors.holdout6 import HOLDOUT6_SOURCES
from benchmarks.errors.replay import CORPUS, SUCCESS_SHAPED, load
from tests.benchmarks.holdout_checks import assert_catalog_labels, assert_replayed_and_scored

SIXTH = load(HOLDOUT6)
SIXTH_SHAPED = load(HOLDOUT6_SHAPED)


def test_the_sixth_hold_out_is_servers_and_kinds_that_no_earlier_set_has() -> None:
    earlier = [*load(CORPUS), *load(SUCCESS_SHAPED), *load(HOLDOUT), *load(HOLDOUT_SHAPED)]
    earlier += [*load(HOLDOUT2), *load(HOLDOUT2_SHAPED), *load(HOLDOUT3), *load(HOLDOUT3_SHAPED)]
    earlier += [*load(HOLDOUT4), *load(HOLDOUT4_SHAPED), *load(HOLDOUT5), *load(HOLDOUT5_SHAPED)]
    sixth = SIXTH + SIXTH_SHAPED
    servers = {r["server"] for r in sixth}
    assert len(servers) >= 5 and not servers & {r["server"] for r in earlier}
    assert not {r["source"] for r in sixth} & {r["source"] for r in earlier}
    new_kinds = {r["kind"] for r in sixth} - {r["kind"] for r in earlier}
    assert len(new_kinds) >= 5, new_kinds
    assert {"python", "node"} <= {s.language for s in HOLDOUT6_SOURCES}
    assert len(SIXTH) >= 60
    assert len({r["id"] for r in sixth}) == len(sixth)


def test_every_label_of_the_sixth_hold_out_uses_catalog_values_only() -> None:
    assert_catalog_labels(SIXTH, SIXTH_SHAPED)


def test_every_record_of_the_sixth_hold_out_replays_and_the_report_scores_it() -> None:
    assert_replayed_and_scored(SIXTH, HOLDOUT6, HOLDOUT6_SHAPED)


def test_accuracy_has_a_holdout6_option(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import benchmarks.errors.accuracy as accuracy

    monkeypatch.setattr(accuracy, "holdout6", lambda diagnosed=None: "the sixth hold-out's section")
    assert main(["--holdout6"]) == 0
    assert "the sixth hold-out's section" in capsys.readouterr().out
