"""The report's honest part: gains split by what they need from the agent, paired comparisons with intervals
resampled by scenario variant, every place the proxy makes an agent worse, and the catalog's remaining metrics.

A scenario *variant* (fault type, target class, variant name) is the effective unit: its trigger positions and
seeds almost always give the same outcome, so intervals resample variants (a cluster bootstrap), not episodes.
Comparisons are paired: the same variant and seed in two modes. ``paired`` gives the mean difference with a
bootstrap interval and an exact McNemar test over the discordant (scenario, seed) pairs.
"""

from __future__ import annotations

import math
from collections import defaultdict
from random import Random
from typing import Any

BOOT = 2000
BLIND = ("blind_retry", "give_up")
"""Agents that never read an error: their gain is what the proxy does on its own."""
READERS = ("strong_reader", "text_reader", "repair_follower")
STRONG = "strong_reader"
"""The reference reader of the headline: the strong reader (``strong.py``); text_reader is the second row."""


def _by_variant(rows: list[dict[str, Any]], policy: str, mode: str) -> dict[tuple[str, str, int], float]:
    return {
        (r["variant"], r["scenario"], r["seed"]): float(r["success"])
        for r in rows
        if r["policy"] == policy and r["mode"] == mode
    }


def _cluster_means(cells: dict[tuple[str, str, int], float]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = defaultdict(list)
    for (variant, _, _), v in cells.items():
        out[variant].append(v)
    return out


def _boot(groups: dict[str, list[float]], seed: int = 0) -> tuple[float, float, float]:
    """Mean over all cells, and a 95 % percentile interval resampling whole variants."""
    keys = sorted(groups)
    if not keys:
        return math.nan, math.nan, math.nan
    total = sum(sum(v) for v in groups.values()) / sum(len(v) for v in groups.values())
    rng = Random(seed)
    stats = []
    for _ in range(BOOT):
        pick = [groups[keys[rng.randrange(len(keys))]] for _ in keys]
        n = sum(len(v) for v in pick)
        stats.append(sum(sum(v) for v in pick) / n)
    stats.sort()
    return total, stats[int(0.025 * BOOT)], stats[int(0.975 * BOOT) - 1]


def rate(rows: list[dict[str, Any]], policy: str, mode: str) -> tuple[float, float, float, int]:
    cells = _by_variant(rows, policy, mode)
    m, lo, hi = _boot(_cluster_means(cells))
    return m, lo, hi, len(_cluster_means(cells))


def mcnemar(b: int, c: int) -> float:
    """Exact two-sided McNemar p-value for b and c discordant pairs."""
    n = b + c
    if n == 0:
        return 1.0
    k = min(b, c)
    p = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * p)


def paired(rows: list[dict[str, Any]], a: tuple[str, str], b: tuple[str, str]) -> dict[str, Any]:
    """(policy, mode) b minus (policy, mode) a over the cells both have: difference, variant-bootstrap interval,
    discordant pairs and McNemar's p."""
    ca, cb = _by_variant(rows, *a), _by_variant(rows, *b)
    common = sorted(set(ca) & set(cb))
    diffs: dict[str, list[float]] = defaultdict(list)
    for key in common:
        diffs[key[0]].append(cb[key] - ca[key])
    m, lo, hi = _boot(diffs)
    better = sum(1 for k in common if cb[k] > ca[k])
    worse = sum(1 for k in common if cb[k] < ca[k])
    return {
        "diff": m,
        "lo": lo,
        "hi": hi,
        "better": better,
        "worse": worse,
        "p": mcnemar(better, worse),
        "pairs": len(common),
        "variants": len(diffs),
    }


def _pp(x: float) -> str:
    return "-" if math.isnan(x) else f"{100 * x:+.1f}"


def _pc(x: float) -> str:
    return "-" if math.isnan(x) else f"{100 * x:.1f}%"


def fmt_paired(d: dict[str, Any]) -> str:
    return (
        f"{_pp(d['diff'])} pts [{_pp(d['lo'])}, {_pp(d['hi'])}] ({d['better']} better / {d['worse']} worse, "
        f"McNemar p={d['p']:.3g})"
    )


def fmt_rate(rows: list[dict[str, Any]], policy: str, mode: str) -> str:
    m, lo, hi, _ = rate(rows, policy, mode)
    return f"{_pc(m)} [{_pc(lo)}-{_pc(hi)}]"


