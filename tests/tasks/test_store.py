"""Task records in each state backend (memory, SQLite, a real redis-server): written whole, read back, expired with
their TTL, bounded per principal (the oldest finished records go first, running ones never), listed newest first; and
how a record left running by a proxy that is gone reads."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from resilient_mcp.policy import TasksPolicy
from resilient_mcp.policy.config import StateConfig
from resilient_mcp.state.sqlite import StateStore
from resilient_mcp.state.tasks import MemoryTaskStore, TaskRecord, TaskStatus, TaskStore
from resilient_mcp.tasks.bridge import Bridge
from resilient_mcp.tasks.manager import HOST, TaskManager
from tests.redis_server import REDIS_SERVER, RedisServer

pytestmark = pytest.mark.anyio


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def record(task_id: str, principal: str, status: TaskStatus, created: float, ttl_s: float = 100.0) -> TaskRecord:
    return TaskRecord(
        task_id=task_id,
        principal=principal,
        tool="export",
        status=status,
        created_at=created,
        updated_at=created,
        expires_at=created + ttl_s,
        ttl_ms=int(ttl_s * 1000),
        poll_interval_ms=1000,
        instance="elsewhere:1:x",
        result={"content": [{"type": "text", "text": task_id}]} if status == "completed" else None,
    )


@pytest.fixture(params=["memory", "sqlite", "redis"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[TaskStore, Clock]]:
    clock = Clock()
    if request.param == "memory":
        yield MemoryTaskStore(clock), clock
    elif request.param == "sqlite":
        async with await StateStore.open(tmp_path / "state", clock=clock) as sqlite:
            yield sqlite, clock
    else:
        if REDIS_SERVER is None and not os.environ.get("CI"):
            pytest.skip("redis-server missing: apt-get install -y redis-server (.ci/run does)")
        from resilient_mcp.state.redis import RedisStateStore

        server: RedisServer = request.getfixturevalue("redis")
        async with await RedisStateStore.open(StateConfig(backend="redis", url=server.url), clock=clock) as redis:
            yield redis, clock


async def test_records_round_trip_expire_and_are_bounded_per_principal(store: tuple[TaskStore, Clock]) -> None:
    tasks, clock = store
    t0 = clock.now
    await tasks.put_task(record("run-1", "alice", "working", t0), max_per_principal=3)
    await tasks.put_task(record("done-1", "alice", "completed", t0 + 1), max_per_principal=3)
    await tasks.put_task(record("done-2", "alice", "completed", t0 + 2), max_per_principal=3)
    await tasks.put_task(record("bob-1", "bob", "completed", t0 + 3), max_per_principal=3)
    assert await tasks.get_task("done-1") == record("done-1", "alice", "completed", t0 + 1)

    await tasks.put_task(record("done-3", "alice", "completed", t0 + 4), max_per_principal=3)
    alice = [r.task_id for r in await tasks.list_tasks("alice")]
    assert alice == ["done-3", "done-2", "run-1"], "the oldest finished record went; the running one stays"
    assert await tasks.get_task("done-1") is None
    assert [r.task_id for r in await tasks.list_tasks("bob")] == ["bob-1"], "another principal's bound is its own"

    clock.now = t0 + 3 + 100  # bob-1 (created t0 + 3, ttl 100 s) has expired; done-3 has not
    assert await tasks.get_task("bob-1") is None
    assert (await tasks.get_task("done-3")) is not None


@pytest.mark.parametrize("status", ["working", "input_required"])
async def test_a_record_left_running_by_a_proxy_that_is_gone_reads_as_outcome_unknown(status: TaskStatus) -> None:
    clock = Clock()
    manager = TaskManager(clock)
    manager.settings = TasksPolicy(lease_s=30)
    gone = await anyio.run_process([sys.executable, "-c", "import os; print(os.getpid())"])
    dead_pid = int(gone.stdout)  # a process of this machine that has exited
    alive = record("alive", "alice", status, clock.now)
    alive = alive.changed(clock.now, instance=f"{HOST}:{os.getpid()}:t", lease_until=clock.now + 30)
    stopped = alive.changed(clock.now, task_id="stopped", instance=f"{HOST}:{dead_pid}:t")
    elsewhere = alive.changed(clock.now, task_id="elsewhere", instance="another-host:1:t")
    for r in (alive, stopped, elsewhere):
        await manager.store.put_task(r, 100)

    assert (await manager.get("alive", "alice"))["status"] == status, "a live proxy on this machine still runs it"
    assert (await manager.get("elsewhere", "alice"))["status"] == status, "another machine's lease still holds"
    lost = await manager.get("stopped", "alice")
    assert lost["status"] == "completed" and lost["result"]["structuredContent"]["repair_action"] == "verify_state"

    clock.now += 31  # nobody renewed the other machine's lease
    late = await manager.get("elsewhere", "alice")
    assert late["status"] == "completed" and late["result"]["structuredContent"]["code"] == "TASK_OUTCOME_UNKNOWN"
    with pytest.raises(MCPError) as refused:
        await manager.get("alive", "mallory")
    assert refused.value.error.code == -32602, "another principal's task is as unknown as a made-up id"


class GatedStore(MemoryTaskStore):
    """A store whose writes wait for the test while ``gate`` is armed, and say when one is written."""

    def __init__(self) -> None:
        super().__init__()
        self.gate: anyio.Event | None = None
        self.entered = anyio.Event()
        self.written = anyio.Event()

    async def put_task(self, record: TaskRecord, max_per_principal: int) -> None:
        self.entered.set()
        if self.gate is not None:
            await self.gate.wait()
        await super().put_task(record, max_per_principal)
        self.written.set()
        self.written = anyio.Event()


async def test_a_question_asked_while_the_record_is_written_reaches_tasks_get() -> None:
    """The watcher must not miss a change that happens while it writes the previous one (it would show the second
    question only at the next lease renewal, 100 s here)."""
    store = GatedStore()
    manager = TaskManager()
    manager.settings = TasksPolicy(lease_s=300)
    bridge = Bridge(answer_timeout_s=300)
    ask = types.ElicitRequest(
        params=types.ElicitRequestFormParams(message="?", requested_schema={"type": "object", "properties": {}})
    )
    async with anyio.create_task_group() as tg:
        manager.bind(tg, store)
        task_id = (await manager.adopt(bridge, "alice", "export"))["taskId"]
        store.gate, store.entered = anyio.Event(), anyio.Event()
        tg.start_soon(bridge.ask, ask, "first")
        with anyio.fail_after(5):
            await store.entered.wait()  # the watcher writes "first", held here
        tg.start_soon(bridge.ask, ask, "second")
        await anyio.wait_all_tasks_blocked()
        store.gate.set()
        with anyio.fail_after(5):
            while set((await manager.get(task_id, "alice")).get("inputRequests", {})) != {"first", "second"}:
                await store.written.wait()
        bridge.abandon()
        bridge.finish(types.CallToolResult(content=[types.TextContent(text="done")]))
        with anyio.fail_after(5):
            while (await manager.get(task_id, "alice"))["status"] != "completed":
                await store.written.wait()


async def test_a_legacy_hosts_identical_call_joins_a_running_one_only_after_it_was_handed_off() -> None:
    """Before the handoff an identical call is the host's own (two executions; the chain's duplicate protection
    decides about writes); once the host holds a handle, the same call again waits for that one (no third)."""
    manager = TaskManager()
    runs: list[anyio.Event] = []

    async def work() -> types.CallToolResult:
        release = anyio.Event()
        runs.append(release)
        number = len(runs)
        await release.wait()
        return types.CallToolResult(content=[types.TextContent(text=f"run {number}")])

    results: dict[str, types.CallToolResult] = {}

    async def call(label: str, after_s: float) -> None:
        results[label] = await manager.handoff("alice", "export", {"n": 1}, after_s, work)

    async with anyio.create_task_group() as tg:
        manager.bind(tg, MemoryTaskStore())
        with anyio.fail_after(10):
            tg.start_soon(call, "first", 3600)
            tg.start_soon(call, "second", 0)  # not joined: nothing was handed off yet; its own run, handed off at once
            while len(runs) < 2 or "second" not in results:
                await anyio.wait_all_tasks_blocked()
            assert "STILL_RUNNING" in str(results["second"].content[0])
            tg.start_soon(call, "third", 3600)  # joins the handed-off second run
            await anyio.wait_all_tasks_blocked()
            assert len(runs) == 2
            runs[1].set()
            runs[0].set()
    assert str(results["third"].content[0].text) == "run 2"  # type: ignore[union-attr]
    assert str(results["first"].content[0].text) == "run 1"  # type: ignore[union-attr]


async def test_a_legacy_host_that_cancels_before_a_handle_stops_the_call() -> None:
    manager = TaskManager()
    started, stopped = anyio.Event(), anyio.Event()

    async def work() -> types.CallToolResult:
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            stopped.set()
        raise AssertionError("unreachable")

    async with anyio.create_task_group() as tg:
        manager.bind(tg, MemoryTaskStore())
        with anyio.fail_after(10):
            async with anyio.create_task_group() as host:
                host.start_soon(manager.handoff, "alice", "export", None, 3600, work)
                await started.wait()
                host.cancel_scope.cancel()  # the host's notifications/cancelled
            await stopped.wait()
