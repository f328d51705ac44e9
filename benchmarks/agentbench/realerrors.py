"""Scenarios from the real-error corpus: real servers' own wordings, replayed by the chaos server (ids ``R-…``).

The catalog scenarios (``scenarios.py``) speak the chaos server's words, which every reader here was written
against. Observations can only add value where a careful reader cannot tell from the raw text what happened or what
to do: errors of servers whose wording is in no reader's habits. ``benchmarks/errors/corpus.jsonl`` holds the
errors real MCP servers returned (the reference filesystem, memory and everything servers, mcp-server-fetch, -git,
-time, a SQLite server; collected by ``benchmarks/errors/collect.py``) with a gold label each. Here every distinct
situation of a real server whose fault the order shop can meet becomes one variant: the chaos server answers the
target's call with that record's text, as an ``isError`` result without any typed hint (real servers send none),
at the first and the last step of the main set's three-step task. The oracle is the main set's for the same fault
and tool class.

Taken: D1 (transient execution errors: fetch failures, 5xx pages), D2 (a 429 page), D4 (not found, on reads and
writes), D5 (an existing destination or branch, on a create), F1/F2 (authentication, sandbox and permission
refusals). Left out, and why: B1/B2/B4 and A1 (the agent's own mistakes: the real text names another server's
arguments and tools, which an order-shop agent never sends), D5 situations that are not about existence (a failed
edit match, nothing to commit: no order-shop write fails that way), C3 (the corpus holds the proxy's own words for
it, not a server's), and the chaos server's own records. Which situation maps to which fault comes from the
corpus's gold label only; no record was picked or dropped after running it.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from .scenarios import BASE_POLICY, TARGETS, _fault_type, rule
from .spec import Oracle, Scenario, Step

CORPUS = Path(__file__).resolve().parent.parent / "errors" / "corpus.jsonl"
PREFIX = "R-"
_RETRY = dict(recipe="retry", transient=True, max_retry=1, proxy_may_retry=True)
_ASK = dict(recipe="stop", recoverable=False, terminal_ok=("asked_user", "aborted"))
_CREATE = TARGETS["create"].args
FILLERS = (Step("get_stock", {"sku": "pear"}), Step("search", {"query": "alice"}), Step("list_orders", {}))
EXISTENCE = ("exists", "already", "duplicate", "unique")
"""D5 situations about something that already exists (the only D5 a create in the order shop can meet)."""


def _text(record: dict[str, Any]) -> str | None:
    raw = record["raw"]
    if raw.get("kind") != "result":
        return None
    parts = [c.get("text", "") for c in (raw.get("result") or {}).get("content", []) if c.get("type") == "text"]
    text = "\n".join(p for p in parts if p)
    return text or None


def _plan(fault: str, effect: str, situation: str) -> dict[str, Any] | None:
    """The target, rule shape and oracle for a real record's (fault, effect class), or None when not taken."""
    reads = effect == "read_only"
    if fault == "D1":
        return {"target": "stock" if reads else "status", "nth": 1, "oracle": Oracle(**_RETRY)}  # type: ignore[arg-type]
    if fault == "D2" and reads:
        return {"target": "stock", "nth": 1, "oracle": Oracle(**_RETRY)}  # type: ignore[arg-type]
    if fault == "D4":
        if reads:
            return {"target": "order", "args": True, "oracle": Oracle("switch", alt=("list_orders", {}))}
        return {"target": "status", "args": True, "oracle": Oracle(**_ASK)}  # type: ignore[arg-type]
    if fault == "D5" and not reads and any(w in situation for w in EXISTENCE):
        return {"target": "create", "args": True, "oracle": Oracle("verify"), "exists": True}
    if fault in ("F1", "F2", "F3"):
        return {"target": "stock" if reads else "create", "nth": None, "oracle": Oracle(**_ASK)}  # type: ignore[arg-type]
    return None


