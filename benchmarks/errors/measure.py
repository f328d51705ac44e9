"""Rules + diagnosis on the corpus: the proxy's real diagnose step (``resilient_mcp.diagnosis``) with a scripted or a
live model. The scripted model answers from the gold label, with injected noise (a wrong type, a wrong action, a
flipped transient, an answer that is not valid JSON, or an attempt to loosen retry safety): it tests the plumbing
and the clamps, not a model's skill. ``--live URL`` asks a real OpenAI-compatible endpoint instead."""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import dataclass
from typing import Any

import anyio

from resilient_mcp.diagnosis.engine import Diagnoser, DiagnosisState
from resilient_mcp.diagnosis.providers import Answer, OpenAICompatible, Provider
from resilient_mcp.faults import BY_TYPE, RepairAction, vocab
from resilient_mcp.policy.diagnosis_settings import DiagnosisRule
from resilient_mcp.verdict.observations import plan_repair

from .replay import Verdict, call_of, raw_fault, server_of, verdict_of

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
) -> tuple[list[Verdict], str]:
    return anyio.run(_run, records, rules, noise, live, model, api_key_env, seed, loso)


@dataclass
class Measured:
    verdicts: list[Verdict]
    asked: int
    loosened: int
    """Verdicts whose retry safety, side-effect status or max_retry ended looser than the rules' (must be 0)."""
    stats: Counter[str]


async def measure(
    records: list[dict[str, Any]], rules: list[Verdict], provider: Provider, *, loso: bool = False
) -> Measured:
    """Every record through the proxy's diagnose step (as the observe stage runs it) with ``provider``. With
    ``loso``, each record's rules run with the rules learned only from its own server switched off (``rules`` must
    be the LOSO verdicts then): the diagnosis is asked where a server the rules never saw leaves them unsure."""
    scripted = provider if isinstance(provider, ScriptedModel) else None
    rule = DiagnosisRule(enabled=True, max_per_minute=10_000, timeout_s=60)
    state = DiagnosisState()
    diagnose = Diagnoser(rule, state, provider)
    out: list[Verdict] = []
    asked = loosened = 0
    for record, rule_verdict in zip(records, rules, strict=True):
        with vocab.held_out(frozenset({server_of(record)}) if loso else frozenset()):
            fault = raw_fault(record)
        if not diagnose.wanted(fault):
            out.append(rule_verdict)
            continue
        asked += 1
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
    return Measured(out, asked, loosened, state.stats)


async def _run(
    records: list[dict[str, Any]],
    rules: list[Verdict],
    noise: float | None,
    live: str | None,
    model: str,
    api_key_env: str | None,
    seed: int,
    loso: bool,
) -> tuple[list[Verdict], str]:
    provider: Provider = (
        ScriptedModel(noise or 0.0, seed) if live is None else OpenAICompatible(live, model, api_key_env, timeout_s=60)
    )
    m = await measure(records, rules, provider, loso=loso)
    s = m.stats
    calls = s["calls"]
    lat = s["latency_ms"] / calls if calls else 0.0
    scripted = live is None
    who = f"scripted model (gold + {100 * (noise or 0):.0f} % noise, seed {seed})" if scripted else f"{live} {model}"
    notes = (
        f"Diagnosis by {who}: asked for {m.asked} of {len(records)} records "
        "(the rules recognised nothing in them; the rest were typed, a standard code or a wording: rules only); "
        f"model calls {calls}, cache hits {s['cache_hits']}, applied {s['applied']}, fallbacks "
        + (
            ", ".join(f"{k.removeprefix('fallback_')} {v}" for k, v in sorted(s.items()) if k.startswith("fallback_"))
            or "none"
        )
        + f"; mean latency {lat:.1f} ms per call; tokens in {s['tokens_in']}, out {s['tokens_out']}"
        + (" (scripted: estimated as characters / 4)" if scripted else "")
        + f"; verdicts that loosened retry safety after the clamps: {m.loosened}."
    )
    return m.verdicts, notes
