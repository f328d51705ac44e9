"""Rules + diagnosis on the corpus: the proxy's real diagnose step (``resilient_mcp.diagnosis``) with a scripted or a
live model. The scripted model answers from the gold label, with injected noise (a wrong type, a wrong action, a
flipped transient, an answer that is not valid JSON, or an attempt to loosen retry safety): it tests the plumbing
and the clamps, not a model's skill. ``--live URL`` asks a real OpenAI-compatible endpoint instead; its answers are
kept on disk by (model, prompt hash) (``AnswerCache``, ``live-answers.jsonl`` by default), so that a rerun with the
same prompts and rules asks nothing and reproduces the figure without the model."""

from __future__ import annotations

import hashlib
import json
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from resilient_mcp.diagnosis.engine import Diagnoser, DiagnosisState
from resilient_mcp.diagnosis.providers import Answer, OpenAICompatible, Provider
from resilient_mcp.faults import BY_TYPE, RepairAction, vocab
from resilient_mcp.policy.diagnosis_settings import DiagnosisRule
from resilient_mcp.verdict.observations import plan_repair

from .replay import CORPUS, Verdict, call_of, raw_fault, server_of, verdict_of

ANSWERS = CORPUS.with_name("live-answers.jsonl")
"""The live model's answers by (model, prompt hash): what makes a ``--live`` figure reproducible without the model."""

LIVE_TIMEOUT_S = 900.0
"""How long the benchmark waits for a live answer (the proxy's own limit is ``diagnosis.timeout_s``, at most 120 s):
a timeout would score the rules' verdict in the model's place, and is not kept."""

_TYPES = sorted(t for t in BY_TYPE if t[:1].isupper())


