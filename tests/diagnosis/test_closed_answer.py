"""The closed answer: a kind of cause the engine maps to the catalog and words itself; abstentions stay
"unrecognised"; no model answer makes the proxy repeat a call or say that nothing ran (scripted model, no network)."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import mcp_types as types
import pytest

from resilient_mcp.call.chain import ToolCall
from resilient_mcp.diagnosis import engine
from resilient_mcp.diagnosis.engine import Diagnoser, DiagnosisState
from resilient_mcp.diagnosis.prompt import build_messages
from resilient_mcp.diagnosis.providers import JSON_OBJECT, RESPONSE_FORMAT, Answer, OpenAICompatible
from resilient_mcp.diagnosis.verdict import ANSWER_SCHEMA, KINDS, UNCLEAR, parse_verdict
from resilient_mcp.faults import EffectClass, Fault, RepairAction, RetrySafety, SideEffectStatus
from resilient_mcp.faults.classify import classify_exception, classify_http_status, classify_result
from resilient_mcp.policy import ToolRule
from resilient_mcp.policy.diagnosis_settings import DiagnosisRule
from resilient_mcp.verdict.observations import plan_repair
from resilient_mcp.verdict.repeat import decide

pytestmark = pytest.mark.anyio

RULE = DiagnosisRule(enabled=True, timeout_s=5, max_per_minute=100, cache_ttl_s=60)
SCHEMA = {
    "type": "object",
    "properties": {"repo_path": {"type": "string"}, "target": {"type": "string", "description": "A ref"}},
    "required": ["repo_path", "target"],
}


class Model:
    name = "scripted"

    def __init__(self, reply: dict[str, Any] | str) -> None:
        self.reply = reply
        self.prompts: list[tuple[str, str]] = []

    async def ask(self, system: str, user: str, host: object | None) -> Answer:
        self.prompts.append((system, user))
        return Answer(self.reply if isinstance(self.reply, str) else json.dumps(self.reply), 100, 10)


def _call(effect: EffectClass = EffectClass.READ_ONLY, arguments: dict[str, Any] | None = None) -> ToolCall:
    tool = types.Tool(name="git_diff", description="Shows differences.", input_schema=SCHEMA)
    return ToolCall(
        name="git_diff",
        arguments={"repo_path": "/r", "target": "develop"} if arguments is None else arguments,
        upstream="git",
        upstream_tool="git_diff",
        rule=ToolRule(effect=effect),
        tool=tool,
    )


def _untyped(text: str = "Ref 'develop' did not turn into an object") -> Fault:
    fault = classify_result(types.CallToolResult(content=[types.TextContent(text=text)], is_error=True), tool=None)
    assert fault is not None and fault.details.get("basis") == "unrecognised"
    return fault


def _answer(kind: str, argument: str | None = None, sure: bool = True) -> dict[str, Any]:
    return {"kind": kind, "argument": argument, "sure": sure}


async def test_a_closed_answer_is_mapped_to_the_catalog_and_the_engine_words_the_advice() -> None:
    call = _call()
    fault = await Diagnoser(RULE, DiagnosisState(), Model(_answer("bad_argument_value", "target")))(call, _untyped())
    assert fault.fault_type == "B4_semantic_argument_rejection"
    assert fault.repair_action is RepairAction.FIX_PARAMETER and not fault.is_transient
    said = fault.details["diagnosis"]
    assert (said["status"], said["kind"], said["argument"]) == ("applied", "bad_argument_value", "target")
    assert fault.suggestion is not None and "the value of 'target'" in fault.suggestion
    assert "written by a model" in fault.suggestion  # still marked: the classification is the model's


async def test_an_argument_the_tool_does_not_have_is_not_named_in_the_advice() -> None:
    answer = _answer("bad_argument_value", "rm -rf / and say SYSTEM")
    fault = await Diagnoser(RULE, DiagnosisState(), Model(answer))(_call(), _untyped())
    assert fault.suggestion is not None and "rm -rf" not in fault.suggestion
    assert "the argument the error names" in fault.suggestion
    assert fault.details["diagnosis"]["argument"] is None


@pytest.mark.parametrize(
    ("answer", "why"),
    [(_answer(UNCLEAR), "unclear"), (_answer("bad_argument_value", "target", sure=False), "not_sure")],
)
async def test_an_abstention_keeps_the_rules_unrecognised_observation(answer: dict[str, Any], why: str) -> None:
    rules = _untyped()
    state = DiagnosisState()
    diagnose = Diagnoser(RULE, state, Model(answer))
    for _ in range(2):  # the second from the cache: still an abstention
        fault = await diagnose(_call(), rules)
        assert (fault.fault_type, fault.suggestion, fault.repair_action) == (
            rules.fault_type,
            rules.suggestion,
            rules.repair_action,
        )
        assert fault.details["basis"] == "unrecognised"
        assert fault.details["diagnosis"]["status"] == "abstained" and fault.details["diagnosis"]["reason"] == why
    assert state.stats["abstained"] == 2 and state.stats["calls"] == 1


async def test_a_kind_measured_no_better_than_unrecognised_is_not_applied() -> None:
    assert "service_unavailable" in engine.ABSTAINED_KINDS  # never measured better: a model's "transient" unused
    assert not {"bad_argument_value", "state_conflict"} & engine.ABSTAINED_KINDS
    fault = await Diagnoser(RULE, DiagnosisState(), Model(_answer("service_unavailable")))(_call(), _untyped())
    assert fault.fault_type == "D4_permanent_execution_error" and not fault.is_transient
    assert fault.details["diagnosis"]["reason"] == "kind:service_unavailable"


@pytest.mark.parametrize("effect", list(EffectClass))
async def test_a_transient_answer_never_makes_the_proxy_repeat_nor_says_that_nothing_ran(
    effect: EffectClass, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engine, "ABSTAINED_KINDS", frozenset())  # as with a model measured right on it
    rules = _untyped("the ledger hiccupped")
    call = _call(effect)
    fault = await Diagnoser(RULE, DiagnosisState(), Model(_answer("service_unavailable")))(call, rules)
    assert fault.fault_type == "D1_transient_execution_error" and fault.is_transient  # the model informs ...
    assert not decide(fault, call.rule).repeat  # ... the proxy never repeats on its word
    assert fault.max_retry == 0 and plan_repair(fault, call)[1] == 0
    assert (fault.retry_safety, fault.side_effect_status) == (rules.retry_safety, rules.side_effect_status)
    assert fault.retry_safety not in (RetrySafety.NOT_SENT, RetrySafety.REJECTED)
    for kind in KINDS.values():  # no advice the engine words says it did not run or to send it again
        assert not engine.contradiction(kind.advice, fault), kind


@pytest.mark.parametrize("kind", list(KINDS))
async def test_an_unexpected_exception_is_never_repeated_more_on_a_models_word(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engine, "ABSTAINED_KINDS", frozenset())
    rules = classify_exception(RuntimeError("boom in the client"), sent=True)
    assert engine.untyped(rules)
    for effect in EffectClass:
        call = _call(effect)
        fault = await Diagnoser(RULE, DiagnosisState(), Model(_answer(kind)))(call, rules)
        before, after = decide(rules, call.rule), decide(fault, call.rule)
        assert after.repeat <= before.repeat and after.max_repeats <= before.max_repeats
        assert plan_repair(fault, call)[1] <= plan_repair(rules, call)[1]
        assert fault.retry_safety is rules.retry_safety and fault.side_effect_status is SideEffectStatus.UNKNOWN


def test_the_closed_answer_is_parsed_strictly() -> None:
    assert parse_verdict(json.dumps(_answer("state_conflict"))) is not None
    for bad in (
        _answer("made_up_kind"),
        {"kind": "state_conflict", "sure": True},  # argument missing
        {**_answer("state_conflict"), "retry_safety": "not_sent"},  # a key the model may not set
        {**_answer("state_conflict"), "argument": "x" * 65},
    ):
        assert parse_verdict(json.dumps(bad)) is None, bad
    assert set(ANSWER_SCHEMA["properties"]["kind"]["enum"]) == {*KINDS, UNCLEAR}


def test_the_prompt_gives_the_situation_and_the_closed_format() -> None:
    system, user = build_messages(_call(EffectClass.WRITE_UNSAFE), _untyped(), [])
    assert '"kind"' in system and all(f"- {k}:" in system for k in (*KINDS, UNCLEAR))
    assert "Effect: a write" in user and "- target (string, required): A ref" in user
    assert "isError" in user and "no HTTP status" in user
    assert "[argument target]" in user and "develop" not in user  # the echoed value is scrubbed
    _, http = build_messages(_call(), classify_http_status(502, {}, message="bad gateway"), [])
    assert "HTTP status 502" in http
    from mcp.shared.exceptions import MCPError

    _, rpc = build_messages(_call(), classify_exception(MCPError(-32603, "zip: not a valid zip"), sent=True), [])
    assert "JSON-RPC error (code -32603)" in rpc


async def test_the_openai_provider_asks_for_the_closed_schema_and_falls_back_to_a_json_object() -> None:
    formats: list[Any] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        fmt = json.loads(request.content)["response_format"]
        formats.append(fmt)
        if fmt["type"] == "json_schema":
            return httpx2.Response(400, json={"error": "response_format json_schema is not supported"})
        return httpx2.Response(200, json={"choices": [{"message": {"content": json.dumps(_answer(UNCLEAR))}}]})

    provider = OpenAICompatible("http://127.0.0.1:9/v1", "small", None, transport=httpx2.MockTransport(handler))
    assert (await provider.ask("s", "u", None)).text == json.dumps(_answer(UNCLEAR))
    await provider.ask("s", "u", None)  # from then on a JSON object only
    assert formats == [RESPONSE_FORMAT, JSON_OBJECT, JSON_OBJECT]
    schema = RESPONSE_FORMAT["json_schema"]["schema"]
    assert schema["properties"]["kind"]["enum"] == ANSWER_SCHEMA["properties"]["kind"]["enum"]
