"""A verdict that can harm needs evidence that says exactly that (issue 19, judge9): the decision procedure, not a
phrase list. Three procedures, each with its standard's own examples and negative cases (none is a hold-out record):

- a validator's prefix ("Validation error: ...") may say "nothing ran" (B1/B2, ``rejected``) only when it is the
  validator's: where the text carries an HTTP status of the API behind the tool (RFC 9110; GitHub's REST 422 body
  ``{"message": "Validation Failed", "errors": [...]}``), that API ran the request and refused it (B4,
  ``executed_failed``);
- a 422, like a 400, says only that the request was wrong somehow: a state conflict its body names decides (D5);
- a rate limit in a generic word is transient only where the text says the wait is short (a Retry-After, a window of
  seconds or minutes, words of waiting); otherwise D2, not asserted transient, never repeated by the proxy.
"""

from __future__ import annotations

import pytest

from resilient_mcp.faults import EffectClass, RetrySafety, vocab
from resilient_mcp.policy import ToolRule
from resilient_mcp.verdict.repeat import decide
from tests.faults.support import B1, B2, B4, D2, D5, of_text

# GitHub REST API's documented 422 body ("Client errors": resource, field, code)
GITHUB_422 = (
    '{"message":"Validation Failed","errors":[{"resource":"Issue","field":"title","code":"missing_field"}],'
    '"documentation_url":"https://docs.github.com/rest/issues/issues#create-an-issue","status":"422"}'
)


@pytest.mark.parametrize(
    "text",
    [
        f"Validation Error: Validation Failed\nDetails: {GITHUB_422}",
        "Validation error: Unprocessable Entity (HTTP 422): the assignee is not valid",
        "Validation error: request failed with status code 422",
        "Validation error: [POST /repos/acme/app/pulls][422] createPullRequestUnprocessableEntity",
    ],
)
def test_a_validation_prefix_over_an_api_status_is_the_api_refusing_a_request_it_ran(text: str) -> None:
    fault = of_text(text)
    assert type(fault) is B4, fault
    assert fault.retry_safety is RetrySafety.EXECUTED_FAILED  # not "rejected": the API received and ran it
    assert not fault.is_transient


@pytest.mark.parametrize(
    ("text", "cls"),
    [
        # zod-validation-error's own messages: the tool's schema refused the arguments before anything ran
        ('Validation error: Required at "url"', B1),
        ('Validation error: Expected number, received string at "age"', B2),
        ("Validation error: Invalid enum value. Expected 'a' | 'b', received 'c' at \"mode\"", B2),
    ],
)
def test_a_validators_own_prefix_still_says_nothing_ran(text: str, cls: type) -> None:
    fault = of_text(text)
    assert type(fault) is cls, fault
    assert fault.retry_safety is RetrySafety.REJECTED


@pytest.mark.parametrize(
    "text",
    [
        'HTTP 422 Unprocessable Entity: {"message":"Reference already exists"}',
        "Request failed with status code 422: name already exists on this account",
        '422 Client Error: Unprocessable Entity for url: https://api.example.test/v1/labels {"error": "label already '
        'exists"}',
        # the same words in a JSON body without spaces around a URL: the body's words are read, only the URL is not
        '{"message":"Reference already exists","errors":[],"documentation_url":"https://docs.github.com/rest",'
        '"status":"422"}',
    ],
)
def test_a_422_whose_body_names_a_conflict_is_a_conflict(text: str) -> None:
    fault = of_text(text)
    assert type(fault) is D5, fault
    assert not fault.is_transient


@pytest.mark.parametrize(
    "text",
    [
        'HTTP 422 Unprocessable Entity: {"message":"Validation Failed"}',
        "Request failed with status code 422: column 'x' not found",  # a name the request got wrong stays B4
    ],
)
def test_a_422_without_a_conflict_stays_the_requests_fault(text: str) -> None:
    assert type(of_text(text)) is B4


def test_the_url_in_a_json_word_is_replaced_but_not_its_neighbours() -> None:
    plain = vocab._without_urls('{"message":"gone","documentation_url":"https://x.test/already-exists","s":"1"}')
    assert "already" not in plain  # the URL's words are the caller's data
    assert '"message":"gone"' in plain and '"s":"1"' in plain
    assert vocab._without_urls("see https://x.test/missing now") == "see <url> now"


