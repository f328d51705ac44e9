"""The shared vocabularies an error text is read in (issue 19): one test per family, written from the standards'
own codes and the engines' documented messages, plus the basis every verdict carries, the bare-code rule, the scan
cap and the leave-one-server-out switch."""

from __future__ import annotations

import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from resilient_mcp.faults import (
    Fault,
    MissingRequiredArgument,
    PermanentExecutionError,
    QuotaExhausted,
    RateLimited,
    RepairAction,
    RetrySafety,
    SchemaViolation,
)
from resilient_mcp.faults.classify import classify_exception, classify_result
from resilient_mcp.faults.vocab import MAX_SCAN_CHARS, held_out, read
from tests.faults.support import B4, D1, D4, D5, F1, F2, F3, of_text


def check(text: str, cls: type[Fault], transient: bool, basis: str, family: str) -> Fault:
    fault = of_text(text)
    assert type(fault) is cls, (text, fault)
    assert fault.is_transient is transient, text
    assert (fault.details["basis"], fault.details["vocabulary"]) == (basis, family), text
    if transient:  # words never prove that a call did not run
        assert fault.retry_safety is RetrySafety.MAYBE_EXECUTED
    return fault


@pytest.mark.parametrize(
    ("text", "cls", "transient"),
    [
        ('ERROR: relation "orders" does not exist (SQLSTATE 42P01)', B4, False),
        ('ERROR: syntax error at or near "selec"\nSQLSTATE: 42601', B4, False),
        ("SQLSTATE[23505]: Unique violation: 7 ERROR: duplicate key", D5, False),
        ("SQLSTATE[23502]: Not null violation", B4, False),
        ('FATAL: password authentication failed for user "app" (SQLSTATE 28P01)', F1, False),
        ("could not serialize access due to concurrent update (SQLSTATE 40001)", D1, True),
        ("server closed the connection unexpectedly (SQLSTATE 08006)", D1, True),
        ("sorry, too many clients already (SQLSTATE 53300)", D1, True),
        ("cannot execute INSERT in a read-only transaction (SQLSTATE 25006)", F2, False),
        ("ERROR 1146 (42S02): Table 'shop.orders' doesn't exist", B4, False),
        # cancelled at the statement timeout: the same query meets the same limit (not transient)
        ("canceling statement due to statement timeout (SQLSTATE 57014)", D4, False),
    ],
)
def test_sqlstate_classes_and_codes(text: str, cls: type[Fault], transient: bool) -> None:
    check(text, cls, transient, "standard_code", "sqlstate")


def test_a_five_character_number_without_sqlstate_context_is_not_a_sqlstate() -> None:
    assert of_text("order 23505 was shipped twice").details["basis"] != "standard_code"


@pytest.mark.parametrize(
    ("text", "cls", "transient"),
    [
        ("ENOENT: no such file or directory, open '/data/report.txt'", D4, False),
        ("Error: EACCES: permission denied, open '/etc/shadow'", F2, False),
        ("EPERM: operation not permitted, unlink '/x'", F2, False),
        ("EEXIST: file already exists, mkdir '/tmp/a'", D5, False),
        ("EISDIR: illegal operation on a directory, read", B4, False),
        ("ENOTDIR: not a directory, scandir '/a/b.txt'", B4, False),
        ("connect ETIMEDOUT 10.0.0.7:443", D1, True),
        ("connect ECONNREFUSED 127.0.0.1:5432", D1, True),
        ("read ECONNRESET", D1, True),
        ("EAGAIN: resource temporarily unavailable, read", D1, True),
        ("ENOSPC: no space left on device, write", D4, False),
    ],
)
def test_errno_names_and_node_codes(text: str, cls: type[Fault], transient: bool) -> None:
    check(text, cls, transient, "standard_code", "errno")


def test_a_full_disk_asks_the_user() -> None:
    assert of_text("ENOSPC: no space left on device, write").repair_action is RepairAction.ASK_USER


