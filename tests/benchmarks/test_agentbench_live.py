"""The live-model track end to end against a scripted fake OpenAI-compatible server on 127.0.0.1.

The fake model answers from a script: its first tool call is JSON written in its text (as small models do), then
native ``tool_calls`` including the host's ``wait`` action, then a final line whose answer is a string where the
truth is an integer. The track must parse all of it, send ``max_tokens``, offer ``list_tools``/``wait``, show the
model the host-visible text and the proxy's instructions, and score the episode as the scripted policies are.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from anyio.abc import SocketStream

from benchmarks.agentbench.live import (
    FINAL_ASK,
    final_of,
    load_episodes,
    plan,
    run_live,
    run_live_episode,
    same_answer,
    text_tool_calls,
)
from benchmarks.agentbench.livereport import section
from benchmarks.agentbench.scenarios import generate
from benchmarks.agentbench.world import PROXY_INSTRUCTIONS

pytestmark = pytest.mark.anyio
SCENARIO = "D1-read_only-unavailable_x1-first"  # get_stock(apple) fails once with "unavailable", then works


def _native(name: str, args: dict[str, Any]) -> dict[str, Any]:
    call = {"id": f"c-{name}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
    return {"role": "assistant", "content": None, "tool_calls": [call]}


SCRIPT: list[dict[str, Any]] = [
    {
        "role": "assistant",
        "content": 'I will check.\n<tool_call>\n{"name": "get_stock", "arguments": {"sku": "apple"}}\n</tool_call>',
    },
    _native("wait", {"seconds": 1}),
    _native("get_stock", {"sku": "apple"}),
    _native("search", {"query": "alice"}),
    _native("list_orders", {}),
    {"role": "assistant", "content": 'All done.\n{"status": "done", "answer": "40"}'},
]


class FakeModel:
    """A minimal HTTP/1.1 server answering POST /v1/chat/completions from ``SCRIPT``; it records every request."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.script = SCRIPT

    async def handle(self, stream: SocketStream) -> None:
        buf = b""
        async with stream:
            while True:
                while b"\r\n\r\n" not in buf:
                    try:
                        buf += await stream.receive()
                    except (anyio.EndOfStream, anyio.BrokenResourceError):
                        return
                head, _, buf = buf.partition(b"\r\n\r\n")
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length")
                    ),
                    0,
                )
                while len(buf) < length:
                    buf += await stream.receive()
                body, buf = json.loads(buf[:length]), buf[length:]
                self.requests.append(body)
                turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
                message = self.script[min(turn, len(self.script) - 1)]
                out = json.dumps(
                    {"choices": [{"message": message}], "usage": {"prompt_tokens": 10, "completion_tokens": 5}}
                ).encode()
                await stream.send(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                    + str(len(out)).encode()
                    + b"\r\n\r\n"
                    + out
                )


@pytest.fixture
async def fake_model() -> AsyncIterator[tuple[FakeModel, str]]:
    model = FakeModel()
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    async with anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, model.handle)
        yield model, f"http://127.0.0.1:{port}/v1"
        tg.cancel_scope.cancel()


@pytest.mark.parametrize("mode", ["M0", "M3"])
async def test_a_scripted_model_finishes_the_task_through_the_live_track(
    fake_model: tuple[FakeModel, str], mode: str
) -> None:
    model, url = fake_model
    scenario = {s.id: s for s in generate()}[SCENARIO]
    with anyio.fail_after(60):
        async with httpx2.AsyncClient(base_url=url, timeout=30) as http:
            episode = await run_live_episode(http, "fake", scenario, mode, 7, timeout_s=45)
    assert episode["end"] == "finish" and episode["status"] == "done"
    assert episode["score"]["success"] is True, episode["events"]
    calls = [e for e in episode["events"] if e["kind"] == "call"]
    assert calls[0]["tool"] == "get_stock" and calls[0]["args"] == {"sku": "apple"}  # parsed from the text
    assert any(e["kind"] == "wait" for e in episode["events"])
    first = model.requests[0]
    assert first["max_tokens"] > 0
    offered = {t["function"]["name"] for t in first["tools"]}
    assert {"get_stock", "list_tools", "wait"} <= offered
    prompt = first["messages"][1]["content"]
    assert "get_stock" not in prompt and "apple" in prompt  # the goal in words, not the calls
    tool_texts = [m["content"] for m in model.requests[-1]["messages"] if m["role"] == "tool"]
    if mode == "M0":
        assert "unavailable" in tool_texts[0]  # the host-visible text of the failed call
    elif PROXY_INSTRUCTIONS:
        assert PROXY_INSTRUCTIONS[:40] in first["messages"][0]["content"]


