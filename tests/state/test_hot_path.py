"""State work on a tool call's path: what a read and a default write wait for, through the whole proxy.

A read waits for no state write; a default write (write_unsafe, derived key) waits for exactly one write before it
is sent, committed to the database file (the claim that reads as "outcome unknown" after a crash), made in the event
loop's thread when the worker is idle (no handoff to it and back), and for none after (the settlement and the
delivery are queued, one job each). The audit is queued off the path and every row is
on disk once the proxy has shut down. On Redis a default write waits for two round trips (claim, settle); the
delivery's delete runs in the background.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import anyio
import mcp_types as types
import pytest
import redis as sync_redis
from mcp.server import Server

from resilient_mcp.call.chain import ToolCall
from resilient_mcp.faults import EffectClass, Fault
from resilient_mcp.policy import IdempotencyRule, ToolRule
from resilient_mcp.policy.config import StateConfig
from resilient_mcp.proxy import pipeline as pipeline_module
from resilient_mcp.stages.idempotency import Idempotency, InFlight
from resilient_mcp.state import Claim, StateLimits
from resilient_mcp.state import schema as state_schema
from resilient_mcp.state import sqlite as state_sqlite
from resilient_mcp.state.redis import RedisStateStore
from resilient_mcp.state.sqlite import StateStore, recent_audit
from tests.harness import proxied
from tests.redis_server import RedisServer, needs_redis

pytestmark = pytest.mark.anyio

T = TypeVar("T")
OBJECT = {"type": "object", "properties": {"n": {"type": "integer"}}}


class CountingWorker(state_sqlite.Worker):
    """The SQLite store's worker, counting what is asked of it: ``call`` waits for the job (a synchronous state
    operation on the call's path) and ``now`` too (made in the caller's thread when it can, ``inline`` counts those;
    else called), ``submit`` queues it (write-behind)."""

    def __init__(self, idle: Callable[[], None], tick_s: float) -> None:
        self.waited = 0
        self.inline = 0
        self.queued = 0
        super().__init__(idle, 3600)  # no maintenance tick: the thread is busy only with what a test asks

    async def idle(self) -> None:
        """Until the thread has run everything asked and queued before (and its maintenance after it)."""
        await self.call(lambda: None)
        self.waited -= 1
        with getattr(self, "_busy", nullcontext()):  # released once the thread is back waiting for a job
            pass

    async def call(self, fn: Callable[[], T]) -> T:
        self.waited += 1
        return await super().call(fn)

    def now(self, fn: Callable[[], T]) -> tuple[bool, T | None]:
        done, value = super().now(fn)
        if done:
            self.waited += 1
            self.inline += 1
        return done, value

    def submit(self, fn: Callable[[], object]) -> None:
        self.queued += 1
        super().submit(fn)


@pytest.fixture
def workers(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[CountingWorker]]:
    opened: list[CountingWorker] = []

    def counting(idle: Callable[[], None], tick_s: float) -> CountingWorker:
        opened.append(CountingWorker(idle, tick_s))
        return opened[-1]

    monkeypatch.setattr(state_sqlite, "Worker", counting)
    yield opened


@dataclass
class Seen:
    """What the upstream saw when a call reached it: the worker's counts and the idempotency rows on disk."""

    waited: int
    inline: int
    queued: int
    rows: list[tuple[str, str]]


def disk_rows(state_file: Path) -> list[tuple[str, str]]:
    """The idempotency records on disk: (key, status), by key."""
    conn = sqlite3.connect(f"{state_file.as_uri()}?mode=ro", uri=True)
    try:
        return [(str(k), str(s)) for k, s in conn.execute("SELECT key, status FROM idempotency ORDER BY key")]
    finally:
        conn.close()


def upstream(state_file: Callable[[], Path], worker: Callable[[], CountingWorker], seen: list[Seen]) -> Server[Any]:
    tools = [
        types.Tool(name="lookup", input_schema=OBJECT, annotations=types.ToolAnnotations(read_only_hint=True)),
        types.Tool(name="create", input_schema=OBJECT),
    ]

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        w = worker()
        seen.append(Seen(w.waited, w.inline, w.queued, disk_rows(state_file())))
        return types.CallToolResult(content=[types.TextContent(text=f"{params.name} {params.arguments}")])

    return Server("shop", on_list_tools=list_tools, on_call_tool=call_tool)