class ScriptedModel:
    """Answers the record set in ``current`` from its gold label; ``noise`` of the answers are wrong on purpose."""

    name = "scripted"

    def __init__(self, noise: float, seed: int) -> None:
        self.noise = noise
        self.rng = random.Random(seed)
        self.current: dict[str, Any] = {}
        self.prompts: list[str] = []

    async def ask(self, system: str, user: str, host: object | None) -> Answer:
        self.prompts.append(user)
        gold = self.current["gold"]
        answer: dict[str, Any] = {
            "fault_type": gold["fault_type"],
            "is_transient": gold["transient"],
            "repair_action": gold["repair_action"],
            "suggestion": "Change " + ", ".join(gold["names"]) if gold["names"] else "See the error text.",
        }
        if self.rng.random() < self.noise:
            kind = self.rng.choice(["type", "action", "transient", "invalid", "loosen"])
            if kind == "type":
                answer["fault_type"] = self.rng.choice(_TYPES)
            elif kind == "action":
                answer["repair_action"] = self.rng.choice(list(RepairAction)).value
            elif kind == "transient":
                answer["is_transient"] = not answer["is_transient"]
            elif kind == "invalid":
                return Answer("Sure! The error means the file is missing.", len(system + user) // 4, 12)
            else:
                answer |= {"is_transient": True, "repair_action": "backoff_retry", "max_retry": 5}
        text = json.dumps(answer)
        return Answer(text, len(system + user) // 4, len(text) // 4)


def prompt_key(model: str, system: str, user: str) -> str:
    return hashlib.sha256(f"{model}\0{system}\0{user}".encode()).hexdigest()[:32]


@dataclass
class AnswerCache:
    """A provider's answers on disk, one JSON line each: ``{"key", "model", "text", "tokens_in", "tokens_out",
    "ms"}``, ``key`` the hash of (model, system prompt, user prompt). Only answers are kept (no prompt text)."""

    inner: Provider
    model: str
    path: Path = ANSWERS
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)
    hits: int = 0
    asked: int = 0
    used_ms: list[int] = field(default_factory=list)
    """The recorded latency of every answer used (asked now or read back): the figure a cold run would show."""

    def __post_init__(self) -> None:
        self.name = self.inner.name
        if self.path.exists():
            for line in self.path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    entry = json.loads(line)
                    self.entries[entry["key"]] = entry

    async def ask(self, system: str, user: str, host: object | None) -> Answer:
        key = prompt_key(self.model, system, user)
        entry = self.entries.get(key)
        if entry is not None:
            self.hits += 1
        else:
            started = time.monotonic()
            answer = await self.inner.ask(system, user, host)
            entry = {
                "key": key,
                "model": self.model,
                "text": answer.text,
                "tokens_in": answer.tokens_in,
                "tokens_out": answer.tokens_out,
                "ms": int((time.monotonic() - started) * 1000),
            }
            self.asked += 1
            self.entries[key] = entry
            with self.path.open("a", encoding="utf-8") as out:
                out.write(json.dumps(entry, ensure_ascii=False, sort_keys=True) + "\n")
        self.used_ms.append(int(entry["ms"]))
        return Answer(str(entry["text"]), entry.get("tokens_in"), entry.get("tokens_out"))


def diagnosed_verdicts(
    records: list[dict[str, Any]],
    rules: list[Verdict],
    *,
    noise: float | None,
    live: str | None,
    model: str,
    api_key_env: str | None,
    seed: int,
    loso: bool = False,
    answers: Path | None = ANSWERS,
) -> Measured:
    """``records`` through the diagnose step with a scripted model (``noise``) or the endpoint ``live`` (its answers
    read from and added to ``answers``, unless None); ``note`` says what was asked and how it went."""
    return anyio.run(_run, records, rules, noise, live, model, api_key_env, seed, loso, answers)


@dataclass
class Measured:
    verdicts: list[Verdict]
    asked: int
    loosened: int
    """Verdicts whose retry safety, side-effect status or max_retry ended looser than the rules' (must be 0)."""
    stats: Counter[str]
    asked_at: list[int] = field(default_factory=list)
    """The indices of the records the model was asked about (the rules recognised nothing in them)."""
    note: str = ""


async def measure(
    records: list[dict[str, Any]], rules: list[Verdict], provider: Provider, *, loso: bool = False
) -> Measured:
    """Every record through the proxy's diagnose step (as the observe stage runs it) with ``provider``. With
    ``loso``, each record's rules run with the rules learned only from its own server switched off (``rules`` must
    be the LOSO verdicts then): the diagnosis is asked where a server the rules never saw leaves them unsure."""
    scripted = provider if isinstance(provider, ScriptedModel) else None
    rule = DiagnosisRule(enabled=True, max_per_minute=10_000, timeout_s=120)
    if isinstance(provider, AnswerCache):  # a figure of the model's answers, however slow a loaded machine makes it
        rule = rule.model_copy(update={"timeout_s": LIVE_TIMEOUT_S})
    state = DiagnosisState()
    diagnose = Diagnoser(rule, state, provider)
    out: list[Verdict] = []
    asked_at: list[int] = []
    loosened = 0
    for i, (record, rule_verdict) in enumerate(zip(records, rules, strict=True)):
        with vocab.held_out(frozenset({server_of(record)}) if loso else frozenset()):
            fault = raw_fault(record)
        if not diagnose.wanted(fault):
            out.append(rule_verdict)
            continue
        asked_at.append(i)
        if scripted is not None:
            scripted.current = record
        call = call_of(record)
        _, rules_max, _ = plan_repair(fault, call)
        safety = (fault.retry_safety, fault.side_effect_status)
        new = await diagnose(call, fault)
        verdict = verdict_of(new, record)
        looser_retry = verdict.max_retry > rules_max and (
            fault.is_transient or (verdict.max_retry > 0 and not call.rule.effect.repeatable)
        )
        if (new.retry_safety, new.side_effect_status) != safety or looser_retry:
            loosened += 1
        out.append(verdict)
    return Measured(out, len(asked_at), loosened, state.stats, asked_at)


async def _run(
    records: list[dict[str, Any]],
    rules: list[Verdict],
    noise: float | None,
    live: str | None,
    model: str,
    api_key_env: str | None,
    seed: int,
    loso: bool,
    answers: Path | None,
) -> Measured:
    provider: Provider
    cache: AnswerCache | None = None
    if live is None:
        provider = ScriptedModel(noise or 0.0, seed)
    else:
        provider = OpenAICompatible(live, model, api_key_env, timeout_s=LIVE_TIMEOUT_S)
        if answers is not None:
            provider = cache = AnswerCache(provider, model, answers)
    m = await measure(records, rules, provider, loso=loso)
    s = m.stats
    calls = s["calls"]
    if cache is not None and cache.used_ms:
        lat = sum(cache.used_ms) / len(cache.used_ms)
    else:
        lat = s["latency_ms"] / calls if calls else 0.0
    scripted = live is None
    who = f"scripted model (gold + {100 * (noise or 0):.0f} % noise, seed {seed})" if scripted else f"{live} {model}"
    m.note = (
        f"Diagnosis by {who}: asked for {m.asked} of {len(records)} records "
        "(the rules recognised nothing in them; the rest were typed, a standard code or a wording: rules only); "
        f"model calls {calls}"
        + (f" ({cache.hits} answered from `{cache.path.name}`, {cache.asked} asked now)" if cache is not None else "")
        + f", cache hits {s['cache_hits']}, applied {s['applied']}, abstained {s['abstained']}, fallbacks "
        + (
            ", ".join(f"{k.removeprefix('fallback_')} {v}" for k, v in sorted(s.items()) if k.startswith("fallback_"))
            or "none"
        )
        + f"; mean latency {lat:.1f} ms per call"
        + (" (as recorded when asked)" if cache is not None else "")
        + f"; tokens in {s['tokens_in']}, out {s['tokens_out']}"
        + (" (scripted: estimated as characters / 4)" if scripted else "")
        + f"; verdicts that loosened retry safety after the clamps: {m.loosened}."
    )
    return m