def test_tool_calls_written_as_json_text_are_read_leniently() -> None:
    names = {"get_stock", "create_order"}
    assert text_tool_calls('{"name": "get_stock", "arguments": {"sku": "apple"}}', names)[0]["function"] == {
        "name": "get_stock",
        "arguments": '{"sku": "apple"}',
    }
    assert text_tool_calls('call: {"tool": "create_order", "args": {"qty": 2}}', names)[0]["function"]["name"] == (
        "create_order"
    )
    assert text_tool_calls('{"name": "rm_rf", "arguments": {}}', names) == []


def test_answers_are_compared_type_tolerantly_and_the_final_status_is_read_from_text() -> None:
    assert same_answer("40", 40) and same_answer(" 40 units", 40) and not same_answer("41", 40)
    assert same_answer("order_id,customer", "order_id,customer") and not same_answer(None, 0)
    assert final_of('ok\n{"status": "asked_user", "answer": null}') == ("asked_user", None)
    assert final_of("status: aborted")[0] == "aborted"


async def test_a_run_is_journaled_resumed_without_rerunning_and_reported(
    fake_model: tuple[FakeModel, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, url = fake_model
    monkeypatch.setenv("RESILIENT_MCP_LLM_BASE_URL", url)
    monkeypatch.setenv("RESILIENT_MCP_LLM_MODEL", "fake")
    scenario = {s.id: s for s in generate()}[SCENARIO]
    journal = tmp_path / "live-episodes.jsonl"
    assert [(s.id, m, k) for s, m, k in plan(("M0", "M3"), [scenario], 2, 7)] == [
        (SCENARIO, "M0", 7),
        (SCENARIO, "M3", 7),
        (SCENARIO, "M0", 8),
        (SCENARIO, "M3", 8),
    ]  # whole samples first; within one, a mode's episodes run together and share a prompt prefix
    with anyio.fail_after(120):
        first = await run_live(("M0",), [scenario], 2, 7, 45, journal)
        journal.write_text(journal.read_text() + '{"torn', encoding="utf-8")  # a run killed mid-write
        asked = len(model.requests)
        both = await run_live(("M0", "M3"), [scenario], 2, 7, 45, journal)
    assert len(first) == 2 and len(both) == 4
    assert {(e["mode"], e["seed"]) for e in load_episodes(journal)} == {("M0", 7), ("M0", 8), ("M3", 7), ("M3", 8)}
    per_episode = asked // 2
    assert len(model.requests) - asked == 2 * per_episode  # only the two M3 episodes were run again
    text = section(tmp_path)
    assert "| M0 direct | 100.0% [100.0%-100.0%] | 100.0%" in text and "| M3 proxy, L2 | 100.0%" in text
    assert f"| {SCENARIO} | ✓✓ | ✓✓ |" in text
    assert "M3 - M0, strict: +0.0 pts" in text
    assert "(0 cells: direct strict success, proxy failure)" in text


WRITE = {"customer": "carol", "sku": "apple", "qty": 2, "client_ref": "R1"}


async def test_a_server_dying_mid_episode_and_a_reply_without_the_answer_line_are_handled(
    fake_model: tuple[FakeModel, str],
) -> None:
    """C2 direct: the server commits the order and dies; the host reconnects for the verifying read. The model then
    stops without the JSON line, so the track asks for it once, with tools switched off."""
    model, url = fake_model
    model.script = [
        _native("create_order", WRITE),
        _native("get_order", {"client_ref": "R1"}),
        _native("get_stock", {"sku": "pear"}),
        _native("search", {"query": "alice"}),
        {"role": "assistant", "content": "The order is placed."},
        {"role": "assistant", "content": '{"status": "done", "answer": null}'},
    ]
    scenario = {s.id: s for s in generate()}["C2-write_unsafe-commit-first"]
    with anyio.fail_after(60):
        async with httpx2.AsyncClient(base_url=url, timeout=30) as http:
            episode = await run_live_episode(http, "fake", scenario, "M0", 7, timeout_s=45)
    calls = [e for e in episode["events"] if e["kind"] == "call"]
    assert [(c["tool"], c["ok"]) for c in calls] == [
        ("create_order", False),  # committed, then the connection was lost
        ("get_order", True),  # a new connection to the restarted server
        ("get_stock", True),
        ("search", True),
    ]
    assert calls[1]["purpose"] == "verify"
    asked = model.requests[-1]
    assert asked["tool_choice"] == "none" and asked["messages"][-1] == {"role": "user", "content": FINAL_ASK}
    assert (episode["end"], episode["status"]) == ("finish", "done")
    assert episode["score"]["success"] is True and episode["score"]["duplicates"] == 0


async def test_the_time_limit_ends_an_episode_between_requests(fake_model: tuple[FakeModel, str]) -> None:
    model, url = fake_model
    model.script = [_native("list_orders", {})]  # never finishes on its own
    scenario = {s.id: s for s in generate()}[SCENARIO]
    with anyio.fail_after(60):
        async with httpx2.AsyncClient(base_url=url, timeout=30) as http:
            episode = await run_live_episode(http, "fake", scenario, "M0", 7, timeout_s=0)
    assert episode["end"] == "timeout" and episode["events"] == [] and model.requests == []
