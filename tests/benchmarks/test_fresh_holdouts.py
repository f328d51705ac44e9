"""The third to sixth fresh hold-outs (benchmarks/errors/holdout3.jsonl … holdout6.jsonl): each is servers of kinds
that neither the corpus nor an earlier hold-out has, well-formed, labelled with catalog values only, replayable,
scored by accuracy.py, and printed alone by its ``--holdoutN`` option."""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

import pytest

from benchmarks.errors import accuracy, holdout3, holdout4, holdout5, holdout6
from benchmarks.errors.replay import CORPUS, SUCCESS_SHAPED, load
from tests.benchmarks.holdout_checks import (
    assert_accuracy_option,
    assert_catalog_labels,
    assert_fresh_batch,
    assert_replayed_and_scored,
)

SETS: list[tuple[Path, Path]] = [
    (CORPUS, SUCCESS_SHAPED),
    (accuracy.HOLDOUT, accuracy.HOLDOUT_SHAPED),
    (accuracy.HOLDOUT2, accuracy.HOLDOUT2_SHAPED),
    (accuracy.HOLDOUT3, accuracy.HOLDOUT3_SHAPED),
    (accuracy.HOLDOUT4, accuracy.HOLDOUT4_SHAPED),
    (accuracy.HOLDOUT5, accuracy.HOLDOUT5_SHAPED),
    (accuracy.HOLDOUT6, accuracy.HOLDOUT6_SHAPED),
]
"""Every set in the order it was collected: the corpus, then hold-out n at index n (the first at 1)."""


class Fresh(NamedTuple):
    n: int
    languages: set[str]
    sources: list[Any]
    new_sources: bool
    """Whether its sources are new too (the third and fourth hold-outs reused a source name of an earlier set)."""
    explained: bool = True
    """Whether every label says why (the third hold-out's labels do not)."""


FRESH = [
    Fresh(3, {"python", "node"}, holdout3.HOLDOUT3_SOURCES, False, explained=False),
    Fresh(4, {"python", "node", "go"}, holdout4.HOLDOUT4_SOURCES, False),
    Fresh(5, {"python", "node"}, holdout5.HOLDOUT5_SOURCES, True),
    Fresh(6, {"python", "node"}, holdout6.HOLDOUT6_SOURCES, True),
]
IDS = [f"holdout{f.n}" for f in FRESH]


def _batch(n: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    errors, shaped = SETS[n]
    return load(errors), load(shaped)


@pytest.mark.parametrize("fresh", FRESH, ids=IDS)
def test_a_hold_out_is_servers_and_kinds_that_no_earlier_set_has(fresh: Fresh) -> None:
    earlier = [path for pair in SETS[: fresh.n] for path in pair]
    assert_fresh_batch(*_batch(fresh.n), earlier, fresh.languages, fresh.sources, new_sources=fresh.new_sources)


@pytest.mark.parametrize("fresh", FRESH, ids=IDS)
def test_every_label_of_a_hold_out_uses_catalog_values_only(fresh: Fresh) -> None:
    assert_catalog_labels(*_batch(fresh.n), explained=fresh.explained)


@pytest.mark.parametrize("fresh", FRESH, ids=IDS)
def test_every_record_of_a_hold_out_replays_and_the_report_scores_it(fresh: Fresh) -> None:
    errors, _ = _batch(fresh.n)
    assert_replayed_and_scored(errors, *SETS[fresh.n])


@pytest.mark.parametrize("fresh", FRESH, ids=IDS)
def test_accuracy_has_an_option_per_hold_out(
    fresh: Fresh, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert_accuracy_option(monkeypatch, capsys, f"holdout{fresh.n}")
