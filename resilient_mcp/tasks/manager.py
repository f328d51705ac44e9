"""Durable tasks for every tool: the proxy answers a long call with a task and keeps running it.

A 2026-07-28 host that declares ``io.modelcontextprotocol/tasks`` may get a ``CreateTaskResult`` for a
``tools/call``: when the tool's rule says ``task.mode: always``, or when the call is still running after
``task.after_s`` (``auto``). The call itself is unchanged: it runs once, through the same chain, in the proxy's own
task group (``bridge``, which already runs a 2026-07-28 host's call detached from its request so that the
upstream can ask questions). From the moment the task is created the proxy owns it:

* its record (``store.TaskRecord``) is written to the state store *before* the ``CreateTaskResult`` goes out, and
  again at each change: questions asked (``input_required`` with ``inputRequests``), answers given, the end;
* the record of a running task is renewed every ``lease_s / 3``; a record nobody renewed for ``lease_s`` (or whose
  process on this machine is gone) belongs to a proxy that stopped mid-call: it reads as finished with an unknown
  outcome and a ``verify_state`` observation, never as a task still running nor as one that did nothing;
* ``tasks/get`` reads the record from the store, so any replica sharing it (Redis) answers for any task;
  ``tasks/update`` answers the questions through the bridge; ``tasks/cancel`` cancels the upstream call;
* task ids are ``secrets.token_urlsafe`` and bound to the principal that created them: another principal's
  ``tasks/get`` gets the same -32602 as an unknown id.
"""

from __future__ import annotations

import collections
import hashlib
import json
import os
import secrets
import socket
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import anyio
import anyio.abc
import mcp_types as types
import structlog
from mcp.shared.exceptions import MCPError

from ..policy import TaskRule, TasksPolicy
from ..state.tasks import MemoryTaskStore, TaskRecord, TaskStatus, TaskStore, iso
from .bridge import Bridge, WorkCancelled

log = structlog.get_logger(__name__)

EXTENSION = "io.modelcontextprotocol/tasks"
CLIENT_CAPABILITIES_META = "io.modelcontextprotocol/clientCapabilities"
MISSING_CAPABILITY = -32021
OBSERVATION_META = "io.github.resilient-mcp/fault"
HOST = socket.gethostname()
RECENT_KEPT = 50
"""Finished tasks the status page lists (this process's; the store keeps every record until its TTL)."""


def required_error(tool: str) -> MCPError:
    """-32021 for a host that did not declare the extension, calling a tool that is served only as a task."""
    return MCPError(
        MISSING_CAPABILITY,
        f"Missing required client capability: the tool {tool!r} runs only as a task; declare the "
        f"{EXTENSION!r} extension in the client capabilities",
        {"requiredCapabilities": {"extensions": {EXTENSION: {}}}},
    )


def unknown_task(task_id: str) -> MCPError:
    return MCPError(types.INVALID_PARAMS, f"Unknown task: {task_id!r} (it expired, or never existed)", None)


@dataclass(eq=False)
class _Live:
    record: TaskRecord
    bridge: Bridge
    cancelled: bool = False


@dataclass(eq=False)
class _Detached:
    """A handshake-era host's call running apart from its request (``handoff``)."""

    key: str
    principal: str
    tool: str
    done: anyio.Event
    scope: anyio.CancelScope
    result: types.CallToolResult | None = None
    record: TaskRecord | None = None
    """Set when the host was handed the handle (the call outlived its patience)."""


@dataclass
class TaskCounts:
    created: int = 0
    completed: int = 0
    failed: int = 0
    cancelled: int = 0
    unknown: int = 0


Patience = tuple[float, Callable[[Bridge], Awaitable[dict[str, Any]]]]
"""How long a call may run before it becomes a task, and what makes it one (``Bridges.run``)."""


