"""A subset of the benchmark, run again, gives exactly the committed run's episodes (``benchmarks/DIGEST.tsv``).

The subset holds the episodes whose outcome once depended on the machine's speed (the breaker's countdown after a
refused connection, C5; a hang meeting the proxy's attempt timeout, C3) and a write held until verified (D1), in
the three blocks (main, held-out domains, real servers' wordings), for the two reference readers with and without
the proxy. Every clock an episode reads is its own, so this holds on a saturated machine too. When the proxy's
behaviour changes on purpose, regenerate the report and the digest with ``python -m benchmarks.agentbench --seed 7``.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.agentbench.digest import NAME, compare, digest_lines, episode_hash, read_digest
from benchmarks.agentbench.realerrors import VERDICTS, verdict_lines
from benchmarks.agentbench.runner import Job, run_jobs

DIGEST = Path(__file__).resolve().parents[2] / "benchmarks" / NAME
COMMITTED_VERDICTS = DIGEST.with_name(VERDICTS)
SUBSET = (
    "C3-read_only-hang-first",
    "C3-write_unsafe-no_commit-first",
    "C5-read_only-tool_down-first",
    "C5-write_unsafe-tool_down-last",
    "D1-write_unsafe-internal_error-first",
    "D2-read_only-limited_x1-first",
    "H-files-C3-read_only-hang-1of4",
    "H-tix-D1-write_unsafe-internal_error-2of5",
    "R-D5-write_unsafe-move_destination_exists-first",
)


def test_a_subset_run_again_matches_the_committed_digest_episode_by_episode() -> None:
    committed = read_digest(DIGEST)
    jobs = [Job(s, p, m, 7) for s in SUBSET for p in ("strong_reader", "text_reader") for m in ("M0", "M3")]
    episodes = run_jobs(jobs, workers=1)
    assert len(episodes) == len(jobs) and not [e for e in episodes if "error" in e]
    assert compare(committed, episodes) == [], (
        "the benchmark's outcome changed: if on purpose, regenerate with `python -m benchmarks.agentbench --seed 7`"
    )


def test_the_real_error_episodes_were_played_with_the_classifier_as_it_is_now() -> None:
    """The subset above does not hold the real-error episodes (``R-``); their outcome follows from the proxy's
    verdict on each real text, so a classification change that moves a verdict stales their digest lines: this
    compares the verdicts the committed run was played with against the classifier now (milliseconds)."""
    committed = COMMITTED_VERDICTS.read_text(encoding="utf-8").splitlines()
    now = verdict_lines()
    changed = sorted(set(now) - set(committed))
    assert len(now) == len(committed) and not changed, (
        f"the proxy's verdict changed on {len(changed)} real-error scenario(s) ({', '.join(changed[:3])}...): their "
        "episodes in benchmarks/DIGEST.tsv may have too; if on purpose, regenerate both with "
        "`python -m benchmarks.agentbench --seed 7`"
    )


def test_the_digest_hashes_every_scored_field_and_no_wall_clock_field() -> None:
    episode = {"scenario": "s", "policy": "p", "mode": "M0", "seed": 7, "status": "done", "end": "finish"}
    episode |= {"facts": {"0": 40}, "sim_time_s": 1.0, "score": {"success": True}, "wall_s": 3.2}
    base = episode_hash(episode)
    assert episode_hash({**episode, "wall_s": 9.9}) == base
    for field, value in (("status", "failed"), ("facts", {"0": 41}), ("sim_time_s", 1.5), ("score", {})):
        assert episode_hash({**episode, field: value}) != base, field
    assert digest_lines([episode]) == [f"s\tp\tM0\t7\t{base}"]
    assert compare({("s", "p", "M0", 7): base}, [episode]) == []
    assert compare({("s", "p", "M0", 7): "0" * 12}, [episode]) == [
        "('s', 'p', 'M0', 7): differs from the committed run"
    ]
