"""The raw tools/call lane of the streamable HTTP host (``resilient_mcp.host.httpcall``), through real proxies.

A plain tools/call POSTed on an initialized session takes the lane (it logs ``tool_call_raw_http`` at debug level);
the same requests sent to a proxy with the lanes off (``RESILIENT_MCP_RAW_TOOL_CALLS=off``) get the same HTTP
answers (status, headers, the SSE event's JSON); every error path stays the SDK's (unknown and ended sessions,
another principal's session, a wrong Accept, a protocol version header of another era); concurrent sessions keep
their own guards; a call the client cancels, or whose client disconnects, ends as on the SDK's path.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from resilient_mcp.host.toolcall import RAW_SWITCH
from tests.helpers import (
    child_env,
    free_port,
    logged_request_ids,
    probe_argv,
    proxy_argv,
    read_events,
    running,
    wait_healthy,
    wait_until,
    write_yaml,
)

CALL_S = 30.0
ACCEPT = "application/json, text/event-stream"
CANCELLED = {"code": -32800, "message": "Request cancelled"}
VOLATILE_HEADERS = {"date", "server", "transfer-encoding", "content-length"}


CONFORMANCE_SERVER = Path(__file__).resolve().parents[1] / "fixtures" / "conformance_server.py"


@contextmanager
def _proxy(
    tmp_path: Path,
    name: str,
    *,
    raw: bool,
    policy: str | None = None,
    tokens: list[str] | None = None,
    upstream: list[str] | None = None,
) -> Iterator[tuple[str, Path, Path]]:
    """``serve --http`` on a free loopback port in front of the probe server (or ``upstream``): (its MCP URL,
    stderr, probe events)."""
    err, events = tmp_path / f"{name}.stderr", tmp_path / f"{name}.events"
    probe = upstream or probe_argv(events=events)
    config: dict[str, Any] = {
        "upstreams": {"probe": {"command": probe[0], "args": probe[1:]}},
        "logging": {"level": "debug", "format": "json"},
    }
    if tokens:
        config["listen"] = {"auth_tokens": tokens}
    if policy is not None:
        (tmp_path / f"{name}-policy.yaml").write_text(policy)
        config["policies"] = [str(tmp_path / f"{name}-policy.yaml")]
    path = write_yaml(tmp_path / f"{name}.yaml", config)
    port = free_port()
    argv = proxy_argv("serve", "--config", str(path), "--http", f"127.0.0.1:{port}")
    env = child_env(state_home=tmp_path / f"{name}-state", **{RAW_SWITCH: "on" if raw else "off"})
    with running(argv, err, env=env) as process:
        base = f"http://127.0.0.1:{port}"
        wait_healthy(base, process, err)
        yield f"{base}/mcp", err, events


class Session:
    """One MCP session over raw HTTP requests (the bytes of each answer are the test's to read)."""

    def __init__(self, client: httpx.Client, url: str, token: str | None = None, capabilities: Any = None) -> None:
        self.client, self.url = client, url
        self.headers = {"accept": ACCEPT, "content-type": "application/json"}
        if token is not None:
            self.headers["authorization"] = f"Bearer {token}"
        hello = {
            "protocolVersion": "2025-11-25",
            "capabilities": capabilities or {},
            "clientInfo": {"name": "t", "version": "0"},
        }
        opened = self.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello})
        assert opened.status_code == 200 and "result" in events(opened)[-1], opened.text
        self.headers["mcp-session-id"] = opened.headers["mcp-session-id"]
        self.headers["mcp-protocol-version"] = "2025-11-25"
        assert self.post({"jsonrpc": "2.0", "method": "notifications/initialized"}).status_code == 202
        assert "result" in events(self.post({"jsonrpc": "2.0", "id": "ping", "method": "ping"}))[-1]

    def post(self, message: Any, **headers: str) -> httpx.Response:
        return self.client.post(self.url, content=json.dumps(message), headers={**self.headers, **headers})

    def call(self, rid: Any, name: str, arguments: Any = None) -> httpx.Response:
        params: dict[str, Any] = {"name": name, "arguments": arguments}
        return self.post({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params})


def events(response: httpx.Response) -> list[dict[str, Any]]:
    """The JSON-RPC messages of an SSE (or JSON) answer."""
    if response.headers.get("content-type", "").startswith("application/json"):
        return [response.json()]
    return [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]


def lane_ids(err: Path) -> list[Any]:
    """The request ids the lane ran (its ``tool_call_raw_http`` debug lines)."""
    return logged_request_ids(err, "tool_call_raw_http")


def shape(response: httpx.Response) -> dict[str, Any]:
    """What a client reads of an answer: status, headers (but the per-response ones), the messages."""
    headers = {k: v for k, v in response.headers.items() if k not in VOLATILE_HEADERS and k != "mcp-session-id"}
    return {"status": response.status_code, "headers": headers, "messages": events(response)}


