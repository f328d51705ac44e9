"""The upstream boundary's exception seam (``resilient_mcp.upstream.errors``): each exception a request can raise
becomes the fault it means, with ``sent`` known; the side effects at the seam; and, through a real ``Upstream`` over
an in-process server, that ``sent`` is what the transport saw, not an assumption."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp.client._memory import InMemoryTransport
from mcp.shared.exceptions import MCPError

from resilient_mcp.call.meta import ATTEMPT_META, OVERSIZED_META
from resilient_mcp.faults import (
    AttemptTimeout,
    ConnectFailure,
    ConnectionLost,
    Fault,
    GatewayError,
    OversizedResult,
    ProtocolMismatch,
    RetrySafety,
)
from resilient_mcp.policy.config import StdioUpstream
from resilient_mcp.upstream import NoHost, Upstream
from resilient_mcp.upstream.calls import note_written
from resilient_mcp.upstream.errors import (
    UPSTREAM_ERROR,
    Attempt,
    ErrorSink,
    HostDidNotAnswer,
    HttpStatuses,
    to_fault,
    upstream_errors,
    upstream_faults,
)
from tests.fixtures.scripted import ScriptedUpstream, ok_text

CLOSED = MCPError(types.CONNECTION_CLOSED, "Connection closed")
STANDIN_502 = MCPError(types.INTERNAL_ERROR, "Server returned an error response")


# --- the mapping ---------------------------------------------------------------------------------------------------


def test_a_connection_closed_before_the_request_left_is_a_connect_failure_not_sent() -> None:
    fault = to_fault(CLOSED, sent=False)
    assert isinstance(fault, ConnectFailure)
    assert fault.retry_safety is RetrySafety.NOT_SENT


def test_a_connection_closed_after_the_request_left_is_lost_and_may_have_executed() -> None:
    fault = to_fault(CLOSED, sent=True)
    assert isinstance(fault, ConnectionLost)
    assert fault.retry_safety is RetrySafety.MAYBE_EXECUTED


def test_the_stdio_readers_stand_in_for_a_line_too_large_is_an_oversized_result() -> None:
    facts = {"original_size_bytes": 70_000_000, "max_message_bytes": 64 * 1024 * 1024}
    fault = to_fault(MCPError(-32099, "too large", {OVERSIZED_META: facts}), sent=True)
    assert isinstance(fault, OversizedResult)
    assert fault.details["original_size_bytes"] == 70_000_000
    assert fault.details["max_message_bytes"] == 64 * 1024 * 1024


def test_the_sdks_stand_in_for_an_http_status_is_read_as_that_status() -> None:
    fault = to_fault(STANDIN_502, sent=True, http=(503, {"Retry-After": "2"}))
    assert isinstance(fault, GatewayError)
    assert fault.details["http_status"] == 503
    assert fault.retry_safety is RetrySafety.REJECTED  # a 503 with Retry-After refused the load
    without = to_fault(STANDIN_502, sent=True)
    assert without.details.get("http_status") is None


def test_a_missing_capability_error_is_read_from_its_json_rpc_error_not_its_http_400() -> None:
    missing = MCPError(-32021, "needs sampling", {"requiredCapabilities": {"sampling": {}}})
    fault = to_fault(missing, sent=True, http=(400, {}))
    assert isinstance(fault, ProtocolMismatch)
    assert fault.details["variant"] == "d"
    assert fault.details.get("http_status") is None


def test_a_question_the_host_did_not_answer_ends_the_call_on_the_hosts_side_not_sent_again() -> None:
    refused = HostDidNotAnswer("elicitation/create", types.ErrorData(code=-32021, message="no elicitation"))
    fault = to_fault(refused, sent=True)
    assert isinstance(fault, ProtocolMismatch)
    assert fault.details["side"] == "host"
    assert fault.retry_safety is RetrySafety.NOT_SENT


def test_a_call_the_upstream_died_during_says_so_only_when_it_may_have_executed() -> None:
    died = to_fault(CLOSED, sent=True, died=True, upstream="shop")
    assert isinstance(died, ConnectionLost)
    assert died.details["upstream_state"] == "died"
    assert "shop" in died.message
    unsent = to_fault(CLOSED, sent=False, died=True, upstream="shop")
    assert "upstream_state" not in unsent.details


def test_a_fault_raised_below_the_seam_passes_unchanged() -> None:
    fault = AttemptTimeout.of("no_answer", upstream_message="x")
    assert to_fault(fault, sent=False) is fault


# --- the seam's side effects ---------------------------------------------------------------------------------------


class _Seen:
    def __init__(self) -> None:
        self.lost = 0
        self.ended = False

    def attempt(self, *, remote: bool = False) -> Attempt:
        return Attempt("shop", ended=lambda: self.ended, session_lost=self._lost, remote=remote)

    def _lost(self) -> None:
        self.lost += 1


@pytest.fixture
def sink() -> Iterator[ErrorSink]:
    sink = ErrorSink()
    token = UPSTREAM_ERROR.set(sink)
    yield sink
    UPSTREAM_ERROR.reset(token)


def test_the_tool_call_seam_raises_only_faults_and_notes_the_upstreams_error(sink: ErrorSink) -> None:
    seen = _Seen()
    with pytest.raises(Fault) as raised, upstream_faults(seen.attempt()):
        raise MCPError(types.INTERNAL_ERROR, "disk full")
    assert raised.value.tool_level  # a live upstream's -32603: the tool failed
    assert sink.error is not None and sink.error.message == "disk full"
    with upstream_faults(seen.attempt()):
        pass
    assert sink.error is None  # answered with a result


def test_the_seam_knows_sent_from_what_the_session_wrote() -> None:
    seen = _Seen()
    with pytest.raises(ConnectFailure), upstream_faults(seen.attempt()):
        note_written(types.JSONRPCNotification(jsonrpc="2.0", method="notifications/progress"))
        raise CLOSED  # only a notification left: the request was never written
    with pytest.raises(ConnectionLost), upstream_faults(seen.attempt()) as attempt:
        note_written(types.JSONRPCRequest(jsonrpc="2.0", id=1, method="tools/call"))
        assert attempt.sent
        raise CLOSED
    note_written(types.JSONRPCRequest(jsonrpc="2.0", id=2, method="tools/call"))  # outside any attempt: no effect


def test_a_remote_session_the_upstream_forgot_is_reconnected_by_either_seam() -> None:
    seen = _Seen()
    terminated = MCPError(types.INVALID_REQUEST, "Session terminated")
    with pytest.raises(ConnectionLost), upstream_faults(seen.attempt(remote=True)):
        raise terminated
    with pytest.raises(MCPError), upstream_errors(seen.attempt(remote=True)):
        raise terminated
    with pytest.raises(ConnectionLost), upstream_faults(seen.attempt(remote=False)):
        raise terminated  # a stdio upstream's words are its own: no reconnect
    assert seen.lost == 2


def test_the_request_seam_passes_the_upstreams_error_and_turns_the_hosts_refusal_into_its_error() -> None:
    seen = _Seen()
    with pytest.raises(MCPError) as raised, upstream_errors(seen.attempt()):
        raise MCPError(types.INVALID_PARAMS, "no such prompt")
    assert (raised.value.code, raised.value.message) == (types.INVALID_PARAMS, "no such prompt")
    refused = HostDidNotAnswer("roots/list", types.ErrorData(code=-32021, message="no roots"))
    with pytest.raises(MCPError) as raised, upstream_errors(seen.attempt()):
        raise refused
    assert raised.value.code == -32021


@pytest.mark.anyio
async def test_http_statuses_are_kept_for_tagged_posts_only() -> None:
    statuses = HttpStatuses(limit=2)
    attempt = Attempt("shop", ended=lambda: False, session_lost=lambda: None, http_statuses=statuses)
    meta = attempt.tag({"k": "v"})
    assert meta is not None and meta["k"] == "v" and meta[ATTEMPT_META] == attempt.http_id

    def post(status: int, meta: dict[str, Any] | None) -> httpx2.Response:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x", "_meta": meta or {}}}
        request = httpx2.Request("POST", "http://127.0.0.1:1/mcp", content=json.dumps(body).encode())
        return httpx2.Response(status, headers={"Retry-After": "3"}, request=request)

    await statuses.observe(post(200, meta))  # a success is not kept
    await statuses.observe(post(502, None))  # untagged: not kept
    assert attempt.http_id is not None and statuses.pop(attempt.http_id) is None
    await statuses.observe(post(502, meta))
    status = statuses.pop(attempt.http_id)
    assert status is not None and status[0] == 502 and status[1]["retry-after"] == "3"


# --- sent known, through a real Upstream --------------------------------------------------------------------------


class _BreakableWrite:
    """The proxy's write side of an in-memory connection: refuses every write once ``broken`` (a pipe whose reader
    is gone), while the read side stays open, so the connection still looks alive to the supervisor."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.broken = False

    async def send(self, item: Any) -> None:
        if self.broken:
            raise anyio.BrokenResourceError
        await self._inner.send(item)

    async def __aenter__(self) -> _BreakableWrite:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        result: bool | None = await self._inner.__aexit__(*exc)
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@asynccontextmanager
async def _upstream_over(scripted: ScriptedUpstream) -> AsyncIterator[tuple[Upstream, list[_BreakableWrite]]]:
    writes: list[_BreakableWrite] = []

    @asynccontextmanager
    async def connect() -> AsyncIterator[tuple[Any, Any]]:
        async with InMemoryTransport(scripted.server()) as (read, write):
            writes.append(_BreakableWrite(write))
            yield read, writes[-1]

    async with Upstream("shop", StdioUpstream(command="unused"), NoHost(), transport=connect).running(30) as upstream:
        yield upstream, writes


