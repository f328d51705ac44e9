"""Vocabularies read from documented standards and conventions shared across servers (issue 19, after the second
hold-out): AWS's error codes and messages, credentials a server lacks, name resolution (getaddrinfo) and undici's
codes, and more validators' message templates. Every text is the standard's or library's own documented example or
template, not a corpus record."""

from __future__ import annotations

import mcp_types as types
import pytest

from resilient_mcp.faults import (
    Fault,
    RateLimited,
    RepairAction,
)
from resilient_mcp.faults.vocab import Basis, read
from tests.faults.support import B1, B2, B4, D1, D4, D5, F1, F2, of_text, reads_as


@pytest.mark.parametrize(
    ("text", "cls", "transient", "repair"),
    [
        # botocore's ClientError shape, with S3's documented codes and messages
        (
            "An error occurred (NoSuchKey) when calling the GetObject operation: The specified key does not exist.",
            D4,
            False,
            None,
        ),
        (
            "An error occurred (NoSuchBucket) when calling the ListObjectsV2 operation: The specified bucket does not "
            "exist",
            D4,
            False,
            None,
        ),
        ("An error occurred (AccessDenied) when calling the PutObject operation: Access Denied", F2, False, "ask_user"),
        (
            "An error occurred (InvalidAccessKeyId) when calling the ListBuckets operation: The AWS Access Key Id you "
            "provided does not exist in our records.",
            F1,
            False,
            "ask_user",
        ),
        (
            "An error occurred (SignatureDoesNotMatch) when calling the GetObject operation: The request signature we "
            "calculated does not match the signature you provided.",
            F1,
            False,
            "ask_user",
        ),
        (
            "An error occurred (ExpiredToken) when calling the GetObject operation: The provided token has expired.",
            F1,
            False,
            "ask_user",
        ),
        (
            "An error occurred (SlowDown) when calling the PutObject operation (reached max retries: 4): Please reduce "
            "your request rate.",
            RateLimited,
            True,
            None,
        ),
        (
            "An error occurred (ThrottlingException) when calling the Query operation: Rate exceeded",
            RateLimited,
            True,
            None,
        ),
        (
            "An error occurred (InternalError) when calling the GetObject operation: We encountered an internal error. "
            "Please try again.",
            D1,
            True,
            None,
        ),
        (
            "An error occurred (ServiceUnavailable) when calling the GetObject operation: Reduce your request rate.",
            D1,
            True,
            None,
        ),
        (
            "An error occurred (RequestTimeout) when calling the PutObject operation: Your socket connection to the "
            "server was not read from or written to within the timeout period.",
            D1,
            True,
            None,
        ),
        (
            "An error occurred (InvalidObjectState) when calling the GetObject operation: The operation is not valid "
            "for the object's storage class",
            D4,
            False,
            "ask_user",
        ),
        (
            "An error occurred (BucketAlreadyOwnedByYou) when calling the CreateBucket operation: Your previous "
            "request to create the named bucket succeeded and you already own it.",
            D5,
            False,
            None,
        ),
        (
            "An error occurred (ConditionalCheckFailedException) when calling the PutItem operation: The conditional "
            "request failed",
            D5,
            False,
            None,
        ),
        (
            "An error occurred (ResourceNotFoundException) when calling the GetItem operation: Requested resource not "
            "found",
            D4,
            False,
            None,
        ),
        (
            "An error occurred (ProvisionedThroughputExceededException) when calling the PutItem operation: The level "
            "of configured provisioned throughput for the table was exceeded.",
            RateLimited,
            True,
            None,
        ),
        (
            "An error occurred (InvalidBucketName) when calling the CreateBucket operation: The specified bucket "
            "is not valid.",
            B4,
            False,
            None,
        ),
        (
            "An error occurred (ValidationException) when calling the Query operation: One or more parameter values "
            "were invalid",
            B4,
            False,
            None,
        ),
        # the same codes and messages without botocore's wrapper (the service's XML Code, or the message alone)
        ("<Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message></Error>", D4, False, None),
        ("The AWS Access Key Id you provided does not exist in our records.", F1, False, "ask_user"),
        ("Please reduce your request rate.", RateLimited, True, None),
        ("Unable to locate credentials", F1, False, "ask_user"),
        ('Could not connect to the endpoint URL: "http://localhost:4566/bucket"', D1, True, None),
    ],
)
def test_aws_documented_error_codes_and_messages(text: str, cls: type[Fault], transient: bool, repair: str) -> None:
    fault = reads_as(text, cls, transient)
    if repair:
        assert fault.repair_action is RepairAction(repair)


