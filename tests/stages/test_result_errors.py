"""Success-shaped failures (issue 19 item 5): the policy's ``result_errors`` turn a successful result that is really a
failure into a classified fault; without them a success is never reinterpreted.

The real-server tests run the reference SQLite server, PyPI ``mcp-server-sqlite==2025.4.25`` (built on the mcp 1.x
SDK, so it lives in its own virtualenv: ``scripts/install-peers.sh``), directly and through ``resilient-mcp wrap``
with the shipped example policy ``policies/server-sqlite.yaml``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from pydantic import ValidationError

from resilient_mcp.faults import (
    PermanentExecutionError,
    RetrySafety,
    SemanticArgumentRejection,
    StateConflict,
    TransientExecutionError,
)
from resilient_mcp.policy import PolicyFile, ResultError
from resilient_mcp.stages.result_errors import success_shaped_failure
from tests.helpers import REPO, child_env, child_pids, pids_with_env, proxy_argv, stop_leftovers

SQLITE_SERVER = REPO / ".tools/py-sqlite-ref/bin/mcp-server-sqlite"
EXAMPLE = REPO / "policies/server-sqlite.yaml"
START_S = 60.0


def ok(text: str, structured: dict[str, Any] | None = None) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=structured)


def rules(*entries: dict[str, Any]) -> list[ResultError]:
    return [ResultError.model_validate(e) for e in entries]


# --- the matchers ---------------------------------------------------------------------------------------------------


def test_without_result_errors_a_success_is_never_reinterpreted() -> None:
    assert success_shaped_failure(ok("Database error: UNIQUE constraint failed: u.email"), [], tool=None) is None


def test_a_prefix_match_is_classified_from_the_text_like_an_error_result() -> None:
    sqlite = rules({"prefix": "Database error: "})
    unique = success_shaped_failure(ok("Database error: UNIQUE constraint failed: u.email"), sqlite, tool=None)
    assert type(unique) is StateConflict and unique.retry_safety is RetrySafety.EXECUTED_FAILED
    assert unique.details["result_error"] == {"index": 0, "by": "prefix"}
    assert unique.upstream_message == "Database error: UNIQUE constraint failed: u.email"
    locked = success_shaped_failure(ok("  Database error: database is locked"), sqlite, tool=None)
    assert type(locked) is TransientExecutionError and locked.retry_safety is RetrySafety.MAYBE_EXECUTED
    assert success_shaped_failure(ok("[{'email': 'Database error: '}]"), sqlite, tool=None) is None  # not a prefix


def test_contains_and_ignore_case() -> None:
    entry = rules({"contains": "NO SUCH TABLE", "ignore_case": True})
    fault = success_shaped_failure(ok("query failed: no such table: orders"), entry, tool=None)
    assert type(fault) is SemanticArgumentRejection
    assert (
        success_shaped_failure(ok("query failed: no such table"), rules({"contains": "NO SUCH TABLE"}), tool=None)
        is None
    )


def test_a_json_path_equality_with_the_fault_type_the_policy_names() -> None:
    entry = rules({"json_path": "$.result", "equals": "error", "fault_type": "D5_state_conflict"})
    stale = ok('{"result": "error", "reason": "hash mismatch"}')
    fault = success_shaped_failure(stale, entry, tool=None)
    assert type(fault) is StateConflict and fault.details["basis"] == "policy"
    assert success_shaped_failure(ok('{"result": "ok"}'), entry, tool=None) is None
    assert success_shaped_failure(ok("not json"), entry, tool=None) is None
    nested = rules({"json_path": "$.status.code", "equals": 1})
    assert success_shaped_failure(ok("x", {"status": {"code": True}}), nested, tool=None) is None  # true is not 1
    assert success_shaped_failure(ok("x", {"status": {"code": 1}}), nested, tool=None) is not None


def test_an_unrecognised_text_stays_unrecognised() -> None:
    fault = success_shaped_failure(ok("Error: the frobnicator declined"), rules({"prefix": "Error: "}), tool=None)
    assert type(fault) is PermanentExecutionError and fault.details["basis"] == "unrecognised"
    assert not fault.is_transient


@pytest.mark.parametrize(
    ("entry", "names"),
    [
        ({}, "exactly one of prefix, contains or json_path"),
        ({"prefix": "a", "contains": "b"}, "exactly one of prefix, contains or json_path"),
        ({"json_path": "$.result"}, "equals goes with json_path"),
        ({"prefix": "a", "equals": "b"}, "equals goes with json_path"),
        ({"json_path": "result", "equals": "error"}, "must be $ followed by"),
        ({"prefix": "a", "fault_type": "D9_made_up"}, "not a catalog fault type"),
        ({"prefix": "a", "regex": "a.*"}, "regex"),
    ],
)
def test_a_bad_entry_is_refused_with_what_to_change(entry: dict[str, Any], names: str) -> None:
    policy = {"upstreams": {"db": {"defaults": {"result_errors": [entry]}}}}
    with pytest.raises(ValidationError) as err:
        PolicyFile.model_validate(policy)
    assert names in str(err.value)


# --- the real reference SQLite server -------------------------------------------------------------------------------

needs_sqlite = pytest.mark.skipif(
    not SQLITE_SERVER.exists(),
    reason=f"mcp-server-sqlite==2025.4.25 is not installed at {SQLITE_SERVER} (bash scripts/install-peers.sh)",
)


def _client(argv: list[str], errlog: Any, state: Path) -> Client:
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=child_env(state), cwd=REPO)
    return Client(stdio_client(params, errlog=errlog), mode="legacy", cache=None)


@asynccontextmanager
async def sqlite_direct_and_wrapped(tmp_path: Path, *policy: str) -> AsyncIterator[tuple[Client, Client]]:
    """One client straight to a server on ``direct.db``, one through ``wrap --name sqlite`` on ``proxied.db``; the
    proxy's upstream is stopped by its pid if the proxy left it behind."""
    async with AsyncExitStack() as stack:
        state = tmp_path / "state"
        direct = await stack.enter_async_context(
            _client(
                [str(SQLITE_SERVER), "--db-path", str(tmp_path / "direct.db")],
                stack.enter_context((tmp_path / "direct.stderr").open("w")),
                state,
            )
        )
        upstreams: list[int] = []
        stack.callback(stop_leftovers, upstreams)
        flags = [arg for path in policy for arg in ("--policy", path)]
        argv = proxy_argv("wrap", "--name", "sqlite", *flags, "--", str(SQLITE_SERVER), "--db-path")
        proxied = await stack.enter_async_context(
            _client(
                [*argv, str(tmp_path / "proxied.db")], stack.enter_context((tmp_path / "proxy.stderr").open("w")), state
            )
        )
        for proxy_pid in pids_with_env("XDG_STATE_HOME", str(state), "resilient_mcp.cli"):
            upstreams.extend(child_pids(proxy_pid))
        yield direct, proxied


