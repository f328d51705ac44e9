"""Per-tool ``result_invariants`` (issue 8 item 7) and results that break their promise (issue 15 item 1).

A success that breaks what the policy says the tool returns (non_empty, required fields, field predicates, a JSON
Schema) is a suspect result (E5): the model gets an observation, not the data. A read may be re-read once (the loop
guard lets that identical call through); a write is verified. An outputSchema violation never offers a value that
breaks the schema as data, and what the model needs is in the text of the observation.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from pydantic import ValidationError

from resilient_mcp.policy import Policy, PolicyFile, ResultInvariants
from resilient_mcp.stages.invariants import Invariants
from tests.fixtures.scripted import ScriptedUpstream, ok_text
from tests.harness import observation, proxied, text
from tests.helpers import child_env, proxy_argv, write_yaml

pytestmark = pytest.mark.anyio

LIMIT_S = 60


def check(invariants: dict[str, Any], result: types.CallToolResult) -> list[dict[str, str]]:
    return Invariants(ResultInvariants.model_validate(invariants)).check(result)


def data(value: Any) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=json.dumps(value))])


# --- the model and its errors ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("invariants", "words"),
    [
        ({"fields": {"sku": {"pattern": "[a-"}}}, "not a valid regular expression"),
        ({"required": ["orders..qty"]}, "field path 'orders..qty'"),
        ({"json_schema": {"type": "objekt"}}, "json_schema is not a valid JSON Schema"),
        ({"fields": {"qty": {"min": 0}}}, "min"),
        ({"fields": {"qty": {"min_items": -1}}}, "greater than or equal to 0"),
    ],
)
def test_a_bad_invariant_is_refused_when_the_policy_loads_with_a_message_naming_it(
    invariants: dict[str, Any], words: str
) -> None:
    with pytest.raises(ValidationError) as refused:
        PolicyFile.model_validate({"tools": {"get_stock": {"result_invariants": invariants}}})
    assert words in str(refused.value) and "result_invariants" in str(refused.value)


def test_invariants_merge_like_every_rule_layer_and_the_tool_glob_wins() -> None:
    policy = Policy(
        PolicyFile.model_validate(
            {
                "upstreams": {"shop": {"defaults": {"result_invariants": {"non_empty": True}}}},
                "tools": {"search": {"result_invariants": {"fields": {"orders": {"min_items": 1}}}}},
            }
        )
    )
    rule = policy.resolve("shop", "search", "search")
    assert rule.result_invariants is not None
    assert rule.result_invariants.non_empty and rule.result_invariants.fields["orders"].min_items == 1
    other = policy.resolve("shop", "get_order", "get_order").result_invariants
    assert other is not None and other.non_empty and other.fields == {}


# --- the checks -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("invariants", "result", "found"),
    [
        ({"non_empty": True}, data([]), [("$", "the result is empty")]),
        ({"non_empty": True}, types.CallToolResult(content=[]), [("$", "the result is empty")]),
        ({"non_empty": True}, ok_text("3 orders"), []),
        ({"required": ["order_id"]}, data({"status": "ok"}), [("$.order_id", "is missing")]),
        ({"fields": {"orders": {"min_items": 1}}}, data({"orders": []}), [("$.orders", "has fewer than 1 items")]),
        ({"fields": {"quantity": {"minimum": 0}}}, data({"quantity": -4}), [("$.quantity", "is less than 0")]),
        (
            {"fields": {"orders.0.qty": {"type": "integer"}}},
            data({"orders": [{"qty": "2"}]}),
            [("$.orders[0].qty", "is not of type integer")],
        ),
        ({"fields": {"note": {"required": False, "non_empty": True}}}, data({"id": 1}), []),
        (
            {"fields": {"sku": {"pattern": "^[A-Z]+-\\d+$"}}},
            data({"sku": "apple"}),
            [("$.sku", "does not match '^[A-Z]+-\\\\d+$'")],
        ),
        (
            {"json_schema": {"type": "object", "required": ["total"]}},
            data({"sum": 3}),
            [("$", "'total' is a required property")],
        ),
        (
            {"required": ["id"]},
            ok_text("created order 7"),
            [("$", "the result carries no JSON data (structuredContent or JSON text)")],
        ),
        ({"required": ["id"]}, ok_text("not json", id=7), []),  # structuredContent first
    ],
)
def test_a_result_is_checked_against_each_invariant(
    invariants: dict[str, Any], result: types.CallToolResult, found: list[tuple[str, str]]
) -> None:
    assert [(v["path"], v["message"]) for v in check(invariants, result)] == found


# --- through the proxy ----------------------------------------------------------------------------------------------

ORDERS = {"fields": {"orders": {"min_items": 1}}}
VERIFY = {"tool": "get_order", "args": {"client_ref": "{client_ref}"}}


async def test_an_empty_search_that_must_find_something_is_a_suspect_result_the_model_may_re_read_once() -> None:
    up = ScriptedUpstream(name="shop")
    empty, found = data({"orders": []}), data({"orders": [{"id": "o-1"}]})
    up.tool("search", ScriptedUpstream.sequence(lambda a: empty, lambda a: empty, lambda a: found))
    policy = {"tools": {"search": {"effect": "read_only", "result_invariants": ORDERS}}}
    async with proxied({"shop": up.server()}, policy) as h:
        with anyio.fail_after(LIMIT_S):
            first = await h.client.call_tool("search", {"q": "bob"})
            second = await h.client.call_tool("search", {"q": "bob"})
            third = await h.client.call_tool("search", {"q": "bob"})
    obs = observation(first)
    assert obs["fault_type"] == "E5_semantic_corruption_or_silent_noop"
    assert (obs["repair_action"], obs["max_retry"]) == ("backoff_retry", 1)
    assert "$.orders has fewer than 1 items" in text(first) and "Read it once more" in text(first)
    again = observation(second)
    assert (again["repair_action"], again["max_retry"]) == ("degrade", 0)
    assert observation(third)["details"]["short_circuited"] is True
    assert up.count("search") == 2, "the re-read went through once; the third identical call was answered"


async def test_a_write_that_says_ok_without_the_id_it_must_return_is_verified() -> None:
    up = ScriptedUpstream(name="shop")
    up.tool("create_order", lambda args: data({"status": "ok"}))
    rule = {"effect": "write_unsafe", "verify_with": VERIFY, "result_invariants": {"required": ["order_id"]}}
    async with proxied({"shop": up.server()}, {"tools": {"create_order": rule}}) as h:
        with anyio.fail_after(LIMIT_S):
            result = await h.client.call_tool("create_order", {"client_ref": "r-1", "qty": 2})
    obs = observation(result)
    assert obs["fault_type"] == "E5_semantic_corruption_or_silent_noop" and obs["repair_action"] == "verify_state"
    assert "get_order(client_ref='r-1')" in text(result) and "$.order_id is missing" in text(result)
    assert up.count("create_order") == 1


STOCK_SCHEMA = {
    "type": "object",
    "properties": {"sku": {"type": "string"}, "quantity": {"type": "integer", "minimum": 0}},
    "required": ["sku", "quantity"],
}


async def test_a_read_breaking_its_output_schema_is_re_read_once_and_the_bad_value_is_never_offered() -> None:
    up = ScriptedUpstream(name="shop")
    corrupt = ok_text(json.dumps({"sku": "apple", "quantity": -5}), sku="apple", quantity=-5)
    good = ok_text(json.dumps({"sku": "apple", "quantity": 40}), sku="apple", quantity=40)
    up.tool("get_stock", ScriptedUpstream.sequence(lambda a: corrupt, lambda a: good), output_schema=STOCK_SCHEMA)
    async with proxied({"shop": up.server()}, {"tools": {"get_stock": {"effect": "read_only"}}}) as h:
        with anyio.fail_after(LIMIT_S):
            first = await h.client.call_tool("get_stock", {"sku": "apple"})
            second = await h.client.call_tool("get_stock", {"sku": "apple"})
    obs = observation(first)
    assert obs["fault_type"] == "E2_output_schema_violation"
    assert (obs["repair_action"], obs["max_retry"]) == ("backoff_retry", 1)
    assert json.loads(obs["details"]["degraded_text"]) == {"sku": "apple"}
    degraded = [c.text for c in first.content if isinstance(c, types.TextContent) and "Degraded data" in c.text]
    assert len(degraded) == 1 and "-5" not in degraded[0], "the value the schema rejects is not offered as data"
    assert "Degraded data" in text(first) and '{"sku": "apple"}' in text(first) and "$.quantity" in text(first)
    assert not second.is_error and second.structured_content == {"sku": "apple", "quantity": 40}
    assert up.count("get_stock") == 2


async def test_unknown_tool_candidates_are_in_the_error_message_a_host_shows() -> None:
    up = ScriptedUpstream(name="shop")
    up.tool("get_stock", lambda args: ok_text("1"))
    async with proxied({"shop": up.server()}) as h:
        with anyio.fail_after(LIMIT_S), pytest.raises(Exception) as refused:
            await h.client.call_tool("get_stok", {})
    assert "Did you mean: get_stock?" in str(refused.value)


# --- explain ----------------------------------------------------------------------------------------------------------


def test_explain_shows_a_tools_result_invariants(tmp_path: Path) -> None:
    policy = write_yaml(tmp_path / "policy.yaml", {"tools": {"search": {"result_invariants": ORDERS}}})
    config = write_yaml(tmp_path / "config.yaml", {"upstreams": {"shop": {"command": "true"}}})
    argv = proxy_argv("explain", "--config", str(config), "--policy", str(policy), "search")
    done = subprocess.run(argv, capture_output=True, text=True, env=child_env(), timeout=LIMIT_S)
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)["rule"]["result_invariants"]
    assert shown["fields"]["orders"]["min_items"] == 1 and shown["non_empty"] is False
