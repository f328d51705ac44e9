"""Error codes spelled as tokens and documented JSON error bodies (issue 19, the hold-outs' policy engines and APIs):
each example is the standard's or the vendor's own, cited beside it, not a benchmark record.

- gRPC status names (grpc.github.io/grpc/core/md_doc_statuscodes.html) and Google's API error model
  (cloud.google.com/apis/design/errors: ``{"error": {"code", "status", "message", "details": [ErrorInfo]}}``);
- RFC 9457 problem details (§3's example); Apollo Server's GraphQL ``extensions.code``
  (apollographql.com/docs/apollo-server/data/errors);
- OAuth 2.0 (RFC 6749 §5.2) and bearer-token errors (RFC 6750 §3, §3.1);
- Kubernetes ``Status`` and kubectl's "Error from server (Reason)"; the Slack Web API's ``{"ok": false, "error"}``;
  Stripe's error object (docs.stripe.com/api/errors); MongoDB's codeName (src/mongo/base/error_codes.yml);
- policy engines' upper-case codes (``POLICY_DENIED``, ``QUOTA_EXCEEDED``), read by the same table and their parts.
"""

from __future__ import annotations

import json

import mcp_types as types
import pytest

from resilient_mcp.faults import (
    Fault,
    RepairAction,
    RetrySafety,
    bodies,
)
from resilient_mcp.faults.classify import classify_result
from resilient_mcp.faults.vocab import read
from tests.faults.support import B4, D1, D2, D4, D5, F1, F2, F3, of_text, reads_as
from tests.security.cpu import cpu_cost

ASK = RepairAction.ASK_USER


GOOGLE_API_KEY = {  # cloud.google.com/apis/design/errors, "Error model" example
    "error": {
        "code": 400,
        "message": "API key not valid. Please pass a valid API key.",
        "status": "INVALID_ARGUMENT",
        "details": [
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": "API_KEY_INVALID",
                "domain": "googleapis.com",
                "metadata": {"service": "translate.googleapis.com"},
            }
        ],
    }
}
GOOGLE_RATE = {
    "error": {
        "code": 429,
        "message": "Quota exceeded for quota metric 'Queries' and limit 'Queries per minute'",
        "status": "RESOURCE_EXHAUSTED",
        "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "RATE_LIMIT_EXCEEDED"}],
    }
}
GOOGLE_NOT_FOUND = {"error": {"code": 404, "message": "Requested entity was not found.", "status": "NOT_FOUND"}}
RFC9457 = {  # RFC 9457 §3, the out-of-credit example
    "type": "https://example.com/probs/out-of-credit",
    "title": "You do not have enough credit.",
    "status": 403,
    "detail": "Your current balance is 30, but that costs 50.",
    "instance": "/account/12345/msgs/abc",
}
APOLLO_VALIDATION = {
    "errors": [
        {
            "message": 'Cannot query field "__typo" on type "Query".',
            "locations": [{"line": 1, "column": 2}],
            "extensions": {"code": "GRAPHQL_VALIDATION_FAILED"},
        }
    ]
}
APOLLO_UNAUTHENTICATED = {"errors": [{"message": "You must be logged in", "extensions": {"code": "UNAUTHENTICATED"}}]}
APOLLO_FORBIDDEN = {"data": None, "errors": [{"message": "Not your order", "extensions": {"code": "FORBIDDEN"}}]}
APOLLO_BAD_INPUT = {"errors": [{"message": "Invalid argument value", "extensions": {"code": "BAD_USER_INPUT"}}]}
OAUTH_INVALID_REQUEST = {"error": "invalid_request"}  # RFC 6749 §5.2's example
OAUTH_INVALID_GRANT = {"error": "invalid_grant", "error_description": "The refresh token has expired"}
K8S_NOT_FOUND = {
    "kind": "Status",
    "apiVersion": "v1",
    "metadata": {},
    "status": "Failure",
    "message": 'pods "grafana" not found',
    "reason": "NotFound",
    "details": {"name": "grafana", "kind": "pods"},
    "code": 404,
}
K8S_CONFLICT = {
    "kind": "Status",
    "status": "Failure",
    "message": 'Operation cannot be fulfilled on configmaps "app": the object has been modified',
    "reason": "Conflict",
    "code": 409,
}
K8S_TIMEOUT = {
    "kind": "Status",
    "status": "Failure",
    "message": "Timeout: request did not complete",
    "reason": "Timeout",
}
SLACK_CHANNEL = {"ok": False, "error": "channel_not_found"}
SLACK_AUTH = {"ok": False, "error": "not_authed"}
SLACK_RATE = {"ok": False, "error": "ratelimited"}
SLACK_SCOPE = {"ok": False, "error": "missing_scope", "needed": "chat:write", "provided": "channels:read"}
STRIPE_MISSING = {
    "error": {
        "code": "resource_missing",
        "doc_url": "https://stripe.com/docs/error-codes/resource-missing",
        "message": "No such customer: 'cus_NffrFeUfNV2Hib'",
        "param": "id",
        "type": "invalid_request_error",
    }
}
STRIPE_CARD = {"error": {"code": "card_declined", "message": "Your card was declined.", "type": "card_error"}}
STRIPE_API = {"error": {"message": "An unknown error occurred", "type": "api_error"}}
MONGO_DUP = {
    "ok": 0,
    "errmsg": 'E11000 duplicate key error collection: shop.users index: email_1 dup key: { email: "a@b" }',
    "code": 11000,
    "codeName": "DuplicateKey",
}
MONGO_PRIMARY = {"ok": 0, "errmsg": "not primary", "code": 10107, "codeName": "NotWritablePrimary"}
MONGO_AUTH = {"ok": 0, "errmsg": "Authentication failed.", "code": 18, "codeName": "AuthenticationFailed"}