POLICY = "version: 1\ndeny: ['pid']\n"
CALLS: list[tuple[Any, str, Any]] = [
    (11, "echo", {"text": "plain"}),  # success
    ("s-12", "echo", {"text": "ünïcode ✓"}),  # a string id, non-ASCII text
    (13, "echo", {"text": 5}),  # a validation error (the schema wants a string)
    (14, "pid", {}),  # a policy denial
    (15, "nope", None),  # an unknown tool
    (16, "counter_add", {"n": 2}),  # a write
    (17, "crash", {"code": 3}),  # the upstream dies mid-call: may have executed
]


def _answers(tmp_path: Path, *, raw: bool) -> tuple[list[dict[str, Any]], list[Any]]:
    with _proxy(tmp_path, "lane" if raw else "sdk", raw=raw, policy=POLICY) as (url, err, _):
        with httpx.Client(timeout=CALL_S) as client:
            session = Session(client, url)
            answers = [shape(session.call(rid, name, args)) for rid, name, args in CALLS]
        return answers, lane_ids(err)


def _stable(value: Any) -> Any:
    """``value`` without the durations an observation reports (``elapsed_ms`` of each attempt differs by run)."""
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items() if k != "elapsed_ms"}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def test_calls_on_the_lane_answer_as_the_sdk_path_does(tmp_path: Path) -> None:
    lane, lane_ran = _answers(tmp_path, raw=True)
    sdk, sdk_ran = _answers(tmp_path, raw=False)
    assert lane_ran == [rid for rid, _, _ in CALLS], "every call took the lane"
    assert sdk_ran == [], "with the lanes off, the SDK's path"
    for (rid, _, _), a, b in zip(CALLS, lane, sdk, strict=True):
        assert _stable(a) == _stable(b), f"call {rid}: lane {a} != SDK {b}"
    by_id = {a["messages"][-1]["id"]: a["messages"][-1] for a in lane}
    assert by_id[11]["result"]["content"] == [{"type": "text", "text": "plain"}]
    assert by_id[13]["result"]["isError"] is True
    assert by_id[14]["result"]["isError"] is True
    assert lane[0]["headers"]["content-type"] == "text/event-stream"


def test_error_paths_stay_the_sdks(tmp_path: Path) -> None:
    with _proxy(tmp_path, "errors", raw=True) as (url, err, _), httpx.Client(timeout=CALL_S) as client:
        session = Session(client, url)
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo", "arguments": {}}}
        unknown = session.post(call, **{"mcp-session-id": "f" * 32})
        assert unknown.status_code == 404, unknown.text
        wrong_accept = session.post(call, accept="application/json")
        assert wrong_accept.status_code == 406, wrong_accept.text
        modern = session.post(call, **{"mcp-protocol-version": "2026-07-28"})
        assert modern.status_code != 200 or "error" in events(modern)[-1], modern.text
        bad_type = session.post(call, **{"content-type": "text/plain"})
        assert bad_type.status_code == 400, bad_type.text
        assert lane_ids(err) == [], "none of them took the lane"
        ended = client.delete(url, headers=session.headers)
        assert ended.status_code == 200, ended.text
        after = session.call(2, "echo", {"text": "x"})
        assert after.status_code == 404, after.text
        assert lane_ids(err) == []


def test_a_session_opened_with_another_token_is_not_found(tmp_path: Path) -> None:
    with (
        _proxy(tmp_path, "tokens", raw=True, tokens=["alpha-token", "beta-token"]) as (url, err, _),
        httpx.Client(timeout=CALL_S) as client,
    ):
        alpha = Session(client, url, token="alpha-token")
        ok = alpha.call(1, "echo", {"text": "mine"})
        assert events(ok)[-1]["result"]["content"][0]["text"] == "mine"
        stolen = alpha.post(
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "x"}}},
            authorization="Bearer beta-token",
        )
        assert stolen.status_code == 404, stolen.text
        assert lane_ids(err) == [1], "the other principal's request kept the SDK's path"


def test_concurrent_sessions_keep_their_own_guards(tmp_path: Path) -> None:
    policy = "version: 1\nsession: {max_tool_calls: 3}\n"
    with _proxy(tmp_path, "budgets", raw=True, policy=policy) as (url, err, _), httpx.Client(timeout=CALL_S) as client:
        first, second = Session(client, url), Session(client, url)
        for i in range(3):
            assert "result" in events(first.call(i, "echo", {"text": f"a{i}"}))[-1]
        over = events(first.call(3, "echo", {"text": "a3"}))[-1]
        assert over["result"]["isError"] is True, over  # the first session's budget is spent
        fresh = events(second.call(0, "echo", {"text": "b0"}))[-1]
        assert fresh["result"]["content"] == [{"type": "text", "text": "b0"}], "the second session has its own"
        assert len(lane_ids(err)) == 5


def _started(probe_events: Path, n: int = 1) -> bool:
    return sum(e.startswith("slow_started") for e in read_events(probe_events)) >= n