class TaskManager:
    """The tasks of one proxy process: the running ones in memory, every record in the store."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.store: TaskStore = MemoryTaskStore(clock)
        self.settings = TasksPolicy()
        self.instance = f"{HOST}:{os.getpid()}:{secrets.token_hex(4)}"
        self.counts = TaskCounts()
        self._clock = clock
        self._live: dict[str, _Live] = {}
        self._recent: collections.deque[TaskRecord] = collections.deque(maxlen=RECENT_KEPT)
        self._detached: OrderedDict[str, _Detached] = OrderedDict()
        """Handshake-era calls running apart from their request, by principal and call (``handoff``)."""
        self._handles: dict[str, _Detached] = {}
        self.handed_off = False
        """A host was given a handle: ``read_task_result`` is listed from then on."""
        self._tg: anyio.abc.TaskGroup | None = None

    def bind(self, tg: anyio.abc.TaskGroup | None, store: TaskStore | None) -> None:
        self._tg = tg
        if store is not None:
            self.store = store

    @property
    def running(self) -> int:
        return len(self._live)

    # --- creation --------------------------------------------------------------------------------------------------

    def patience(self, rule: TaskRule, principal: str, tool: str, fingerprint: str = "") -> Patience | None:
        """What ``Bridges.run`` waits before the call becomes a task, and what turns it into one (``None``: the call
        stays synchronous)."""
        if not self.settings.enabled or rule.mode == "never" or self._tg is None:
            return None

        async def create(bridge: Bridge) -> dict[str, Any]:
            return await self.adopt(bridge, principal, tool, fingerprint)

        return (0.0 if rule.mode == "always" else rule.after_s), create

    def _new_record(self, principal: str, tool: str, now: float, fingerprint: str = "") -> TaskRecord:
        """A new working task of ``principal``'s, under an unguessable id, leased to this process."""
        return TaskRecord(
            task_id=secrets.token_urlsafe(24),
            principal=principal,
            tool=tool,
            status="working",
            created_at=now,
            updated_at=now,
            expires_at=now + self.settings.ttl_s,
            ttl_ms=int(self.settings.ttl_s * 1000),
            poll_interval_ms=self.settings.poll_interval_ms,
            instance=self.instance,
            fingerprint=fingerprint,
            lease_until=now + self.settings.lease_s,
        )

    async def adopt(self, bridge: Bridge, principal: str, tool: str, fingerprint: str = "") -> dict[str, Any]:
        """Make the running work of ``bridge`` a task: stored first, then watched; the ``CreateTaskResult``."""
        now = self._clock()
        record = self._new_record(principal, tool, now, fingerprint)
        live = _Live(record, bridge)
        record = self._status(live, now) or record
        live.record = record
        await self.store.put_task(record, self.settings.max_per_principal)  # durable before the host hears of it
        self._live[record.task_id] = live
        self.counts.created += 1
        assert self._tg is not None
        self._tg.start_soon(self._watch, live, name=f"task:{tool}")
        log.info("task_created", task=record.task_id[:8], tool=tool, status=record.status)
        return {"resultType": "task", **record.wire()}

    def _status(self, live: _Live, now: float) -> TaskRecord | None:
        """The record with the bridge's current questions, or ``None`` when nothing changed."""
        pending = live.bridge.unanswered() if not live.bridge.done else {}
        status: TaskStatus = "input_required" if pending else "working"
        requests = (
            {k: r.model_dump(by_alias=True, mode="json", exclude_none=True) for k, r in pending.items()}
            if pending
            else None
        )
        if status == live.record.status and requests == live.record.input_requests:
            return None
        return live.record.changed(now, status=status, input_requests=requests)

    async def _watch(self, live: _Live) -> None:
        """Follow one task to its end: questions and answers, lease renewals, then the final record."""
        bridge = live.bridge
        try:
            while True:
                # Taken before the state is read: a change from now on (even during the save below) sets it.
                changed = bridge.changed
                if bridge.done:
                    break
                now = self._clock()
                record = self._status(live, now)
                if record is not None or now >= live.record.lease_until - self.settings.lease_s * 2 / 3:
                    await self._save(live, self._renewed(record or live.record, now))
                with anyio.move_on_after(self.settings.lease_s / 3):
                    await changed.wait()
            await self._save(live, self._final(live))
            self._recent.append(live.record)
        except Exception:
            log.exception("task_watch_failed", task=live.record.task_id[:8])
        finally:
            self._live.pop(live.record.task_id, None)
            bridge.collected.set()

    def _renewed(self, record: TaskRecord, now: float) -> TaskRecord:
        """``record`` with its lease renewed; a running task's record never expires (``ttl_s`` counts from the last
        change)."""
        expires = max(record.expires_at, now + self.settings.ttl_s)
        return record.changed(now, lease_until=now + self.settings.lease_s, expires_at=expires)

    async def _save(self, live: _Live, record: TaskRecord) -> None:
        live.record = record
        with anyio.CancelScope(shield=True):
            await self.store.put_task(record, self.settings.max_per_principal)

    def _final(self, live: _Live) -> TaskRecord:
        record = self._renewed(live.record, self._clock())
        live.record = record
        return self._ended(live)

    def _ended(self, live: _Live) -> TaskRecord:
        bridge, now = live.bridge, self._clock()
        error = bridge.error
        if live.cancelled or isinstance(error, WorkCancelled):
            self.counts.cancelled += 1
            return live.record.changed(now, status="cancelled", input_requests=None, status_message="cancelled")
        if isinstance(error, MCPError):
            self.counts.failed += 1
            return live.record.changed(now, status="failed", input_requests=None, error=_error(error.error))
        if error is not None:
            self.counts.failed += 1
            failure = types.ErrorData(code=types.INTERNAL_ERROR, message=f"resilient-mcp: the call failed: {error}")
            return live.record.changed(now, status="failed", input_requests=None, error=_error(failure))
        outcome = bridge.outcome
        if isinstance(outcome, types.CallToolResult):
            protocol = protocol_error(outcome, bridge.upstream_error.error)
            if protocol is not None:
                self.counts.failed += 1
                return live.record.changed(now, status="failed", input_requests=None, error=protocol)
            self.counts.completed += 1
            dumped = outcome.model_dump(by_alias=True, mode="json", exclude_none=True)
            return live.record.changed(now, status="completed", input_requests=None, result=dumped)
        self.counts.failed += 1
        failure = types.ErrorData(code=types.INTERNAL_ERROR, message="resilient-mcp: the call ended without a result")
        return live.record.changed(now, status="failed", input_requests=None, error=_error(failure))

    async def shutdown(self) -> None:
        """The proxy stops: every task it still runs ends with it, outcome unknown (said now, not when the lease runs
        out, so other replicas answer at once)."""
        records = [live.record for live in self._live.values() if not live.record.terminal]
        records += [d.record for d in self._handles.values() if d.record is not None and not d.done.is_set()]
        self._live.clear()
        for record in records:
            try:
                await self.store.put_task(self._unknown(record), self.settings.max_per_principal)
            except Exception as exc:  # the store may be gone too: the lease says it later
                log.warning("task_shutdown_record_failed", task=record.task_id[:8], error=str(exc))

    # --- hosts that cannot poll (handshake era) -----------------------------------------------------------------

    async def handoff(
        self,
        principal: str,
        tool: str,
        arguments: dict[str, Any] | None,
        after_s: float,
        work: Callable[[], Awaitable[types.CallToolResult]],
        on_handoff: Callable[[], None] | None = None,
    ) -> types.CallToolResult:
        """``work()``'s result if it comes within ``after_s``; else a STILL_RUNNING observation with a handle, while
        the call goes on (its record in the store, read with ``read_task_result``). The same call again (same
        principal, tool and arguments) once it was handed off, while it runs or before its result was read, waits for
        that one: a call is never run twice because its host could not wait for it. Before the handoff an identical
        call is the host's own (the chain's duplicate protection decides about it), and a host that cancels its call
        before it had a handle stops it."""
        key = f"{principal}|{tool}|{_arguments_digest(arguments)}"
        detached = self._detached.get(key)  # only handed-off calls are kept by key: the same call again joins one
        if detached is None:
            if self._tg is None:
                return await work()
            detached = _Detached(key, principal, tool, anyio.Event(), anyio.CancelScope())
            self._tg.start_soon(self._run_detached, detached, work, name=f"task:{tool}")
        try:
            with anyio.move_on_after(after_s):
                await detached.done.wait()
        except anyio.get_cancelled_exc_class():
            if detached.record is None:  # the host gave up before it had a handle: the call was its own, stop it
                detached.scope.cancel()
            raise
        if detached.done.is_set() and detached.result is not None:
            self._forget(detached)
            return detached.result
        if detached.record is None:
            detached.record = self._new_record(principal, tool, self._clock())
            await self.store.put_task(detached.record, self.settings.max_per_principal)
            if detached.done.is_set():  # it ended while its record was written: that one must be the last word
                await self.store.put_task(detached.record, self.settings.max_per_principal)
            self._handles[detached.record.task_id] = detached
            self._detached[key] = detached
            while len(self._detached) > MAX_DETACHED:
                self._forget(next(iter(self._detached.values())))
            self.counts.created += 1
            self.handed_off = True
            if on_handoff is not None:
                on_handoff()
            log.info("task_handed_off", task=detached.record.task_id[:8], tool=tool, after_s=after_s)
        return still_running(detached.record, after_s)

    async def _run_detached(self, detached: _Detached, work: Callable[[], Awaitable[types.CallToolResult]]) -> None:
        try:
            with detached.scope:
                async with anyio.create_task_group() as renewals:
                    renewals.start_soon(self._renew_detached, detached)
                    try:
                        detached.result = await work()
                    except Exception as exc:
                        log.exception("task_call_failed", tool=detached.tool)
                        text = f"resilient-mcp: the call failed: {exc}"
                        detached.result = types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)
                    renewals.cancel_scope.cancel()
                record = detached.record
                if record is not None and detached.result is not None:
                    self.counts.completed += 1
                    dumped = detached.result.model_dump(by_alias=True, mode="json", exclude_none=True)
                    final = self._renewed(record, self._clock()).changed(
                        self._clock(), status="completed", result=dumped
                    )
                    detached.record = final
                    with anyio.CancelScope(shield=True):
                        await self.store.put_task(final, self.settings.max_per_principal)
                    self._recent.append(final)
        finally:
            detached.done.set()

    async def _renew_detached(self, detached: _Detached) -> None:
        """Renew the record of a handed-off call while it runs (other replicas read a stale lease as abandoned)."""
        while True:
            await anyio.sleep(self.settings.lease_s / 3)
            if detached.record is not None and not detached.done.is_set():
                detached.record = self._renewed(detached.record, self._clock())
                await self.store.put_task(detached.record, self.settings.max_per_principal)

    def _forget(self, detached: _Detached) -> None:
        if self._detached.get(detached.key) is detached:
            del self._detached[detached.key]
        if detached.record is not None:
            self._handles.pop(detached.record.task_id, None)

    async def call_read_task_result(self, arguments: dict[str, Any] | None, owner: str) -> types.CallToolResult:
        """The ``read_task_result`` tool: its arguments checked here (it has no chain of its own)."""
        args = arguments or {}
        handle, wait_s = args.get("handle"), args.get("wait_s", 30)
        if not isinstance(handle, str) or not handle or not isinstance(wait_s, int | float) or isinstance(wait_s, bool):
            text = "INVALID_ARGUMENTS: give handle (the STILL_RUNNING note's) and optionally wait_s (0 to 50 seconds)"
            return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)
        return await self.read_result(handle, owner_principal(owner), min(max(float(wait_s), 0.0), READ_WAIT_S))

    async def read_result(self, handle: str, principal: str, wait_s: float) -> types.CallToolResult:
        """``read_task_result``: the result of a handed-off call, waiting up to ``wait_s`` for it."""
        try:
            record = await self._owned(handle, principal)
        except MCPError:
            text = (
                f"UNKNOWN_HANDLE: no task {handle!r} for you: it expired (results are kept {self.settings.ttl_s:g} s) "
                "or never existed. Call the tool again if you still need its result."
            )
            return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)
        detached = self._handles.get(handle)
        if detached is not None and not detached.done.is_set():
            with anyio.move_on_after(wait_s):
                await detached.done.wait()
            record = detached.record or record
        elif not record.terminal and self._abandoned(record):
            record = self._unknown(record)
            await self.store.put_task(record, self.settings.max_per_principal)
        if record.status == "completed" and record.result is not None:
            if detached is not None:
                self._forget(detached)
            return types.CallToolResult.model_validate(record.result, by_name=False)
        return still_running(record, wait_s)

    # --- the host's requests ---------------------------------------------------------------------------------------

    async def _owned(self, task_id: str, principal: str) -> TaskRecord:
        record = await self.store.get_task(task_id) if isinstance(task_id, str) and task_id else None
        if record is None or not secrets.compare_digest(record.principal, principal):
            raise unknown_task(task_id)
        return record

    async def get(self, task_id: str, principal: str) -> dict[str, Any]:
        """``tasks/get``: the ``DetailedTask``."""
        record = await self._owned(task_id, principal)
        if not record.terminal and task_id not in self._live and self._abandoned(record):
            record = self._unknown(record)
            await self.store.put_task(record, self.settings.max_per_principal)
        return record.detailed()

    def _abandoned(self, record: TaskRecord) -> bool:
        """The proxy that ran this task stopped: its lease ran out, or it was a process of this machine now gone."""
        if record.instance == self.instance:
            return True  # this process runs it no more (it is not live)
        if record.lease_until <= self._clock():
            return True
        host, _, rest = record.instance.partition(":")
        pid = rest.partition(":")[0]
        return host == HOST and pid.isdigit() and not _process_alive(int(pid))

    def _unknown(self, record: TaskRecord) -> TaskRecord:
        self.counts.unknown += 1
        observation = {
            "code": "TASK_OUTCOME_UNKNOWN",
            "level": "L2",
            "fault_category": "C",
            "fault_type": "C2_connection_lost_after_send",
            "is_transient": True,
            "retry_safety": "maybe_executed",
            "side_effect_status": "unknown",
            "repair_action": "verify_state",
            "max_retry": 0,
            "suggestion": f"The proxy running {record.tool} stopped before the call finished: it may or may not have "
            "taken effect. Check the current state before calling it again.",
        }
        text = (
            f"TASK_OUTCOME_UNKNOWN: the proxy running {record.tool} stopped before the call finished; its outcome is "
            "unknown. Verify the state before calling it again (verify_state)."
        )
        result = {
            "content": [{"type": "text", "text": text}],
            "structuredContent": observation,
            "isError": True,
            "_meta": {OBSERVATION_META: observation},
        }
        return record.changed(
            self._clock(), status="completed", input_requests=None, result=result, status_message="outcome unknown"
        )

    async def update(self, task_id: str, principal: str, responses: dict[str, Any] | None) -> None:
        """``tasks/update``: answers to the task's questions (keys it did not ask are ignored)."""
        record = await self._owned(task_id, principal)
        live = self._live.get(task_id)
        if live is None:
            if record.terminal:
                return
            raise MCPError(
                types.INVALID_PARAMS,
                f"Task {task_id!r} is running on another proxy replica, which holds its questions: send tasks/update "
                "there (the same session), or wait for it to finish",
            )
        live.bridge.answer(responses)
        changed = self._status(live, self._clock())
        if changed is not None:
            await self._save(live, changed)

    async def cancel(self, task_id: str, principal: str) -> None:
        """``tasks/cancel``: cancel the upstream call; a finished task is left as it is (idempotent)."""
        record = await self._owned(task_id, principal)
        live = self._live.get(task_id)
        if live is None or record.terminal:
            if not record.terminal and self._abandoned(record):
                await self.store.put_task(self._unknown(record), self.settings.max_per_principal)
            return
        live.cancelled = True
        if live.bridge.scope is not None:
            live.bridge.scope.cancel()
        live.bridge.abandon()  # a question still parked ends with an answer, so the upstream call ends too
        with anyio.move_on_after(self.settings.lease_s):
            await live.bridge.finished.wait()

    async def list(self, principal: str | None = None, limit: int = 100) -> list[TaskRecord]:
        return await self.store.list_tasks(principal, limit)

    def summary(self, viewer: str | None = None) -> dict[str, Any]:
        """What the status page shows: this process's running tasks and the last ones it finished, and its counts.
        ``viewer``: a bearer-token principal that sees only its own tasks. Task ids are shown by their first 8
        characters (an id is not a credential, its principal is; still, the page never lists one whole)."""

        def visible(record: TaskRecord) -> bool:
            return viewer is None or record.principal == f"http:{viewer}"

        def row(record: TaskRecord) -> dict[str, Any]:
            return {
                "task": record.task_id[:8],
                "tool": record.tool,
                "status": record.status,
                "created_at": iso(record.created_at),
                "updated_at": iso(record.updated_at),
                "message": record.status_message,
            }

        running = [row(live.record) for live in self._live.values() if visible(live.record)]
        finished = [row(r) for r in reversed(self._recent) if visible(r)]
        return {"running": running, "finished": finished, "counts": asdict(self.counts)}


