"""The validate stage: every schema error in one fault with paths and fixes; size cap; $schema; coercion; helpers."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import mcp_types as types
import pytest
from structlog.testing import capture_logs

from resilient_mcp.call.chain import ToolCall
from resilient_mcp.faults import MalformedArguments, MissingRequiredArgument, SchemaViolation
from resilient_mcp.policy import ToolRule, ValidationRule
from resilient_mcp.stages.validate import Validate, schema_diff, suggest_tools
from tests.harness import ScriptedNext

pytestmark = pytest.mark.anyio


ORDER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "customer": {"type": "string", "description": "The customer's id, e.g. C-17."},
        "priority": {"type": "string", "enum": ["low", "normal", "high"]},
        "quantity": {"type": "integer", "minimum": 1},
        "items": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"sku": {"type": "string", "pattern": "^S-[0-9]+$"}, "qty": {"type": "integer"}},
                "required": ["sku", "qty"],
                "additionalProperties": False,
            },
        },
        "ship_on": {"type": "string", "format": "date"},
    },
    "required": ["customer"],
    "additionalProperties": False,
}


def make_call(arguments: Any, schema: dict[str, Any] = ORDER_SCHEMA) -> ToolCall:
    return ToolCall(
        name="shop__create_order",
        arguments=arguments,
        upstream="shop",
        upstream_tool="create_order",
        rule=ToolRule(),
        tool=types.Tool(name="create_order", input_schema=schema),
    )


async def run(arguments: Any, schema: dict[str, Any] = ORDER_SCHEMA, **rule: Any) -> tuple[ToolCall, ScriptedNext]:
    stage, call_next, call = Validate(schema, ValidationRule(**rule)), ScriptedNext(), make_call(arguments, schema)
    await stage(call, call_next)
    return call, call_next


async def refused(arguments: Any, schema: dict[str, Any] = ORDER_SCHEMA, **rule: Any) -> Any:
    stage, call_next = Validate(schema, ValidationRule(**rule)), ScriptedNext()
    with pytest.raises((MissingRequiredArgument, SchemaViolation, MalformedArguments)) as info:
        await stage(make_call(arguments, schema), call_next)
    assert call_next.calls == [], "an invalid call must never reach the next stage"
    return info.value


def by_path(fault: Any) -> dict[str, dict[str, Any]]:
    return {e["path"]: e for e in fault.details["validation_errors"]}


async def test_valid_arguments_reach_the_next_stage_unchanged() -> None:
    args = {"customer": "C-1", "items": [{"sku": "S-1", "qty": 2}], "ship_on": "2024-05-31"}
    call, call_next = await run(args)
    assert call_next.calls == [call]
    assert call.record.notes == []


async def test_all_kinds_of_errors_are_reported_together_in_one_fault_with_paths_and_fixes() -> None:
    fault = await refused({"priority": "urgent", "quantity": "ten", "quantty": 3})
    assert isinstance(fault, SchemaViolation)
    errors = by_path(fault)
    assert set(errors) == {"$", "$.customer", "$.priority", "$.quantity"}
    assert errors["$.customer"]["keyword"] == "required"
    assert "customer" in errors["$.customer"]["fix"] and "string" in errors["$.customer"]["fix"]
    assert errors["$.priority"]["keyword"] == "enum"
    assert errors["$.priority"]["expected"] == ["low", "normal", "high"]
    assert '"low", "normal", "high"' in errors["$.priority"]["fix"]
    assert errors["$.quantity"]["keyword"] == "type"
    assert errors["$.quantity"]["got"] == '"ten"'
    assert "integer" in errors["$.quantity"]["fix"] and "string" in errors["$.quantity"]["fix"]
    extra = errors["$"]
    assert extra["keyword"] == "additionalProperties" and extra["got"] == ["quantty"]
    assert "'quantty'" in extra["fix"] and "customer, priority, quantity, items, ship_on" in extra["fix"]
    assert "Did you mean 'quantity'" in extra["fix"]
    canonical = json.dumps(ORDER_SCHEMA, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert fault.details["input_schema_hash"] == hashlib.sha256(canonical.encode()).hexdigest()


async def test_only_missing_properties_raise_missing_required_argument_with_type_and_description() -> None:
    fault = await refused({})
    assert isinstance(fault, MissingRequiredArgument)
    (error,) = fault.details["validation_errors"]
    assert error["path"] == "$.customer" and error["got"] == "missing" and error["expected"] == "string"
    assert "The customer's id, e.g. C-17." in error["fix"]
    assert fault.details["missing"] == ["customer"]
    assert "ask the user" in (fault.suggestion or "")


async def test_nested_errors_carry_json_paths_into_arrays_and_objects() -> None:
    fault = await refused({"customer": "C-1", "items": [{"sku": "S-1", "qty": "2"}, {"sku": "X9"}]})
    errors = by_path(fault)
    assert set(errors) == {"$.items[0].qty", "$.items[1].qty", "$.items[1].sku"}
    assert errors["$.items[1].qty"]["keyword"] == "required"
    assert "to $.items[1]" in errors["$.items[1].qty"]["fix"]
    assert errors["$.items[1].sku"]["keyword"] == "pattern"
    assert "^S-[0-9]+$" in errors["$.items[1].sku"]["fix"]
    assert "Write 2 without quotes" in errors["$.items[0].qty"]["fix"]


async def test_bounds_and_formats_are_named_in_the_fix() -> None:
    fault = await refused({"customer": "C-1", "quantity": 0, "ship_on": "2024-13-45"})
    errors = by_path(fault)
    assert errors["$.quantity"]["fix"] == "Use a number >= 1 at $.quantity."
    assert errors["$.ship_on"]["keyword"] == "format"
    assert "date" in errors["$.ship_on"]["fix"] and "2024-05-31" in errors["$.ship_on"]["fix"]


async def test_properties_behind_local_refs_are_described_from_their_definitions() -> None:
    schema = {
        "type": "object",
        "$defs": {
            "Qty": {"type": "integer", "description": "How many units."},
            "ById": {"type": "object", "required": ["id"]},
        },
        "properties": {
            "qty": {"$ref": "#/$defs/Qty"},
            "target": {"anyOf": [{"$ref": "#/$defs/ById"}, {"type": "string"}]},
        },
        "required": ["qty"],
    }
    fault = await refused({"target": 5}, schema)
    errors = by_path(fault)
    assert errors["$.qty"]["fix"] == "Add 'qty' (integer) to the arguments. It is: How many units."
    assert errors["$.target"]["expected"] == ["object with id", "string"]


async def test_arguments_over_the_size_cap_are_refused_with_sizes() -> None:
    args = {"customer": "é" * 100}
    fault = await refused(args, max_argument_bytes=150)
    assert isinstance(fault, MalformedArguments)
    assert fault.details == {
        "size_bytes": len(json.dumps(args, ensure_ascii=False).replace(" ", "").encode()),
        "max_bytes": 150,
    }


async def test_arguments_that_are_not_an_object_are_malformed_and_double_encoding_is_named() -> None:
    fault = await refused(["C-1"])
    assert isinstance(fault, MalformedArguments)
    assert fault.details["received_type"] == "array" and fault.details["double_encoded"] is False
    fault = await refused('{"customer": "C-1"}')
    assert fault.details["double_encoded"] is True
    assert "not its JSON text" in (fault.suggestion or "")


async def test_a_draft_07_schema_is_validated_with_draft_07_keywords() -> None:
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "dependencies": {"card": ["billing_address"]},
    }
    fault = await refused({"card": "4111"}, schema)
    assert by_path(fault)["$"]["keyword"] == "dependencies"
    without_dialect = {k: v for k, v in schema.items() if k != "$schema"}
    _, call_next = await run({"card": "4111"}, without_dialect)  # 2020-12 has no "dependencies" keyword
    assert len(call_next.calls) == 1


async def test_an_invalid_upstream_schema_is_logged_once_and_not_enforced() -> None:
    schema = {"type": "objekt", "properties": {"a": {"type": "integer"}}}
    with capture_logs() as logs:
        stage = Validate(schema, ValidationRule(), tool_name="shop__broken")
    assert [entry["event"] for entry in logs] == ["input_schema_invalid_validation_skipped"]
    call_next = ScriptedNext()
    with capture_logs() as logs:
        await stage(make_call({"a": "not an integer"}, schema), call_next)
    assert len(call_next.calls) == 1 and logs == []


async def test_disabled_validation_skips_the_schema_but_keeps_the_size_cap() -> None:
    _, call_next = await run({"quantity": "ten"}, enabled=False)
    assert len(call_next.calls) == 1
    fault = await refused({"customer": "x" * 50}, enabled=False, max_argument_bytes=20)
    assert isinstance(fault, MalformedArguments)


async def test_one_of_errors_report_only_the_closest_alternative() -> None:
    schema = {
        "type": "object",
        "properties": {
            "target": {
                "oneOf": [
                    {"type": "string"},
                    {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]},
                ]
            }
        },
    }
    fault = await refused({"target": {"name": "x"}}, schema)
    (error,) = fault.details["validation_errors"]
    assert error["path"] == "$.target.id" and error["keyword"] == "required"
    assert "closest alternative: #2 of oneOf" in error["message"]
    fault = await refused({"target": 5}, schema)  # no alternative is closer: both are named
    (error,) = fault.details["validation_errors"]
    assert error["keyword"] == "oneOf" and error["expected"] == ["string", "object with id"]


async def test_coercion_is_off_by_default() -> None:
    fault = await refused({"customer": "C-1", "quantity": "5"})
    assert by_path(fault)["$.quantity"]["keyword"] == "type"


async def test_enabled_coercion_converts_safe_values_and_reports_each_one() -> None:
    schema = {
        "type": "object",
        "properties": {
            "count": {"type": "integer"},
            "ratio": {"type": "number"},
            "dry_run": {"type": "boolean"},
            "filter": {"type": "object"},
            "tags": {"type": ["array", "null"]},
            "name": {"type": "string"},
        },
    }
    args = {"count": "5", "ratio": "2.5", "dry_run": "false", "filter": '{"a": 1}', "tags": '["x"]', "name": "7"}
    call, call_next = await run(args, schema, coerce=True)
    (sent,) = call_next.calls
    assert sent.arguments == {
        "count": 5,
        "ratio": 2.5,
        "dry_run": False,
        "filter": {"a": 1},
        "tags": ["x"],
        "name": "7",
    }
    assert args["count"] == "5", "the caller's arguments are not mutated"
    coercions = {c["path"]: (c["from"], c["to"]) for c in call.record.extra["coercions"]}
    assert coercions == {
        "$.count": ("5", 5),
        "$.ratio": ("2.5", 2.5),
        "$.dry_run": ("false", False),
        "$.filter": ('{"a": 1}', {"a": 1}),
        "$.tags": ('["x"]', ["x"]),
    }
    (note,) = call.record.notes
    assert "5 argument value(s)" in note and "$.count" in note


@pytest.mark.parametrize(
    ("field", "value"),
    [("quantity", "5 apples"), ("quantity", "1e3"), ("quantity", "07"), ("customer", 5)],
)
async def test_coercion_leaves_unsafe_values_alone_and_refuses(field: str, value: Any) -> None:
    fault = await refused({"customer": "C-1", field: value}, coerce=True)
    assert by_path(fault)[f"$.{field}"]["keyword"] == "type"


async def test_coercion_is_not_applied_when_other_errors_remain() -> None:
    fault = await refused({"quantity": "5"}, coerce=True)
    assert set(by_path(fault)) == {"$.customer", "$.quantity"}


async def test_coercion_is_not_applied_when_the_coerced_value_still_fails() -> None:
    fault = await refused({"customer": "C-1", "quantity": "0"}, coerce=True)
    assert by_path(fault)["$.quantity"]["keyword"] == "type"


async def test_double_encoded_arguments_are_unwrapped_only_with_coercion_and_reported() -> None:
    call, call_next = await run('{"customer": "C-1"}', coerce=True)
    assert call_next.calls[0].arguments == {"customer": "C-1"}
    assert call.record.extra["coercions"][0]["path"] == "$"


def test_suggest_tools_finds_typos_missing_prefixes_and_substrings() -> None:
    known = ["fs__read_file", "fs__write_file", "fs__list_directory", "git__status", "web__search_v2"]
    assert suggest_tools("fs__read_fil", known)[0] == "fs__read_file"
    assert suggest_tools("read_file", known)[0] == "fs__read_file"
    assert suggest_tools("FS__READ_FILE", known)[0] == "fs__read_file"
    assert suggest_tools("search", known) == ["web__search_v2"]
    assert suggest_tools("list_dir", known)[0] == "fs__list_directory"
    assert suggest_tools("launch_rocket", known) == []
    assert len(suggest_tools("fs__file", known, limit=1)) == 1


def test_schema_diff_names_added_removed_changed_and_required_properties() -> None:
    old = {
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "limit": {"type": "string", "description": "old words"},
            "filter": {"type": "object", "properties": {"kind": {"enum": ["a", "b"]}}},
        },
        "required": ["query"],
    }
    new = {
        "type": "object",
        "properties": {
            "q": {"type": "string"},
            "limit": {"type": "integer", "description": "new words"},
            "filter": {"type": "object", "properties": {"kind": {"enum": ["a", "b", "c"]}}, "required": ["kind"]},
        },
        "required": ["q", "limit"],
    }
    assert schema_diff(old, new) == {
        "added": ["$.q"],
        "removed": ["$.query"],
        "changed": {
            "$.limit": {"type": {"old": "string", "new": "integer"}},
            "$.filter.kind": {"enum": {"old": ["a", "b"], "new": ["a", "b", "c"]}},
        },
        "required_added": ["$.filter.kind", "$.limit", "$.q"],
        "required_removed": ["$.query"],
    }
    assert schema_diff(new, new) == {
        "added": [],
        "removed": [],
        "changed": {},
        "required_added": [],
        "required_removed": [],
    }