async def test_a_read_waits_for_no_state_write_and_a_write_for_one_durable_claim(
    tmp_path: Path, workers: list[CountingWorker]
) -> None:
    seen: list[Seen] = []
    state = tmp_path / "state"
    server = upstream(lambda: state / "state.sqlite3", lambda: workers[0], seen)
    async with proxied({"shop": server}, config={"state_dir": str(state)}) as h:
        [worker] = workers
        for tool, n in (("lookup", 1), ("create", 1), ("create", 2), ("lookup", 2)):
            await worker.idle()
            before = (worker.waited, worker.queued)
            inline = worker.inline
            with anyio.fail_after(10):
                result = await h.client.call_tool(tool, {"n": n})
            assert not result.is_error, result
            sent, after = seen[-1], (worker.waited, worker.queued)
            if tool == "lookup":
                assert (sent.waited, sent.queued) == before and after == before, "a read touched the state"
                continue
            assert sent.waited == before[0] + 1, "a default write waits for exactly one state write before it is sent"
            assert sent.inline == inline + 1, "the claim went to the worker thread and back although it was idle"
            assert sent.queued == before[1], "nothing of the write is queued before it is sent"
            # That one write is both claims, committed: the call's own record and the upstream-wide marker.
            assert sorted((key.count("#session:"), status) for key, status in sent.rows) == [
                (0, "in_flight"),
                (1, "in_flight"),
            ], sent.rows
            assert after[0] == sent.waited, "a write waits for no state write after the upstream answered"
            # Delivered before the worker wrote the settling: one job, one transaction deleting both records (main
            # queued two: the result completed, then deleted).
            assert after[1] - sent.queued == 1, "settling and delivery are one queued job"
            await worker.idle()
            assert disk_rows(state / "state.sqlite3") == [], "a delivered write left a record behind"


async def test_a_writes_claims_are_one_statement_committed_in_the_event_loops_thread(
    tmp_path: Path, workers: list[CountingWorker]
) -> None:
    """Both claims of a derived-key write (its record and the upstream-wide marker) are one ``INSERT`` of two rows,
    atomic without a transaction of its own (main ran ``BEGIN IMMEDIATE``, two inserts and ``COMMIT``); a held
    marker leaves one row to claim. Both are on disk when ``begin_write`` returns."""
    store = await StateStore.open(tmp_path)
    try:
        [worker] = workers
        await worker.idle()
        statements: list[str] = []
        conn = store._db()
        conn.set_trace_callback(lambda sql: statements.append(sql) if not sql.startswith("PRAGMA") else None)
        claim = Claim(args_hash="h", tool="t", now=time.time(), expires_at=10**10, marker_expires_at=10**10)
        inline = worker.inline
        assert await store.begin_write("own-1", "marker", claim) == (None, None)
        assert worker.inline == inline + 1, "the claim went to the worker thread although it was idle"
        assert [s.split(" VALUES")[0] for s in statements] == ["INSERT OR REPLACE INTO idempotency"], statements
        assert statements[0].count("'in_flight'") == 2, statements
        assert disk_rows(tmp_path / "state.sqlite3") == [("marker", "in_flight"), ("own-1", "in_flight")]
        statements.clear()
        await store.begin_write("own-2", "marker", claim)  # the marker is held: only the call's own record
        assert [s.count("'in_flight'") for s in statements] == [1], statements
        conn.set_trace_callback(None)
    finally:
        await store.aclose()


async def test_the_write_behind_jobs_of_one_step_wake_the_worker_once() -> None:
    """A call's settling and its delivery's delete, queued in one step of the event loop, wake the worker thread
    once (and it runs its maintenance once), not once per job: a wake-up is what costs on a busy machine (the event
    loop and the worker contend for the GIL and the cores)."""
    ran: list[str] = []
    wakeups: list[int] = []
    written = asyncio.Event()
    loop = asyncio.get_running_loop()
    worker = state_sqlite.Worker(lambda: wakeups.append(len(ran)), tick_s=3600)
    try:
        with anyio.fail_after(10):
            worker.submit(lambda: ran.append("settle 1"))
            worker.submit(lambda: (ran.append("delivered 1"), loop.call_soon_threadsafe(written.set)))
            await written.wait()
            seen = await worker.call(lambda: (list(ran), list(wakeups)))
    finally:
        await worker.stop()
    assert seen == (["settle 1", "delivered 1"], [2])


async def test_write_behind_jobs_keep_their_order_with_a_job_that_is_waited_for() -> None:
    ran: list[str] = []
    wakeups: list[int] = []
    worker = state_sqlite.Worker(lambda: wakeups.append(len(ran)), tick_s=3600)
    try:
        with anyio.fail_after(10):
            worker.submit(lambda: ran.append("settle 1"))
            worker.submit(lambda: ran.append("delivered 1"))
            await worker.call(lambda: ran.append("claim 2"))
            seen = await worker.call(lambda: (list(ran), list(wakeups)))
    finally:
        await worker.stop()
    assert seen == (["settle 1", "delivered 1", "claim 2"], [3])


