"""A compact digest of every episode of a run, committed next to RESULTS.md so that a new run can be compared with
the committed one (``same``) without committing the whole results file.

One line per episode: ``scenario policy mode seed hash``, where the hash (12 hex digits of SHA-256) covers every
field scoring and the report read: status, how the episode ended, the reported facts, the simulated time and the
whole score. Wall-clock fields are not in it. ``benchmarks/DIGEST.tsv`` is written by every full run
(``python -m benchmarks.agentbench --seed 7``); ``tests/benchmarks/test_agentbench_digest.py`` re-runs a subset of
scenarios and compares their lines with it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from resilient_mcp.text import canonical_json

NAME = "DIGEST.tsv"
SCORED = ("status", "end", "facts", "sim_time_s", "score")
Key = tuple[str, str, str, int]


def key_of(e: dict[str, Any]) -> Key:
    return (e["scenario"], e["policy"], e["mode"], int(e["seed"]))


def episode_hash(e: dict[str, Any]) -> str:
    """The hash of an episode's scored fields (a harness error is hashed as such)."""
    fields = {k: e.get(k) for k in (*SCORED, "error")}
    return hashlib.sha256(canonical_json(fields).encode()).hexdigest()[:12]


def digest_lines(episodes: Iterable[dict[str, Any]]) -> list[str]:
    rows = sorted((key_of(e), episode_hash(e)) for e in episodes)
    return [f"{s}\t{p}\t{m}\t{seed}\t{h}" for (s, p, m, seed), h in rows]


def write_digest(episodes: Iterable[dict[str, Any]], root: Path) -> Path:
    path = root / NAME
    path.write_text("\n".join(digest_lines(episodes)) + "\n", encoding="utf-8")
    return path


def read_digest(path: Path) -> dict[Key, str]:
    out: dict[Key, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            s, p, m, seed, h = line.split("\t")
            out[(s, p, m, int(seed))] = h
    return out


def compare(committed: dict[Key, str], episodes: Iterable[dict[str, Any]]) -> list[str]:
    """Every episode of a (possibly partial) new run whose hash differs from the committed one, or that the
    committed digest does not have."""
    notes = []
    for e in episodes:
        key = key_of(e)
        if key not in committed:
            notes.append(f"not in the committed digest: {key}")
        elif committed[key] != episode_hash(e):
            notes.append(f"{key}: differs from the committed run")
    return notes