def test_an_aws_code_is_read_as_a_code_and_only_as_a_whole_token() -> None:
    fault = of_text("An error occurred (NoSuchBucket) when calling the HeadBucket operation: Not Found")
    assert fault.details["basis"] == Basis.STANDARD_CODE.value and fault.details["recognised"] == "NoSuchBucket"
    assert read("x-nosuchkeyring-y") is None  # a substring of another word is not the code
    assert read("nosuchkey") is None  # the codes are case-sensitive names


@pytest.mark.parametrize(
    "text",
    [
        "The OPENAI_API_KEY environment variable is not set.",
        "Missing API key",
        "No API key provided. Set the API key in the settings.",
        "api_key is required",
        "Access token not found: run the login command first",
        "Missing bearer token",
        "No password given",  # pdf.js PasswordException (NEED_PASSWORD)
        "Incorrect Password",  # pdf.js PasswordException (INCORRECT_PASSWORD)
        "GITHUB_TOKEN is not set",
        "Credentials not configured",
    ],
)
def test_a_credential_the_server_lacks_asks_the_user(text: str) -> None:
    fault = reads_as(text, F1, False)
    assert fault.repair_action is RepairAction.ASK_USER


def test_a_setting_named_as_an_environment_variable_is_the_servers_configuration() -> None:
    fault = of_text("Environment variable DATABASE_URL is not set")
    assert type(fault) is D4 and fault.repair_action is RepairAction.ASK_USER and not fault.is_transient


def test_a_credential_that_is_one_of_the_tools_arguments_is_the_callers_to_give() -> None:
    schema = {"type": "object", "properties": {"password": {"type": "string"}}, "required": ["password"]}
    tool = types.Tool(name="unlock", input_schema=schema)
    assert type(of_text("password is required", tool)) is not F1
    assert type(of_text("password is required")) is F1


@pytest.mark.parametrize(
    "text",
    [
        "Unexpected token } in JSON at position 12",  # a parser's token, not a credential
        "Token refreshed; the file was not found",  # absence of something else, in another clause
        "Password changed for user bob",
    ],
)
def test_credential_nouns_without_absence_are_not_read_as_missing_credentials(text: str) -> None:
    fault = of_text(text)
    assert type(fault) is not F1, (text, fault)


@pytest.mark.parametrize(
    ("text", "cls", "transient"),
    [
        ("getaddrinfo ENOTFOUND no-such-host.invalid", D4, False),  # Node's dns: the name does not resolve
        ("getaddrinfo EAI_AGAIN api.example.com", D1, True),  # the standard's "temporary failure"
        ("Error: getaddrinfo EAI_NONAME api.example.com", D4, False),
        ("[Errno -2] Name or service not known", D4, False),  # glibc EAI_NONAME
        ("[Errno -3] Temporary failure in name resolution", D1, True),  # glibc EAI_AGAIN
        ("[Errno -5] No address associated with hostname", D4, False),  # glibc EAI_NODATA
        ("[Errno -4] Non-recoverable failure in name resolution", D4, False),  # glibc EAI_FAIL
        ("[Errno 8] nodename nor servname provided, or not known", D4, False),  # BSD / macOS
        ("[Errno 11001] getaddrinfo failed", D4, False),  # Windows
        (
            'Get "https://api.example.com/v1": dial tcp: lookup api.example.com on 127.0.0.53:53: no such host',
            D4,
            False,
        ),
        ("java.net.UnknownHostException: api.example.com", D4, False),
    ],
)
def test_name_resolution_is_transient_only_where_the_standard_says_temporary(
    text: str, cls: type[Fault], transient: bool
) -> None:
    reads_as(text, cls, transient)