@contextmanager
def _slow_call(session: Session, probe_events: Path, err: Path) -> Iterator[dict[str, httpx.Response]]:
    """The probe's ``slow`` tool called (id 7) on a thread of its own and begun upstream; after the block, its answer
    under ``"r"``."""
    answer: dict[str, httpx.Response] = {}
    slow = threading.Thread(target=lambda: answer.update(r=session.call(7, "slow", {"seconds": 60})))
    slow.start()
    try:
        wait_until(lambda: _started(probe_events), CALL_S, "the slow call upstream", stderr=err)
        yield answer
    finally:
        slow.join(CALL_S)


@pytest.mark.parametrize("raw", [True, False], ids=["lane", "sdk-path"])
def test_a_call_the_client_cancels_is_answered_request_cancelled_as_on_the_sdk_path(tmp_path: Path, raw: bool) -> None:
    with _proxy(tmp_path, "cancel", raw=raw) as (url, err, probe_events), httpx.Client(timeout=CALL_S) as client:
        session = Session(client, url)
        with _slow_call(session, probe_events, err) as answer:
            cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}
            assert session.post(cancel).status_code == 202
        assert events(answer["r"]) == [{"jsonrpc": "2.0", "id": 7, "error": CANCELLED}], answer["r"].text
        cancelled = lambda: any(e.startswith("cancelled") for e in read_events(probe_events))  # noqa: E731
        wait_until(cancelled, CALL_S, "the upstream's cancel", stderr=err)
        assert lane_ids(err) == ([7] if raw else [])


def test_a_client_that_disconnects_does_not_cancel_its_call_and_the_session_goes_on(tmp_path: Path) -> None:
    with _proxy(tmp_path, "gone", raw=True) as (url, err, probe_events), httpx.Client(timeout=CALL_S) as client:
        session = Session(client, url)
        body = json.dumps(
            {"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "slow", "arguments": {"seconds": 1}}}
        ).encode()
        port = int(url.split(":")[2].split("/")[0])
        head = "".join(f"{k}: {v}\r\n" for k, v in session.headers.items())
        request = f"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n{head}content-length: {len(body)}\r\n\r\n"
        with socket.create_connection(("127.0.0.1", port), timeout=CALL_S) as sock:
            sock.sendall(request.encode() + body)
            wait_until(lambda: _started(probe_events), CALL_S, "the slow call upstream", stderr=err)
        # the client is gone: the call still completes upstream (as on the SDK's path), nothing is cancelled
        done = lambda: any(e.startswith("slow_done") for e in read_events(probe_events))  # noqa: E731
        wait_until(done, CALL_S, "the call to complete upstream", stderr=err)
        assert not any(e.startswith("cancelled") for e in read_events(probe_events))
        after = events(session.call(9, "echo", {"text": "still here"}))[-1]
        assert after["result"]["content"] == [{"type": "text", "text": "still here"}]
        assert lane_ids(err) == [8, 9]


@pytest.mark.parametrize("raw", [True, False], ids=["lane", "sdk-path"])
def test_an_upstreams_log_lines_during_a_call_come_before_its_answer_on_its_stream(tmp_path: Path, raw: bool) -> None:
    upstream = [sys.executable, str(CONFORMANCE_SERVER), "--stdio"]
    name = "logs-lane" if raw else "logs-sdk"
    with _proxy(tmp_path, name, raw=raw, upstream=upstream) as (url, err, _), httpx.Client(timeout=CALL_S) as client:
        session = Session(client, url)
        messages = events(session.call(5, "test_tool_with_logging", {}))
        assert lane_ids(err) == ([5] if raw else [])
    logs = [m["params"]["data"] for m in messages if m.get("method") == "notifications/message"]
    assert logs == ["Tool execution started", "Tool processing data", "Tool execution completed"], messages
    assert messages[-1]["id"] == 5 and "result" in messages[-1], messages


@pytest.mark.parametrize("raw", [True, False], ids=["lane", "sdk-path"])
def test_a_session_ended_during_a_call_cancels_it_and_ends_its_stream_unanswered(tmp_path: Path, raw: bool) -> None:
    name = "ended-lane" if raw else "ended-sdk"
    with _proxy(tmp_path, name, raw=raw) as (url, err, probe_events), httpx.Client(timeout=CALL_S) as client:
        session = Session(client, url)
        with _slow_call(session, probe_events, err) as answer:
            assert client.delete(url, headers=session.headers).status_code == 200
        assert answer["r"].status_code == 200 and events(answer["r"]) == [], answer["r"].text
        cancelled = lambda: any(e.startswith("cancelled") for e in read_events(probe_events))  # noqa: E731
        wait_until(cancelled, CALL_S, "the upstream's cancel", stderr=err)
        assert session.call(8, "echo", {"text": "x"}).status_code == 404
        assert lane_ids(err) == ([7] if raw else [])
