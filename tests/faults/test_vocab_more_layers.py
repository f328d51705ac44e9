"""Vocabularies added after the fresh hold-out was measured (issue 19, benchmarks/errors/REPORT.md): MySQL's and
MariaDB's documented messages, Chromium's network error codes, HTTP reason phrases standing alone, zod's and the
PEG parsers' message shapes, an error label before a phrase that opens the text, and a unit of work stopped at a time
limit the text names (not the transport's timeout). Each text is written from the standard's own documentation."""

from __future__ import annotations

import pytest
from mcp.shared.exceptions import MCPError

from resilient_mcp.faults import (
    Fault,
    MissingRequiredArgument,
    RepairAction,
    RetrySafety,
    SchemaViolation,
    UnknownTool,
)
from resilient_mcp.faults.classify import classify_exception
from resilient_mcp.faults.vocab import held_out, read
from tests.faults.support import B4, D1, D4, D5, F2, F3, of_text, reads_as


@pytest.mark.parametrize(
    ("text", "cls", "transient", "repair"),
    [
        ("SELECT command denied to user 'app'@'localhost' for table `vault`.`secrets`", F2, False, "ask_user"),
        ("User 'etl' has exceeded the 'max_queries_per_hour' resource (current value: 100)", F3, False, "ask_user"),
        ("Query execution was interrupted (max_statement_time exceeded)", D4, False, "fix_parameter"),
        ("Data too long for column 'name' at row 1", B4, False, None),
        ("Out of range value for column 'qty' at row 1", B4, False, None),
        ("Incorrect integer value: 'ten' for column `shop`.`orders`.`qty` at row 1", B4, False, None),
        ("CONSTRAINT `orders.qty` failed for `shop`.`orders`", B4, False, None),
        ("Can't connect to MySQL server on 'db:3306' (111)", D1, True, None),
        ("Lost connection to MySQL server during query", D1, True, None),
    ],
)
def test_mysql_and_mariadb_documented_messages(text: str, cls: type[Fault], transient: bool, repair: str) -> None:
    fault = reads_as(text, cls, transient)
    assert fault.details["vocabulary"] in ("sql", "runtime"), text  # runtime: the work-limit reading (below)
    if repair:
        assert fault.repair_action is RepairAction(repair)


@pytest.mark.parametrize(
    ("code", "cls", "transient"),
    [
        ("ERR_CONNECTION_REFUSED", D1, True),
        ("ERR_INTERNET_DISCONNECTED", D1, True),
        ("ERR_NAME_NOT_RESOLVED", D4, False),
        ("ERR_BLOCKED_BY_CLIENT", F2, False),
        ("ERR_CERT_DATE_INVALID", D4, False),
    ],
)
def test_chromium_network_error_codes(code: str, cls: type[Fault], transient: bool) -> None:
    fault = of_text(f"page.goto: net::{code} at https://shop.example/\nCall log:\n  - navigating")
    assert type(fault) is cls and fault.is_transient is transient, (code, fault)
    assert fault.details["vocabulary"] == "runtime"


@pytest.mark.parametrize(
    ("phrase", "cls", "transient"),
    [
        ("Internal Server Error", D1, True),
        ("Bad Gateway", D1, True),
        ("Gateway Timeout", D1, True),
        ("Bad Request", B4, False),
        ("Unprocessable Entity", B4, False),
        ("Precondition Failed", D5, False),
    ],
)
def test_an_http_reason_phrase_alone_is_read_as_its_status(phrase: str, cls: type[Fault], transient: bool) -> None:
    # A server that passes on only the reason phrase of the API behind it (fetch's response.statusText).
    fault = classify_exception(MCPError(-32603, f"Issue tracker API error: {phrase}"), sent=True)
    assert type(fault) is cls and fault.is_transient is transient, (phrase, fault)
    assert fault.details["vocabulary"] == "http-reason"


@pytest.mark.parametrize(
    "text",
    [
        "Command '['sleep', '5']' timed out after 1 seconds",
        "ERROR: canceling statement due to statement timeout",
        "Query execution was interrupted, maximum statement execution time exceeded",
        "Script timeout: the script ran longer than its time limit",
        "process exceeded the time limit of 30 s",
    ],
)
def test_work_stopped_at_a_time_limit_the_text_names_is_permanent(text: str) -> None:
    fault = reads_as(text, D4, False)
    assert fault.repair_action is RepairAction.FIX_PARAMETER


def test_one_reading_covers_a_commands_and_a_statements_time_limit() -> None:
    # The strict leave-one-server-out measurement switches off a wording that decided one server's records only; the
    # work-limit reading is one rule for commands and statements, so a shell server's "timed out after N seconds"
    # keeps it when its own records are held out.
    shell, sql = (
        read("Command 'sleep 5' timed out after 1 seconds"),
        read("canceling statement due to statement timeout"),
    )
    assert shell is not None and sql is not None
    assert (shell.rule.family, shell.rule.key) == (sql.rule.family, sql.rule.key)
    assert of_text("Command 'sleep 5' timed out after 1 seconds").retry_safety is RetrySafety.MAYBE_EXECUTED


@pytest.mark.parametrize(
    "text",
    [
        "Command timed out",  # ioredis: a Redis command got no answer (the connection is down)
        "Request timed out after 30000 ms",
        "connect ETIMEDOUT 10.0.0.7:5432",
    ],
)
def test_a_timeout_with_no_limit_of_the_work_named_stays_the_transports(text: str) -> None:
    assert of_text(text).is_transient, text


def test_held_out_switches_the_work_limit_reading_off() -> None:
    reading = read("Command 'x' timed out after 1 seconds")
    assert reading is not None
    with held_out(frozenset(), frozenset({(reading.rule.family, reading.rule.key)})):
        assert of_text("Command 'x' timed out after 1 seconds").is_transient  # only the transport's word is left


@pytest.mark.parametrize(
    ("text", "cls"),
    [
        ("Invalid arguments: per_page: Expected number, received string", SchemaViolation),
        (
            'Invalid arguments for tool "click":\n✖ Invalid input: expected string, received undefined\n  → at ref',
            B1 := MissingRequiredArgument,
        ),
        (
            'Invalid arguments for tool "a":\n✖ Invalid input: expected string, received undefined\n  → at o.ref',
            SchemaViolation,
        ),
        ('Expected "SELECT", "WITH" or [ \\t\\n\\r] but "*" found.', B4),
        ("Queue name can only contain letters, digits, hyphen", B4),
        ("Exchange name cannot be empty", B4),
    ],
)
def test_validators_and_parsers_message_shapes(text: str, cls: type[Fault]) -> None:
    assert type(of_text(text)) is cls, text


def test_a_32602_whose_validator_names_an_absent_argument_is_b1() -> None:
    message = 'Invalid arguments for tool search: [{"code": "invalid_type", "expected": "object", "received": '
    message += '"undefined", "path": ["queryBody"], "message": "Required"}]'
    fault = classify_exception(MCPError(-32602, message), sent=True)
    assert type(fault) is MissingRequiredArgument and fault.retry_safety is RetrySafety.REJECTED
    wrong = classify_exception(
        MCPError(-32602, "Invalid arguments: limit: Expected number, received string"), sent=True
    )
    assert type(wrong) is SchemaViolation


def test_an_error_label_may_stand_before_a_phrase_that_opens_the_text() -> None:
    assert type(of_text('### Error\nTool "browser_devtools" not found')) is UnknownTool
    assert type(of_text("Error: Unknown tool: drop_all")) is UnknownTool
    assert type(of_text("Could not run: tool x not found in the plugin")) is not UnknownTool