@pytest.mark.parametrize(
    ("text", "cls", "transient"),
    [
        ("WRONGTYPE Operation against a key holding the wrong kind of value", B4, False),
        ("redis.exceptions.ResponseError: WRONGTYPE Operation against a key", B4, False),
        ("NOAUTH Authentication required.", F1, False),
        ("WRONGPASS invalid username-password pair or user is disabled.", F1, False),
        ("NOPERM this user has no permissions to run the 'set' command", F2, False),
        ("READONLY You can't write against a read only replica.", F2, False),
        ("OOM command not allowed when used memory > 'maxmemory'.", F3, False),
        ("LOADING Redis is loading the dataset in memory", D1, True),
        ("BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.", D1, True),
        ("ReplyError: TRYAGAIN Multiple keys request during rehashing of slot", D1, True),
    ],
)
def test_redis_error_prefixes(text: str, cls: type[Fault], transient: bool) -> None:
    check(text, cls, transient, "standard_code", "redis")


def test_a_redis_prefix_is_read_only_where_redis_puts_it() -> None:
    """Upper-case words deep inside a sentence are not a Redis reply's prefix."""
    assert of_text("the report for project LOADING DOCK 7 is not ready yet").details.get("vocabulary") != "redis"


@pytest.mark.parametrize(
    ("text", "cls", "transient"),
    [
        ("Request failed with status code 503", D1, True),
        ("HTTP Error 404: Not Found", D4, False),
        ("upstream answered 401 Unauthorized", F1, False),
        ("403 Forbidden", F2, False),
        ("Failed to fetch https://x.example/a - status code 502", D1, True),
        ("409 Conflict: version 3 is stale", D5, False),
        ("HTTP 422 Unprocessable Content", B4, False),
    ],
)
def test_http_statuses_in_a_tools_text(text: str, cls: type[Fault], transient: bool) -> None:
    check(text, cls, transient, "standard_code", "http")


def test_retry_after_makes_a_rate_limit_or_a_quota() -> None:
    limited = check("429 Too Many Requests; Retry-After: 20", RateLimited, True, "standard_code", "http")
    assert limited.retry_after_ms == 20_000
    quota = of_text("HTTP 429 Too Many Requests, retry after 7200 seconds")
    assert type(quota) is QuotaExhausted and not quota.is_transient


@pytest.mark.parametrize(
    ("text", "cls", "transient"),
    [
        ("14 UNAVAILABLE: failed to connect to all addresses", D1, True),
        ("StatusCode.DEADLINE_EXCEEDED: Deadline Exceeded", D1, True),
        ("7 PERMISSION_DENIED: caller lacks storage.objects.get", F2, False),
        ("16 UNAUTHENTICATED: invalid token", F1, False),
        ("5 NOT_FOUND: bucket missing", D4, False),
        ("6 ALREADY_EXISTS: topic exists", D5, False),
        ("3 INVALID_ARGUMENT: page_size must be positive", B4, False),
        ("8 RESOURCE_EXHAUSTED: quota exceeded", F3, False),
    ],
)
def test_grpc_status_names(text: str, cls: type[Fault], transient: bool) -> None:
    check(text, cls, transient, "standard_code", "grpc")


def test_grpc_internal_and_unknown_say_nothing_about_transience() -> None:
    for text in ("13 INTERNAL: stream removed", "2 UNKNOWN: exception in handler"):
        fault = of_text(text)
        assert not fault.is_transient and fault.details["basis"] == "unrecognised", text


@pytest.mark.parametrize(
    ("text", "cls", "transient"),
    [
        ("FileNotFoundError: [Errno 2] No such file or directory: 'a.csv'", D4, False),
        ("PermissionError: [Errno 13] Permission denied: '/root/x'", F2, False),
        ("IsADirectoryError: [Errno 21] Is a directory: '/tmp'", B4, False),
        ("TimeoutError: timed out", D1, True),
        ("ConnectionRefusedError: [Errno 111] Connection refused", D1, True),
        ("sqlite3.IntegrityError: UNIQUE constraint failed: users.email", D5, False),
    ],
)
def test_python_exception_names(text: str, cls: type[Fault], transient: bool) -> None:
    check(text, cls, transient, "standard_code", "python")


@pytest.mark.parametrize(
    ("text", "cls", "transient"),
    [
        ("UNIQUE constraint failed: users.email", D5, False),
        ("NOT NULL constraint failed: users.name", B4, False),
        ("database is locked", D1, True),
        ("attempt to write a readonly database", F2, False),
        ("no such table: customers", B4, False),
        ('duplicate key value violates unique constraint "users_email_key"', D5, False),
        ("You have an error in your SQL syntax; check the manual", B4, False),
        ("Deadlock found when trying to get lock; try restarting transaction", D1, True),
    ],
)
def test_sql_engine_wordings(text: str, cls: type[Fault], transient: bool) -> None:
    check(text, cls, transient, "wording", "sql")


