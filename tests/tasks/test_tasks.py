"""Durable tasks (io.modelcontextprotocol/tasks) served by the proxy, through real processes and real transports.

The proxy runs as ``resilient-mcp serve --http`` in front of a real stdio upstream; the host is a 2026-07-28 client
speaking JSON-RPC over HTTP (each request carries its own ``_meta`` envelope, as the protocol wants). A "long" tool
is the ledger server's ``append`` with a gate file: its side effect is a ledger line, written once per execution,
and it answers only when the test creates the gate, so no test waits for wall-clock time to pass; the proxy's
threshold is set low (``task.after_s``) and every wait is bounded.
"""

from __future__ import annotations

import itertools
import json
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.helpers import (
    child_env,
    free_port,
    proxy_argv,
    run_cli,
    running,
    wait_healthy,
    wait_until,
    write_yaml,
)
from tests.redis_server import RedisServer, needs_redis

FIXTURES = Path(__file__).parents[1] / "fixtures"
LEDGER = FIXTURES / "ledger_server.py"
PROBE = FIXTURES / "probe_server.py"
EXTENSION = "io.modelcontextprotocol/tasks"
WITH_TASKS = {"extensions": {EXTENSION: {}}}
LIMIT_S = 60.0
_ids = itertools.count(1)


class Host:
    """A 2026-07-28 host over HTTP: one POST per request, its envelope in ``_meta``."""

    def __init__(self, url: str, token: str | None = None, capabilities: dict[str, Any] | None = None) -> None:
        self.url, self.token = url, token
        self.capabilities = WITH_TASKS if capabilities is None else capabilities

    def request(self, method: str, params: dict[str, Any], name: str | None = None) -> dict[str, Any]:
        meta = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": self.capabilities,
        }
        body = {"jsonrpc": "2.0", "id": next(_ids), "method": method, "params": {**params, "_meta": meta}}
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": method,
        }
        if name is not None:
            headers["Mcp-Name"] = name
        if self.token is not None:
            headers["Authorization"] = f"Bearer {self.token}"
        req = urllib.request.Request(self.url, json.dumps(body).encode(), headers)
        try:
            with urllib.request.urlopen(req, timeout=LIMIT_S) as response:
                text = response.read().decode()
        except urllib.error.HTTPError as exc:
            text = exc.read().decode()
        if not text.lstrip().startswith("{"):  # an SSE stream: the last data line is the answer
            text = [line[5:] for line in text.splitlines() if line.startswith("data:")][-1]
        answer: dict[str, Any] = json.loads(text)
        return answer

    def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return self.request("tools/call", {"name": tool, "arguments": arguments}, name=tool)

    def task(self, method: str, task_id: str, **params: Any) -> dict[str, Any]:
        return self.request(method, {"taskId": task_id, **params}, name=task_id)

    def until(self, task_id: str, status: str, limit_s: float = LIMIT_S) -> dict[str, Any]:
        def reached() -> dict[str, Any] | None:
            result = self.task("tasks/get", task_id)["result"]
            return result if result["status"] == status else None

        return wait_until(reached, limit_s, f"task {task_id} {status}")


@contextmanager
def proxy(
    tmp_path: Path, name: str, upstream: list[str], policy: dict[str, Any], **config: Any
) -> Iterator[tuple[str, Path]]:
    """``serve --http`` with one stdio upstream and ``policy``; yields its MCP URL and its stderr file."""
    port = free_port()
    policy_path = write_yaml(tmp_path / f"{name}-policy.yaml", policy)
    settings = {
        "upstreams": {"up": {"command": sys.executable, "args": upstream}},
        "policies": [str(policy_path)],
        "state_dir": str(tmp_path / "state"),
        **config,
    }
    path = write_yaml(tmp_path / f"{name}.yaml", settings)
    stderr = tmp_path / f"{name}.stderr"
    argv = proxy_argv("--log-format", "json", "serve", "--config", str(path), "--http", f"127.0.0.1:{port}")
    with running(argv, stderr, env=child_env(tmp_path / "xdg")) as process:
        wait_healthy(f"http://127.0.0.1:{port}", process, stderr)
        yield f"http://127.0.0.1:{port}/mcp", stderr