def _text(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


SCHEMA = "CREATE TABLE u (id INTEGER PRIMARY KEY, email TEXT UNIQUE NOT NULL)"
INSERT = "INSERT INTO u (email) VALUES ('ada@example.com')"


@pytest.mark.peers
@needs_sqlite
@pytest.mark.anyio
async def test_the_real_sqlite_server_answers_a_unique_violation_as_a_success_and_the_policy_classifies_it(
    tmp_path: Path,
) -> None:
    with anyio.fail_after(START_S):
        async with sqlite_direct_and_wrapped(tmp_path, str(EXAMPLE)) as (direct, proxied):
            for client in (direct, proxied):
                assert not (await client.call_tool("create_table", {"query": SCHEMA})).is_error
                assert not (await client.call_tool("write_query", {"query": INSERT})).is_error  # a real success
            raw = await direct.call_tool("write_query", {"query": INSERT})
            unique = await proxied.call_tool("write_query", {"query": INSERT})
            null = await proxied.call_tool("write_query", {"query": "INSERT INTO u (email) VALUES (NULL)"})
            missing = await proxied.call_tool("read_query", {"query": "SELECT * FROM orders"})
            rows = await proxied.call_tool("read_query", {"query": "SELECT email FROM u"})
    assert not raw.is_error and _text(raw) == "Database error: UNIQUE constraint failed: u.email"
    assert unique.is_error and isinstance(unique.structured_content, dict)
    obs = unique.structured_content
    assert (obs["fault_type"], obs["is_transient"], obs["repair_action"]) == (
        "D5_state_conflict",
        False,
        "verify_state",
    )
    assert obs["details"]["result_error"] == {"index": 0, "by": "prefix"}
    assert obs["upstream_message"]["text"] == "Database error: UNIQUE constraint failed: u.email"
    for result, fault_type in ((null, "B4_semantic_argument_rejection"), (missing, "B4_semantic_argument_rejection")):
        assert result.is_error and isinstance(result.structured_content, dict)
        assert (result.structured_content["fault_type"], result.structured_content["repair_action"]) == (
            fault_type,
            "fix_parameter",
        )
    assert not rows.is_error and "ada@example.com" in _text(rows)  # real data stays data


@pytest.mark.peers
@needs_sqlite
@pytest.mark.anyio
async def test_without_the_policy_the_proxy_passes_the_success_shaped_failure_on_unchanged(tmp_path: Path) -> None:
    with anyio.fail_after(START_S):
        async with sqlite_direct_and_wrapped(tmp_path) as (_, proxied):
            await proxied.call_tool("create_table", {"query": SCHEMA})
            await proxied.call_tool("write_query", {"query": INSERT})
            again = await proxied.call_tool("write_query", {"query": INSERT})
    assert not again.is_error and _text(again) == "Database error: UNIQUE constraint failed: u.email"


@pytest.mark.parametrize(
    ("server", "policy_file", "upstream"),
    [("sqlite-ref", "server-sqlite.yaml", "sqlite"), ("text-editor", "text-editor.yaml", "editor")],
)
def test_the_collected_success_shaped_failures_become_faults_with_the_shipped_example_policy(
    server: str, policy_file: str, upstream: str
) -> None:
    """The corpus's success-shaped records (benchmarks/errors/success_shaped.jsonl, collected from the real servers)
    through the shipped policy: every one becomes a fault, none is called transient unless the label says so."""
    import yaml

    from benchmarks.errors.replay import load, server_of
    from resilient_mcp.policy import Policy

    text = (REPO / "policies" / policy_file).read_text(encoding="utf-8")
    policy = Policy(PolicyFile.model_validate(yaml.safe_load(text)))
    records = [r for r in load(REPO / "benchmarks/errors/success_shaped.jsonl") if server_of(r) == server]
    assert records
    for record in records:
        result = types.CallToolResult.model_validate(record["raw"]["result"])
        assert not result.is_error
        name = record["tool"]["name"]
        fault = success_shaped_failure(result, policy.resolve(upstream, name, name).result_errors, tool=None)
        assert fault is not None, record["id"]
        assert fault.is_transient is record["gold"]["transient"], record["id"]
    reader = policy.resolve(upstream, "get_text_file_contents", "get_text_file_contents")
    assert server != "text-editor" or reader.result_errors == []  # file content is never reinterpreted