@pytest.mark.parametrize(
    ("text", "cls", "transient"),
    [
        ("TypeError: fetch failed\n  [cause]: Error: connect ECONNREFUSED 127.0.0.1:8080", D1, True),
        (
            "TypeError: fetch failed [cause]: ConnectTimeoutError: Connect Timeout Error (attempted address: "
            "api.example.com:443, timeout: 10000ms) { code: 'UND_ERR_CONNECT_TIMEOUT' }",
            D1,
            True,
        ),
        ("fetch failed: HeadersTimeoutError: Headers Timeout Error (UND_ERR_HEADERS_TIMEOUT)", D1, True),
        ("fetch failed: SocketError: other side closed", D1, True),
        ("TypeError: fetch failed [cause]: Error: getaddrinfo ENOTFOUND no-such-host.invalid", D4, False),
        ("fetch failed: ResponseExceededMaxSizeError (UND_ERR_RES_EXCEEDED_MAX_SIZE)", D4, False),
    ],
)
def test_undici_fetch_failed_is_decided_by_its_cause(text: str, cls: type[Fault], transient: bool) -> None:
    reads_as(text, cls, transient)


def test_a_bare_fetch_failed_says_nothing_and_is_said_to_be_unrecognised() -> None:
    # undici says "fetch failed" for every failure (DNS, refused, reset, TLS): without its cause, the proxy is unsure
    fault = of_text("TypeError: fetch failed")
    assert fault.details["basis"] == Basis.UNRECOGNISED.value and not fault.is_transient


@pytest.mark.parametrize(
    ("text", "cls"),
    [
        ('"name" is required', B1),  # Joi any.required
        ('"colour" is not allowed', B2),  # Joi object.unknown
        ("email is a required field", B1),  # yup mixed.required
        ("{'name': ['Missing data for required field.']}", B1),  # marshmallow
        ("{'nickname': ['Unknown field.']}", B2),  # marshmallow
        ("{'age': ['Field may not be null.']}", B2),  # marshmallow
        ("title should not be null or undefined", B1),  # class-validator isDefined
        ("Key: 'User.Email' Error:Field validation for 'Email' failed on the 'required' tag", B1),  # go-playground
        ("Key: 'User.Age' Error:Field validation for 'Age' failed on the 'gte' tag", B2),
        ("{} is not valid under any of the given schemas", B2),  # python-jsonschema anyOf
        ("/colour must be equal to one of the allowed values", B2),  # ajv enum
        ('/id must match pattern "^[a-z]+$"', B2),  # ajv pattern
        ("/name must NOT have fewer than 1 characters", B2),  # ajv minLength
        ('Validation error: Required at "url"', B1),  # zod-validation-error
        ('Validation error: Expected number, received string at "age"', B2),
    ],
)
def test_more_validators_documented_message_templates(text: str, cls: type[Fault]) -> None:
    fault = of_text(text)
    assert type(fault) is cls, (text, fault)


@pytest.mark.parametrize(
    "text",
    [
        "pymysql.err.InternalError: (1054, \"Unknown column 'x' in 'field list'\")",  # DB-API's InternalError
        "psycopg2.InternalError: current transaction is aborted, commands ignored until end of transaction block",
    ],
)
def test_an_aws_code_that_is_also_another_librarys_name_is_read_only_as_an_aws_code(text: str) -> None:
    fault = of_text(text)
    assert not fault.is_transient, (text, fault)
    assert fault.details.get("vocabulary") != "aws"


def test_an_ambiguous_aws_code_in_its_aws_shape_is_read() -> None:
    fault = of_text('{"__type": "com.amazonaws.dynamodb.v20120810#InternalServerError", "message": "Internal error"}')
    assert type(fault) is D1 and fault.is_transient
    assert type(of_text("<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>")) is F2


def test_an_orms_validation_error_for_a_unique_constraint_is_not_a_schema_violation() -> None:
    fault = of_text("Validation error: name must be unique")  # Sequelize's UniqueConstraintError, the row exists
    assert type(fault) not in (B1, B2)


def test_a_500_whose_words_name_a_conflict_is_the_conflict() -> None:
    # docker-py's APIError for the Engine's 500 on a port another container holds (Docker API: 500 "server error")
    text = (
        "docker.errors.APIError: 500 Server Error for http+docker://localhost/v1.45/containers/web-1/start: Internal "
        'Server Error ("driver failed programming external connectivity on endpoint web-1: Bind for 0.0.0.0:8080 '
        'failed: port is already allocated")'
    )
    fault = of_text(text)
    assert type(fault) is D5 and not fault.is_transient
    plain_500 = of_text("docker.errors.APIError: 500 Server Error for http+docker://x/info: Internal Server Error")
    assert type(plain_500) is D1 and plain_500.is_transient
