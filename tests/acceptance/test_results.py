"""Acceptance of issue 4 for catalog category E (results) and the output caps, through the real path.

A real MCP client → the proxy (all stages) → an in-process upstream behind a breakable in-memory link
(tests/fixtures/fault_links.py). Each test asserts how many times the upstream executed the call and the
observation's fields; capped results are read back page by page through the proxy's ``read_stored_output`` tool and
the ``resilient-mcp://outputs/{handle}`` resource and compared byte for byte with what the upstream sent.
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
import pytest

from tests.fixtures.fault_links import (
    FAULT_META,
    Shop,
    attempt_outcomes,
    call,
    core,
    full_jitter,
    observation,
    rule,
    text_of,
)
from tests.fixtures.scripted import ScriptedUpstream, error_text, ok_text
from tests.harness import Harness

pytestmark = pytest.mark.anyio

LIMIT_S = 30
CAP = 100_000  # OutputRule.max_text_bytes, the documented default
TRUNCATED_META = "io.github.resilient-mcp/truncated"
PAGE_META = "io.github.resilient-mcp/page"


# --- E1 malformed_response ------------------------------------------------------------------------------------------


async def test_a_write_whose_response_cannot_be_parsed_runs_once_and_asks_to_verify_state(shop: Shop) -> None:

    def create(args: dict[str, Any]) -> types.CallToolResult:
        shop.link.arm("corrupt")
        return ok_text("created")

    shop.up.tool("create_order", create)
    async with shop.run({"create_order": rule("write_unsafe")}) as h:
        result = await call(h, "create_order", {"sku": "S"})
    obs = observation(result)
    assert core(obs) == {
        "fault_type": "E1_malformed_response",
        "retry_safety": "maybe_executed",
        "side_effect_status": "unknown",
        "repair_action": "verify_state",
        "max_retry": 0,
        "attempts": ["E1_malformed_response"],
    }
    assert "content" in obs["details"]["parse_error"]
    assert shop.up.count("create_order") == 1
    assert shop.recorder.delays == []


async def test_a_read_whose_response_cannot_be_parsed_is_retried_once_and_succeeds(shop: Shop) -> None:

    def corrupt_once(args: dict[str, Any]) -> types.CallToolResult:
        shop.link.arm("corrupt")
        return ok_text("garbled")

    shop.up.tool("search", ScriptedUpstream.sequence(corrupt_once, lambda args: ok_text("3 hits")))
    async with shop.run({"search": rule("read_only")}) as h:
        result = await call(h, "search", {"q": "x"})
    assert not result.is_error, text_of(result)
    assert attempt_outcomes(result) == ["E1_malformed_response", "ok"]
    assert shop.up.count("search") == 2
    assert shop.recorder.delays == full_jitter(0.1)


# --- E2 output_schema_violation -------------------------------------------------------------------------------------

TOTAL_SCHEMA = {"type": "object", "properties": {"total": {"type": "integer"}}, "required": ["total"]}


async def test_a_structured_result_breaking_its_output_schema_becomes_an_observation_with_the_text_kept(
    shop: Shop,
) -> None:
    shop.up.tool("checkout", lambda args: ok_text("total: 3 items", count=3), output_schema=TOTAL_SCHEMA)
    async with shop.run({"checkout": rule("write_unsafe")}) as h:
        result = await call(h, "checkout", {"cart": 1})
    obs = observation(result)
    assert core(obs) == {
        "fault_type": "E2_output_schema_violation",
        "retry_safety": "executed_failed",
        "side_effect_status": "committed",
        "repair_action": "degrade",
        "max_retry": 0,
        "attempts": ["ok"],  # the attempt itself succeeded; the result broke its promise
    }
    assert obs["details"]["validation_errors"] == [{"path": "$", "message": "'total' is a required property"}]
    assert obs["details"]["degraded_text"] == "total: 3 items"
    assert shop.up.count("checkout") == 1
    assert shop.recorder.delays == []


# --- E3 incomplete_result -------------------------------------------------------------------------------------------


def incomplete(retryable: bool | None = None) -> types.CallToolResult:
    hint: dict[str, Any] = {"type": "incomplete_result"}
    if retryable is not None:
        hint["retryable"] = retryable
    return error_text("page 2 of 3 is missing", hint)


async def test_a_read_flagged_incomplete_and_retryable_by_its_upstream_is_retried_and_succeeds(shop: Shop) -> None:
    """The proxy cannot see that a result is incomplete by itself (no per-tool expectations such as non_empty or
    json_text exist yet): the upstream flags it with the typed hint ``_meta["io.github.resilient-mcp/error"]``."""
    shop.up.tool("list_orders", ScriptedUpstream.sequence(lambda a: incomplete(True), lambda a: ok_text("3 orders")))
    async with shop.run({"list_orders": rule("read_only")}) as h:
        result = await call(h, "list_orders", {})
    assert not result.is_error and text_of(result) == "3 orders"
    assert attempt_outcomes(result) == ["E3_incomplete_result", "ok"]
    assert shop.up.count("list_orders") == 2
    assert shop.recorder.delays == full_jitter(0.1)


async def test_a_write_flagged_incomplete_is_not_retried_and_asks_to_verify_state(shop: Shop) -> None:
    """Driven by the typed hint ``_meta["io.github.resilient-mcp/error"] = {type: incomplete_result}``."""
    shop.up.tool("import_orders", lambda args: incomplete())
    async with shop.run({"import_orders": rule("write_unsafe")}) as h:
        result = await call(h, "import_orders", {"file": "a.csv"})
    assert core(observation(result)) == {
        "fault_type": "E3_incomplete_result",
        "retry_safety": "maybe_executed",
        "side_effect_status": "unknown",
        "repair_action": "verify_state",
        "max_retry": 0,
        "attempts": ["E3_incomplete_result"],
    }
    assert shop.up.count("import_orders") == 1
    assert shop.recorder.delays == []


async def test_a_read_flagged_incomplete_is_retried_once(shop: Shop) -> None:
    """Driven by the typed hint ``{type: incomplete_result}`` (no ``retryable``)."""
    shop.up.tool("list_orders", ScriptedUpstream.sequence(lambda a: incomplete(), lambda a: ok_text("3 orders")))
    async with shop.run({"list_orders": rule("read_only")}) as h:
        result = await call(h, "list_orders", {})
    assert not result.is_error, text_of(result)
    assert shop.up.count("list_orders") == 2


# --- E4 oversized_result and the output caps ------------------------------------------------------------------------


def five_mb_text() -> str:
    """5 MB of text with 2-, 3- and 4-byte characters, so a cut can land inside one."""
    line = "order {:07d}: crème brûlée x2 — 東京 🍰 ok\n"
    out, size, i = [], 0, 0
    while size < 5_000_000:
        piece = line.format(i)
        out.append(piece)
        size += len(piece.encode())
        i += 1
    return "".join(out)


async def read_pages(h: Harness, handle: str, length: int = 1_000_000) -> tuple[bytes, int]:
    """Every page of a stored output read through ``read_stored_output``, concatenated; and how many pages."""
    chunks: list[bytes] = []
    offset: int | None = 0
    while offset is not None:
        page = await call(h, "read_stored_output", {"handle": handle, "offset": offset, "length": length})
        assert not page.is_error, text_of(page)
        chunks.append(page.content[0].text.encode())  # type: ignore[union-attr]
        facts = (page.meta or {})[PAGE_META]
        assert facts["offset"] == offset
        offset = facts["next_offset"]
    return b"".join(chunks), len(chunks)


async def test_a_five_megabyte_text_result_is_capped_says_what_was_cut_and_its_pages_reassemble_it_exactly(
    shop: Shop,
) -> None:
    big = five_mb_text()
    raw = big.encode()
    shop.up.tool("export", lambda args: ok_text(big))
    async with shop.run({"export": rule("read_only")}) as h:
        result = await call(h, "export", {})
        assert not result.is_error
        head, note = (c.text for c in result.content)  # type: ignore[union-attr]
        facts = (result.meta or {})[TRUNCATED_META]
        assert "read_stored_output" in {t.name for t in (await h.client.list_tools()).tools}
        pages, count = await read_pages(h, facts["handle"])
        whole = await h.client.read_resource(facts["uri"])
    kept = len(head.encode())
    assert CAP - 4 < kept <= CAP and big.startswith(head), "cut at a character boundary, as close to the cap as fits"
    assert facts == {
        "handle": facts["handle"],
        "original_bytes": len(raw),
        "kept_bytes": kept,
        "items_dropped": 0,
        "resume_offset": kept,
        "uri": f"resilient-mcp://outputs/{facts['handle']}",
    }
    assert note.startswith(f"[resilient-mcp: output truncated: kept {kept} of {len(raw)} bytes of text")
    assert f'read_stored_output(handle="{facts["handle"]}", offset={kept}' in note
    assert pages == raw, "the pages reassemble the original byte for byte"
    assert count == 6, "5 000 020 bytes in pages of at most 1 MB"
    assert isinstance(whole.contents[0], types.TextResourceContents) and whole.contents[0].text == big
    assert shop.up.count("export") == 1


async def test_a_five_megabyte_json_result_is_capped_to_valid_json_whose_pages_reassemble_the_original(
    shop: Shop,
) -> None:
    rows = [{"id": i, "name": f"row {i}", "tags": ["a", "ü"], "price": i * 1.5} for i in range(60_000)]
    big = json.dumps(rows, ensure_ascii=False)
    assert len(big.encode()) > 4_000_000
    shop.up.tool("export", lambda args: ok_text(big))
    async with shop.run({"export": rule("read_only")}) as h:
        result = await call(h, "export", {})
        head, note = (c.text for c in result.content)  # type: ignore[union-attr]
        facts = (result.meta or {})[TRUNCATED_META]
        pages, _ = await read_pages(h, facts["handle"], length=700_000)
    kept_rows = json.loads(head)
    assert kept_rows == rows[: len(kept_rows)] and len(kept_rows) > 1000, "whole rows only, brackets closed"
    assert len(head.encode()) <= CAP
    assert "the JSON was cut after a complete value and its open brackets closed by the proxy" in note
    assert pages == big.encode()
    assert shop.up.count("export") == 1


async def test_an_oversized_structured_result_of_a_tool_with_an_output_schema_becomes_an_e4_observation(
    shop: Shop,
) -> None:
    schema = {"type": "object", "properties": {"rows": {"type": "array"}}, "required": ["rows"]}
    rows = [{"id": i, "sku": f"SKU-{i:06d}"} for i in range(20_000)]
    shop.up.tool("export", lambda args: ok_text("20000 rows", rows=rows), output_schema=schema)
    async with shop.run({"export": rule("read_only")}) as h:
        result = await call(h, "export", {})
        obs = observation(result)
        pages, _ = await read_pages(h, obs["details"]["handle"])
    assert core(obs) == {
        "fault_type": "E4_oversized_result",
        "retry_safety": "n/a",
        "side_effect_status": "committed",
        "repair_action": "fix_parameter",
        "max_retry": 0,
        "attempts": ["ok"],
    }
    details = obs["details"]
    assert details["structured_content_shape"] == {
        "rows": {"array": 20000, "items": {"id": "number", "sku": "string (10 chars)"}}
    }
    assert details["degraded_text"] == "20000 rows"
    assert details["read_with"] == {"tool": "read_stored_output", "args": {"handle": details["handle"], "offset": 0}}
    start = details["resume_offset"]
    assert pages[:start] == b"20000 rows\n\n" and json.loads(pages[start:]) == {"rows": rows}
    assert shop.up.count("export") == 1


# --- E5 semantic_corruption_or_silent_noop --------------------------------------------------------------------------


async def test_a_read_its_upstream_flags_as_suspect_is_not_retried_by_the_proxy_and_may_be_re_read_once(
    shop: Shop,
) -> None:
    """Without declared ``result_invariants`` the proxy cannot detect a wrong but success-shaped result by itself:
    here the upstream flags it with the typed hint ``_meta["io.github.resilient-mcp/error"]``. A read may be read once
    more by the model (rule R); the proxy does not repeat it on its own."""
    hint = {"type": "E5_semantic_corruption_or_silent_noop", "invariant": "quantity >= 0"}
    shop.up.tool("stock", lambda args: error_text("quantity: -3", hint))
    async with shop.run({"stock": rule("read_only")}) as h:
        result = await call(h, "stock", {"sku": "S"})
    obs = observation(result)
    assert core(obs) == {
        "fault_type": "E5_semantic_corruption_or_silent_noop",
        "retry_safety": "n/a",
        "side_effect_status": "unknown",
        "repair_action": "backoff_retry",
        "max_retry": 1,
        "attempts": ["E5_semantic_corruption_or_silent_noop"],
    }
    assert obs["details"]["upstream_error"] == {"invariant": "quantity >= 0"}
    assert obs["upstream_message"] == {"untrusted": True, "text": "quantity: -3"}
    assert shop.up.count("stock") == 1
    assert shop.recorder.delays == []


async def test_a_success_shaped_wrong_result_without_a_hint_passes_through_unmarked(shop: Shop) -> None:
    """The limit ``docs/fault-catalog.md`` §6 states: without a hint or declared invariants, E5 passes through."""
    shop.up.tool("stock", lambda args: ok_text("quantity: -3", quantity=-3))
    async with shop.run({"stock": rule("read_only")}) as h:
        result = await call(h, "stock", {"sku": "S"})
    assert not result.is_error and FAULT_META not in (result.meta or {})
    assert result.structured_content == {"quantity": -3}
    assert shop.up.count("stock") == 1
