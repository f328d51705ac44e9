"""Cross-server conventions the rules read (issue 19, "judgement that generalises"): the validators' other shapes
(zod's JSON issues and zod 4's prefixed messages, pydantic's error types), a process's exit status, a tool's own
time limit, name resolution, an HTTP status after "Error", URLs that are data, refusal and optimistic-concurrency
words, an error that names the valid choices, and what a generic word may claim. Every text here is written in the
convention's own form, not copied from the error corpus."""

from __future__ import annotations

import pytest

from resilient_mcp.faults import (
    Fault,
    RepairAction,
    RetrySafety,
)
from tests.faults.support import B1, B2, B4, D1, D4, D5, F2, of_text, reads_as


@pytest.mark.parametrize(
    ("text", "cls"),
    [
        # zod 3's issue list as JSON (a server that returns ``error.issues``): a one-element path is a top-level name
        ('[{"code": "invalid_type", "expected": "string", "received": "undefined", "path": ["repo"]}]', B1),
        ('[{"code":"invalid_type","expected":"string","received":"undefined","path":["opts","depth"]}]', B2),
        # zod 4's issue as JSON: "received undefined" is in the message only
        (
            '[{"expected": "number", "code": "invalid_type", "path": ["limit"], '
            '"message": "Invalid input: expected number, received undefined"}]',
            B1,
        ),
        # zod 4's prettified "path: message", as the TypeScript SDK words it
        ("Invalid arguments for tool search: query: Invalid input: expected string, received undefined", B1),
        ("Invalid arguments for tool search: filter.kind: Invalid input: expected string, received undefined", B2),
        # pydantic's error types: ``missing`` / ``missing_argument`` is an absent argument, any other a bad one
        (
            "1 validation error for call[send_mail]\nto\n  Missing required argument "
            "[type=missing_argument, input_value={}, input_type=dict]",
            B1,
        ),
        (
            "1 validation error for call[resize]\nwidth\n  Input should be a valid integer, unable to parse string "
            "as an integer [type=int_parsing, input_value='wide', input_type=str]",
            B2,
        ),
        # servers that check their own arguments in the SDK's shape
        ("Invalid arguments for export: format: required", B1),
        ("Invalid argument: limit: is required", B1),
        ("Invalid arguments for export", B2),
    ],
)
def test_validator_shapes(text: str, cls: type[Fault]) -> None:
    fault = of_text(text)
    assert type(fault) is cls, (text, fault)
    assert fault.details["vocabulary"] == "validation" and not fault.is_transient


def test_a_pydantic_error_of_a_tools_own_output_is_not_the_callers_argument() -> None:
    fault = of_text(
        "1 validation error for statsOutput\nresult\n  Input should be a valid integer "
        "[type=int_parsing, input_value='Error: NOAUTH', input_type=str]"
    )
    assert type(fault) not in (B1, B2)


@pytest.mark.parametrize(
    "text",
    [
        "Command 'make test' returned non-zero exit status 2.",  # Python's CalledProcessError
        "git push exited with code 128: fatal: 'origin' does not appear to be a git repository",
        "Exit Code: 1 Stderr: grep: logs/app.log: No such file or directory",  # the command's argument, not a lookup
        "Cmd('git') failed due to: exit code(128) stderr: 'fatal: bad revision'",  # GitPython
    ],
)
def test_a_failed_commands_exit_status_says_the_command_is_what_to_change(text: str) -> None:
    fault = of_text(text)
    assert type(fault) is B4, (text, fault)
    assert (fault.details["basis"], fault.details["vocabulary"]) == ("standard_code", "process")
    assert fault.repair_action is RepairAction.FIX_PARAMETER


def test_exit_status_gives_way_to_a_state_conflict_and_a_signal_is_never_transient() -> None:
    assert type(of_text("exit status 128 stderr: fatal: a branch named 'topic' already exists")) is D5
    assert type(of_text("Command failed with exit status 1: nothing to commit, working tree clean")) is D5
    killed = of_text("the job ended with exit code 137")  # 128 + SIGKILL: cut midway, the same work meets it again
    assert type(killed) is D4 and not killed.is_transient
    assert killed.retry_safety is RetrySafety.MAYBE_EXECUTED
    timeout = of_text("exit status 124")  # GNU timeout: the same command meets the same limit
    assert type(timeout) is D4 and timeout.details["vocabulary"] == "process"


@pytest.mark.parametrize(
    "text",
    [
        "Command 'pytest -x' timed out after 60 seconds",  # Python's subprocess.TimeoutExpired
        "Error: command timed out after 30000 ms",
        "Script timed out after 5s and was stopped",
        "ERROR: canceling query: statement timeout reached",
        "Query timed out (limit 30 s); narrow the date range",
    ],
)
def test_a_tool_cutting_its_own_child_is_not_transient(text: str) -> None:
    fault = reads_as(text, D4, False)
    assert fault.retry_safety is RetrySafety.MAYBE_EXECUTED  # what ran before the cut is unknown


def test_a_transports_timeout_stays_transient() -> None:
    for text in (
        "Request timed out after 30s",
        "Operation timed out",
        "connect ETIMEDOUT 10.0.0.1:443",
        "Error: Command timed out",  # ioredis: a Redis command got no answer (the connection is down)
    ):
        fault = of_text(text)
        assert fault.is_transient, text


