"""The corpus and the read hold-outs pooled (``accuracy --pooled``, judge9): every set of the pool is counted, and
the harmful verdicts over it stay at the three that no text shows (a bare 503 for a query timeout, a port that
wrapped around, the proxy's own start-up fault recorded as collected), whether the held-out server's own wordings
are off (LOSO) or every wording only it used too (strict)."""

from __future__ import annotations

from benchmarks.errors.accuracy import POOLED, harms, pooled
from benchmarks.errors.replay import load, rules_verdict, strict_verdicts

RECORDS = [r for path in POOLED.values() for r in load(path)]
LEFT = {"prometheus-004-query_timeout", "mqtt-005-port_out_of_range", "mysql-npm-badauth-001-startup_wrong_password"}


def test_the_pool_prints_every_set_and_the_pooled_row() -> None:
    out = pooled()
    assert f"{len(RECORDS)} records" in out
    for name in POOLED:
        assert f"| {name} |" in out
    assert "| **pooled** |" in out and "| **harmful-verdict rate** |" in out


def test_no_harmful_verdict_over_the_pool_but_the_three_no_text_shows() -> None:
    loso = {r["id"] for r in RECORDS if harms(r, rules_verdict(r, loso=True))}
    strict = {r["id"] for r, v in zip(RECORDS, strict_verdicts(RECORDS), strict=True) if harms(r, v)}
    assert loso <= LEFT and strict <= LEFT, (loso - LEFT, strict - LEFT)
