"""Input-required bridging: a 2026-07-28 host in front of an upstream that asks the handshake-era way.

A handshake-era upstream asks for sampling, elicitation or roots *during* a call, with server-to-client requests. A
2026-07-28 host cannot receive those: its server answers ``InputRequiredResult`` instead, and the host calls again
with ``inputResponses`` and the echoed ``requestState`` (SEP-2322). The proxy joins the two:

1. the host's request (tools/call, prompts/get, resources/read) starts the upstream work in a task the proxy owns,
   so it outlives the host's HTTP request;
2. when the upstream asks, the question is parked and the host gets an ``InputRequiredResult`` listing every
   question pending at that moment (questions asked together within ``SETTLE_S`` go out together), with a fresh
   opaque ``requestState`` naming this bridge;
3. the host's retry carries the answers: each parked question is answered, and the host waits for the next event
   (more questions, or the final result);
4. an unknown or altered ``requestState`` is refused with -32602; a host that never comes back leaves the upstream
   with an error after ``answer_timeout_s`` ("the host did not answer"), never a silent hang; a host that makes the
   same request again without the ``requestState`` has the parked questions answered with an error. Either way the
   upstream ends its call with an answer of its own: a round is never cancelled, which would leave a write's
   outcome unknown (and the call's timeouts stand still while the host is asked, see ``call.chain.HostEnvelope``).

A 2026-07-28 upstream's questions arrive here too (``upstream.calls.Upstream._with_input``), under the upstream's
own keys, which the host sees unchanged.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import mcp_types as types
import structlog
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ValidationError

from ..upstream.errors import UPSTREAM_ERROR, ErrorSink

log = structlog.get_logger(__name__)

SETTLE_S = 0.2
"""Questions an upstream asks within this time of each other are sent to the host in one InputRequiredResult."""

STATE_PREFIX = "resilient-mcp/bridge:"

_RESULT_OF: dict[str, type[BaseModel]] = {
    "sampling/createMessage": types.CreateMessageResult,
    "elicitation/create": types.ElicitResult,
    "roots/list": types.ListRootsResult,
}


@dataclass
class _Question:
    request: types.ServerRequest
    answered: anyio.Event = field(default_factory=anyio.Event)
    answer: BaseModel | types.ErrorData | None = None
    sent: bool = False


class Bridge:
    """One host request whose upstream work waits for the host's answers."""

    def __init__(self, answer_timeout_s: float) -> None:
        self.questions: dict[str, _Question] = {}
        self.state = STATE_PREFIX + secrets.token_urlsafe(24)
        self.outcome: Any = None
        self.error: BaseException | None = None
        self.done = False
        self._changed = anyio.Event()
        self._answer_timeout_s = answer_timeout_s
        self._count = 0
        self.collected = anyio.Event()
        self.finished = anyio.Event()
        self.scope: anyio.CancelScope | None = None
        """The upstream work's scope while it runs (``tasks/cancel`` cancels it)."""
        self.upstream_error = ErrorSink()
        """The JSON-RPC error the upstream answered the work's last attempt with, if any (a task's ``failed``)."""

    @property
    def changed(self) -> anyio.Event:
        """Set at the next change (a question asked, the work finished); a fresh event after each."""
        return self._changed

    def unanswered(self) -> dict[str, types.ServerRequest]:
        """The questions the host has not answered yet, by key (a task's ``inputRequests``); they count as sent."""
        pending = {k: q for k, q in self.questions.items() if not q.answered.is_set()}
        for question in pending.values():
            question.sent = True
        return {k: q.request for k, q in pending.items()}

    def _touch(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    async def ask(self, request: types.ServerRequest, key: str | None = None) -> BaseModel | types.ErrorData:
        """Called for the upstream: park ``request`` until the host answers it (or gives up). ``key`` is the
        upstream's own name for it (a 2026-07-28 upstream's ``inputRequests`` key): the host sees that name."""
        self._count += 1
        if key is None or key in self.questions:
            key = f"{request.method.replace('/', '_')}_{self._count}"
        question = _Question(request)
        self.questions[key] = question
        self._touch()
        with anyio.move_on_after(self._answer_timeout_s):
            await question.answered.wait()
        self.questions.pop(key, None)
        if question.answer is None:
            return types.ErrorData(
                code=types.REQUEST_TIMEOUT,
                message=f"resilient-mcp: the host did not answer {request.method} within "
                f"{self._answer_timeout_s:.0f} s",
            )
        return question.answer

    def answer(self, responses: dict[str, Any] | None) -> None:
        """The host's ``inputResponses``: answer the parked questions they name (other keys are ignored)."""
        for key, raw in (responses or {}).items():
            question = self.questions.get(key)
            if question is None or question.answered.is_set():
                continue
            data = raw.model_dump(by_alias=True, mode="json", exclude_none=True) if isinstance(raw, BaseModel) else raw
            try:
                question.answer = _RESULT_OF[question.request.method].model_validate(data, by_name=False)
            except (ValidationError, KeyError, TypeError) as exc:
                question.answer = types.ErrorData(
                    code=types.INVALID_PARAMS, message=f"resilient-mcp: the host's answer is not valid: {exc}"
                )
            question.answered.set()

    @property
    def parked(self) -> bool:
        """The upstream work waits for the host: its questions went out and are not all answered."""
        unanswered = [q for q in self.questions.values() if not q.answered.is_set()]
        return bool(unanswered) and all(q.sent for q in unanswered)

    def abandon(self) -> None:
        """The host will not answer this round (it made the request again without its ``requestState``): every
        question still parked is answered with an error, so the upstream ends its request with an answer of its own
        (a known outcome), never by a cancellation that would leave a write's outcome unknown."""
        for question in self.questions.values():
            if not question.answered.is_set():
                question.answer = types.ErrorData(
                    code=types.INVALID_REQUEST,
                    message="resilient-mcp: the host made the request again instead of answering this "
                    f"{question.request.method}",
                )
                question.answered.set()

    def finish(self, outcome: Any = None, error: BaseException | None = None) -> None:
        self.outcome, self.error, self.done = outcome, error, True
        self.finished.set()
        self._touch()

    async def next_event(self) -> Any:
        """The final result (or its error), or an InputRequiredResult listing the questions still unanswered."""
        while True:
            if self.done:
                if self.error is not None:
                    raise self.error
                return self.outcome
            unanswered = {k: q for k, q in self.questions.items() if not q.answered.is_set()}
            if any(not q.sent for q in unanswered.values()):
                changed = self._changed
                with anyio.move_on_after(SETTLE_S):  # questions asked together leave together
                    await changed.wait()
                    continue
            if unanswered:  # new questions, or ones the host's retry left unanswered: ask (again)
                for question in unanswered.values():
                    question.sent = True
                self.state = STATE_PREFIX + secrets.token_urlsafe(24)  # each round its own state
                return types.InputRequiredResult(
                    input_requests={key: q.request for key, q in unanswered.items()},
                    request_state=self.state,
                )
            await self._changed.wait()


class WorkCancelled(Exception):
    """The bridged work was cancelled on purpose (``tasks/cancel``), not by a failure."""


class Bridges:
    """The open bridges of one proxy, by their ``requestState``; run the upstream work in the proxy's task group."""

    def __init__(self, answer_timeout_s: float = 300.0) -> None:
        self._by_state: dict[str, Bridge] = {}
        self._by_ctx: dict[int, Bridge] = {}
        self._by_origin: dict[str, Bridge] = {}
        self._tg: anyio.abc.TaskGroup | None = None
        self.answer_timeout_s = answer_timeout_s

    def bind(self, tg: anyio.abc.TaskGroup | None) -> None:
        self._tg = tg

    def for_ctx(self, ctx: Any) -> Bridge | None:
        return self._by_ctx.get(id(ctx))

    def waiting_on_host(self, ctx: Any) -> bool:
        """Whether ``ctx``'s upstream work is parked: its questions went to the host and are not answered yet (a
        call still gathering questions asked together is not parked: it may be asking more)."""
        bridge = self._by_ctx.get(id(ctx))
        return bridge is not None and bridge.parked

    async def run(
        self,
        ctx: Any,
        request_state: str | None,
        input_responses: dict[str, Any] | None,
        work: Callable[[], Awaitable[Any]],
        origin: str = "",
        patience: tuple[float, Callable[[Bridge], Awaitable[Any]]] | None = None,
    ) -> Any:
        """``work()``'s result for the host's request ``ctx``, or an InputRequiredResult when the upstream asks.

        ``origin`` names the host and the request (tool, prompt, resource): the same host making the same request
        again without the ``requestState`` starts over, so a round of that request still parked is abandoned.
        ``patience`` (seconds, then what to answer): when neither a result nor a question comes within that time,
        the answer is ``then(bridge)`` (a durable task takes the bridge over, ``resilient_mcp.tasks``)."""
        if request_state is not None and request_state.startswith(STATE_PREFIX):
            bridge = self._by_state.get(request_state)
            if bridge is None:
                raise MCPError(
                    types.INVALID_PARAMS,
                    "requestState is not one this proxy issued, or it expired (altered, or from another process)",
                )
            bridge.answer(input_responses)
        elif self._tg is None:
            return await work()
        else:
            earlier = self._by_origin.get(origin) if origin else None
            if earlier is not None and not earlier.done and earlier.parked:
                # Its questions are answered with an error and its upstream call ends with an answer of its own,
                # before this request starts over: so this one is not an identical write joining one whose outcome
                # would then be unknown.
                earlier.abandon()
                with anyio.move_on_after(self.answer_timeout_s):
                    await earlier.finished.wait()
            bridge = Bridge(self.answer_timeout_s)
            self._by_state[bridge.state] = bridge
            if origin:
                self._by_origin[origin] = bridge
            self._tg.start_soon(self._work, ctx, bridge, work)
        asked_with = bridge.state
        try:
            if patience is not None:
                with anyio.move_on_after(patience[0]) as waited:
                    event = await bridge.next_event()
                if waited.cancelled_caught:
                    return await patience[1](bridge)
            else:
                event = await bridge.next_event()
            asked = sorted(event.input_requests or {}) if isinstance(event, types.InputRequiredResult) else None
            log.debug("bridge_round", resumed=request_state is not None, done=bridge.done, asked=asked)
            return event
        finally:
            if bridge.done:
                self._close(bridge)
            elif bridge.state != asked_with:  # a new round: only its state resumes the bridge
                self._by_state.pop(asked_with, None)
                self._by_state[bridge.state] = bridge

    async def _work(self, ctx: Any, bridge: Bridge, work: Callable[[], Awaitable[Any]]) -> None:
        self._by_ctx[id(ctx)] = bridge
        UPSTREAM_ERROR.set(bridge.upstream_error)  # this task's own context
        try:
            with anyio.CancelScope() as bridge.scope:
                outcome = await work()
            if bridge.scope.cancelled_caught:
                bridge.finish(error=WorkCancelled())
            else:
                bridge.finish(outcome)
        except Exception as exc:
            bridge.finish(error=exc)
        finally:
            self._by_ctx.pop(id(ctx), None)
        with anyio.move_on_after(self.answer_timeout_s):  # the host may never come back for the result
            await bridge.collected.wait()
        self._close(bridge)

    def _close(self, bridge: Bridge) -> None:
        for state in [state for state, open_bridge in self._by_state.items() if open_bridge is bridge]:
            self._by_state.pop(state, None)
        for origin in [origin for origin, open_bridge in self._by_origin.items() if open_bridge is bridge]:
            self._by_origin.pop(origin, None)
        bridge.collected.set()