@pytest.mark.parametrize(
    ("text", "cls", "transient"),
    [
        ("curl: (6) Could not resolve host: api.example.org", D4, False),
        ("[Errno -2] Name or service not known", D4, False),
        ("getaddrinfo: nodename nor servname provided, or not known", D4, False),
        ("[Errno -3] Temporary failure in name resolution", D1, True),
        ("connect: Network is unreachable", D1, True),
        ("connect to 10.1.2.3 port 22: No route to host", D1, True),
        ("AxiosError: Network Error", D1, True),
        ("Unable to connect to the API server", D1, True),
        ("FATAL: terminating connection due to administrator command", D1, True),
        ("FATAL: the database system is shutting down", D1, True),
    ],
)
def test_name_resolution_network_and_database_shutdown_texts(text: str, cls: type[Fault], transient: bool) -> None:
    fault = reads_as(text, cls, transient)
    assert fault.details["basis"] != "unrecognised", text  # read, not the unrecognised default


def test_an_http_status_after_error_is_read() -> None:
    assert type(of_text("Backend Error (503): try later")) is D1
    blocked = of_text("Website Error (403): access blocked")
    assert type(blocked) is F2 and blocked.details["basis"] == "standard_code"


def test_words_inside_a_url_are_the_callers_data() -> None:
    fault = of_text("Failed to load https://missing.example.invalid/page: fetch failed")
    assert fault.details["basis"] == "unrecognised"  # not "invalid" (B4) nor "missing" (B4) from the URL


def test_refusal_words_are_whole_words_and_never_claim_that_nothing_ran() -> None:
    for text in ("Request blocked by the egress rules", "Disallowed scheme: ftp", "Refused by security policy"):
        fault = of_text(text)
        assert type(fault) is F2, text
        assert fault.retry_safety is RetrySafety.EXECUTED_FAILED, text  # a guess: not "rejected"
    assert type(of_text("blockedHosts cannot be changed at run time")) is not F2  # an identifier, not a refusal
    assert of_text("HTTP 403 Forbidden").retry_safety is RetrySafety.REJECTED  # the status is the upstream's claim


@pytest.mark.parametrize(
    ("text", "cls", "repair"),
    [
        ("Unknown region 'eu-north-9'. Available regions: eu-west-1, us-east-1", B4, RepairAction.FIX_PARAMETER),
        ("Profile 'ops' not found. Available profiles: dev, prod", B4, RepairAction.FIX_PARAMETER),
        ("Setting 'colour' cannot be changed. Allowed keys: theme, width", B4, RepairAction.FIX_PARAMETER),
        ("Access denied: only .csv and .json files are allowed", F2, RepairAction.FIX_PARAMETER),
        ("Path not permitted; it must be within one of these roots: /srv", F2, RepairAction.FIX_PARAMETER),
        ("Access denied for this account", F2, RepairAction.ASK_USER),  # names no choice: ask the user
    ],
)
def test_an_error_that_names_the_valid_choices_is_fixed_by_choosing_one(
    text: str, cls: type[Fault], repair: RepairAction
) -> None:
    fault = of_text(text)
    assert type(fault) is cls and fault.repair_action is repair, (text, fault)


@pytest.mark.parametrize(
    "text",
    [
        "Write rejected: content hash mismatch, the file changed on disk",
        "The document has been modified by another user",
        "Update refused: resource modified since it was read (ETag)",
    ],
)
def test_optimistic_concurrency_words_are_a_state_conflict(text: str) -> None:
    assert type(of_text(text)) is D5, text


def test_a_typed_invalid_argument_is_narrowed_by_a_validators_text() -> None:
    missing = of_text("'order_id' is a required property", hint={"type": "invalid_argument"})
    assert type(missing) is B1 and missing.retry_safety is RetrySafety.REJECTED
    assert missing.details["basis"] == "typed_hint"
    wrong = of_text("Input validation error: 'qty' is not of type 'integer'", hint={"type": "invalid_argument"})
    assert type(wrong) is B2
    assert type(of_text("quantity must be positive", hint={"type": "invalid_argument"})) is B4  # the hint stands


def test_an_allow_list_refusal_names_the_command_and_redis_memory_is_not_one() -> None:
    listed = of_text("Error: Command not allowed: rm -rf build")
    assert type(listed) is F2 and listed.repair_action is RepairAction.FIX_PARAMETER  # another command may do
    full = of_text("Error setting key k: command not allowed when used memory > 'maxmemory'.")  # Redis, OOM cut off
    assert full.repair_action is RepairAction.ASK_USER  # no argument fixes a full store


def test_a_quota_that_names_its_window_is_a_rate_limit_when_the_window_is_short() -> None:
    short = of_text("8 RESOURCE_EXHAUSTED: Quota exceeded for limit 'Requests per minute'")
    assert short.fault_type == "D2_rate_limited" and short.is_transient
    long = of_text("HTTP 429 Too Many Requests: 1000 requests per day allowed")
    assert type(long).__name__ == "QuotaExhausted" and not long.is_transient
    assert of_text("HTTP 429 Too Many Requests").fault_type == "D2_rate_limited"  # no window: as before