@pytest.mark.parametrize(
    ("body", "cls", "transient"),
    [
        (GOOGLE_API_KEY, F1, False),  # the ErrorInfo reason outranks the INVALID_ARGUMENT status beside it
        (GOOGLE_RATE, D2, True),
        (GOOGLE_NOT_FOUND, D4, False),
        (RFC9457, F2, False),  # its status: 403
        (APOLLO_VALIDATION, B4, False),
        (APOLLO_UNAUTHENTICATED, F1, False),
        (APOLLO_FORBIDDEN, F2, False),
        (APOLLO_BAD_INPUT, B4, False),
        (OAUTH_INVALID_REQUEST, B4, False),
        (OAUTH_INVALID_GRANT, F1, False),
        (K8S_NOT_FOUND, D4, False),
        (K8S_CONFLICT, D5, False),
        (K8S_TIMEOUT, D1, True),
        (SLACK_CHANNEL, D4, False),
        (SLACK_AUTH, F1, False),
        (SLACK_RATE, D2, True),
        (SLACK_SCOPE, F2, False),
        (STRIPE_MISSING, D4, False),
        (STRIPE_CARD, D4, False),
        (STRIPE_API, D1, True),
        (MONGO_DUP, D5, False),
        (MONGO_PRIMARY, D1, True),
        (MONGO_AUTH, F1, False),
    ],
)
@pytest.mark.parametrize("prefix", ["", "API request failed: ", "Error: HTTP error\n"])
def test_a_documented_error_body_is_read_by_its_code(
    body: dict[str, object], cls: type[Fault], transient: bool, prefix: str
) -> None:
    """Before: most of these bodies were read by a stray word of their message, or not at all."""
    fault = of_text(prefix + json.dumps(body, indent=2))
    assert type(fault) is cls and fault.is_transient is transient, (body, fault)


