"""Issue 20.2: a model's (or a host's sampling) answer is read in time linear in its length, after a cap.

Before: the verdict parser's fenced-JSON regex (``^\\s*```(?:json)?\\s*(.*?)\\s*```\\s*$`` with DOTALL) backtracked:
an unclosed fence and 2,000 spaces cost 29 s, on the event loop, after the diagnosis deadline had ended; a host's
1.8 KB sampling answer stalled another tenant for 21.6 s. Now the fence is stripped with string methods, an answer
over ``MAX_ANSWER_CHARS`` is discarded unread, an endpoint's body over ``MAX_RESPONSE_BYTES`` is not read on, and the
answer is parsed inside the diagnosis deadline.
"""

from __future__ import annotations

import json

import httpx2
import mcp_types as types
import pytest

from resilient_mcp.call.chain import ToolCall
from resilient_mcp.diagnosis.engine import Diagnoser, DiagnosisState
from resilient_mcp.diagnosis.providers import MAX_RESPONSE_BYTES, OpenAICompatible
from resilient_mcp.diagnosis.verdict import MAX_ANSWER_CHARS, parse_verdict
from resilient_mcp.faults import EffectClass
from resilient_mcp.faults.classify import classify_result
from resilient_mcp.policy import ToolRule
from resilient_mcp.policy.diagnosis_settings import DiagnosisRule
from tests.security.cpu import cpu_cost

pytestmark = pytest.mark.anyio

RATIO = 25.0
VERDICT = {
    "fault_type": "B4_semantic_argument_rejection",
    "is_transient": False,
    "repair_action": "fix_parameter",
    "suggestion": "Pass an existing table name.",
}


def _padded_verdict(length: int) -> str:
    """A valid fenced verdict of exactly ``length`` characters (padded with spaces inside the fence)."""
    head, tail = "```json\n" + json.dumps(VERDICT), "\n```"
    return head + " " * (length - len(head) - len(tail)) + tail


@pytest.mark.parametrize(
    "hostile",
    [
        "```" + " " * 300,  # an unclosed fence: the regex tried every split of the spaces
        "```" + " " * 2000,
        "```json" + " \n" * 1000 + "``",
        " " * 1000 + "```" + " " * 1000 + "``` ```" + " " * 1000,
    ],
    ids=["unclosed-300", "unclosed-2000", "almost-closed", "fences-in-spaces"],
)
def test_a_hostile_answer_costs_what_a_valid_one_of_its_length_costs(hostile: str) -> None:
    benign = _padded_verdict(len(hostile))
    assert parse_verdict(benign) is not None
    assert parse_verdict(hostile) is None
    benign_s = cpu_cost(lambda: parse_verdict(benign))
    hostile_s = cpu_cost(lambda: parse_verdict(hostile), stop_above=RATIO * benign_s)
    assert hostile_s <= RATIO * benign_s, f"hostile {hostile_s:.6f} s vs valid {benign_s:.6f} s (CPU)"


@pytest.mark.parametrize(
    "answer",
    [json.dumps(VERDICT), "```json\n" + json.dumps(VERDICT) + "\n```", "  ```" + json.dumps(VERDICT) + "```  "],
)
def test_plain_and_fenced_verdicts_are_read(answer: str) -> None:
    verdict = parse_verdict(answer)
    assert verdict is not None and verdict.fault_type == VERDICT["fault_type"]


def test_an_answer_over_the_cap_is_discarded_unread() -> None:
    assert parse_verdict(_padded_verdict(MAX_ANSWER_CHARS)) is not None
    assert parse_verdict(_padded_verdict(MAX_ANSWER_CHARS + 1)) is None
    assert parse_verdict("[" * 100_000 + "]" * 100_000) is None  # deep nesting: refused, not a RecursionError


def _call() -> ToolCall:
    tool = types.Tool(name="run_sql", description="Run SQL.", input_schema={"type": "object"})
    return ToolCall(
        name="run_sql",
        arguments={"sql": "select 1"},
        upstream="db",
        upstream_tool="run_sql",
        rule=ToolRule(effect=EffectClass.READ_ONLY),
        tool=tool,
        session_id="s1",
    )


async def test_an_endpoint_answer_over_the_byte_cap_falls_back_to_the_rules() -> None:
    """An OpenAI-compatible endpoint that streams an endless body is cut at ``MAX_RESPONSE_BYTES``."""
    sent: list[int] = []

    async def endless() -> object:
        chunk = b" " * 65536
        while True:
            sent.append(len(chunk))
            yield chunk

    def answer(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, content=endless(), headers={"Content-Type": "application/json"})

    provider = OpenAICompatible("http://127.0.0.1:9/v1", "m", None, timeout_s=5, transport=httpx2.MockTransport(answer))
    rule = DiagnosisRule(enabled=True, provider="openai", url="http://127.0.0.1:9/v1", model="m", timeout_s=5)
    text = 'ledger "customers" refused the entry'
    fault = classify_result(types.CallToolResult(content=[types.TextContent(text=text)], is_error=True), tool=None)
    assert fault is not None
    result = await Diagnoser(rule, DiagnosisState(), provider)(_call(), fault)
    assert result.details["diagnosis"]["status"] == "fallback"
    assert result.details["diagnosis"]["reason"] == "unavailable"
    assert sum(sent) <= MAX_RESPONSE_BYTES + 2 * 65536
