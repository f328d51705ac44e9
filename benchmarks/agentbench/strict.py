"""Strict scoring of a live (real-model) episode: every user step done, the answer exact, nothing invented.

The scripted policies' success (``scoring.py``) is already strict: they report only what a tool returned, a
skipped read ends the task ``degraded`` (a failure), and the answer is the extracted fact itself. A real model is
scored from what it wrote, and the live track's own scoring is lenient: the answer is read type-tolerantly (a
sentence counts by its first integer) and nothing checks that the model called the tools of steps it was not asked
to report on, or that a result it quotes came from a tool. Strictly, an episode succeeds when, on top of the lenient
success:

- **every step of the user's request was done**: each read step has a successful call of its tool (the faulted step
  may also get its fact from one of the domain's alternative reads); write steps are already checked against the
  ledger;
- **the answer is exact**: the value itself ("40" or 40), not a sentence that contains it;
- **nothing was invented**: the answer appears in a tool result the model received, and no JSON object the model
  wrote outside a tool call and outside its answer line carries a value no tool result holds (a tool result made
  up in the reply).

``strict_verdict`` gives the verdict and the reasons it fails; ``livereport`` reports strict and lenient side by
side. Nothing here needs the episode's ledger: a committed journal is re-scored as it is.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .spec import Scenario

_FENCE = re.compile(r"```(?:json)?\s*\n?(.*?)```", re.DOTALL)
_ANSWER_KEYS = {"status", "answer"}
_CALL_KEYS = ({"name", "arguments"}, {"function"}, {"name", "parameters"})


def _objects(text: str) -> list[Any]:
    """JSON values in a reply: fenced blocks, and every balanced ``{...}`` that parses."""
    found: list[Any] = []
    decoder = json.JSONDecoder()
    for chunk in [*_FENCE.findall(text), text]:
        i = 0
        while (i := chunk.find("{", i)) != -1:
            try:
                value, end = decoder.raw_decode(chunk, i)
            except ValueError:
                i += 1
                continue
            found.append(value)
            i = end
    return found


def _scalars(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [s for v in value.values() for s in _scalars(v)]
    if isinstance(value, list):
        return [s for v in value for s in _scalars(v)]
    if value is None or isinstance(value, bool):
        return []
    text = str(value).strip()
    return [text] if len(text) >= 2 or text.isdigit() else []


def _grounded(value: str, results: str) -> bool:
    if re.fullmatch(r"-?\d+(?:\.0+)?", value):
        number = value.split(".")[0]
        return re.search(rf"(?<![\w.-]){re.escape(number)}(?![\w.])", results) is not None
    return value.lower() in results.lower()


def _exact(answer: Any) -> bool:
    """The answer is a value, not a sentence: a number, or a string that is one token or parses as a number."""
    if isinstance(answer, bool) or answer is None or isinstance(answer, list | dict):
        return False
    if isinstance(answer, int | float):
        return True
    text = str(answer).strip().strip('"')
    try:
        float(text)
        return True
    except ValueError:
        return " " not in text


def strict_verdict(s: Scenario, episode: dict[str, Any]) -> tuple[bool, list[str]]:
    """(strict success, the reasons it fails). A lenient failure stays a failure (reason ``lenient``)."""
    reasons: list[str] = []
    if not episode["score"]["success"]:
        reasons.append("lenient")
    transcript = episode.get("transcript") or []
    results = "\n".join(str(m.get("content") or "") for m in transcript if m.get("role") == "tool")
    calls = [e for e in episode.get("events", []) if e.get("kind") == "call"]
    if s.oracle.recoverable:
        for i, step in enumerate(s.steps):
            if step.cls != "read_only":
                continue  # the ledger decides a write (lenient success checks the intended state)
            tools = {step.tool, f"{step.tool}_v2"}
            if i == s.target:  # the step the fault is aimed at may get its fact from another read
                tools |= set(s.domain.alternatives)
            if not any(e["ok"] and e["tool"] in tools for e in calls):
                reasons.append(f"step {i + 1} ({step.tool}) not done")
        answer = episode.get("answer")
        if s.target_step.fact is not None and episode["score"]["success"]:
            if not _exact(answer):
                reasons.append("answer not exact")
            elif not _grounded(str(answer).strip().strip('"'), results):
                reasons.append("answer in no tool result")
    for m in transcript:
        if m.get("role") != "assistant" or not m.get("content"):
            continue
        for obj in _objects(str(m["content"])):
            if not isinstance(obj, dict) or set(obj) <= _ANSWER_KEYS | {"reason"}:
                continue
            if any(keys <= set(obj) for keys in _CALL_KEYS):
                continue
            if any(not _grounded(v, results) for v in _scalars(obj)):
                reasons.append("invented tool result")
                break
        if "invented tool result" in reasons:
            break
    return not reasons, reasons
