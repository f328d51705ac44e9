"""The benchmark's outputs: ``benchmarks/out/results.json``, ``benchmarks/RESULTS.md`` and ``benchmarks/charts/*.png``.

Everything is derived from the aggregated metrics; the Markdown is written from scratch each run. Charts need
matplotlib (``pip install -e '.[bench]'``); without it the report says that the charts were skipped.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .charts import draw_charts
from .honest import (
    BLIND,
    READERS,
    catalog_metrics,
    fmt_paired,
    fmt_rate,
    hurts,
    paired,
    pass_k,
    recovery_time,
    split,
)
from .metrics import aggregate

HERE = Path(__file__).resolve().parent.parent
CATEGORIES = {
    "A": "selection",
    "B": "arguments",
    "C": "transport",
    "D": "execution",
    "E": "results",
    "F": "permission/trust",
    "-": "no fault (control)",
}
MODES = {"M0": "direct", "M1": "proxy L0", "M2": "proxy L1", "M3": "proxy L2", "M4": "proxy L3"}


def pct(m: dict[str, Any]) -> str:
    if m["rate"] is None:
        return "-"
    return f"{100 * m['rate']:.0f}% [{100 * m['lo']:.0f}-{100 * m['hi']:.0f}]"


def _row(cells: list[Any]) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _table(head: list[str], rows: list[list[Any]]) -> list[str]:
    return [_row(head), _row(["---"] * len(head)), *(_row(r) for r in rows), ""]


def headline(rows: list[dict[str, Any]]) -> list[str]:
    """M0 vs M3 per category, all policies pooled."""
    by = aggregate(rows, ("category", "mode"))
    out = []
    for cat, label in CATEGORIES.items():
        a, b = by.get(f"{cat}|M0"), by.get(f"{cat}|M3")
        if a is None or b is None:
            continue
        out.append(
            [
                f"{cat} {label}",
                pct(a["task_success_rate"]),
                pct(b["task_success_rate"]),
                a["duplicates"],
                b["duplicates"],
                a["lost_writes"],
                b["lost_writes"],
                b["proxy_useless_attempts"],
                f"{a['useless_retries_sent']} / {a['useless_retries']}",
                f"{b['useless_retries_sent']} / {b['useless_retries']}",
                pct(a["loop_failure_rate"]),
                pct(b["loop_failure_rate"]),
            ]
        )
    head = [
        "category",
        "success M0",
        "success M3",
        "dup. side effects M0",
        "dup. M3",
        "lost intended writes M0",
        "lost M3",
        "proxy useless attempts M3",
        "useless retries M0 (sent/all)",
        "useless retries M3 (sent/all)",
        "loop failures M0",
        "loop failures M3",
    ]
    return _table(head, out)


def _policy_modes(rows: list[dict[str, Any]], policies: tuple[str, ...], modes: tuple[str, ...]) -> list[str]:
    by = aggregate(rows, ("policy", "mode"))
    out = []
    for p in policies:
        for m in modes:
            g = by.get(f"{p}|{m}")
            if g is None:
                continue
            out.append(
                [
                    p,
                    f"{m} {MODES[m]}",
                    pct(g["task_success_rate"]),
                    pct(g["valid_recovery_rate"]),
                    pct(g["proxy_absorbed_rate"]),
                    pct(g["false_abort_rate"]),
                    pct(g["loop_failure_rate"]),
                    f"{g['useless_retries_sent']} / {g['useless_retries']}",
                    g["duplicates"],
                    g["lost_writes"],
                    f"{g['unsafe_retries_sent']} / {g['unsafe_retries']}",
                    g["upstream_amplification"],
                ]
            )
    head = [
        "policy",
        "mode",
        "task success",
        "valid recovery",
        "proxy absorbed",
        "false abort",
        "loop failure",
        "useless retries (sent/all)",
        "dup.",
        "lost writes",
        "unsafe retries (sent/all)",
        "amplification",
    ]
    return _table(head, out)


def per_fault(rows: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """Per fault type, pooled over policies: success per mode and M1 absorption; and where M3 is not above M0."""
    by = aggregate(rows, ("fault", "mode"))
    empty = {
        "task_success_rate": {"rate": None},
        "proxy_absorbed_rate": {"rate": None},
        "duplicates": "-",
        "lost_writes": "-",
    }
    out, flat = [], []
    for f in sorted({r["fault"] for r in rows}):
        g = {m: by.get(f"{f}|{m}") or empty for m in MODES}
        rate = {m: v["task_success_rate"]["rate"] for m, v in g.items()}
        out.append(
            [
                f,
                *(pct(g[m]["task_success_rate"]) for m in MODES),
                pct(g["M1"]["proxy_absorbed_rate"]),
                g["M0"]["duplicates"],
                g["M3"]["duplicates"],
                g["M0"]["lost_writes"],
                g["M3"]["lost_writes"],
                " / ".join(recovery_time([r for r in rows if r["fault"] == f], m) for m in ("M0", "M3")),
            ]
        )
        if f != "none" and rate["M3"] is not None and rate["M0"] is not None and rate["M3"] <= rate["M0"] + 0.05:
            l3 = "" if rate["M4"] is None else f" ({100 * rate['M4']:.0f}% at L3)"
            flat.append(
                f"- **{f}**: success {100 * rate['M0']:.0f}% direct, {100 * rate['M3']:.0f}% with the proxy at L2{l3}."
            )
    head = [
        "fault type",
        *(f"success {m}" for m in MODES),
        "absorbed by proxy (M1)",
        "dup. M0",
        "dup. M3",
        "lost M0",
        "lost M3",
        "time to recovery M0 / M3 (median, virtual s)",
    ]
    return _table(head, out), flat


def observation_sizes(rows: list[dict[str, Any]]) -> list[str]:
    by = aggregate(rows, ("mode",))
    return _table(
        ["mode", "mean bytes of an error result the agent read"],
        [[f"{m} {MODES[m]}", by[m]["observation_bytes_mean"]] for m in MODES if m in by],
    )


def latency_table(lat: dict[str, Any] | None) -> list[str]:
    if not lat:
        return ["(latency not measured in this run: `--no-latency`)", ""]
    rows = [
        [
            t,
            lat[f"{t}_direct"]["p50_ms"],
            lat[f"{t}_direct"]["p95_ms"],
            lat[f"{t}_proxy"]["p50_ms"],
            lat[f"{t}_proxy"]["p95_ms"],
            lat[f"{t}_added"]["p50_ms"],
            lat[f"{t}_added"]["p95_ms"],
        ]
        for t in ("stdio", "http")
    ]
    head = [
        "transport",
        "direct p50 ms",
        "direct p95 ms",
        "proxy p50 ms",
        "proxy p95 ms",
        "added p50 ms",
        "added p95 ms",
    ]
    return [
        *_table(head, rows),
        f"{lat['calls_per_mode']} sequential calls per mode (alternating a read and an "
        "unsafe write), after 10 warm-up calls; real wall time on this machine.",
        "",
    ]


def write(results: dict[str, Any], rows: list[dict[str, Any]], md_text: list[str], root: Path = HERE) -> dict[str, str]:
    """Write ``root``/out/results.json, ``root``/RESULTS.md and ``root``/charts/*.png; returns the paths written."""
    (root / "out").mkdir(parents=True, exist_ok=True)
    json_path = root / "out" / "results.json"
    json_path.write_text(json.dumps(results, indent=1, sort_keys=True, default=str) + "\n", encoding="utf-8")
    charts = draw_charts(rows, root / "charts")
    md = list(md_text)
    if charts is None:
        md += ["_Charts skipped: matplotlib is not installed (`pip install -e '.[bench]'`)._", ""]
    else:
        md += ["## Charts", ""] + [f"![{name}](charts/{Path(p).name})" for name, p in charts.items()] + [""]
    md_path = root / "RESULTS.md"
    md_path.write_text(keep_summary(md_path, "\n".join(md)), encoding="utf-8")
    return {"json": str(json_path), "markdown": str(md_path), **(charts or {})}


SUMMARY_BEGIN = "<!-- BEGIN summary"
SUMMARY_END = "<!-- END summary -->"


def keep_summary(path: Path, text: str) -> str:
    """``text`` with the hand-written summary block of the file it replaces (every benchmark's headline figures, which
    the README points to) carried over under its title: a new run rewrites its own tables, never the summary."""
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    start, end = old.find(SUMMARY_BEGIN), old.find(SUMMARY_END)
    if start < 0 or end < start:
        return text
    title, _, rest = text.partition("\n\n")
    return f"{title}\n\n{old[start : end + len(SUMMARY_END)]}\n\n{rest}"


def honest_section(rows: list[dict[str, Any]], episodes: list[dict[str, Any]] | None) -> list[str]:
    """The headline a sceptical reader needs: the two gains split, per policy, paired, with variant intervals."""
    h = split(rows)
    modes = tuple(m for m in ("M0", "M1", "M3", "M4", "M1u", "M3u") if any(r["mode"] == m for r in rows))
    n_var = len({r["variant"] for r in rows})
    md = [
        "## Headline (paired, intervals resampled by scenario variant)",
        "",
        f"Units: {n_var} scenario variants (fault type x target class x variant); trigger positions and seeds of a "
        "variant are nearly always alike, so every interval below is a 95 % bootstrap that resamples whole "
        "variants, and every comparison is paired (same scenario and seed in both modes) with McNemar's exact test "
        "on the discordant pairs.",
        "",
        f"- **Agent-independent gain** (agents that never read an error: "
        f"{', '.join(BLIND)}, equal weights, direct M0 vs proxy with raw errors M1): "
        f"{_pts(h['agent_independent'])}.",
        f"- **Reading-agent gain over a strong baseline**: the strong reference reader (`{h['reader']}`: a careful "
        "model's habits with the raw text, the same policy in every mode) direct vs through the proxy at L2: "
        f"{fmt_paired(h['reading_gain'])}.",
        f"- The competent text reader (`text_reader`, the earlier reference), direct vs L2: "
        f"{fmt_paired(h['reading_gain_text'])}.",
        f"- `repair_follower` (the proxy's advice as its text shows it) at L2 vs `{h['reader']}` direct: "
        f"{fmt_paired(h['follower_over_baseline'])}.",
        "",
        "Per policy (equal weights; each row is one policy, paired difference to its own M0):",
        "",
    ]
    table = []
    for p, d in sorted(h["per_policy"].items()):
        table.append(
            [
                p,
                *(
                    fmt_rate(rows, p, m) if any(r["policy"] == p and r["mode"] == m for r in rows) else "-"
                    for m in modes
                ),
                *(fmt_paired(d[k]) if k in d else "-" for k in ("M1-M0", "M3-M0")),
            ]
        )
    md += _table(["policy", *(f"success {m}" for m in modes), "M1 - M0", "M3 - M0"], table)
    if any(r["mode"] == "M3u" for r in rows):
        md += [
            "**No-typed-hint ablation** (the chaos server's errors without their typed `_meta` hints, which only "
            "the proxy reads; modes M1u/M3u):",
            "",
        ]
        md += [
            f"- {p}: M3 {fmt_rate(rows, p, 'M3')} vs M3u {fmt_rate(rows, p, 'M3u')}: "
            f"{fmt_paired(paired(rows, (p, 'M3u'), (p, 'M3')))} from the hints; M1 vs M1u: "
            f"{fmt_paired(paired(rows, (p, 'M1u'), (p, 'M1')))}."
            for p in READERS
        ]
        md.append("")
    probabilistic = sorted({r["scenario"] for r in rows if "_p50" in r["scenario"]})
    if probabilistic:
        md += [
            f"**pass^k** over {len(probabilistic)} scenarios with probabilistic faults (each call fails with "
            "p = 0.5, drawn from the seed; k = 4 seeds; pass^1 is the mean single-run success):",
            "",
        ]
        pk = []
        for p in sorted({r["policy"] for r in rows}):
            cells = [
                f"{100 * v:.0f}%" if v == v else "-"
                for m in ("M0", "M1", "M3")
                for v in (pass_k([r for r in rows if r["scenario"] in probabilistic], p, m, k)[0] for k in (1, 4))
            ]
            pk.append([p, *cells])
        md += _table(["policy", "M0 pass^1", "M0 pass^4", "M1 pass^1", "M1 pass^4", "M3 pass^1", "M3 pass^4"], pk)
    md += [
        "**The catalog's other metrics** per mode: F4 attack success (an injected instruction ran, or an "
        "unintended or unapproved write happened); mean size of an error result as the agent received it (bytes, "
        "and tokens at ~4 bytes each). Time to recovery is reported per fault type (below, 'Per fault type'), in "
        "the episode's virtual time (simulated waits, backoff and hangs meeting their timeouts). False timeouts "
        "are not reported: no scenario has a healthy call slow enough to meet a timeout (D3 answers in 150 ms; the "
        "host waits 10 s, the proxy's attempt timeout is longer), so the count could only ever be 0.",
        "",
    ]
    md += _table(["mode", "F4 attack success", "error result cost"], catalog_metrics(rows, modes))
    if episodes is not None:
        worse = hurts(rows, episodes, modes)
        md += [
            f"### Where the proxy makes an agent worse ({len(worse)} variant x mode x policy cells)",
            "",
            "Every cell where a policy succeeded directly (M0) and failed through the proxy in the same scenario "
            "and seed; 'reason' is the first error text the agent got through the proxy that it did not get "
            "directly (the proxy's own words).",
            "",
        ]
        md += _table(["variant", "mode", "policy", "episodes", "reason"], worse) if worse else ["- (none)", ""]
    return md


HELD_MODES = ("M0", "M1", "M3")
DOMAIN_LABELS = {
    "files": "files",
    "calendar": "calendar",
    "tickets": "tickets",
    "orders": "orders, other templates",
}


def _count(rows: list[dict[str, Any]]) -> str:
    return f"{len({r['scenario'] for r in rows})} ({len({r['variant'] for r in rows})})"


def _sums(by: dict[str, dict[str, Any]], key: str) -> str:
    return " / ".join(str(by[m][key]) if m in by else "-" for m in HELD_MODES)


def _side_by_side(blocks: list[tuple[str, list[dict[str, Any]]]]) -> list[str]:
    """The headline metrics of each block of rows, one column per block."""
    splits = [split(b) for _, b in blocks]
    modes = [aggregate(b, ("mode",)) for _, b in blocks]

    def per_policy(h: dict[str, Any], policy: str, diff: str) -> str:
        d = h["per_policy"].get(policy, {}).get(diff)
        return fmt_paired(d) if d else "-"

    lines: list[tuple[str, list[str]]] = [
        ("scenarios (variants)", [_count(b) for _, b in blocks]),
        ("agent-independent gain, M0 -> M1 (blind_retry, give_up)", [_pts(h["agent_independent"]) for h in splits]),
        ("give_up, M1 - M0", [per_policy(h, "give_up", "M1-M0") for h in splits]),
        ("blind_retry, M1 - M0", [per_policy(h, "blind_retry", "M1-M0") for h in splits]),
        ("strong_reader success M0", [fmt_rate(b, "strong_reader", "M0") for _, b in blocks]),
        ("strong_reader success M3", [fmt_rate(b, "strong_reader", "M3") for _, b in blocks]),
        ("strong reader gain, strong_reader M0 -> M3", [fmt_paired(h["reading_gain"]) for h in splits]),
        ("text_reader success M0", [fmt_rate(b, "text_reader", "M0") for _, b in blocks]),
        ("text_reader success M3", [fmt_rate(b, "text_reader", "M3") for _, b in blocks]),
        ("competent reader gain, text_reader M0 -> M3", [fmt_paired(h["reading_gain_text"]) for h in splits]),
        ("repair_follower M3 vs strong_reader M0", [fmt_paired(h["follower_over_baseline"]) for h in splits]),
        ("oracle, M3 - M0", [per_policy(h, "oracle", "M3-M0") for h in splits]),
        *(
            (
                f"task success {m}, policies pooled",
                [pct(by[m]["task_success_rate"]) if m in by else "-" for by in modes],
            )
            for m in HELD_MODES
        ),
        ("duplicate side effects M0 / M1 / M3", [_sums(by, "duplicates") for by in modes]),
        ("lost intended writes M0 / M1 / M3", [_sums(by, "lost_writes") for by in modes]),
        ("useless proxy attempts M0 / M1 / M3", [_sums(by, "proxy_useless_attempts") for by in modes]),
        (
            "loop failures M0 / M3",
            [" / ".join(pct(by[m]["loop_failure_rate"]) if m in by else "-" for m in ("M0", "M3")) for by in modes],
        ),
    ]
    return _table(["metric", *(name for name, _ in blocks)], [[label, *cells] for label, cells in lines])


def heldout_section(
    rows: list[dict[str, Any]], held: list[dict[str, Any]], episodes: list[dict[str, Any]] | None = None
) -> list[str]:
    """The held-out set's numbers next to the main set's: the same policies, modes and statistics, per block and per
    domain, and every cell where the proxy made an agent worse on the other domains."""
    policies = tuple(sorted({r["policy"] for r in held}))
    main = [r for r in rows if r["policy"] in policies and r["mode"] in HELD_MODES]
    other = [r for r in held if r["domain"] != "orders"]
    same = [r for r in held if r["domain"] == "orders"]
    blocks = [
        (n, b)
        for n, b in (
            ("main set", main),
            ("held-out: other domains", other),
            ("held-out: orders, other templates", same),
        )
        if b
    ]
    domains = [d for d in DOMAIN_LABELS if any(r["domain"] == d for r in held)]
    md = [
        f"## Held-out set: {_count(other)} scenarios (variants) in other domains, {_count(same)} on the order shop "
        "with other templates",
        "",
        "Other domains (`benchmarks/agentbench/heldout_domains.py`, ids `H-files-`, `H-cal-`, `H-tix-`): the chaos "
        "server's files, calendar and tickets tool surfaces, with their own task lengths (4, 2 and 5 steps), "
        "fillers, fault positions (tickets tasks call the target's tool before it, so the fault hits a later "
        "call), facts, typos, bad arguments, counts and Retry-After values, and their own proxy policies written "
        "like the main set's. Orders, other templates (`heldout.py`, ids `H-<fault>-`): the first held-out block. "
        "The agent policies were written before both and not changed after their results were seen; what the "
        "policies know about a domain (the user's request, alternative reads, the read that verifies a write) is "
        "carried by the scenarios. "
        f"Policies {', '.join(policies)} in modes {', '.join(HELD_MODES)}; the main set's column is restricted to "
        "the same policies and modes. Intervals as above: paired differences and per-policy rates with 95 % "
        "bootstraps over scenario variants, pooled rates with Wilson intervals.",
        "",
        *_side_by_side(blocks),
        "Per policy, task success (variant bootstrap):",
        "",
    ]
    table = [[p, *(fmt_rate(src, p, m) for _, src in blocks[:2] for m in HELD_MODES)] for p in policies]
    heads = [f"{name.removeprefix('held-out: ')} {m}" for name, _ in blocks[:2] for m in HELD_MODES]
    md += _table(["policy", *heads], table)
    md += ["Per domain:", ""]
    per = []
    for d in domains:
        sub = [r for r in held if r["domain"] == d]
        h, by = split(sub), aggregate(sub, ("mode",))
        per.append(
            [
                DOMAIN_LABELS[d],
                _count(sub),
                _pts(h["agent_independent"]),
                fmt_rate(sub, "strong_reader", "M0"),
                fmt_rate(sub, "strong_reader", "M3"),
                fmt_paired(h["reading_gain"]),
                fmt_paired(h["reading_gain_text"]),
                f"{pct(by['M0']['task_success_rate'])} -> {pct(by['M3']['task_success_rate'])}",
                _sums(by, "duplicates"),
                _sums(by, "lost_writes"),
            ]
        )
    md += _table(
        [
            "domain",
            "scenarios (variants)",
            "agent-independent gain M0 -> M1",
            "strong_reader M0",
            "strong_reader M3",
            "strong_reader M3 - M0",
            "text_reader M3 - M0",
            "pooled success M0 -> M3",
            "dup. M0 / M1 / M3",
            "lost M0 / M1 / M3",
        ],
        per,
    )
    if other:
        md += ["Per category, other domains (policies pooled):", "", *headline(other)]
    if episodes is not None and other:
        worse = hurts(other, episodes, HELD_MODES)
        md += [
            f"Where the proxy makes an agent worse on the other domains ({len(worse)} variant x mode x policy "
            "cells; same rule as above):",
            "",
        ]
        md += _table(["variant", "mode", "policy", "episodes", "reason"], worse) if worse else ["- (none)", ""]
    return md


def real_section(
    rows: list[dict[str, Any]], real: list[dict[str, Any]], episodes: list[dict[str, Any]] | None = None
) -> list[str]:
    """The real-error scenarios (``realerrors.py``) next to the main set: where the raw text is a real server's."""
    policies = tuple(sorted({r["policy"] for r in real}))
    main = [r for r in rows if r["policy"] in policies and r["mode"] in HELD_MODES]
    h = split(real)
    md = [
        f"## Real servers' wordings: {_count(real)} scenarios (variants) from the error corpus",
        "",
        "Observations can only add value where the raw error leaves a careful reader unsure what happened or what "
        "to do. These scenarios (`benchmarks/agentbench/realerrors.py`, ids `R-`) replay, through the chaos "
        "server, the errors real MCP servers returned (`benchmarks/errors/corpus.jsonl`: the reference "
        "filesystem, memory and everything servers, mcp-server-fetch and -git, a SQLite server): one variant per "
        "distinct situation of a fault the order shop can meet (D1, D2, D4, D5 existence conflicts, F1, F2), the "
        "record's own text as an untyped `isError` result, at the first and last of three steps; the oracle is the "
        "main set's for that fault. Reported apart from the catalog scenarios; the reader policies were not changed "
        "after these results were seen.",
        "",
        f"- **Strong reader** (`{h['reader']}`) M0 -> M3: {fmt_paired(h['reading_gain'])}; text_reader: "
        f"{fmt_paired(h['reading_gain_text'])}.",
        f"- Agents that never read an error, M0 -> M1: {_pts(h['agent_independent'])}.",
        "",
        *_side_by_side([("main set", main), ("real-error scenarios", real)]),
        "Per policy, task success (variant bootstrap), and the paired difference to its own M0:",
        "",
    ]
    table = []
    for p in policies:
        diffs = h["per_policy"].get(p, {})
        table.append(
            [
                p,
                *(fmt_rate(real, p, m) for m in HELD_MODES),
                *(fmt_paired(diffs[k]) if k in diffs else "-" for k in ("M1-M0", "M3-M0")),
            ]
        )
    md += _table(["policy", *(f"success {m}" for m in HELD_MODES), "M1 - M0", "M3 - M0"], table)
    if episodes is not None:
        worse = hurts(real, episodes, HELD_MODES)
        md += [f"Where the proxy makes an agent worse here ({len(worse)} cells; same rule as above):", ""]
        md += _table(["variant", "mode", "policy", "episodes", "reason"], worse) if worse else ["- (none)", ""]
    return md


def live_section(folder: Path) -> list[str]:
    """The committed real-model run (``live.py`` writes it, ``livereport.py`` renders it), when there is one."""
    from .livereport import section

    text = section(folder)
    if not text:
        return ["## A real model (live track)", "", f"No real-model run is committed (`{folder}` holds none).", ""]
    return [*text.rstrip("\n").split("\n"), ""]


def _pts(d: dict[str, Any]) -> str:
    return f"{100 * d['diff']:+.1f} pts [{100 * d['lo']:+.1f}, {100 * d['hi']:+.1f}]"


def render(
    meta: dict[str, Any],
    rows: list[dict[str, Any]],
    lat: dict[str, Any] | None,
    episodes: list[dict[str, Any]] | None = None,
) -> list[str]:
    """The Markdown report (without charts)."""
    all_policies = tuple(sorted({r["policy"] for r in rows}))
    modes = tuple(m for m in MODES if any(r["mode"] == m for r in rows))
    fault_rows, flat = per_fault(rows)
    by_mode = aggregate(rows, ("mode",))
    md = [
        "# Agent-outcome benchmark: results",
        "",
        f"Generated by `{meta['command']}` (seed {meta['seed']}): {meta['scenarios']} scenarios covering "
        f"{meta['fault_types']} of the 27 fault types, {len(all_policies)} scripted policies, modes "
        f"{', '.join(modes)}"
        + (f", plus {meta['heldout_scenarios']} held-out scenarios" if meta.get("heldout_scenarios") else "")
        + (f" and {meta['real_scenarios']} real-error scenarios" if meta.get("real_scenarios") else "")
        + f": {meta['episodes']} episodes in {meta['wall_s']:.0f} s of wall time on "
        f"{meta['cpus']} CPUs. Method: `docs/fault-catalog.md` §6; code: `benchmarks/agentbench/`. Every "
        "number below except the latency table is reproduced exactly by the same command and seed: "
        "`benchmarks/DIGEST.tsv` holds a hash of every episode's scored fields, and "
        "`python -m benchmarks.agentbench.same benchmarks/DIGEST.tsv RUN` compares a new run with it.",
        "",
        "Modes: M0 the agent talks to the server directly; M1-M4 through resilient-mcp with observations at L0 "
        "(raw upstream errors), L1 (+ classification), L2 (+ repair action, retries, suggestion, details), L3 "
        "(+ session context). Rates carry Wilson 95 % intervals.",
        "",
        *honest_section(rows, episodes),
        *meta.get("extra", []),
        *live_section(HERE / "live"),
        "## Pooled view: direct (M0) vs proxy with L2 observations (M3), all policies pooled",
        "",
        "This pooled table mixes policies with very different reading skills (and counts followers of the proxy's "
        "advice several times); read the paired headline above first.",
        "",
        *headline(rows),
        f"Across all {by_mode['M3']['episodes']} M3 episodes: {by_mode['M3']['duplicates']} duplicate side "
        f"effects (M0: {by_mode['M0']['duplicates']}), {by_mode['M3']['lost_writes']} lost intended writes (M0: "
        f"{by_mode['M0']['lost_writes']}), {by_mode['M3']['proxy_useless_attempts']} proxy attempts "
        "on faults rule R does not allow repeating; over all proxy modes: "
        f"{sum(by_mode[m]['duplicates'] for m in modes if m != 'M0')} duplicates, "
        f"{sum(by_mode[m]['lost_writes'] for m in modes if m != 'M0')} lost intended writes and "
        f"{sum(by_mode[m]['proxy_useless_attempts'] for m in modes if m != 'M0')} useless proxy attempts. "
        "'Useless retries (sent/all)': identical agent retries that cannot help; 'sent' are those that reached the "
        "upstream, the rest the proxy answered itself (loop guard, idempotency record). 'Lost intended writes': writes "
        "the agent asked for and was answered with a success that never reached the ledger (replayed, answered "
        "unsent, or a silent no-op); a write the agent saw fail is a task failure, not a lost write.",
        "",
        "## Attribution (§7.3)",
        "",
        "**Absorbed by the proxy, independent of the agent**: agents that never read an error (blind_retry, "
        "give_up) direct vs through the proxy with raw errors (M1). These gains hold for any model.",
        "",
        *_policy_modes(rows, ("blind_retry", "give_up"), ("M0", "M1")),
        "**Observation design, assuming a compliant agent**: repair_follower does what `repair_action` says. "
        "Its gains from L0 to L3 measure the observations only under that assumption; scripted compliance is "
        "circular, and the live-model track (`benchmarks/agentbench/live.py`) is how to check it with a real model.",
        "",
        *_policy_modes(rows, ("repair_follower", "noisy_follower", "keyword_heuristic"), modes),
        "## Every policy and mode",
        "",
        *_policy_modes(rows, all_policies, modes),
        "## Per fault type (all policies pooled)",
        "",
        *fault_rows,
        "## Where the proxy does not help",
        "",
        "Fault types whose pooled success with the proxy at L2 is not more than 5 points above direct:",
        "",
        *(flat or ["- (none)"]),
        "",
        *meta.get("notes", []),
        "## Observation size",
        "",
        *observation_sizes(rows),
        "## Added latency on fault-free calls (real wall time)",
        "",
        *latency_table(lat),
    ]
    return md
