"""Evidence of a state conflict outranks the advice word "try again" (issue 19, after the fourth hold-out), and
Kubernetes's fixed sentences. Every text is a standard's or library's own wording: Kubernetes's
(k8s.io/apimachinery/pkg/api/errors ``NewConflict`` and ``NewGenericServerResponse``, k8s.io/apiserver's
``OptimisticLockErrorMsg``) and RFC 9110's status semantics (409 Conflict, 412 Precondition Failed), not a hold-out
record."""

from __future__ import annotations

import pytest

from resilient_mcp.faults import (
    Fault,
    RateLimited,
    RepairAction,
    RetrySafety,
)
from tests.faults.support import B4, D1, D4, D5, F1, of_text

# k8s.io/apiserver/pkg/registry/generic/registry: OptimisticLockErrorMsg
OPTIMISTIC_LOCK = "the object has been modified; please apply your changes to the latest version and try again"


@pytest.mark.parametrize(
    "text",
    [
        # apimachinery NewConflict: "Operation cannot be fulfilled on %s %q: %v", with the optimistic-lock message
        f'Operation cannot be fulfilled on deployments.apps "web": {OPTIMISTIC_LOCK}',
        f'Operation cannot be fulfilled on configmaps "settings": {OPTIMISTIC_LOCK}',
        # a Go server wrapping the StatusError's message in its own words
        f'failed to update scale: Operation cannot be fulfilled on statefulsets.apps "db": {OPTIMISTIC_LOCK}',
        # the optimistic-lock message alone
        OPTIMISTIC_LOCK,
        # client-go's sentence for a 409 sent without a Status body
        "the server reported a conflict",
    ],
)
def test_a_kubernetes_conflict_is_re_read_not_repeated(text: str) -> None:
    fault = of_text(text)
    assert type(fault) is D5
    assert not fault.is_transient
    assert fault.repair_action is RepairAction.VERIFY_STATE
    assert fault.retry_safety is RetrySafety.EXECUTED_FAILED


@pytest.mark.parametrize(
    "text",
    [
        # RFC 9110 §15.5.10 (409): "a conflict with the current state of the target resource"; the client "might be
        # able to resolve the conflict and resubmit": a resubmission after re-reading, not the same request again
        "409 Conflict: the request could not be completed due to a conflict with the current state of the target "
        "resource. Please try again.",
        "Conflict: please try again",
        # §15.5.13 (412): a condition (If-Match, If-Unmodified-Since) evaluated to false: the version read is stale
        "Precondition failed: the resource has changed; fetch it and try again",
        "The resource has been modified since it was read. Try again.",
        "Update rejected: stale resourceVersion, try again",
        "Stale ETag: try again with the current one",
        "The document was changed by another user (version mismatch). Please try again.",
    ],
)
def test_conflict_evidence_outranks_the_advice_word_try_again(text: str) -> None:
    fault = of_text(text)
    assert type(fault) is D5
    assert not fault.is_transient


@pytest.mark.parametrize(
    ("text", "cls"),
    [
        # client-go's 429 sentence says "try again later": the rate limit is the evidence
        ("the server has received too many requests and has asked us to try again later", RateLimited),
        ("Rate limit exceeded. Please try again later.", RateLimited),
        ("Too Many Requests: try again in 30 seconds", RateLimited),
        ("Service temporarily unavailable, please try again", D1),
        ("The service is overloaded; try again later", D1),
        # the advice word alone keeps its reading: nothing says what happened
        ("Something went wrong. Please try again.", D1),
        # a resource someone holds may be released: the advice word still reads first, as before
        ("The lock is in use; try again", D1),
    ],
)
def test_try_again_stays_transient_where_no_conflict_is_named(text: str, cls: type[Fault]) -> None:
    fault = of_text(text)
    assert type(fault) is cls
    assert fault.is_transient


@pytest.mark.parametrize(
    ("text", "cls", "transient"),
    [
        # k8s.io/apimachinery/pkg/api/errors NewGenericServerResponse: a status sent without a Status body
        ("the server has asked for the client to provide credentials", F1, False),  # 401
        ("the server could not find the requested resource", D4, False),  # 404
        ("the server does not allow this method on the requested resource", B4, False),  # 405
        ("the server rejected our request due to an error in our request", B4, False),  # 422
        ("the server rejected our request for an unknown reason", B4, False),  # 400
        ("the server has received too many requests and has asked us to try again later", RateLimited, True),  # 429
        ("the server is currently unable to handle the request", D1, True),  # 503
        # as kubectl and client-go print them, with the verb and resource appended
        ("the server is currently unable to handle the request (get pods.metrics.k8s.io)", D1, True),
        ("failed to list pods: the server has asked for the client to provide credentials (get pods)", F1, False),
    ],
)
def test_client_go_status_sentences(text: str, cls: type[Fault], transient: bool) -> None:
    fault = of_text(text)
    assert type(fault) is cls
    assert fault.is_transient is transient
    if cls is F1:
        assert fault.repair_action is RepairAction.ASK_USER


def test_a_gateway_timeout_that_may_still_be_processing_is_transient_and_maybe_executed() -> None:
    """client-go's 504: "the server was unable to return a response in the time allotted, but may still be
    processing the request": waiting helps, but the request may have run (rule R repeats it only where that is safe)."""
    fault = of_text(
        "the server was unable to return a response in the time allotted, but may still be processing the request"
    )
    assert type(fault) is D1
    assert fault.is_transient
    assert fault.retry_safety is RetrySafety.MAYBE_EXECUTED