@pytest.mark.parametrize(
    ("text", "cls"),
    [
        ("Input validation error: 'sql' is a required property", MissingRequiredArgument),
        ("data must have required property 'sql'", MissingRequiredArgument),
        ("1 validation error for queryArguments\nsql\n  Field required [type=missing]", MissingRequiredArgument),
        ("MCP error -32602: Invalid input: expected string, received undefined at path", MissingRequiredArgument),
        ("MCP error -32602: Invalid input: expected string, received undefined at edits[0].newText", SchemaViolation),
        ("1 validation error for queryArguments\nlimit\n  Input should be a valid integer", SchemaViolation),
        ("5 is not of type 'string'", SchemaViolation),
    ],
)
def test_validation_shapes_of_json_schema_zod_and_pydantic(text: str, cls: type[Fault]) -> None:
    fault = of_text(text)
    assert type(fault) is cls and fault.details["vocabulary"] == "validation" and not fault.is_transient


@pytest.mark.parametrize("message", ["Internal error", "Internal server error", "", "An error occurred"])
def test_a_bare_internal_error_is_never_transient_and_says_it_is_unrecognised(message: str) -> None:
    fault = classify_exception(MCPError(-32603, message), sent=True)
    assert type(fault) is PermanentExecutionError and not fault.is_transient
    assert fault.details["basis"] == "unrecognised" and fault.retry_safety is RetrySafety.MAYBE_EXECUTED


def test_internal_and_server_errors_are_read_by_their_message() -> None:
    syntax = classify_exception(MCPError(-32603, 'syntax error at or near "selec"'), sent=True)
    assert type(syntax) is B4 and not syntax.is_transient and syntax.retry_safety is RetrySafety.EXECUTED_FAILED
    auth = classify_exception(MCPError(-32000, "WRONGPASS invalid username-password pair"), sent=True)
    assert (
        type(auth) is F1 and auth.retry_safety is RetrySafety.REJECTED and auth.repair_action is RepairAction.ASK_USER
    )
    closed = classify_exception(MCPError(-32000, "Connection closed"), sent=True)  # the SDK's own: the link died
    assert closed.fault_type == "C2_connection_lost_after_send" and closed.details["basis"] == "observed"


def test_every_verdict_says_how_it_was_reached() -> None:
    hinted = classify_result(
        types.CallToolResult(
            content=[types.TextContent(text="slow down")],
            is_error=True,
            _meta={"io.github.resilient-mcp/error": {"type": "rate_limited"}},
        ),
        tool=None,
    )
    assert hinted is not None and hinted.details["basis"] == "typed_hint"
    assert of_text("ECONNRESET").details["basis"] == "standard_code"
    assert of_text("Could not find exact match for edit").details["basis"] == "wording"
    assert of_text("the frobnicator declined").details["basis"] == "unrecognised"


def test_text_beyond_the_scan_cap_is_not_read() -> None:
    assert read("x" * MAX_SCAN_CHARS + " ECONNRESET") is None
    assert read("x" * (MAX_SCAN_CHARS - 20) + " ECONNRESET") is not None


def test_holding_a_server_out_switches_off_only_the_rules_learned_from_it() -> None:
    private = "Refused to fetch x: 10.0.0.7 resolves to 10.0.0.7, which is not a public address."  # fetch's own
    assert isinstance(of_text(private), F2)
    with held_out(frozenset({"fetch"})):
        assert not isinstance(of_text(private), F2)
        assert of_text("ENOENT: no such file").details["basis"] == "standard_code"  # standards stay on
    with held_out(frozenset({"git"})):
        assert isinstance(of_text(private), F2)
    # A family several servers use stays on whichever of them is held out (the sandbox's "outside ... allowed").
    sandbox = "Access denied - path outside allowed directories: /etc/passwd not in /srv"
    with held_out(frozenset({"fs", "git"})):
        assert of_text(sandbox).repair_action is RepairAction.FIX_PARAMETER
        assert of_text(sandbox).details["recognised"] == "a path outside the roots the server allows"