def split(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The two headline gains, per policy with equal weights."""
    policies = sorted({r["policy"] for r in rows})
    out: dict[str, Any] = {"per_policy": {}}
    for p in policies:
        out["per_policy"][p] = {
            f"{m}-M0": paired(rows, (p, "M0"), (p, m))
            for m in ("M1", "M3", "M4")
            if any(r["policy"] == p and r["mode"] == m for r in rows)
        }
    blind = [out["per_policy"][p]["M1-M0"] for p in BLIND if "M1-M0" in out["per_policy"].get(p, {})]
    out["agent_independent"] = _equal(rows, [(p, "M0", "M1") for p in BLIND if p in policies])
    out["agent_independent_parts"] = blind
    reader = STRONG if any(r["policy"] == STRONG for r in rows) else "text_reader"
    out["reader"] = reader
    out["reading_gain"] = paired(rows, (reader, "M0"), (reader, "M3"))
    out["reading_gain_text"] = paired(rows, ("text_reader", "M0"), ("text_reader", "M3"))
    out["follower_over_baseline"] = paired(rows, (reader, "M0"), ("repair_follower", "M3"))
    return out


def _equal(rows: list[dict[str, Any]], triples: list[tuple[str, str, str]]) -> dict[str, Any]:
    """Mean over policies (equal weights) of each policy's paired difference, resampling variants jointly."""
    per: dict[str, dict[str, list[float]]] = {}
    for p, a, b in triples:
        ca, cb = _by_variant(rows, p, a), _by_variant(rows, p, b)
        d: dict[str, list[float]] = defaultdict(list)
        for key in set(ca) & set(cb):
            d[key[0]].append(cb[key] - ca[key])
        per[p] = d
    if not per:
        return {"diff": math.nan, "lo": math.nan, "hi": math.nan}
    variants = sorted(set().union(*(set(d) for d in per.values())))
    rng = Random(1)

    def stat(pick: list[str]) -> float:
        vals = []
        for d in per.values():
            cells = [x for v in pick for x in d.get(v, [])]
            vals.append(sum(cells) / len(cells) if cells else 0.0)
        return sum(vals) / len(vals)

    boots = sorted(stat([variants[rng.randrange(len(variants))] for _ in variants]) for _ in range(BOOT))
    return {"diff": stat(variants), "lo": boots[int(0.025 * BOOT)], "hi": boots[int(0.975 * BOOT) - 1]}


def hurts(rows: list[dict[str, Any]], episodes: list[dict[str, Any]], modes: tuple[str, ...]) -> list[list[Any]]:
    """Every (policy, variant, mode) where the agent succeeded directly and failed through the proxy, with the
    first text it got through the proxy that differs from what it got directly (the reason, in the proxy's words)."""
    ok0 = {(r["policy"], r["scenario"], r["seed"]): r["success"] for r in rows if r["mode"] == "M0"}
    texts = {
        (e["policy"], e["scenario"], e["mode"], e["seed"]): [
            x.get("text") for x in e.get("events", []) if x.get("kind") == "call" and not x.get("ok")
        ]
        for e in episodes
    }
    found: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    for r in rows:
        if (
            r["mode"] in modes
            and r["mode"] != "M0"
            and ok0.get((r["policy"], r["scenario"], r["seed"]))
            and not r["success"]
        ):
            direct = texts.get((r["policy"], r["scenario"], "M0", r["seed"]), [])
            mine = texts.get((r["policy"], r["scenario"], r["mode"], r["seed"]), [])
            why = next((t for t in mine if t not in direct), mine[-1] if mine else "(no error: a different result)")
            found[(r["variant"], r["mode"], r["policy"])].append(str(why).replace("\n", " ").replace("|", "/")[:150])
    return [[v.replace("|", " "), m, p, len(ws), ws[0]] for (v, m, p), ws in sorted(found.items())]


def catalog_metrics(rows: list[dict[str, Any]], modes: tuple[str, ...]) -> list[list[Any]]:
    """Per mode: F4 attack success, observation cost."""
    out = []
    for m in modes:
        g = [r for r in rows if r["mode"] == m]
        f4 = [r for r in g if r["fault"].startswith("F4")]
        attack = sum(1 for r in f4 if r["injected_ran"] or r["unintended_writes"] or r["unapproved_destructive"])
        errs = [b for r in g for b in r["error_bytes"]]
        out.append(
            [
                m,
                f"{attack}/{len(f4)}",
                f"{sum(errs) / len(errs):.0f} B ≈ {sum(errs) / len(errs) / 4:.0f} tokens" if errs else "-",
            ]
        )
    return out


def recovery_time(rows: list[dict[str, Any]], mode: str) -> str:
    """Median episode time (virtual seconds) from the failure the agent saw to its next successful call, with n."""
    ttr = sorted(r["time_to_recovery_s"] for r in rows if r["mode"] == mode and r.get("time_to_recovery_s") is not None)
    return f"{ttr[len(ttr) // 2]:.2f} s (n={len(ttr)})" if ttr else "-"


def pass_k(rows: list[dict[str, Any]], policy: str, mode: str, k: int) -> tuple[float, int]:
    """pass^k: the share of scenarios whose k seeded runs all succeeded (seeds drive probabilistic faults)."""
    by: dict[str, list[bool]] = defaultdict(list)
    for r in rows:
        if r["policy"] == policy and r["mode"] == mode:
            by[r["scenario"]].append(bool(r["success"]))
    full = [v for v in by.values() if len(v) >= k]
    return (sum(all(v[:k]) for v in full) / len(full) if full else math.nan), len(full)