async def test_a_write_behind_job_is_written_at_the_next_tick_without_another_job() -> None:
    written = asyncio.Event()
    loop = asyncio.get_running_loop()
    worker = state_sqlite.Worker(lambda: None, tick_s=0.01)
    try:
        worker.submit(lambda: loop.call_soon_threadsafe(written.set))
        with anyio.fail_after(10):
            await written.wait()
    finally:
        await worker.stop()


async def test_a_write_behind_job_submitted_before_stop_is_written() -> None:
    ran: list[str] = []
    worker = state_sqlite.Worker(lambda: None, tick_s=3600)
    worker.submit(lambda: ran.append("settle"))
    with anyio.fail_after(10):
        await worker.stop()
    assert ran == ["settle"]


async def test_now_runs_in_the_callers_thread_after_the_queued_write_behind_jobs() -> None:
    ran: list[tuple[str, int]] = []
    worker = state_sqlite.Worker(lambda: None, tick_s=3600)
    try:
        with anyio.fail_after(10):
            await worker.call(lambda: None)
            with worker._busy:  # (the thread is back waiting for a job)
                pass
            worker.submit(lambda: ran.append(("settle 1", threading.get_ident())))
            done, value = worker.now(lambda: (ran.append(("claim 2", threading.get_ident())), 7)[1])
    finally:
        await worker.stop()
    here = threading.get_ident()
    assert (done, value) == (True, 7)
    assert ran == [("settle 1", here), ("claim 2", here)]


async def test_now_never_overtakes_a_job_asked_before_nor_waits_for_the_thread() -> None:
    release = threading.Event()
    ran: list[str] = []
    worker = state_sqlite.Worker(lambda: None, tick_s=3600)
    try:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(worker.call, lambda: (release.wait(10), ran.append("slow job")))
                await anyio.lowlevel.checkpoint()  # the slow job is asked
                assert worker.now(lambda: ran.append("claim")) == (False, None)
                release.set()
            assert ran == ["slow job"]
    finally:
        await worker.stop()


