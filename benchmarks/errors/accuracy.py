"""How often the rules (and the rules + model diagnosis) are right on the corpus of real MCP errors, in-sample and
leave-one-server-out, and how often they are harmful.

    python -m benchmarks.errors.accuracy                      # rules alone
    python -m benchmarks.errors.accuracy --scripted 0.2       # + diagnosis by a scripted model (gold, 20 % noise)
    python -m benchmarks.errors.accuracy --live URL [--model M] [--api-key-env VAR] [--answers FILE]
                                                              # + diagnosis by a real OpenAI-compatible endpoint
    python -m benchmarks.errors.accuracy --live URL --diagnosis-summary
                                                              # only: rules vs rules + model, corpus and hold-outs

With a diagnosis, each fresh hold-out is diagnosed too (its rules now, LOSO, + the model where they recognised
nothing): the hold-outs are the generalisation figure of the model as of the rules. A live model's answers are kept
by (model, prompt hash) in ``benchmarks/errors/live-answers.jsonl`` (``--answers``; ``--answers none``: not kept):
a rerun with the same prompts and rules asks the endpoint nothing.

Fields: fault type (exact catalog type), category (its letter), repair action (after the proxy's repair planning for
the tool's effect class), transient, retry safety. **In-sample**: every rule on. **Leave-one-server-out (LOSO)**:
each record is judged with the rules learned only from its own server switched off (``resilient_mcp/faults/vocab.py``:
every wording carries the corpus servers it was written from; rules from a published standard, ``standard``, and
plain words, ``generic``, stay on). LOSO is the headline: it is what a server the rules never saw gets.

**Harmful verdicts** (the proxy is worse than no proxy): ``transient`` said of a fault the gold label calls
permanent; ``no effect`` (``not_sent``/``rejected``) said of a call the gold label says ran (``maybe_executed`` or
``executed_failed``); a **proxy retry** (rule R would let the retry stage repeat it) of a fault that cannot pass
(gold not transient). A record counts once however many kinds it hits. Target: 0.

With a diagnosis (asked only where the rules recognised nothing) it also counts safety: a verdict must never make
retrying looser than the rules' (retry safety, side-effect status, max_retry); the clamps guarantee it, the benchmark
checks it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from resilient_mcp.faults import vocab

from .replay import CORPUS, Verdict, load, rules_verdict, server_of, strict_verdicts

if TYPE_CHECKING:
    from .measure import Measured

AXES = ("fault_type", "category", "repair_action", "transient", "retry_safety")
HARMS = ("transient_of_permanent", "no_effect_of_ran", "proxy_retry_of_permanent")
_RAN = ("maybe_executed", "executed_failed")
_NOTHING_RAN = ("not_sent", "rejected")


def category(record: dict[str, Any]) -> str:
    return str(record["gold"]["fault_type"])[0]


def gold(record: dict[str, Any], axis: str) -> Any:
    g = record["gold"]
    return g["fault_type"][:1] if axis == "category" else g[axis]


def right(record: dict[str, Any], verdict: Verdict, axis: str) -> bool:
    return bool(verdict.get(axis) == gold(record, axis))


def harms(record: dict[str, Any], verdict: Verdict) -> list[str]:
    """The kinds of harm this verdict does (see the module docstring); empty when none."""
    g = record["gold"]
    out = []
    if verdict.transient and not g["transient"]:
        out.append("transient_of_permanent")
    if verdict.retry_safety in _NOTHING_RAN and g["retry_safety"] in _RAN:
        out.append("no_effect_of_ran")
    if verdict.proxy_retries and not g["transient"]:
        out.append("proxy_retry_of_permanent")
    return out


def overall(records: Sequence[dict[str, Any]], verdicts: Sequence[Verdict]) -> dict[str, float]:
    return {a: sum(right(r, v, a) for r, v in zip(records, verdicts, strict=True)) / len(records) for a in AXES}


def harmful_rate(records: Sequence[dict[str, Any]], verdicts: Sequence[Verdict]) -> float:
    return sum(bool(harms(r, v)) for r, v in zip(records, verdicts, strict=True)) / len(records)


def _pct(ok: int, n: int) -> str:
    return f"{100 * ok / n:.0f} %" if n else "-"


def headline(records: Sequence[dict[str, Any]], runs: dict[str, Sequence[Verdict]]) -> str:
    """Markdown: rows = fields and the harmful-verdict rate, columns = runs."""
    lines = ["| field | " + " | ".join(runs) + " |", "|---|" + "---:|" * len(runs)]
    for axis in AXES:
        cells = [
            _pct(sum(right(r, v, axis) for r, v in zip(records, vs, strict=True)), len(records)) for vs in runs.values()
        ]
        lines.append(f"| {axis} | " + " | ".join(cells) + " |")
    for kind in HARMS:
        cells = [str(sum(kind in harms(r, v) for r, v in zip(records, vs, strict=True))) for vs in runs.values()]
        lines.append(f"| harmful: {kind} (records) | " + " | ".join(cells) + " |")
    cells = []
    for vs in runs.values():
        n = sum(bool(harms(r, v)) for r, v in zip(records, vs, strict=True))
        cells.append(f"**{100 * n / len(records):.1f} %** ({n})")
    lines.append("| **harmful-verdict rate** | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def table(records: Sequence[dict[str, Any]], verdicts: dict[str, Sequence[Verdict]], axes: Sequence[str]) -> str:
    """Markdown: rows = categories + overall, columns = (run, axis) accuracy in %."""
    groups: dict[str, list[int]] = defaultdict(list)
    for i, rec in enumerate(records):
        groups[category(rec)].append(i)
    head = "| category | n | " + " | ".join(f"{run}: {axis}" for run in verdicts for axis in axes) + " |"
    sep = "|---|---:|" + "---:|" * (len(verdicts) * len(axes))
    lines = [head, sep]
    for cat, idx in [*sorted(groups.items()), ("all", list(range(len(records))))]:
        cells = []
        for vs in verdicts.values():
            for axis in axes:
                cells.append(_pct(sum(right(records[i], vs[i], axis) for i in idx), len(idx)))
        lines.append(f"| {'**all**' if cat == 'all' else cat} | {len(idx)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def per_server(records: Sequence[dict[str, Any]], insample: Sequence[Verdict], loso: Sequence[Verdict]) -> str:
    """Markdown: each server held out in turn: its records' fault type and repair action, in-sample vs LOSO."""
    groups: dict[str, list[int]] = defaultdict(list)
    for i, rec in enumerate(records):
        groups[server_of(rec)].append(i)
    lines = [
        "| held-out server | n | fault_type in / LOSO | repair_action in / LOSO | transient LOSO | harmful LOSO |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for server, idx in sorted(groups.items()):
        cell = []
        for axis in ("fault_type", "repair_action"):
            a = _pct(sum(right(records[i], insample[i], axis) for i in idx), len(idx))
            b = _pct(sum(right(records[i], loso[i], axis) for i in idx), len(idx))
            cell.append(f"{a} / {b}")
        t = _pct(sum(right(records[i], loso[i], "transient") for i in idx), len(idx))
        h = sum(bool(harms(records[i], loso[i])) for i in idx)
        lines.append(f"| {server} | {len(idx)} | {cell[0]} | {cell[1]} | {t} | {h} |")
    return "\n".join(lines)


def confusion(records: Sequence[dict[str, Any]], verdicts: Sequence[Verdict], axis: str, top: int = 15) -> str:
    """Markdown: the most frequent (gold -> given) pairs where ``axis`` is wrong, with the servers they come from."""
    pairs: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for rec, v in zip(records, verdicts, strict=True):
        if not right(rec, v, axis):
            pairs[(str(gold(rec, axis)), str(v.get(axis)))][server_of(rec)] += 1
    lines = [f"| gold {axis} | given | n | servers |", "|---|---|---:|---|"]
    ranked = sorted(pairs.items(), key=lambda kv: (-sum(kv[1].values()), kv[0]))
    for (g, said), servers in ranked[:top]:
        where = ", ".join(f"{s} {n}" for s, n in servers.most_common())
        lines.append(f"| {g} | {said} | {sum(servers.values())} | {where} |")
    if len(ranked) > top:
        lines.append(f"| ({len(ranked) - top} more pairs) | | {sum(sum(c.values()) for _, c in ranked[top:])} | |")
    return "\n".join(lines)


def bases(verdicts: Sequence[Verdict]) -> str:
    counts = Counter(v.basis or "(none)" for v in verdicts)
    return ", ".join(f"{k} {n}" for k, n in counts.most_common())


def provenance() -> str:
    """How many rules of each provenance the vocabulary holds (what LOSO can switch off)."""
    counts: Counter[str] = Counter()
    for rule in (*vocab.ALL_CODES, *(p.rule for p in vocab.ALL_PHRASES)):
        counts[" + ".join(rule.sources)] += 1
    return ", ".join(f"{k} {n}" for k, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def misses(records: Sequence[dict[str, Any]], verdicts: Sequence[Verdict]) -> str:
    """Where the verdicts are wrong, grouped by situation: gold vs given, whether the diagnose step is asked (the
    rules recognised nothing), and one example text."""
    rows: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i, (rec, v) in enumerate(zip(records, verdicts, strict=True)):
        if any(not right(rec, v, a) for a in ("fault_type", "repair_action", "transient")) or harms(rec, v):
            rows[(_source_name(rec), rec["situation"])].append(i)
    lines = [
        "| source / situation | n | gold (type, action, transient) | verdict | basis | harm | example error |",
        "|---|---:|---|---|---|---|---|",
    ]
    for (src, sit), idx in sorted(rows.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        rec = records[idx[0]]
        g = rec["gold"]
        said = Counter(f"{verdicts[i].fault_type}, {verdicts[i].repair_action}, {verdicts[i].transient}" for i in idx)
        harm = ", ".join(sorted({h for i in idx for h in harms(records[i], verdicts[i])})) or "-"
        lines.append(
            f"| {src} / {sit} | {len(idx)} | {g['fault_type']}, {g['repair_action']}, {g['transient']} | "
            f"{'; '.join(f'{k} (x{n})' for k, n in said.most_common())} | {verdicts[idx[0]].basis} | {harm} | "
            f"`{_text(rec)}` |"
        )
    return "\n".join(lines)


def _source_name(record: dict[str, Any]) -> str:
    return re.sub(r"-\d{3}-.*$", "", str(record["id"]))


def _text(record: dict[str, Any]) -> str:
    from .replay import error_text

    flat = " ".join(error_text(record).split()).replace("|", "\\|").replace("`", "'")
    flat = flat.replace("/tmp/rmcp-errors-corpus", "…")
    return flat if len(flat) <= 90 else flat[:89] + "…"


def summary(records: Sequence[dict[str, Any]]) -> str:
    by_server = Counter(server_of(r) for r in records)
    by_kind = Counter(r["raw"]["kind"] for r in records)
    parts = [
        f"{len(records)} records from {len(by_server)} servers: "
        + ", ".join(f"{s} {n}" for s, n in sorted(by_server.items())),
        "raw outcomes: " + ", ".join(f"{k} {n}" for k, n in sorted(by_kind.items())),
        "rules by provenance: " + provenance(),
    ]
    return "\n".join(parts)


SUCCESS_SHAPED = CORPUS.parent / "success_shaped.jsonl"
EXAMPLE_POLICIES = {
    "sqlite-ref": (Path("policies/server-sqlite.yaml"), "sqlite"),
    "text-editor": (Path("policies/text-editor.yaml"), "editor"),
}
"""Servers with a shipped example policy whose ``result_errors`` the success-shaped records are read through."""


def success_shaped(path: Path = SUCCESS_SHAPED) -> str:
    """The success-shaped failures (no ``isError``) through the example policy of their server: without a policy the
    proxy passes every one on as a success (by design); with it, how many become the right fault."""
    import mcp_types as types
    import yaml

    from resilient_mcp.policy import Policy, PolicyFile
    from resilient_mcp.stages.result_errors import success_shaped_failure

    from .replay import tool_of, verdict_of

    if not path.exists():
        return "(no success-shaped records)"
    root = Path(__file__).resolve().parents[2]
    records = load(path)
    lines = [
        "| server | policy | n | made a fault | fault_type | repair_action | transient | harmful |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for server in sorted({server_of(r) for r in records}):
        group = [r for r in records if server_of(r) == server]
        if server not in EXAMPLE_POLICIES:
            lines.append(f"| {server} | none shipped | {len(group)} | 0 | - | - | - | - |")
            continue
        file, upstream = EXAMPLE_POLICIES[server]
        policy = Policy(PolicyFile.model_validate(yaml.safe_load((root / file).read_text(encoding="utf-8"))))
        verdicts = []
        for rec in group:
            name = rec["tool"]["name"]
            entries = policy.resolve(upstream, name, name).result_errors
            fault = success_shaped_failure(
                types.CallToolResult.model_validate(rec["raw"]["result"]), entries, tool=tool_of(rec)
            )
            if fault is not None:
                verdicts.append((rec, verdict_of(fault, rec)))
        cells = [
            _pct(sum(right(r, v, axis) for r, v in verdicts), len(group))
            for axis in ("fault_type", "repair_action", "transient")
        ]
        harmful = sum(bool(harms(r, v)) for r, v in verdicts)
        lines.append(
            f"| {server} | `{file}` | {len(group)} | {len(verdicts)} | " + " | ".join(cells) + f" | {harmful} |"
        )
    return "\n".join(lines)


def shaped_as_errors(path: Path = SUCCESS_SHAPED) -> str:
    """The success-shaped failures' texts read by the rules as if the server had flagged them (``isError``), without
    a policy's ``fault_type``: a second held-out set until 2026-12-02, when their misses were read (the Redis replies
    inside a server's sentence, DuckDB's error types): in-sample since."""
    import mcp_types as types

    from resilient_mcp.faults.classify import classify_result

    from .replay import tool_of, verdict_of

    if not path.exists():
        return "(no success-shaped records)"
    records = load(path)
    verdicts = []
    for rec in records:
        flagged = types.CallToolResult.model_validate({**rec["raw"]["result"], "isError": True})
        with vocab.held_out(frozenset({server_of(rec)})):
            fault = classify_result(flagged, tool=tool_of(rec))
        assert fault is not None
        verdicts.append(verdict_of(fault, rec))
    n = len(records)
    cells = [
        f"{axis} {_pct(sum(right(r, v, axis) for r, v in zip(records, verdicts, strict=True)), n)}"
        for axis in ("fault_type", "repair_action", "transient")
    ]
    harmful = sum(bool(harms(r, v)) for r, v in zip(records, verdicts, strict=True))
    unsure = sum(v.basis == "unrecognised" for v in verdicts)
    return f"{n} records: " + ", ".join(cells) + f", harmful {harmful}, unrecognised {unsure}"


Diagnosed = Callable[[list[dict[str, Any]], list[Verdict], bool], "Measured"]
"""Records, their rules' verdicts and whether those are LOSO -> the verdicts with the model's diagnosis."""

HOLDOUT = CORPUS.with_name("holdout.jsonl")
HOLDOUT_SHAPED = CORPUS.with_name("holdout_success_shaped.jsonl")
HOLDOUT_FROZEN_AT = "4e82b8c"
"""The commit that froze the fresh hold-out's records and labels (``holdout.py``), before any rule was run on them:
its rules are the ones the "frozen" column measures."""
HOLDOUT2 = CORPUS.with_name("holdout2.jsonl")
HOLDOUT2_SHAPED = CORPUS.with_name("holdout2_success_shaped.jsonl")
HOLDOUT2_FROZEN_AT = "354a7a5"
"""The commit that froze the second hold-out (``holdout2.py``): collected after the rules added from the first
hold-out, so "frozen" and "now" both measure rules that never saw these servers (until a rule is written from them)."""
HOLDOUT3 = CORPUS.with_name("holdout3.jsonl")
HOLDOUT3_SHAPED = CORPUS.with_name("holdout3_success_shaped.jsonl")
HOLDOUT3_FROZEN_AT = "0c7bf73"
"""The commit that froze the third hold-out (``holdout3.py``): collected and labelled while new rules were being
written elsewhere, without reading them; "frozen" is main's rules of that day, "now" the rules at measurement."""
HOLDOUT4 = CORPUS.with_name("holdout4.jsonl")
HOLDOUT4_SHAPED = CORPUS.with_name("holdout4_success_shaped.jsonl")
HOLDOUT4_FROZEN_AT = "ddc6016"
"""The commit that froze the fourth hold-out (``holdout4.py``): collected and labelled while new rules were being
written elsewhere from documented vocabularies, without reading them; "frozen" is main's rules of that day (29f0914),
"now" the rules at measurement (after the round's rules are merged: their hold-out figure)."""
HOLDOUT5 = CORPUS.with_name("holdout5.jsonl")
HOLDOUT5_SHAPED = CORPUS.with_name("holdout5_success_shaped.jsonl")
HOLDOUT5_FROZEN_AT = "157afad"
"""The commit that froze the fifth hold-out (``holdout5.py``): collected and labelled while rules (in general form)
and model diagnosis were being written elsewhere, without reading them; "frozen" is main's rules of that day
(f400c6d), "now" the rules at measurement (after the round's work is merged: its hold-out figure)."""
HOLDOUT6 = CORPUS.with_name("holdout6.jsonl")
HOLDOUT6_SHAPED = CORPUS.with_name("holdout6_success_shaped.jsonl")
HOLDOUT6_FROZEN_AT = "ae7c9f3"
"""The commit that froze the sixth hold-out (``holdout6.py``): collected and labelled while rules were being written
elsewhere, without reading them; "frozen" is main's rules of that day (74aaae0), "now" the rules at measurement (after
the round's work is merged: its hold-out figure)."""

_FROZEN_SCRIPT = """
import dataclasses, json, sys
import mcp_types as types
from pathlib import Path
from benchmarks.errors.replay import load, rules_verdict, verdict_of, tool_of
from resilient_mcp.faults.classify import classify_result
out = []
for rec in load(Path(sys.argv[1])):
    if sys.argv[2] == "shaped":
        flagged = types.CallToolResult.model_validate({**rec["raw"]["result"], "isError": True})
        out.append(dataclasses.asdict(verdict_of(classify_result(flagged, tool=tool_of(rec)), rec)))
    else:
        out.append(dataclasses.asdict(rules_verdict(rec)))
print(json.dumps(out))
"""


def frozen_verdicts(path: Path, *, shaped: bool = False, rev: str = HOLDOUT_FROZEN_AT) -> list[Verdict] | None:
    """The verdicts of the rules as they were at ``rev`` on the records of ``path`` (read from the current tree):
    the package and the benchmark code of that commit, from git, run in a subprocess. ``None`` without the history
    (a shallow clone, no git)."""
    root = Path(__file__).resolve().parents[2]
    with tempfile.TemporaryDirectory(prefix="rmcp-frozen-") as tmp:
        archive = Path(tmp) / "rules.tar"
        try:
            with archive.open("wb") as out:
                subprocess.run(
                    ["git", "-C", str(root), "archive", rev, "resilient_mcp", "benchmarks"],
                    check=True,
                    stdout=out,
                    stderr=subprocess.DEVNULL,
                    timeout=60,
                )
        except (OSError, subprocess.SubprocessError):
            return None
        with tarfile.open(archive) as tar:
            tar.extractall(tmp, filter="data")
        env = {**os.environ, "PYTHONPATH": tmp}
        argv = [sys.executable, "-c", _FROZEN_SCRIPT, str(path.resolve()), "shaped" if shaped else "errors"]
        done = subprocess.run(argv, cwd=tmp, env=env, check=True, capture_output=True, text=True, timeout=300)
    fields = {f.name for f in dataclasses.fields(Verdict)}
    return [Verdict(**{k: v for k, v in d.items() if k in fields}) for d in json.loads(done.stdout)]


def _shaped_now(records: Sequence[dict[str, Any]], *, loso: bool) -> list[Verdict]:
    import mcp_types as types

    from resilient_mcp.faults.classify import classify_result

    from .replay import tool_of, verdict_of

    out = []
    for rec in records:
        flagged = types.CallToolResult.model_validate({**rec["raw"]["result"], "isError": True})
        with vocab.held_out(frozenset({server_of(rec)}) if loso else frozenset()):
            fault = classify_result(flagged, tool=tool_of(rec))
        assert fault is not None
        out.append(verdict_of(fault, rec))
    return out


def holdout(
    path: Path = HOLDOUT,
    shaped_path: Path = HOLDOUT_SHAPED,
    *,
    frozen: bool = True,
    rev: str = HOLDOUT_FROZEN_AT,
    before: str = "",
    diagnosed: Diagnosed | None = None,
) -> str:
    """The fresh hold-out: servers collected after the rules, labels committed before the rules were run on them.
    Columns: the rules as they were at the freezing commit (the honest generalisation figure), the rules now (the
    records are in-sample for rules written after reading them), and now with the rules credited to the held-out
    server off (LOSO). ``before``: also the rules of that earlier commit (the second hold-out: the rules as they
    were before the first hold-out's additions, so that the two columns show what those additions bring).
    ``diagnosed``: also now, LOSO, + the model's diagnosis where those rules recognised nothing."""
    if not path.exists():
        return "(no hold-out records)"
    records = load(path)
    runs: dict[str, Sequence[Verdict]] = {}
    earlier = frozen_verdicts(path, rev=before) if frozen and before else None
    if earlier is not None:
        runs[f"rules of {before}"] = earlier
    old = frozen_verdicts(path, rev=rev) if frozen else None
    if old is not None:
        runs[f"frozen ({rev})"] = old
    now_loso = [rules_verdict(r, loso=True) for r in records]
    runs |= {"now": [rules_verdict(r) for r in records], "now, LOSO": now_loso}
    diagnosis = diagnosed(records, now_loso, True) if diagnosed is not None else None
    if diagnosis is not None:
        runs["now, LOSO + diagnosis"] = diagnosis.verdicts
    by_server = Counter(server_of(r) for r in records)
    out = [
        f"{len(records)} records from {len(by_server)} servers: "
        + ", ".join(f"{s} {n}" for s, n in sorted(by_server.items())),
        "",
        headline(records, runs),
        "",
        *([diagnosis.note, ""] if diagnosis is not None else []),
        "Each hold-out server, now, LOSO:",
        "",
        per_server(records, runs["now"], now_loso),
    ]
    if shaped_path.exists():
        shaped = load(shaped_path)
        shaped_runs: dict[str, Sequence[Verdict]] = {}
        old_shaped = frozen_verdicts(shaped_path, shaped=True, rev=rev) if frozen else None
        if old_shaped is not None:
            shaped_runs[f"frozen ({rev})"] = old_shaped
        shaped_runs["now, LOSO"] = _shaped_now(shaped, loso=True)
        servers = ", ".join(f"{s} {n}" for s, n in sorted(Counter(server_of(r) for r in shaped).items()))
        out += [
            "",
            f"Their success-shaped failures ({len(shaped)}: {servers}), read as if flagged (`isError`):",
            "",
            headline(shaped, shaped_runs),
        ]
    if frozen and old is None:
        out += ["", f"(No frozen column: commit {rev} is not in this clone's history.)"]
    out += ["", "Where the rules are wrong or harmful on the hold-out (now, LOSO):", "", misses(records, now_loso)]
    if old is not None:
        out += ["", f"... and with the frozen rules ({rev}):", "", misses(records, old)]
    return "\n".join(out)


def holdout2(diagnosed: Diagnosed | None = None) -> str:
    """The second hold-out, with the rules of the first hold-out's freezing commit beside its own."""
    return holdout(HOLDOUT2, HOLDOUT2_SHAPED, rev=HOLDOUT2_FROZEN_AT, before=HOLDOUT_FROZEN_AT, diagnosed=diagnosed)


def holdout3(diagnosed: Diagnosed | None = None) -> str:
    """The third hold-out, with the rules of the second hold-out's freezing commit beside its own."""
    return holdout(HOLDOUT3, HOLDOUT3_SHAPED, rev=HOLDOUT3_FROZEN_AT, before=HOLDOUT2_FROZEN_AT, diagnosed=diagnosed)


def holdout4(diagnosed: Diagnosed | None = None) -> str:
    """The fourth hold-out, with the rules of the third hold-out's freezing commit beside its own."""
    return holdout(HOLDOUT4, HOLDOUT4_SHAPED, rev=HOLDOUT4_FROZEN_AT, before=HOLDOUT3_FROZEN_AT, diagnosed=diagnosed)


def holdout5(diagnosed: Diagnosed | None = None) -> str:
    """The fifth hold-out, with the rules of the fourth hold-out's freezing commit beside its own."""
    return holdout(HOLDOUT5, HOLDOUT5_SHAPED, rev=HOLDOUT5_FROZEN_AT, before=HOLDOUT4_FROZEN_AT, diagnosed=diagnosed)


def holdout6(diagnosed: Diagnosed | None = None) -> str:
    """The sixth hold-out, with the rules of the fifth hold-out's freezing commit beside its own."""
    return holdout(HOLDOUT6, HOLDOUT6_SHAPED, rev=HOLDOUT6_FROZEN_AT, before=HOLDOUT5_FROZEN_AT, diagnosed=diagnosed)


POOLED = {
    "corpus": CORPUS,
    "hold-out 1": HOLDOUT,
    "hold-out 2": HOLDOUT2,
    "hold-out 3": HOLDOUT3,
    "hold-out 4": HOLDOUT4,
    "hold-out 5": HOLDOUT5,
}
"""The sets ``--pooled`` reads as one: the corpus and every fresh hold-out whose records have been read."""


def pooled(sets: dict[str, Path] = POOLED) -> str:
    """The corpus and the read hold-outs as one set (about 1,000 records, 55 servers): in-sample, leave-one-server-out
    and strict leave-one-server-out over the pool (strict: also off, every wording that decided only the held-out
    server's records of the whole pool, whoever the rule is credited to). Every hold-out here has been read by the
    time the rules were last changed: the pool is in-sample for the rules; strict LOSO over it is the figure closest
    to a server never seen, short of a fresh hold-out. Per set below, the same three runs."""
    parts = {name: load(path) for name, path in sets.items() if path.exists()}
    records = [r for recs in parts.values() for r in recs]
    insample = [rules_verdict(r) for r in records]
    loso = [rules_verdict(r, loso=True) for r in records]
    strict = strict_verdicts(records)
    runs: dict[str, Sequence[Verdict]] = {"in-sample": insample, "LOSO": loso, "strict LOSO": strict}
    servers = Counter(server_of(r) for r in records)
    lines = [
        "| set | n | servers | fault_type in / LOSO / strict | repair_action in / LOSO / strict "
        "| transient in / LOSO / strict | harmful in / LOSO / strict |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    at = 0
    for name, recs in [*parts.items(), ("**pooled**", records)]:
        idx = range(at, at + len(recs)) if name != "**pooled**" else range(len(records))
        at += len(recs) if name != "**pooled**" else 0
        cells = []
        for axis in ("fault_type", "repair_action", "transient"):
            cells.append(
                " / ".join(_pct(sum(right(records[i], vs[i], axis) for i in idx), len(idx)) for vs in runs.values())
            )
        cells.append(" / ".join(str(sum(bool(harms(records[i], vs[i])) for i in idx)) for vs in runs.values()))
        n_servers = len({server_of(records[i]) for i in idx})
        lines.append(f"| {name} | {len(idx)} | {n_servers} | " + " | ".join(cells) + " |")
    return "\n".join(
        [
            f"{len(records)} records from {len(servers)} servers ({', '.join(parts)}); every set has been read: "
            "in-sample for the rules.",
            "",
            headline(records, runs),
            "",
            f"How the verdicts were reached (LOSO): {bases(loso)}",
            "",
            "Per set:",
            "",
            *lines,
        ]
    )


def run(path: Path, diagnosed: Diagnosed | None = None, *, confusions: bool = False, holdout_too: bool = True) -> str:
    records = load(path)
    insample = [rules_verdict(r) for r in records]
    loso = [rules_verdict(r, loso=True) for r in records]
    strict = strict_verdicts(records)
    runs: dict[str, Sequence[Verdict]] = {"in-sample": insample, "LOSO": loso, "strict LOSO": strict}
    notes = []
    if diagnosed is not None:
        with_model, loso_model = diagnosed(records, insample, False), diagnosed(records, loso, True)
        runs |= {"in-sample + diagnosis": with_model.verdicts, "LOSO + diagnosis": loso_model.verdicts}
        notes = [f"In-sample: {with_model.note}", "", f"LOSO: {loso_model.note}"]
    out = [
        summary(records),
        "",
        "Per field, and the harmful-verdict rate (LOSO is the headline):",
        "",
        headline(records, runs),
        "",
        f"How the verdicts were reached (in-sample): {bases(insample)}; (LOSO): {bases(loso)}",
        "",
    ]
    if notes:
        out += [*notes, ""]
    out += [
        "Per gold category, rules in-sample and LOSO:",
        "",
        table(records, {"in": insample, "LOSO": loso}, ("fault_type", "repair_action", "transient")),
        "",
        "Each server held out in turn:",
        "",
        per_server(records, insample, loso),
        "",
        "Success-shaped failures (`success_shaped.jsonl`) through the shipped example policy's `result_errors`:",
        "",
        success_shaped(),
        "",
        "Their texts read as if flagged, LOSO (their misses were read on 2026-12-02: in-sample): " + shaped_as_errors(),
        "",
        "Where the rules are wrong or harmful (LOSO):",
        "",
        misses(records, loso),
        "",
        "Where the rules are wrong or harmful (strict LOSO: also off, every wording that decided only the held-out "
        "server's records in-sample):",
        "",
        misses(records, strict),
    ]
    if holdout_too and path == CORPUS:
        out += ["", "## The fresh hold-out (`holdout.jsonl`)", "", holdout(diagnosed=diagnosed)]
        out += ["", "## The second fresh hold-out (`holdout2.jsonl`)", "", holdout2(diagnosed)]
        out += ["", "## The third fresh hold-out (`holdout3.jsonl`)", "", holdout3(diagnosed)]
        out += ["", "## The fourth fresh hold-out (`holdout4.jsonl`)", "", holdout4(diagnosed)]
        out += ["", "## The fifth fresh hold-out (`holdout5.jsonl`)", "", holdout5(diagnosed)]
        out += ["", "## The sixth fresh hold-out (`holdout6.jsonl`)", "", holdout6(diagnosed)]
    if confusions:
        for axis in ("fault_type", "repair_action", "transient"):
            out += [
                "",
                f"Confusions of {axis} (LOSO, off-diagonal, most frequent first):",
                "",
                confusion(records, loso, axis),
            ]
    return "\n".join(out)


def _moved(
    records: Sequence[dict[str, Any]],
    before: Sequence[Verdict],
    after: Sequence[Verdict],
    idx: Sequence[int],
    axis: str,
) -> str:
    """``before → after`` on the records ``idx``: the share right on ``axis``, or the count of harmful records."""
    if axis == "harmful":
        a, b = (sum(bool(harms(records[i], vs[i])) for i in idx) for vs in (before, after))
        return f"{a} → {b}"
    a, b = (sum(right(records[i], vs[i], axis) for i in idx) for vs in (before, after))
    return f"{_pct(a, len(idx))} → {_pct(b, len(idx))}"


DIAGNOSIS_SETS = {
    "corpus-in": ("corpus, in-sample", CORPUS, False),
    "corpus": ("corpus, LOSO", CORPUS, True),
    "holdout1": ("hold-out 1, LOSO", HOLDOUT, True),
    "holdout2": ("hold-out 2, LOSO", HOLDOUT2, True),
    "holdout3": ("hold-out 3, LOSO", HOLDOUT3, True),
    "holdout4": ("hold-out 4, LOSO", HOLDOUT4, True),
    "holdout5": ("hold-out 5, LOSO", HOLDOUT5, True),
    "holdout6": ("hold-out 6, LOSO", HOLDOUT6, True),
}
"""What ``--diagnosis-summary`` measures (``--diagnosis-sets`` picks some): the corpus (in-sample for the rules and
for any tuning of the diagnosis), and each fresh hold-out with the rules now, LOSO."""


def diagnosis_summary(
    diagnosed: Diagnosed, sets: Sequence[tuple[str, Path, bool]] = tuple(DIAGNOSIS_SETS.values())
) -> tuple[str, list[str]]:
    """Markdown: for each set, rules alone vs rules + the model's diagnosis (fault type, repair action, transient,
    harmful records), over all its records and over the records the model was asked about only (where the rules
    said "unrecognised"); and the notes of each run. Aggregates only: no record of a set is shown."""
    lines = [
        "| set | n | asked | applied | fault type | repair action | transient | harmful | on the asked: fault type "
        "| repair action | transient | harmful | loosened |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    notes = []
    for name, path, loso in sets:
        if not path.exists():
            continue
        records = load(path)
        rules = [rules_verdict(r, loso=loso) for r in records]
        m = diagnosed(records, rules, loso)
        notes.append(f"{name}: {m.note}")

        cells = []
        for idx in (range(len(records)), m.asked_at):
            cells += [_moved(records, rules, m.verdicts, idx, a) for a in ("fault_type", "repair_action", "transient")]
            cells.append(_moved(records, rules, m.verdicts, idx, "harmful"))
        lines.append(
            f"| {name} | {len(records)} | {m.asked} | {m.stats['applied'] + m.stats['cache_hits']} | "
            + " | ".join(cells)
            + f" | {m.loosened} |"
        )
    return "\n".join(lines), notes


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--scripted", type=float, metavar="NOISE", help="diagnosis by a scripted model")
    parser.add_argument("--live", metavar="URL", help="diagnosis by an OpenAI-compatible endpoint (base URL)")
    parser.add_argument("--model", default="gpt-4o-mini")
    parser.add_argument("--api-key-env", default="OPENAI_API_KEY")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--answers",
        default=None,
        metavar="FILE",
        help="where a live model's answers are kept by (model, prompt hash) (default: live-answers.jsonl; none: off)",
    )
    parser.add_argument(
        "--diagnosis-sets",
        default=",".join(DIAGNOSIS_SETS),
        help="the sets --diagnosis-summary measures, comma-separated (default: all: %(default)s)",
    )
    parser.add_argument(
        "--diagnosis-summary",
        action="store_true",
        help="print only rules vs rules + diagnosis on the corpus and each hold-out (aggregates, no records)",
    )
    parser.add_argument("--confusion", action="store_true", help="also print LOSO confusions per field, by server")
    parser.add_argument("--holdout2", action="store_true", help="print only the second fresh hold-out's section")
    parser.add_argument("--holdout3", action="store_true", help="print only the third fresh hold-out's section")
    parser.add_argument("--holdout4", action="store_true", help="print only the fourth fresh hold-out's section")
    parser.add_argument("--holdout5", action="store_true", help="print only the fifth fresh hold-out's section")
    parser.add_argument("--holdout6", action="store_true", help="print only the sixth fresh hold-out's section")
    parser.add_argument(
        "--pooled", action="store_true", help="print only the corpus and the read hold-outs pooled (LOSO, strict LOSO)"
    )
    args = parser.parse_args(argv)
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    diagnosed = None
    if args.scripted is not None or args.live:
        from .measure import ANSWERS, diagnosed_verdicts

        answers = None if args.answers == "none" else Path(args.answers) if args.answers else ANSWERS

        def diagnosed(recs: list[dict[str, Any]], rules: list[Verdict], loso: bool) -> Measured:
            return diagnosed_verdicts(
                recs,
                rules,
                noise=args.scripted,
                live=args.live,
                model=args.model,
                api_key_env=args.api_key_env,
                seed=args.seed,
                loso=loso,
                answers=answers,
            )

    if args.diagnosis_summary:
        if diagnosed is None:
            parser.error("--diagnosis-summary needs --scripted NOISE or --live URL")
        names = [n.strip() for n in args.diagnosis_sets.split(",") if n.strip()]
        if unknown := [n for n in names if n not in DIAGNOSIS_SETS]:
            parser.error(f"--diagnosis-sets: unknown {', '.join(unknown)} (known: {', '.join(DIAGNOSIS_SETS)})")
        summary_table, summary_notes = diagnosis_summary(diagnosed, [DIAGNOSIS_SETS[n] for n in names])
        sys.stdout.write(summary_table + "\n\n" + "\n\n".join(summary_notes) + "\n")
        return 0

    if args.holdout2:
        sys.stdout.write(holdout2(diagnosed) + "\n")
        return 0
    if args.holdout3:
        sys.stdout.write(holdout3(diagnosed) + "\n")
        return 0
    if args.holdout4:
        sys.stdout.write(holdout4(diagnosed) + "\n")
        return 0
    if args.holdout5:
        sys.stdout.write(holdout5(diagnosed) + "\n")
        return 0
    if args.holdout6:
        sys.stdout.write(holdout6(diagnosed) + "\n")
        return 0
    if args.pooled:
        sys.stdout.write(pooled() + "\n")
        return 0
    sys.stdout.write(run(args.corpus, diagnosed, confusions=args.confusion) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
