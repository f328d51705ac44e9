"""Strict scoring of a real model's episode (``strict.py``): a lenient success that skipped a step, answered with a
sentence, or quoted a tool result nobody returned is a failure."""

from __future__ import annotations

import json
from typing import Any

from benchmarks.agentbench.scenarios import generate
from benchmarks.agentbench.strict import strict_verdict

SCENARIO = next(s for s in generate() if s.id == "none-read_only-control-mid")  # search alice, stock apple, list
RESULTS = {
    "search": '[{"order_id": "ord-1", "customer": "alice"}]',
    "get_stock": '{"sku": "apple", "quantity": 40}',
    "list_orders": '{"orders": [{"order_id": "ord-1"}, {"order_id": "ord-2"}]}',
}


def _episode(tools: list[str], answer: Any, reply: str = "", success: bool = True) -> dict[str, Any]:
    events = [{"kind": "call", "tool": t, "ok": True} for t in tools]
    transcript: list[dict[str, Any]] = [{"role": "user", "content": "..."}]
    for t in tools:
        transcript += [{"role": "assistant", "content": ""}, {"role": "tool", "content": RESULTS[t]}]
    transcript.append({"role": "assistant", "content": reply or json.dumps({"status": "done", "answer": answer})})
    return {"events": events, "transcript": transcript, "answer": answer, "score": {"success": success}}


def test_every_step_done_and_an_exact_answer_from_a_tool_result_is_a_strict_success() -> None:
    assert SCENARIO.steps[SCENARIO.target].tool == "get_stock"
    assert strict_verdict(SCENARIO, _episode(["search", "get_stock", "list_orders"], 40)) == (True, [])
    assert strict_verdict(SCENARIO, _episode(["search", "get_stock", "list_orders"], "40"))[0]


def test_a_step_never_done_fails_strictly() -> None:
    ok, why = strict_verdict(SCENARIO, _episode(["get_stock", "list_orders"], 40))
    assert not ok and why == ["step 1 (search) not done"]


def test_a_sentence_for_an_answer_fails_strictly() -> None:
    ok, why = strict_verdict(SCENARIO, _episode(["search", "get_stock", "list_orders"], "There are 40 apples."))
    assert not ok and why == ["answer not exact"]


def test_an_answer_no_tool_returned_fails_strictly() -> None:
    ok, why = strict_verdict(SCENARIO, _episode(["search", "get_stock", "list_orders"], 41))
    assert not ok and why == ["answer in no tool result"]


def test_a_tool_result_the_model_made_up_fails_strictly_and_a_quoted_real_one_does_not() -> None:
    invented = 'The search returned:\n```json\n{"query": "alice", "matches": ["Order 1", "Order 2"]}\n```'
    episode = _episode(["search", "get_stock", "list_orders"], 40)
    episode["transcript"].insert(-1, {"role": "assistant", "content": invented})
    assert strict_verdict(SCENARIO, episode) == (False, ["invented tool result"])
    quoted = _episode(["search", "get_stock", "list_orders"], 40)
    quoted["transcript"].insert(-1, {"role": "assistant", "content": 'Got {"sku": "apple", "quantity": 40}.'})
    assert strict_verdict(SCENARIO, quoted) == (True, [])


def test_a_lenient_failure_stays_a_failure() -> None:
    assert strict_verdict(SCENARIO, _episode(["search", "get_stock", "list_orders"], 40, success=False))[0] is False