async def test_a_claim_never_blocks_the_event_loop_on_a_database_another_process_locked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: list[CountingWorker]
) -> None:
    """Run in the event loop's thread, the claim would wait there for the lock (up to the busy timeout) and stop
    every other call: it fails at once instead, and the worker thread waits for the lock."""
    monkeypatch.setattr(state_schema, "BUSY_TIMEOUT_S", 30.0)  # longer than the test may take: waiting is failing
    async with await StateStore.open(tmp_path) as store:
        assert store.path is not None
        other = sqlite3.connect(store.path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # another process's write transaction
        claimed = anyio.Event()
        [worker] = workers
        await worker.idle()  # so the claim is made in the event loop's thread, if it can

        async def claim() -> None:
            assert await store.begin("k", args_hash="h", tool="t", now=1.0, expires_at=9e9) is None
            claimed.set()

        try:
            with anyio.fail_after(10):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(claim)
                    await anyio.lowlevel.checkpoint()  # the claim ran up to its wait: the event loop is free
                    assert not claimed.is_set()
                    other.execute("COMMIT")
                    await claimed.wait()
        finally:
            other.close()
        conn = sqlite3.connect(f"{store.path.as_uri()}?mode=ro", uri=True)
        try:
            assert conn.execute("SELECT status FROM idempotency WHERE key = 'k'").fetchall() == [("in_flight",)]
        finally:
            conn.close()


class LazyAudit(StateStore):
    """The SQLite store with an audit batch larger than the test's calls and no timed flush."""

    @classmethod
    async def open(cls, state_dir: Any = None, *, clock: Any = time.time, limits: Any = None) -> StateStore:
        return await super().open(state_dir, clock=clock, limits=StateLimits(audit_batch=1000, flush_interval_s=3600))


async def test_every_audit_row_is_on_disk_after_the_proxy_shut_down(
    tmp_path: Path, workers: list[CountingWorker], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pipeline_module, "StateStore", LazyAudit)
    seen: list[Seen] = []
    state = tmp_path / "state"
    calls = 40
    server = upstream(lambda: state / "state.sqlite3", lambda: workers[0], seen)
    async with proxied({"shop": server}, config={"state_dir": str(state)}) as h:
        for i in range(calls):
            with anyio.fail_after(10):
                await h.client.call_tool("lookup" if i % 2 else "create", {"n": i})
        assert recent_audit(state, limit=1000) == [], "the audit was written on the calls' path"
    rows = recent_audit(state, limit=1000)
    assert len(rows) == calls
    assert sorted(r["tool"] for r in rows) == ["create"] * (calls // 2) + ["lookup"] * (calls // 2)


WRITE = ToolRule(effect=EffectClass.WRITE_UNSAFE, idempotency=IdempotencyRule())


@needs_redis()
async def test_a_default_write_makes_two_redis_round_trips_and_its_record_is_deleted_by_the_next_claim(
    redis: RedisServer,
) -> None:
    """Claim both records (one script), settle both (one script): that is all a default write sends. Its own record,
    once delivered, is deleted by the next claim's script on its way (main sent a third command per write, a
    ``DEL`` in the background), or by the background task's tick when no claim comes."""
    store = await RedisStateStore.open(
        StateConfig(backend="redis", url=redis.url, command_timeout_s=5.0), limits=StateLimits(flush_interval_s=3600)
    )
    sent: list[tuple[str, bool]] = []
    execute = store.redis.execute_command
    path: set[asyncio.Task[Any] | None] = set()

    async def counted(*args: Any, **options: Any) -> Any:  # every command the store sends is one round trip
        sent.append((str(args[0]), asyncio.current_task() in path))
        return await execute(*args, **options)

    store.redis.execute_command = counted  # type: ignore[method-assign]

    async def terminal(c: ToolCall) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(text="done")])

    async def write(n: int) -> list[tuple[str, bool]]:
        call = ToolCall(
            name="create", arguments={"n": n}, upstream="shop", upstream_tool="create", rule=WRITE, session_id="s"
        )
        before = len(sent)
        result = await stage(call, terminal)
        assert not result.is_error and "replay" not in str(result.meta), (n, result)
        for hook in call.record.on_delivered:
            await hook()
        return sent[before:]

    def own_records() -> list[bytes]:
        client = sync_redis.Redis.from_url(redis.url)
        try:
            return sorted(k for k in client.keys("*idem:*") if b"#session:" in k)
        finally:
            client.close()

    path.add(asyncio.current_task())
    try:
        stage = Idempotency(WRITE, store, InFlight())
        await write(0)  # loads the scripts into Redis (a first EVALSHA is answered NOSCRIPT)
        for _ in range(3):  # the same write three times: each was delivered, so each runs, never a replay
            commands = await write(1)
            assert commands == [("EVALSHA", True), ("EVALSHA", True)], "claim both, then settle both: nothing else"
            assert len(own_records()) == 1, "the delivered record of the write before was not deleted on the way"
    finally:
        await store.aclose()
    assert own_records() == [], "closing deleted the last delivered record"


@needs_redis()
async def test_a_delete_whose_claim_failed_is_carried_by_the_next_one(redis: RedisServer) -> None:
    """The delivered write's record rides on the next claim; that claim fails (Redis unreachable for it): the next
    identical write still runs, never replays the result the host already has."""
    store = await RedisStateStore.open(StateConfig(backend="redis", url=redis.url, command_timeout_s=5.0))
    execute = store.redis.execute_command
    failures = {"EVALSHA": 0}

    async def flaky(*args: Any, **options: Any) -> Any:
        if failures.get(str(args[0]), 0) > 0:
            failures[str(args[0])] -= 1
            raise ConnectionError("connection reset by peer")
        return await execute(*args, **options)

    store.redis.execute_command = flaky  # type: ignore[method-assign]
    ran: list[int] = []

    async def terminal(c: ToolCall) -> types.CallToolResult:
        ran.append(1)
        return types.CallToolResult(content=[types.TextContent(text="done")])

    def create() -> ToolCall:
        return ToolCall(
            name="create", arguments={"n": 1}, upstream="shop", upstream_tool="create", rule=WRITE, session_id="s"
        )

    try:
        stage = Idempotency(WRITE, store, InFlight())
        for attempt in range(3):
            call = create()
            if attempt == 1:
                failures["EVALSHA"] = 1  # the claim that carries the first write's delete
                with pytest.raises(Fault):
                    await stage(call, terminal)
                continue
            result = await stage(call, terminal)
            assert "replay" not in str(result.meta), result
            for hook in call.record.on_delivered:
                await hook()
        assert len(ran) == 2 and failures["EVALSHA"] == 0, "the delivered write was replayed instead of run"
    finally:
        await store.aclose()