@pytest.mark.parametrize(
    "text",
    [
        "Rate limit exceeded",
        "Error: Rate limit exceeded",
        "API rate limit exceeded for user ID 1.",
        "rate-limit reached for this API key",
        "Request was throttled.",
    ],
)
def test_a_rate_limit_without_a_named_wait_is_not_asserted_transient(text: str) -> None:
    fault = of_text(text)
    assert type(fault) is D2, fault
    assert not fault.is_transient
    assert fault.retry_safety is RetrySafety.EXECUTED_FAILED  # a guess never claims that nothing ran
    for effect in (EffectClass.READ_ONLY, EffectClass.WRITE_IDEMPOTENT):
        assert not decide(fault, ToolRule(effect=effect)).repeat  # the proxy never repeats it on its own


@pytest.mark.parametrize(
    ("text", "after_ms"),
    [
        ("Rate limit exceeded; slow down", None),
        ("Rate limit exceeded, please try again later.", None),
        ("You have exceeded a secondary rate limit. Please wait a few minutes before you try again.", None),
        ("Rate limit exceeded. Retry after 30 seconds", 30_000),
        ("rate limit: at most 10 requests per minute", None),
        ("You are temporarily rate limited.", None),
        # a status or a code that names a rate limit stays transient without more words
        ("429 Too Many Requests", None),
        ("Too Many Requests", None),
        ('{"code": "RATE_LIMITED", "message": "Rate limit exceeded"}', None),
    ],
)
def test_a_rate_limit_with_a_short_wait_stays_transient(text: str, after_ms: int | None) -> None:
    fault = of_text(text)
    assert type(fault) is D2, fault
    assert fault.is_transient
    if after_ms is not None:
        assert fault.retry_after_ms == after_ms


def test_a_rate_limit_over_a_long_window_is_a_quota() -> None:
    fault = of_text("Rate limit exceeded: 5000 requests per hour")
    assert fault.fault_type == "F3_quota_exhausted"
    assert not fault.is_transient


@pytest.mark.parametrize(
    "text",
    [
        # ssh2's (Node) and paramiko's own sentences behind a server's generic wrapper
        "SSH connection error: All configured authentication methods failed",
        "Connection error: Authentication failed.",
        "Network error: the server's host key is not the pinned key",
        "connection error: client certificate required by the server",
    ],
)
def test_a_generic_transient_wrapper_over_an_identity_cause_is_not_transient(text: str) -> None:
    fault = of_text(text)
    assert not fault.is_transient, fault
    assert not decide(fault, ToolRule(effect=EffectClass.READ_ONLY)).repeat


@pytest.mark.parametrize(
    "text",
    [
        "Connection error: connection refused",
        "Network error: request timed out",
        "SSH connection error: connect ECONNREFUSED 127.0.0.1:22",
        "Network Error: fetch failed. Check if the URL is correct and the server is available",
        "Connection error: the password store is temporarily unavailable",  # the cause says transient itself
    ],
)
def test_a_generic_transient_wrapper_over_a_transient_or_plain_cause_stays_transient(text: str) -> None:
    assert of_text(text).is_transient


@pytest.mark.parametrize(
    ("text", "cls"),
    [
        # V8's TypeError messages (Node 16+), JavaScriptCore's, CPython's AttributeError / TypeError
        ("TypeError: Cannot read properties of undefined (reading 'map')", B1),
        ("Error: Parsing failed: Cannot read properties of undefined (reading 'trim')", B1),
        ("TypeError: Cannot read property 'length' of undefined", B1),
        ("TypeError: undefined is not an object (evaluating 'args.name')", B1),
        ("Error: name.includes is not a function", B2),
        ("An error occurred: 'int' object has no attribute 'startswith'", B2),
        ("TypeError: 'int' object is not subscriptable", B2),
        ("TypeError: 'int' object is not iterable", B2),
    ],
)
def test_a_runtime_type_error_is_the_arguments_fault_but_never_refused_before_it_ran(text: str, cls: type) -> None:
    fault = of_text(text)
    assert type(fault) is cls, fault
    assert fault.retry_safety is RetrySafety.MAYBE_EXECUTED  # the handler stopped midway: not "rejected"
    assert not fault.is_transient
    assert not decide(fault, ToolRule(effect=EffectClass.READ_ONLY)).repeat


@pytest.mark.parametrize(
    "text",
    [
        "AttributeError: 'NoneType' object has no attribute 'cursor'",  # the server's own state is as likely absent
        "module 'msoffcrypto.exceptions' has no attribute 'InvalidFormatError'",  # a server's import bug
    ],
)
def test_an_absent_server_state_or_a_module_is_not_read_as_the_arguments(text: str) -> None:
    assert type(of_text(text)) not in (B1, B2)
