"""Write safety through real processes: the proxy never loses a write the host meant, and never sends a blind
duplicate of a write whose outcome is unknown.

Every test runs ``resilient-mcp wrap`` (or ``serve --http``) as a subprocess in front of a real stdio server: the
reference filesystem and memory servers (npm), the git server (PyPI ``mcp-server-git``), and
``tests/fixtures/ledger_server.py``, whose ledger file counts the writes that reached it whatever the proxy said.
Defaults throughout (no policy file) unless a test says otherwise.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from resilient_mcp.call.meta import REPLAY_META
from resilient_mcp.state.sqlite import recent_audit
from tests.harness import observation, text
from tests.helpers import (
    FIXTURES,
    REPO,
    VENV_BIN,
    await_until,
    child_env,
    free_port,
    http_get_status,
    node_binary,
    proxy_argv,
    running,
    stderr_tail,
    wait_until,
    write_yaml,
)

pytestmark = pytest.mark.anyio

LIMIT_S = 120.0
"""Bound on one test (process start-up included); never reached when things work."""
NPM = REPO / ".tools/npm/node_modules/@modelcontextprotocol"
FILESYSTEM = NPM / "server-filesystem/dist/index.js"
MEMORY = NPM / "server-memory/dist/index.js"
GIT = VENV_BIN / "mcp-server-git"
LEDGER = FIXTURES / "ledger_server.py"

_NODE = node_binary()
needs_filesystem = pytest.mark.skipif(
    _NODE is None or not FILESYSTEM.exists(), reason="node or server-filesystem missing: scripts/install-peers.sh"
)
needs_memory = pytest.mark.skipif(
    _NODE is None or not MEMORY.exists(), reason="node or server-memory missing: scripts/install-peers.sh"
)
needs_git = pytest.mark.skipif(not GIT.exists(), reason="mcp-server-git missing: pip install -e '.[dev]'")


def ledger_argv(ledger: Path) -> list[str]:
    return [sys.executable, str(LEDGER), "--ledger", str(ledger)]


def lines(ledger: Path) -> list[str]:
    return ledger.read_text(encoding="utf-8").splitlines() if ledger.exists() else []


@asynccontextmanager
async def wrapped(
    argv: list[str],
    tmp: Path,
    *,
    state: Path,
    host: str = "claude-ai",
    label: str = "proxy",
    wrap: tuple[str, ...] = (),
) -> AsyncIterator[Client]:
    """A legacy-mode client named ``host`` over stdio to ``resilient-mcp wrap --state-dir STATE -- argv``."""
    args = proxy_argv("wrap", "--state-dir", str(state), *wrap, "--", *argv)
    params = StdioServerParameters(command=args[0], args=args[1:], env=child_env(), cwd=REPO)
    info = types.Implementation(name=host, version="1.0")
    with (tmp / f"{label}.stderr").open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode="legacy", cache=None, client_info=info) as c:
            yield c


def replayed(result: types.CallToolResult) -> bool:
    return REPLAY_META in (result.meta or {})


# --- delivered writes run again: the reference servers ---------------------------------------------------------------


@needs_filesystem
async def test_filesystem_v1_then_v2_then_v1_leaves_v1(tmp_path: Path) -> None:
    root = tmp_path / "files"
    root.mkdir()
    notes = root / "notes.txt"
    assert _NODE is not None
    with anyio.fail_after(LIMIT_S):
        async with wrapped([_NODE, str(FILESYSTEM), str(root)], tmp_path, state=tmp_path / "state") as client:
            results = [
                await client.call_tool("write_file", {"path": str(notes), "content": content})
                for content in ("v1", "v2", "v1")
            ]
            read = await client.call_tool("read_text_file", {"path": str(notes)})
    assert [r.is_error for r in results] == [False, False, False]
    assert not any(replayed(r) for r in results), "each write was sent"
    assert notes.read_text(encoding="utf-8") == "v1"
    assert "v1" in text(read)


@needs_memory
async def test_memory_create_delete_create_leaves_the_entity_present(tmp_path: Path) -> None:
    memory_file = tmp_path / "memory.jsonl"
    entity = {"entities": [{"name": "x", "entityType": "thing", "observations": ["made by the test"]}]}
    assert _NODE is not None
    with anyio.fail_after(LIMIT_S):
        async with wrapped(
            [_NODE, str(MEMORY)], tmp_path, state=tmp_path / "state", wrap=("--env", f"MEMORY_FILE_PATH={memory_file}")
        ) as client:
            first = await client.call_tool("create_entities", entity)
            deleted = await client.call_tool("delete_entities", {"entityNames": ["x"]})
            again = await client.call_tool("create_entities", entity)
            graph = await client.call_tool("read_graph", {})
    assert not first.is_error and not deleted.is_error and not again.is_error
    assert not replayed(again), "the second create was sent"
    names = [e["name"] for e in json.loads(text(graph))["entities"]]
    assert names == ["x"]
    stored = [json.loads(line) for line in memory_file.read_text(encoding="utf-8").splitlines()]
    assert [e["name"] for e in stored if e.get("type") == "entity"] == ["x"]


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True)
    return done.stdout


@needs_git
async def test_git_add_and_commit_with_the_same_message_twice_commits_twice(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "test@example.invalid")
    _git(repo, "config", "user.name", "Test")
    (repo / "seed.txt").write_text("seed\n", encoding="utf-8")
    _git(repo, "add", "seed.txt")
    _git(repo, "commit", "-q", "-m", "seed")
    notes = repo / "notes.txt"
    with anyio.fail_after(LIMIT_S):
        async with wrapped([str(GIT), "--repository", str(repo)], tmp_path, state=tmp_path / "state") as client:
            answers: list[types.CallToolResult] = []
            for content in ("one\n", "two\n"):
                notes.write_text(content, encoding="utf-8")
                answers.append(await client.call_tool("git_add", {"repo_path": str(repo), "files": ["notes.txt"]}))
                answers.append(await client.call_tool("git_commit", {"repo_path": str(repo), "message": "update"}))
    assert [a.is_error for a in answers] == [False] * 4
    assert not any(replayed(a) for a in answers)
    assert _git(repo, "log", "--format=%s").split() == ["update", "update", "seed"]
    assert _git(repo, "status", "--porcelain") == "", "the second change was committed"
    assert text(answers[1]) != text(answers[3]), "two commits, two hashes"


# --- identity: processes, servers and state directories --------------------------------------------------------------


async def test_two_proxy_processes_of_one_host_sharing_a_state_directory_never_answer_for_each_other(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"  # one state directory, one host name, both upstreams named "upstream"
    ledger_a, ledger_b, shared = tmp_path / "a.ledger", tmp_path / "b.ledger", tmp_path / "shared.ledger"
    with anyio.fail_after(LIMIT_S):
        async with AsyncExitStack() as stack:
            a = await stack.enter_async_context(wrapped(ledger_argv(ledger_a), tmp_path, state=state, label="a"))
            b = await stack.enter_async_context(wrapped(ledger_argv(ledger_b), tmp_path, state=state, label="b"))
            window1 = await stack.enter_async_context(wrapped(ledger_argv(shared), tmp_path, state=state, label="w1"))
            window2 = await stack.enter_async_context(wrapped(ledger_argv(shared), tmp_path, state=state, label="w2"))
            results = [
                await a.call_tool("append", {"entry": "x"}),
                await b.call_tool("append", {"entry": "x"}),
            ]
            for n in range(10):  # back to back: the first window's records must not hold up the second
                results.append(await window1.call_tool("append", {"entry": f"y{n}"}))
                results.append(await window2.call_tool("append", {"entry": f"y{n}"}))
            failed_in_a = await a.call_tool("reject", {"entry": "z"})
            failed_in_b = await b.call_tool("reject", {"entry": "z"})
    assert not any(r.is_error or replayed(r) for r in results)
    assert lines(ledger_a) == ["x", "attempt z"] and lines(ledger_b) == ["x", "attempt z"]
    assert lines(shared) == [f"y{n}" for n in range(10) for _ in (1, 2)], "two windows: both writes were meant"
    assert failed_in_a.is_error and failed_in_b.is_error
    assert not observation(failed_in_b)["details"].get("short_circuited"), "b's call was sent, not a's failure"


# --- unknown outcomes: blocked until verified, then sent ------------------------------------------------------------


async def test_after_a_host_timeout_the_blind_reissue_is_held_until_the_session_verifies(tmp_path: Path) -> None:
    ledger, gate = tmp_path / "ledger", tmp_path / "gate"
    write = {"entry": "pay invoice 7", "gate": str(gate)}
    with anyio.fail_after(LIMIT_S):
        async with wrapped(ledger_argv(ledger), tmp_path, state=tmp_path / "state") as client:
            await client.call_tool("ping", {"n": 0})  # the upstream is up
            # The answer is late (gate shut) and the host gives up, as its timeout would, once the write reached the
            # upstream (an event, not a race with a timeout): the SDK sends notifications/cancelled either way.
            async with anyio.create_task_group() as tg:
                tg.start_soon(client.call_tool, "append", write)
                await await_until(lambda: lines(ledger), 60, "the write to reach the upstream")
                tg.cancel_scope.cancel()
            assert lines(ledger) == ["pay invoice 7"]
            blind = await client.call_tool("append", write)
            obs = observation(blind)
            assert lines(ledger) == ["pay invoice 7"], "the blind re-issue was not sent"
            assert obs["repair_action"] == "verify_state" and obs["side_effect_status"] == "unknown"
            assert "any read-only tool" in obs["suggestion"] and "re-issue it after" not in obs["suggestion"]
            assert "blocked_until" in obs["details"] and obs["details"]["unblocked_by"] == "verify_call"

            checked = await client.call_tool("read_ledger", {})
            assert "pay invoice 7" in text(checked)
            gate.touch()
            reissued = await client.call_tool("append", write)
    assert not reissued.is_error and not replayed(reissued)
    assert "read-only call" in text(reissued), "the note says why it was sent"
    assert lines(ledger) == ["pay invoice 7", "pay invoice 7"], "sent once more, only after the session verified"


async def test_an_unknown_outcome_survives_a_restart_of_the_proxy(tmp_path: Path) -> None:
    ledger, gate, state = tmp_path / "ledger", tmp_path / "gate", tmp_path / "state"
    write = {"entry": "ship order 9", "gate": str(gate)}
    with anyio.fail_after(LIMIT_S):
        # The host gives up on the write once it reached the upstream (an event, not a race with a timeout).
        async with (
            wrapped(ledger_argv(ledger), tmp_path, state=state, label="first") as client,
            anyio.create_task_group() as tg,
        ):
            tg.start_soon(client.call_tool, "append", write)
            await await_until(lambda: lines(ledger), 60, "the write to reach the upstream")
            tg.cancel_scope.cancel()
        gate.touch()
        async with wrapped(ledger_argv(ledger), tmp_path, state=state, label="second") as client:
            blind = await client.call_tool("append", write)
            await client.call_tool("read_ledger", {})
            after_check = await client.call_tool("append", write)
    assert observation(blind)["repair_action"] == "verify_state"
    assert not after_check.is_error
    assert lines(ledger) == ["ship order 9", "ship order 9"]


async def test_concurrent_identical_writes_of_one_session_execute_once_and_both_are_answered(tmp_path: Path) -> None:
    ledger, gate = tmp_path / "ledger", tmp_path / "gate"
    write = {"entry": "create user ada", "gate": str(gate)}
    answers: list[types.CallToolResult] = []
    with anyio.fail_after(LIMIT_S):
        async with wrapped(ledger_argv(ledger), tmp_path, state=tmp_path / "state") as client:

            async def send() -> None:
                answers.append(await client.call_tool("append", write))

            async with anyio.create_task_group() as tg:
                tg.start_soon(send)
                await await_until(lambda: lines(ledger) or None, 30, "the first write upstream")
                tg.start_soon(send)
                await await_until(
                    lambda: "idempotency_joined" in (tmp_path / "proxy.stderr").read_text(), 30, "the join"
                )
                gate.touch()
    assert lines(ledger) == ["create user ada"]
    assert [a.is_error for a in answers] == [False, False]
    assert sorted(replayed(a) for a in answers) == [False, True]
    assert all("appended create user ada" in text(a) for a in answers)


# --- budgets: a long-lived host keeps being served -------------------------------------------------------------------


async def test_a_long_lived_session_is_still_served_after_1050_calls_and_120_failures(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    with anyio.fail_after(600):
        async with wrapped(ledger_argv(ledger), tmp_path, state=tmp_path / "state") as client:
            failures = 0
            for n in range(1050):
                if n % 8 == 0 and failures < 120:
                    result = await client.call_tool("reject", {"entry": f"r{n}"})
                    assert result.is_error
                    failures += 1
                else:
                    result = await client.call_tool("ping", {"n": n})
                    assert not result.is_error, text(result)
            last = await client.call_tool("ping", {"n": 1050})
            late_failure = await client.call_tool("reject", {"entry": "late"})
    assert failures == 120
    assert text(last) == "pong 1050"
    assert observation(late_failure)["fault_type"] != "budget_exhausted"
    assert lines(ledger)[-1] == "attempt late", "the 122nd failing write still reached the server"


# --- HTTP: sessions are connections the server issued, never ids a client chose --------------------------------------


def _serve_config(tmp_path: Path, ledger: Path, port: int, **listen: Any) -> Path:
    return write_yaml(
        tmp_path / "proxy.yaml",
        {
            "upstreams": {"ledger": {"command": sys.executable, "args": [str(LEDGER), "--ledger", str(ledger)]}},
            "state_dir": str(tmp_path / "state"),
            "listen": {"http": f"127.0.0.1:{port}", **listen},
        },
    )


def _post(url: str, body: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
    """One JSON-RPC request; the response whether sent as JSON or as one SSE event."""
    response = httpx2.post(
        url,
        json=body,
        headers={"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-11-25", **headers},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
        return dict(json.loads(data[-1]))
    return dict(response.json())


async def test_stateless_http_ignores_a_forged_session_id(tmp_path: Path) -> None:
    ledger, port = tmp_path / "ledger", free_port()
    config = _serve_config(tmp_path, ledger, port, stateless=True)
    url = f"http://127.0.0.1:{port}/mcp"
    with running(proxy_argv("serve", "--config", str(config)), tmp_path / "proxy.stderr"):
        wait_until(lambda: http_get_status(f"http://127.0.0.1:{port}/healthz") == 200, 60, "the proxy listening")
        forged = {"mcp-session-id": "victim-session"}
        call = {"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "reject", "arguments": {"entry": "z"}}}
        attacker = _post(url, {**call, "id": 1}, forged)
        victim = _post(url, {**call, "id": 2}, forged)
    assert attacker["result"]["isError"] and victim["result"]["isError"]
    victim_obs = victim["result"].get("structuredContent", {})
    assert not victim_obs.get("details", {}).get("short_circuited")
    assert lines(ledger) == ["attempt z", "attempt z"], "the victim's call was sent: no session was shared"
    sessions = {row["session"] for row in recent_audit(tmp_path / "state", limit=10)}
    assert len(sessions) == 2 and "victim-session" not in sessions, stderr_tail(tmp_path / "proxy.stderr")


async def test_two_2026_era_clients_on_one_http_connection_are_two_sessions(tmp_path: Path) -> None:
    ledger, port = tmp_path / "ledger", free_port()
    config = _serve_config(tmp_path, ledger, port)
    url = f"http://127.0.0.1:{port}/mcp"
    with running(proxy_argv("serve", "--config", str(config)), tmp_path / "proxy.stderr"):
        wait_until(lambda: http_get_status(f"http://127.0.0.1:{port}/healthz") == 200, 60, "the proxy listening")
        with anyio.fail_after(LIMIT_S):
            async with httpx2.AsyncClient(limits=httpx2.Limits(max_connections=1), timeout=30) as shared:
                results = []
                for name in ("first-agent", "second-agent"):
                    info = types.Implementation(name=name, version="1")
                    transport = streamable_http_client(url, http_client=shared, terminate_on_close=False)
                    async with Client(transport, mode="auto", cache=None, client_info=info) as client:
                        assert client.session.protocol_version == "2026-07-28"
                        results.append(await client.call_tool("reject", {"entry": "z"}))
    assert all(r.is_error for r in results)
    assert not observation(results[1])["details"].get("short_circuited")
    assert lines(ledger) == ["attempt z", "attempt z"]


# --- what check --connect says ---------------------------------------------------------------------------------------


def test_check_connect_says_per_tool_what_an_identical_call_does_and_where_the_effect_came_from(tmp_path: Path) -> None:
    config = write_yaml(
        tmp_path / "proxy.yaml",
        {
            "upstreams": {
                "ledger": {"command": sys.executable, "args": [str(LEDGER), "--ledger", str(tmp_path / "l")]}
            },
            "state_dir": str(tmp_path / "state"),
        },
    )
    policy = write_yaml(
        tmp_path / "policy.yaml", {"upstreams": {"ledger": {"tools": {"ping": {"effect": "read_only"}}}}}
    )
    done = subprocess.run(
        proxy_argv("check", "--config", str(config), "--policy", str(policy), "--connect"),
        capture_output=True,
        text=True,
        timeout=LIMIT_S,
        env=child_env(),
        cwd=REPO,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    tools = {t["name"]: t for t in json.loads(done.stdout)["ledger"]["tools"]}
    assert tools["append"]["effect"] == "write_unsafe"
    assert tools["append"]["effect_from"].startswith("default")
    assert (
        tools["append"]["identical_call"]["summary"] == "join / replay-if-undelivered / block-until-verified, else run"
    )
    assert tools["ping"]["effect_from"] == "policy" and tools["ping"]["identical_call"]["summary"] == "run"
    assert tools["read_ledger"]["identical_call"]["summary"] == "run", "its own readOnlyHint switches replay off"