READ_TASK_RESULT = "read_task_result"
READ_WAIT_S = 50.0
"""The longest ``read_task_result`` waits (under the 60 s common hosts wait for one request)."""
MAX_DETACHED = 1000

READ_TASK_RESULT_TOOL = types.Tool(
    name=READ_TASK_RESULT,
    title="Wait for a call that is still running",
    description="Wait for (up to wait_s seconds) and read the result of a tool call that resilient-mcp reported as "
    "still running (STILL_RUNNING names its handle). If it is still running after that, the answer says so again.",
    input_schema={
        "type": "object",
        "properties": {
            "handle": {"type": "string", "description": "The handle from the STILL_RUNNING note."},
            "wait_s": {
                "type": "number",
                "minimum": 0,
                "maximum": READ_WAIT_S,
                "default": 30,
                "description": "Seconds to wait for the result at most.",
            },
        },
        "required": ["handle"],
        "additionalProperties": False,
    },
    annotations=types.ToolAnnotations(
        read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
    ),
)


def still_running(record: TaskRecord, waited_s: float) -> types.CallToolResult:
    """The observation a host that cannot poll gets for a call that outlived its patience."""
    handle = record.task_id
    suggestion = (
        f'Call read_task_result(handle="{handle}") to wait for its result, or call {record.tool} again with the same '
        "arguments: it waits for this same call, it does not run it twice."
    )
    observation = {
        "code": "STILL_RUNNING",
        "level": "L2",
        "fault_category": "C",
        "fault_type": "C3_attempt_timeout",
        "is_transient": True,
        "retry_safety": "maybe_executed",
        "side_effect_status": "unknown",
        "repair_action": "backoff_retry",
        "max_retry": 1,
        "suggestion": suggestion,
        "details": {"handle": handle, "tool": record.tool, "waited_s": round(waited_s, 1), "status": record.status},
    }
    text = f"STILL_RUNNING: {record.tool} is still running after {waited_s:g} s and goes on without you. {suggestion}"
    return types.CallToolResult(
        content=[types.TextContent(text=text)],
        structured_content=observation,
        is_error=True,
        _meta={OBSERVATION_META: observation},
    )