@pytest.mark.parametrize(
    ("text", "cls", "transient"),
    [
        # RFC 6750 §3's WWW-Authenticate challenge, passed on as text
        ('Bearer realm="example", error="invalid_token", error_description="The access token expired"', F1, False),
        ('Bearer realm="example", error="insufficient_scope", scope="repo"', F2, False),
        # kubectl / client-go
        ('Error from server (NotFound): pods "grafana" not found', D4, False),
        ('Error from server (Forbidden): pods is forbidden: User "dev" cannot list resource "pods"', F2, False),
        ('Error from server (AlreadyExists): namespaces "team-a" already exists', D5, False),
        # a MongoDB driver's error, printed (util.inspect)
        ("MongoServerError: not primary\n  code: 10107,\n  codeName: 'NotWritablePrimary'", D1, True),
        ("MongoServerError: E11000 duplicate key error collection: shop.users index: email_1", D5, False),
        # policy engines' and APIs' upper-case codes, opening the text or after "code"
        ('POLICY_DENIED: profile "dev" denies destructive commands', F2, False),
        ("QUOTA_EXCEEDED: the daily allowance is spent", F3, False),
        ("APPROVAL_REQUIRED: a person must approve this call", F2, False),
        ("request failed, code: PERMISSION_DENIED", F2, False),
        ("Error: RATE_LIMITED - slow down", D2, True),
        ("NOT_FOUND: project acme/api", D4, False),
        ("ALREADY_EXISTS: bucket logs", D5, False),
        ("INVALID_ARGUMENT: page_size must be positive", B4, False),
        ("UNAUTHENTICATED: missing bearer", F1, False),
        # ... and by their parts, where no table names them
        ("WORKSPACE_NOT_FOUND: ws-42", D4, False),
        ("TOOL_CALL_DENIED by the gateway", F2, False),
        ("TOKEN_EXPIRED", F1, False),
        ("MONTHLY_QUOTA_EXHAUSTED", F3, False),
        ("DOCUMENT_ALREADY_EXISTS", D5, False),
        ("INVALID_DATE_RANGE: end before start", B4, False),
        # python-ldap (RFC 4511 result codes) and MySQL's code names where their parts would mislead
        ("INVALID_CREDENTIALS: {'desc': 'Invalid credentials'}", F1, False),
        ("ER_ACCESS_DENIED_ERROR: Access denied for user 'app'@'localhost' (using password: YES)", F1, False),
        ("ER_TABLEACCESS_DENIED_ERROR: SELECT command denied to user 'app'", F2, False),
    ],
)
def test_codes_spelled_as_tokens(text: str, cls: type[Fault], transient: bool) -> None:
    reads_as(text, cls, transient)


def test_a_code_refusal_says_nothing_ran_and_asks() -> None:
    fault = of_text('POLICY_DENIED: Profile "dev" denies destructive commands (approvalPolicy = "deny")')
    assert fault.retry_safety is RetrySafety.REJECTED and fault.repair_action is ASK
    assert fault.details["basis"] == "standard_code" and fault.details["vocabulary"] == "code"


@pytest.mark.parametrize(
    "text",
    [
        "APPROVAL_UNAVAILABLE: the client could not be asked",  # a refusal, not the UNAVAILABLE it contains
        "HOST_KEY_PIN_MISMATCH: the key is not the pinned one",  # no code reading: the cause family decides
        '{ "success": false, "error": "syntax error at or near \\"selec\\"", "code": "EXECUTION_ERROR" }',
        "SERVICE_TIMEOUT_PENDING",
    ],
)
def test_a_codes_parts_never_make_it_transient(text: str) -> None:
    reading = read(text)
    assert reading is None or reading.rule.family != "code" or not reading.rule.transient, (text, reading)
    assert reading is None or reading.rule.key not in ("UNAVAILABLE", "SERVICE_UNAVAILABLE"), text


def test_words_of_a_mongodb_codename_are_not_read_outside_one() -> None:
    """``Unauthorized`` is also HTTP 401's reason phrase: only a ``codeName`` makes it MongoDB's (F2)."""
    assert type(of_text("401 Client Error: Unauthorized for url: http://api.test/items")) is F1


def test_a_code_in_a_callers_program_output_is_the_programs() -> None:
    tool = types.Tool(name="run", input_schema={"type": "object", "properties": {"code": {}}})
    text = 'Traceback (most recent call last):\n  File "x.py", line 1\nRuntimeError: QUOTA_EXCEEDED on the test API\n'
    result = types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)
    fault = classify_result(result, tool=tool)
    assert type(fault) is B4


def test_a_success_body_is_never_reinterpreted() -> None:
    ok = types.CallToolResult(content=[types.TextContent(text=json.dumps(SLACK_CHANNEL))], is_error=False)
    assert classify_result(ok, tool=None) is None


def test_json_parsing_is_bounded() -> None:
    """Deep nesting is a failed parse, many braces cost at most MAX_PARSES decodes, the walk a bounded number of
    nodes: reading an adversarial body costs about what a benign text of the same length costs."""
    deep = "{" + '"a":[' * 50_000
    assert bodies.error_codes(deep) == []
    braces = "{" * 8000
    wide = json.dumps({"errors": [{"extensions": {"code": "X"}}] * 5000})
    for text in (deep, braces, wide):
        read(text)
    benign = "x " * 4000
    base = cpu_cost(lambda: read(benign), repeat=20)
    for text in (deep[:8192], braces, wide[:8192]):
        assert cpu_cost(lambda t=text: read(t), repeat=20) < 40 * base + 0.05, text[:40]