@pytest.mark.anyio
async def test_a_request_the_transport_refused_to_write_is_not_sent_and_never_reached_the_tool() -> None:
    scripted = ScriptedUpstream().tool("order", lambda args: ok_text("ordered"))
    async with _upstream_over(scripted) as (upstream, writes):
        assert not (await upstream.call_tool("order", {"n": 1}, timeout_s=30)).is_error
        writes[-1].broken = True
        with anyio.fail_after(30), pytest.raises(ConnectFailure) as raised:
            await upstream.call_tool("order", {"n": 2}, timeout_s=30)
    assert raised.value.retry_safety is RetrySafety.NOT_SENT  # safe to send again, even for a write
    assert scripted.count("order") == 1


@pytest.mark.anyio
async def test_a_request_written_and_then_cut_off_may_have_executed() -> None:
    cut = anyio.Event()

    async def order(args: dict[str, Any]) -> types.CallToolResult:
        cut.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    scripted = ScriptedUpstream().tool("order", order)
    async with _upstream_over(scripted) as (upstream, _):

        async def cut_when_running() -> None:
            await cut.wait()
            upstream.request_restart()  # the connection goes while the call is in the upstream's hands

        async with anyio.create_task_group() as tg:
            tg.start_soon(cut_when_running)
            with anyio.fail_after(30), pytest.raises(ConnectionLost) as raised:
                await upstream.call_tool("order", {"n": 1}, timeout_s=30)
    assert raised.value.retry_safety is RetrySafety.MAYBE_EXECUTED
    assert scripted.count("order") == 1