def _arguments_digest(arguments: dict[str, Any] | None) -> str:
    canonical = json.dumps(arguments or {}, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode("utf-8", "replace")).hexdigest()


def _error(data: types.ErrorData) -> dict[str, Any]:
    return data.model_dump(by_alias=True, mode="json", exclude_none=True)


def protocol_error(result: types.CallToolResult, upstream: types.ErrorData | None) -> dict[str, Any] | None:
    """The JSON-RPC error of a call that ended without the tool's own result (its last attempt was answered with
    ``upstream``, an error): a task reports it as ``failed`` with that ``error`` (the proxy's observation in
    ``data.observation``). A tool that ran and reported an error is ``completed`` with ``result.isError``; so is every
    other observation of the proxy (a timeout, an open circuit: what the model should read)."""
    if not result.is_error or upstream is None:
        return None
    data: dict[str, Any] = {"observation": result.structured_content} if result.structured_content else {}
    if upstream.data is not None:
        data["upstream"] = upstream.data
    return {"code": upstream.code, "message": upstream.message, **({"data": data} if data else {})}


def owner_principal(owner: str) -> str:
    """The task principal (``host.principal``) of a proxy tool call's ``owner`` (``proxy.output_owner``):
    over HTTP its first word (the bearer token's principal), over stdio the one local host."""
    return "local" if owner.startswith("stdio:") or not owner else "http:" + owner.partition(" ")[0]


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def opted_in(client_capabilities: types.ClientCapabilities | None, meta: Mapping[str, Any] | None) -> bool:
    """Whether a request's host declared the tasks extension: on its connection, or in this request's ``_meta``."""
    if (
        client_capabilities is not None
        and client_capabilities.extensions
        and EXTENSION in client_capabilities.extensions
    ):
        return True
    raw = meta.get(CLIENT_CAPABILITIES_META) if meta is not None else None
    extensions = raw.get("extensions") if isinstance(raw, dict) else None
    return isinstance(extensions, dict) and EXTENSION in extensions