def ledger_policy(after_s: float = 0.3) -> dict[str, Any]:
    long_running = {"timeouts": {"attempt_s": 600, "total_s": 600}, "task": {"mode": "auto", "after_s": after_s}}
    return {"version": 1, "tools": {"append": long_running}}


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def test_a_long_call_becomes_a_task_polled_to_its_result_across_reconnects_and_a_proxy_restart(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.txt"
    upstream = [str(LEDGER), "--ledger", str(ledger)]
    gate1, gate2 = tmp_path / "gate1", tmp_path / "gate2"
    with proxy(
        tmp_path, "first", upstream, ledger_policy(), listen={"auth_tokens": ["token-aaaaaaaa", "token-bbbbbbbb"]}
    ) as (url, _):
        host = Host(url, token="token-aaaaaaaa")
        created = host.call("append", {"entry": "job-1", "gate": str(gate1)})["result"]
        assert created["resultType"] == "task" and created["status"] in ("working", "input_required")
        assert {"taskId", "createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs"} <= set(created)
        assert "result" not in created and "content" not in created
        task1 = created["taskId"]
        # Every request is a new connection: the task is the principal's, not the connection's.
        assert Host(url, token="token-aaaaaaaa").task("tasks/get", task1)["result"]["status"] == "working"
        other = Host(url, token="token-bbbbbbbb").task("tasks/get", task1)
        assert other["error"]["code"] == -32602, "another principal must not see the task (nor learn it exists)"

        gate1.touch()
        done = Host(url, token="token-aaaaaaaa").until(task1, "completed")
        assert done["result"]["content"][0]["text"] == "appended job-1"
        assert not done["result"].get("isError")

        task2 = host.call("append", {"entry": "job-2", "gate": str(gate2)})["result"]["taskId"]
        wait_until(lambda: "job-2" in lines(ledger), LIMIT_S, "job-2 reaching the upstream")
    # The first proxy is gone, job-2 with it (its upstream was its child): the second proxy knows what it can.
    with proxy(
        tmp_path, "second", upstream, ledger_policy(), listen={"auth_tokens": ["token-aaaaaaaa", "token-bbbbbbbb"]}
    ) as (url, _):
        host = Host(url, token="token-aaaaaaaa")
        kept = host.task("tasks/get", task1)["result"]
        assert kept["status"] == "completed" and kept["result"]["content"][0]["text"] == "appended job-1"
        lost = host.task("tasks/get", task2)["result"]
        assert lost["status"] == "completed" and lost["result"]["isError"] is True
        observation = lost["result"]["structuredContent"]
        assert observation["code"] == "TASK_OUTCOME_UNKNOWN"
        assert observation["repair_action"] == "verify_state" and observation["side_effect_status"] == "unknown"
        assert host.task("tasks/get", task2)["result"]["status"] == "completed", "the verdict is kept"
    assert lines(ledger) == ["job-1", "job-2"], "each call ran exactly once; nothing was re-run after the restart"


def test_tasks_cancel_cancels_the_upstream_call(tmp_path: Path) -> None:
    events = tmp_path / "events.txt"
    upstream = [str(PROBE), "--events", str(events)]
    policy = {
        "version": 1,
        "tools": {"slow": {"timeouts": {"attempt_s": 600, "total_s": 600}, "task": {"mode": "always"}}},
    }
    with proxy(tmp_path, "cancel", upstream, policy) as (url, _):
        host = Host(url)
        task = host.call("slow", {"seconds": 300, "steps": 1})["result"]["taskId"]
        wait_until(lambda: any(e.startswith("slow_started") for e in lines(events)), LIMIT_S, "the upstream call")
        ack = host.task("tasks/cancel", task)["result"]
        assert ack["resultType"] == "complete" and not {"taskId", "status", "result"} & set(ack)
        wait_until(lambda: any(e.startswith("cancelled") for e in lines(events)), LIMIT_S, "the upstream's cancel")
        assert host.task("tasks/get", task)["result"]["status"] == "cancelled"
        again = host.task("tasks/cancel", task)["result"]
        assert again["resultType"] == "complete", "cancelling a finished task is acknowledged the same way"
        base = url.removesuffix("/mcp")
        with urllib.request.urlopen(f"{base}/status.json", timeout=LIMIT_S) as response:
            tasks = json.load(response)["tasks"]
        assert tasks["running"] == [] and tasks["counts"]["cancelled"] == 1
        assert [(t["task"], t["tool"], t["status"]) for t in tasks["finished"]] == [(task[:8], "slow", "cancelled")]
        with urllib.request.urlopen(f"{base}/metrics", timeout=LIMIT_S) as response:
            metrics = response.read().decode()
        assert 'resilient_mcp_tasks_total{event="cancelled"} 1.0' in metrics
        assert "resilient_mcp_tasks_running 0.0" in metrics
        text = run_cli("status", "--url", base).stdout
        assert f"{task[:8]}  slow  cancelled" in text and "Tasks (0 running" in text
    assert not any(e.startswith("slow_done") for e in lines(events))


def test_a_host_without_the_extension_gets_the_plain_result_and_no_task_methods(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.txt"
    gate = tmp_path / "gate"
    gate.touch()
    policy = ledger_policy(after_s=0.001)
    policy["tools"]["append"]["task"]["mode"] = "always"
    with proxy(tmp_path, "plain", [str(LEDGER), "--ledger", str(ledger)], policy) as (url, _):
        plain = Host(url, capabilities={})
        result = plain.call("append", {"entry": "sync", "gate": str(gate)})["result"]
        assert result["resultType"] == "complete" and result["content"][0]["text"] == "appended sync"
        assert plain.task("tasks/get", "anything")["error"]["code"] == -32021
        opted = Host(url)
        created = opted.call("append", {"entry": "task", "gate": str(gate)})["result"]
        assert created["resultType"] == "task"
        assert opted.request("tasks/result", {"taskId": created["taskId"]})["error"]["code"] == -32601
        assert opted.request("tasks/list", {})["error"]["code"] == -32601
        assert opted.task("tasks/get", "no-such-task")["error"]["code"] == -32602
        mismatch = opted.request("tasks/get", {"taskId": created["taskId"]}, name="another-id")
        assert mismatch["error"]["code"] == -32020
        assert opted.until(created["taskId"], "completed")["result"]["content"][0]["text"] == "appended task"


@needs_redis()
def test_any_replica_on_redis_answers_for_a_task_another_runs(tmp_path: Path, redis: RedisServer) -> None:
    ledger = tmp_path / "ledger.txt"
    gate = tmp_path / "gate"
    upstream = [str(LEDGER), "--ledger", str(ledger)]
    state = {"state": {"backend": "redis", "url": redis.url}}
    with (
        proxy(tmp_path, "replica-a", upstream, ledger_policy(), **state) as (url_a, _),
        proxy(tmp_path, "replica-b", upstream, ledger_policy(), **state) as (url_b, _),
    ):
        task = Host(url_a).call("append", {"entry": "shared", "gate": str(gate)})["result"]["taskId"]
        seen = Host(url_b).task("tasks/get", task)["result"]
        assert seen["taskId"] == task and seen["status"] == "working"
        gate.touch()
        done = Host(url_b).until(task, "completed")
        assert done["result"]["content"][0]["text"] == "appended shared"
    assert lines(ledger) == ["shared"]


def test_a_task_asks_its_host_through_tasks_get_and_resumes_on_tasks_update(tmp_path: Path) -> None:
    from tests.fixtures import conformance_server

    fixture = Path(conformance_server.__file__)
    policy = {"version": 1, "tools": {"multi_input": {"task": {"mode": "always"}}}}
    with proxy(tmp_path, "input", [str(fixture), "--stdio"], policy) as (url, _):
        host = Host(url, capabilities={"elicitation": {}, **WITH_TASKS})
        task = host.call("multi_input", {})["result"]["taskId"]

        def two_questions() -> dict[str, Any] | None:
            result: dict[str, Any] = host.task("tasks/get", task)["result"]
            return (
                result if result["status"] == "input_required" and len(result.get("inputRequests", {})) == 2 else None
            )

        asked = wait_until(two_questions, LIMIT_S, "both questions on tasks/get")
        first, second = sorted(asked["inputRequests"])
        assert {q["method"] for q in asked["inputRequests"].values()} == {"elicitation/create"}
        reply = {"action": "accept", "content": {"name": "Ada", "confirm": True}}
        ack = host.task("tasks/update", task, inputResponses={first: reply})["result"]
        assert ack["resultType"] == "complete" and "status" not in ack
        pending = host.task("tasks/get", task)["result"]
        assert pending["status"] == "input_required" and list(pending["inputRequests"]) == [second]
        host.task("tasks/update", task, inputResponses={second: reply})
        done = host.until(task, "completed")
        assert done["result"]["content"][0]["text"] == "Ada: confirm=True"
