"""The accuracy benchmark's diagnosis options: the hold-outs are diagnosed too, a summary of rules vs rules + model
per set, and a live model's answers kept on disk so that a rerun asks nothing (scripted providers, no network)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from benchmarks.errors import accuracy
from benchmarks.errors.accuracy import DIAGNOSIS_SETS, diagnosis_summary, holdout
from benchmarks.errors.measure import AnswerCache, Measured, ScriptedModel, diagnosed_verdicts, measure
from benchmarks.errors.replay import Verdict, load, rules_verdict
from resilient_mcp.diagnosis.providers import Answer


def _scripted(records: list[dict[str, Any]], rules: list[Verdict], loso: bool) -> Measured:
    return diagnosed_verdicts(
        records, rules, noise=0.0, live=None, model="m", api_key_env=None, seed=7, loso=loso, answers=None
    )


def test_a_hold_out_is_diagnosed_beside_its_rules_when_a_model_is_given() -> None:
    report = holdout(frozen=False, diagnosed=_scripted)
    assert "now, LOSO + diagnosis" in report and "Diagnosis by scripted model" in report
    assert "now, LOSO + diagnosis" not in holdout(frozen=False)


def test_the_summary_shows_rules_and_rules_plus_model_on_every_set_and_on_the_asked_records() -> None:
    sets = [DIAGNOSIS_SETS["corpus"], DIAGNOSIS_SETS["holdout4"]]
    table, notes = diagnosis_summary(_scripted, sets)
    rows = [line for line in table.splitlines() if line.startswith("| corpus") or line.startswith("| hold-out")]
    assert [r.split(" | ")[0] for r in rows] == ["| corpus, LOSO", "| hold-out 4, LOSO"]
    for row in rows:
        cells = row.strip("|").split(" | ")
        asked, loosened = int(cells[2]), int(cells[-1].strip())
        assert asked > 0 and loosened == 0
        assert all("→" in c for c in cells[4:12])
    assert len(notes) == 2 and all("asked for" in n for n in notes)


def test_the_command_line_prints_only_the_chosen_sets(capsys: pytest.CaptureFixture[str]) -> None:
    assert accuracy.main(["--scripted", "0", "--diagnosis-summary", "--diagnosis-sets", "holdout3"]) == 0
    out = capsys.readouterr().out
    assert "| hold-out 3, LOSO |" in out and "| corpus" not in out
    with pytest.raises(SystemExit):
        accuracy.main(["--scripted", "0", "--diagnosis-summary", "--diagnosis-sets", "holdout9"])


async def _measure(records: list[dict[str, Any]], rules: list[Verdict], provider: Any) -> Measured:
    return await measure(records, rules, provider, loso=True)


class Counting:
    name = "counting"

    def __init__(self) -> None:
        self.asked = 0

    async def ask(self, system: str, user: str, host: object | None) -> Answer:
        self.asked += 1
        return Answer(json.dumps({"kind": "bad_argument_value", "argument": None, "sure": True}), 50, 5)


def test_a_live_models_answers_are_kept_by_prompt_and_a_rerun_asks_nothing(tmp_path: Path) -> None:
    records = load(DIAGNOSIS_SETS["holdout4"][1])
    rules = [rules_verdict(r, loso=True) for r in records]
    path = tmp_path / "answers.jsonl"
    asked, hits, verdicts = [], [], []
    for _ in range(2):
        inner = Counting()
        cache = AnswerCache(inner, "m1", path)
        verdicts.append(anyio.run(_measure, records, rules, cache).verdicts)
        asked.append(inner.asked)
        hits.append(cache.hits)
    assert asked[0] > 0 and asked[1] == 0 and hits[1] == asked[0]
    assert verdicts[0] == verdicts[1]
    entries = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(entries) == asked[0] and {"key", "model", "text", "ms"} <= set(entries[0])
    assert not any("untrusted_error_text" in line for line in path.read_text().splitlines())  # answers, no prompts
    other = Counting()  # another model name: its own answers
    anyio.run(_measure, records, rules, AnswerCache(other, "m2", path))
    assert other.asked == asked[0]


def test_a_scripted_model_of_the_summary_never_loosens_retry_safety_even_when_always_wrong() -> None:
    records = load(DIAGNOSIS_SETS["holdout2"][1])
    rules = [rules_verdict(r, loso=True) for r in records]
    m = anyio.run(_measure, records, rules, ScriptedModel(1.0, seed=3))
    assert m.asked == len(m.asked_at) > 0 and m.loosened == 0
    assert not any(m.verdicts[i].proxy_retries for i in m.asked_at)