@cache
def _records() -> tuple[tuple[str, str, str, str, str], ...]:
    """(fault, effect, situation, source, text) of the first real record of every situation, in corpus order."""
    seen: set[tuple[str, str, str]] = set()
    out = []
    for line in CORPUS.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        if "chaos-server" in record["source"]:
            continue
        fault, effect, situation = record["gold"]["fault_type"][:2], record["effect"], record["situation"]
        text = _text(record)
        if text is None or (fault, effect, situation) in seen:
            continue
        seen.add((fault, effect, situation))
        out.append((fault, effect, situation, record["source"], text))
    return tuple(out)


def real_error_scenarios() -> list[Scenario]:
    """Every real-error scenario, in corpus order, each at the first and the last step."""
    out = []
    for fault, effect, situation, _source, text in _records():
        plan = _plan(fault, effect, situation)
        if plan is None:
            continue
        target = TARGETS[plan["target"]]
        params: dict[str, Any] = {"message": text, "typed": False}
        state: dict[str, Any] = {}
        expected: dict[str, int] = {}
        if plan.get("exists"):  # the order the create collides with, as the main set's D5 already_exists
            params |= {"variant": "already_exists"}
            state = {"ord-3": {**_CREATE, "order_id": "ord-3", "version": 1, "status": "open"}}
            expected = {"create_order:R1": 0}
        if plan.get("args"):
            rules = [rule(fault, target.tool, None, dict(target.args), **params)]
        else:
            rules = [rule(fault, target.tool, plan["nth"], **params)]
        for position in ("first", "last"):
            fillers = [f for f in FILLERS if f.tool != target.tool][:2]
            index = 0 if position == "first" else 2
            steps = (*fillers[:index], target, *fillers[index:])
            out.append(
                Scenario(
                    id=f"{PREFIX}{fault}-{target.cls}-{situation}-{position}",
                    fault=_fault_type(fault),
                    variant=f"R-{situation}",
                    target_class=target.cls,
                    position=position,  # type: ignore[arg-type]
                    steps=steps,
                    target=index,
                    oracle=plan["oracle"],
                    server_rules=tuple(rules),
                    policy=BASE_POLICY,
                    state=state,
                    expected_commits=expected,
                )
            )
    return out


def verdict_lines() -> list[str]:
    """The proxy's verdict on every real-error scenario's text, one line each: ``scenario  tool  hash`` (the
    scenario id without its position).

    An ``R-`` episode's outcome follows from this verdict (fault type, transient, repair, retry safety, what the
    model is told), so a classification change that moves one changes its line here. ``VERDICTS.tsv`` is written
    beside ``DIGEST.tsv`` by every full run; the digest test compares it with the classifier as it is now, which
    costs milliseconds where re-running every real-error episode would cost minutes.
    """
    # imported here: the proxy's classifier is not needed to build scenarios, only to check them
    import hashlib

    import mcp_types as types

    from resilient_mcp.chaos.tools import default_tools
    from resilient_mcp.faults.error_results import classify_result
    from resilient_mcp.text import canonical_json

    tools = {t.name: t for t in default_tools()}
    lines = []
    for scenario in real_error_scenarios():
        if scenario.position != "first":
            continue  # the last-position twin replays the same text at the same tool
        target = scenario.steps[scenario.target]
        text = scenario.server_rules[0]["params"]["message"]
        result = types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)
        fault = classify_result(result, tool=tools[target.tool])
        assert fault is not None
        fields = {
            "fault_type": fault.fault_type,
            "transient": fault.is_transient,
            "repair": str(fault.repair_action),
            "retry_safety": str(fault.retry_safety),
            "side_effect": str(fault.side_effect_status),
            "max_retry": fault.max_retry,
            "message": fault.message,
            "suggestion": fault.suggestion,
            "details": {k: str(v) for k, v in fault.details.items()},
        }
        digest = hashlib.sha256(canonical_json(fields).encode()).hexdigest()[:12]
        lines.append(f"{scenario.id.removesuffix('-first')}\t{target.tool}\t{digest}")
    return lines


VERDICTS = "VERDICTS.tsv"


def write_verdicts(root: Path) -> Path:
    """``VERDICTS.tsv`` beside the digest: the verdicts the run's real-error episodes were played with."""
    path = root / VERDICTS
    path.write_text("\n".join(verdict_lines()) + "\n", encoding="utf-8")
    return path
