"""The hostile-input fuzzer's harness (issue 20): a real proxy process, a real stdio upstream that counts writes
(``tests/fixtures/ledger_server.py``) and a real hostile HTTP upstream (``hostile_http_upstream.py``), driven by
hypothesis-generated cases. Used by ``test_fuzz_hostile.py`` (a short, derandomized run in CI) and by
``benchmarks/fuzz.py`` (a long one).

Cases, over stdio (the host is this process, on the proxy's stdin/stdout) or over streamable HTTP:

- ``garbage``: bytes that are not a JSON-RPC message (not JSON, JSON of another shape, a batch, deep nesting);
- ``request``: a JSON-RPC request with a real or made-up method and arbitrary params;
- ``upstream``: a ``tools/call`` whose upstream answers with an arbitrary HTTP body (not JSON, a JSON-RPC response of
  any shape, another id, a huge or deep document);
- ``sampling`` (stdio): a call that fails with free text, so the proxy's diagnosis asks the host's model
  (``sampling/createMessage``), and the host answers with arbitrary text, an error, or a malformed result;
- ``write``: an explicit-key write of a ledger entry (keys drawn from a few, so keys repeat).

After each case a calm session makes one call that must come back right. Checked: every request with an id is
answered (a response with that id, or an HTTP status below 500); the calm call is answered, its latency kept as a
ratio to the calm latency measured at the start of the same run; the proxy's RSS stays under a bound; no ledger
entry was written twice.
"""

from __future__ import annotations

import itertools
import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from tests.helpers import (
    FIXTURES,
    free_port,
    http_get_status,
    proxy_argv,
    running,
    wait_healthy,
    wait_until,
    write_yaml,
)

HOSTILE = Path(__file__).with_name("hostile_http_upstream.py")
LEDGER = FIXTURES / "ledger_server.py"
ANSWER_S = 60.0
"""The longest a request may go unanswered (a bound on a hang, not a speed target)."""
KEYS = [f"fuzz-key-{i}" for i in range(5)]
METHODS = [
    "tools/call",
    "tools/list",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "ping",
    "logging/setLevel",
    "initialize",
    "notifications/initialized",
    "no/such/method",
    "",
]
TOOLS = ["ledger__ping", "ledger__append", "ledger__read_ledger", "hostile__echo", "hostile__big_json", "nope", ""]

# --- strategies -------------------------------------------------------------------------------------------------

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False),
    st.text(max_size=40),
    st.sampled_from(["```", "```json\n{", " " * 2000, "a/" * 500, "\x00", "\u202e", "{{id}}"]),
)
json_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=5), st.dictionaries(st.text(max_size=12), inner, max_size=5)),
    max_leaves=30,
)


def _deep(n: int) -> str:
    return "[" * n + "]" * n


garbage = st.one_of(
    st.binary(max_size=300).map(lambda b: b.replace(b"\n", b" ")),
    json_values.map(lambda v: json.dumps(v).encode()),
    st.lists(json_values, min_size=1, max_size=3).map(lambda v: json.dumps(v).encode()),
    st.integers(min_value=100, max_value=100_000).map(lambda n: _deep(n).encode()),
    st.sampled_from([b'{"jsonrpc": "2.0"', b'{"jsonrpc": "1.0", "id": 1, "method": "ping"}', b"\xff\xfe{}"]),
)
requests = st.fixed_dictionaries(
    {
        "method": st.sampled_from(METHODS),
        "params": st.one_of(
            json_values,
            st.fixed_dictionaries({"name": st.sampled_from(TOOLS), "arguments": json_values, "_meta": json_values}),
        ),
    }
)
upstream_bodies = st.one_of(
    st.text(max_size=200),
    json_values.map(
        lambda v: json.dumps({"jsonrpc": "2.0", "id": "{{id}}", "result": v}).replace('"{{id}}"', "{{id}}")
    ),
    json_values.map(lambda v: json.dumps({"jsonrpc": "2.0", "id": "{{id}}", "error": v}).replace('"{{id}}"', "{{id}}")),
    json_values.map(lambda v: json.dumps({"jsonrpc": "2.0", "id": 987654, "result": v})),
    json_values.map(
        lambda v: json.dumps({"jsonrpc": "2.0", "id": "{{id}}", "result": {"content": v}}).replace('"{{id}}"', "{{id}}")
    ),
    st.integers(min_value=1000, max_value=200_000).map(
        lambda n: '{"jsonrpc": "2.0", "id": {{id}}, "result": ' + _deep(n) + "}"
    ),
)
content_types = st.sampled_from(
    ["application/json", "text/event-stream", "text/plain", "", "application/json; x=\u00e9"]
)
sampling_answers = st.one_of(
    st.text(max_size=300).map(
        lambda t: {"result": {"role": "assistant", "content": {"type": "text", "text": t}, "model": "fuzz"}}
    ),
    st.sampled_from(["```", '```json\n{"fault_type": ', " " * 2000]).map(
        lambda t: {"result": {"role": "assistant", "content": {"type": "text", "text": t + " " * 1800}, "model": "m"}}
    ),
    json_values.map(lambda v: {"result": v}),
    json_values.map(lambda v: {"error": {"code": -32603, "message": "fuzz", "data": v}}),
)
cases = st.one_of(
    st.tuples(st.just("garbage"), garbage),
    st.tuples(st.just("request"), requests),
    st.tuples(st.just("upstream"), st.tuples(upstream_bodies, content_types)),
    st.tuples(st.just("sampling"), st.tuples(st.integers(0, 10**9), sampling_answers)),
    st.tuples(st.just("write"), st.tuples(st.sampled_from(KEYS), st.integers(1, 3))),
)


# --- the processes ----------------------------------------------------------------------------------------------


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _config(tmp: Path, hostile_port: int, listen: dict[str, Any] | None) -> Path:
    policy = write_yaml(
        tmp / "fuzz-policy.yaml",
        {
            "diagnosis": {"enabled": True, "provider": "sampling", "timeout_s": 5, "cache_ttl_s": 1},
            "tools": {
                "hostile__fail": {"retry": {"enabled": False}},  # one sampling request per case
                # an answer to another id never answers the call: the attempt timeout does, sooner than by default
                "hostile__raw_reply": {"retry": {"enabled": False}, "timeouts": {"attempt_s": 2, "total_s": 3}},
            },
        },
    )
    config: dict[str, Any] = {
        "upstreams": {
            "ledger": {"command": sys.executable, "args": [str(LEDGER), "--ledger", str(tmp / "ledger")]},
            "hostile": {
                "url": f"http://127.0.0.1:{hostile_port}/mcp",
                "protocol": "legacy",
                "max_message_bytes": 1_000_000,
            },
        },
        "policies": [str(policy)],
    }
    if listen:
        config["listen"] = listen
    return write_yaml(tmp / "fuzz.yaml", config)


@dataclass
class Stats:
    cases: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    calm_ms: list[float] = field(default_factory=list)
    calm_by_kind: dict[str, float] = field(default_factory=dict)
    """The slowest calm call sent alongside a case of each kind, in ms."""
    baseline_ms: float = 0.0
    rss_start_kb: int = 0
    rss_peak_kb: int = 0

    def count(self, kind: str, seconds: float = 0.0) -> None:
        self.cases[kind] = self.cases.get(kind, 0) + 1
        self.seconds[kind] = round(self.seconds.get(kind, 0.0) + seconds, 2)

    def calm(self, kind: str, ms: float) -> None:
        self.calm_ms.append(ms)
        self.calm_by_kind[kind] = round(max(self.calm_by_kind.get(kind, 0.0), ms), 1)

    def ratio(self, kind: str) -> float:
        """The slowest calm call alongside a case of ``kind`` over the calm latency at the start."""
        return self.calm_by_kind.get(kind, 0.0) / self.baseline_ms if self.baseline_ms else float("inf")

    def summary(self) -> str:
        ratio = max(self.calm_ms, default=0.0) / self.baseline_ms if self.baseline_ms else float("nan")
        return (
            f"{sum(self.cases.values())} cases {dict(sorted(self.cases.items()))} "
            f"(seconds {dict(sorted(self.seconds.items()))}); calm call p50 at start "
            f"{self.baseline_ms:.1f} ms, slowest alongside a case {max(self.calm_ms, default=0.0):.1f} ms "
            f"{self.calm_by_kind} "
            f"(x{ratio:.1f}); proxy RSS {self.rss_start_kb // 1024} MB at start, peak {self.rss_peak_kb // 1024} MB"
        )


class StdioHost:
    """This process as the proxy's host over stdio: it answers the proxy's sampling requests as the case says."""

    def __init__(self, process: subprocess.Popen[bytes], stderr: Path) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.process, self.stderr = process, stderr
        self._buffer = b""
        self._ids = itertools.count(1)
        self.sampling_answer: dict[str, Any] = {"error": {"code": -32603, "message": "no model"}}

    def write(self, line: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + b"\n")
        self.process.stdin.flush()

    def _receive(self, deadline: float) -> dict[str, Any]:
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or self.process.poll() is not None:
                raise AssertionError(f"no answer within {ANSWER_S} s (proxy exit {self.process.poll()})")
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    raise AssertionError(f"the proxy closed stdout (exit {self.process.poll()})")
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        message: dict[str, Any] = json.loads(line)
        return message

    def send(self, method: str, params: Any) -> int:
        rid = next(self._ids)
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            message["params"] = params
        self.write(json.dumps(message).encode())
        return rid

    def request(self, method: str, params: Any) -> dict[str, Any]:
        """Send a request; answer what the proxy asks meanwhile; return the response to it."""
        return self.wait([self.send(method, params)])[0][0]

    def wait(self, rids: list[int]) -> list[tuple[dict[str, Any], float]]:
        """The responses to ``rids`` and when each came (``time.perf_counter``), answering the proxy meanwhile."""
        deadline = time.monotonic() + ANSWER_S
        got: dict[int, tuple[dict[str, Any], float]] = {}
        while len(got) < len(rids):
            reply = self._receive(deadline)
            if "method" in reply and "id" in reply:  # the proxy asks the host something
                if reply["method"] == "sampling/createMessage":
                    answer = self.sampling_answer
                else:
                    answer = {"error": {"code": -32601, "message": "not supported"}}
                self.write(json.dumps({"jsonrpc": "2.0", "id": reply["id"], **answer}).encode())
            elif reply.get("id") in rids and "method" not in reply:
                got[reply["id"]] = (reply, time.perf_counter())
        return [got[rid] for rid in rids]


@dataclass
class Fuzz:
    tmp: Path
    host: StdioHost
    proxy_pid: int
    stats: Stats = field(default_factory=Stats)
    calm_n: int = 0

    def _calm_request(self) -> tuple[int, int, float]:
        self.calm_n += 1
        return (
            self.calm_n,
            self.host.send("tools/call", {"name": "ledger__ping", "arguments": {"n": self.calm_n}}),
            (time.perf_counter()),
        )

    def _calm_check(self, n: int, reply: dict[str, Any]) -> None:
        text = json.dumps(reply.get("result", {}).get("content", []))
        assert f"pong {n}" in text, reply

    def calm(self) -> float:
        n, rid, t0 = self._calm_request()
        ((reply, t1),) = self.host.wait([rid])
        self._calm_check(n, reply)
        return (t1 - t0) * 1000

    def run(self, case: tuple[str, Any]) -> None:
        """The case, with a calm call sent right after it (both outstanding at once): the calm call's latency is
        how long the case held another call up."""
        kind, data = case
        started = time.perf_counter()
        rid = self._send(kind, data)
        n, calm_rid, t0 = self._calm_request()
        rids = [calm_rid] if rid is None else [rid, calm_rid]
        replies = self.host.wait(rids)
        calm_reply, t1 = replies[-1]
        self._calm_check(n, calm_reply)
        self.stats.count(kind, time.perf_counter() - started)
        self.stats.calm(kind, (t1 - t0) * 1000)
        if rid is not None:
            self._check(kind, replies[0][0])
        self.stats.rss_peak_kb = max(self.stats.rss_peak_kb, rss_kb(self.proxy_pid))

    def _send(self, kind: str, data: Any) -> int | None:
        host = self.host
        if kind == "garbage":
            host.write(data)
            return None
        if kind == "request":
            return host.send(data["method"], data["params"])
        if kind == "upstream":
            body, ctype = data
            return host.send(
                "tools/call", {"name": "hostile__raw_reply", "arguments": {"body": body, "content_type": ctype}}
            )
        if kind == "sampling":
            n, answer = data
            host.sampling_answer = answer
            return host.send("tools/call", {"name": "hostile__fail", "arguments": {"text": f"odd {n}"}})
        key, times = data
        write = {"name": "ledger__append", "arguments": {"entry": key}, "_meta": {"idempotency-key": key}}
        for _ in range(times - 1):  # the same write again: replayed, never run twice
            assert "result" in host.request("tools/call", write)
        return host.send("tools/call", write)

    @staticmethod
    def _check(kind: str, reply: dict[str, Any]) -> None:
        assert "result" in reply or "error" in reply, reply
        if kind == "sampling":
            assert reply.get("result", {}).get("isError") is True, reply
        if kind == "write":
            assert "result" in reply, reply

    def ledger(self) -> list[str]:
        path = self.tmp / "ledger"
        return path.read_text().splitlines() if path.exists() else []


@contextmanager
def stdio_fuzz(tmp: Path) -> Iterator[Fuzz]:
    """The proxy over stdio in front of the ledger and the hostile upstream; the calm baseline measured."""
    port = free_port()
    with ExitStack() as stack:
        hostile = stack.enter_context(
            running([sys.executable, str(HOSTILE), "--port", str(port)], tmp / "hostile.stderr")
        )
        wait_until(lambda: http_get_status(f"http://127.0.0.1:{port}/x") is not None, 30, "hostile up", process=hostile)
        stderr = tmp / "proxy.stderr"
        argv = proxy_argv("serve", "--config", str(_config(tmp, port, None)))
        process = stack.enter_context(running(argv, stderr, stdin=subprocess.PIPE, stdout=subprocess.PIPE))
        host = StdioHost(process, stderr)
        init = host.request(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {"sampling": {}},
                "clientInfo": {"name": "fuzz", "version": "0"},
            },
        )
        assert "result" in init, init
        host.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')
        fuzz = Fuzz(tmp, host, process.pid)
        calm = sorted(fuzz.calm() for _ in range(20))
        fuzz.stats.baseline_ms = calm[len(calm) // 2]
        fuzz.stats.rss_start_kb = fuzz.stats.rss_peak_kb = rss_kb(process.pid)
        yield fuzz


def http_listen_config(tmp: Path, hostile_port: int) -> tuple[Path, int]:
    port = free_port()
    return _config(tmp, hostile_port, {"http": f"127.0.0.1:{port}"}), port


# --- over streamable HTTP ---------------------------------------------------------------------------------------

http_cases = st.one_of(
    st.tuples(st.just("garbage"), garbage),
    st.tuples(st.just("request"), requests),
    st.tuples(st.just("upstream"), st.tuples(upstream_bodies, content_types)),
    st.tuples(st.just("write"), st.tuples(st.sampled_from(KEYS), st.integers(1, 3))),
)


class HttpSession:
    """One MCP session over raw streamable HTTP (its own connection per request, like ``RawSession``)."""

    def __init__(self, port: int) -> None:
        self.port, self.sid, self._ids = port, "", itertools.count(1)

    def post(self, body: bytes) -> tuple[int, str]:
        import http.client

        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "Host": f"127.0.0.1:{self.port}",
        }
        if self.sid:
            headers |= {"Mcp-Session-Id": self.sid, "Mcp-Protocol-Version": "2025-11-25"}
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=ANSWER_S)
        try:
            conn.request("POST", "/mcp", body=body, headers=headers)
            response = conn.getresponse()
            if not self.sid:
                self.sid = response.getheader("mcp-session-id") or ""
            return response.status, response.read().decode(errors="replace")
        finally:
            conn.close()

    def request(self, method: str, params: Any) -> tuple[int, str]:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": next(self._ids), "method": method}
        if params is not None:
            message["params"] = params
        return self.post(json.dumps(message).encode())

    def open(self) -> HttpSession:
        status, text = self.request(
            "initialize",
            {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "0"}},
        )
        assert status == 200 and self.sid, (status, text[:300])
        self.post(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')
        return self


@dataclass
class HttpFuzz:
    tmp: Path
    port: int
    proxy_pid: int
    hostile: HttpSession
    calm_session: HttpSession
    stats: Stats = field(default_factory=Stats)
    statuses: dict[int, int] = field(default_factory=dict)
    calm_n: int = 0

    def calm(self) -> float:
        self.calm_n += 1
        t0 = time.perf_counter()
        status, text = self.calm_session.request(
            "tools/call", {"name": "ledger__ping", "arguments": {"n": self.calm_n}}
        )
        assert status == 200 and f"pong {self.calm_n}" in text, (status, text[:300])
        return (time.perf_counter() - t0) * 1000

    def run(self, case: tuple[str, Any]) -> None:
        """The case on one session and a calm call on another, at once (two threads)."""
        from concurrent.futures import ThreadPoolExecutor

        kind, data = case
        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=1) as pool:
            answer = pool.submit(self._send, kind, data)
            calm_ms = self.calm()
            status, text = answer.result(timeout=ANSWER_S)
        self.stats.count(kind, time.perf_counter() - started)
        self.stats.calm(kind, calm_ms)
        self.statuses[status] = self.statuses.get(status, 0) + 1
        assert 200 <= status < 600, (status, text[:300])
        if kind == "write":
            assert status == 200 and '"result"' in text, (status, text[:300])
        self.stats.rss_peak_kb = max(self.stats.rss_peak_kb, rss_kb(self.proxy_pid))

    def _send(self, kind: str, data: Any) -> tuple[int, str]:
        session = self.hostile
        if kind == "garbage":
            return session.post(data)
        if kind == "request":
            return session.request(data["method"], data["params"])
        if kind == "upstream":
            body, ctype = data
            args = {"body": body, "content_type": ctype}
            return session.request("tools/call", {"name": "hostile__raw_reply", "arguments": args})
        key, times = data
        write = {"name": "ledger__append", "arguments": {"entry": key}, "_meta": {"idempotency-key": key}}
        for _ in range(times - 1):  # the same write again: replayed, never run twice
            assert session.request("tools/call", write)[0] == 200
        return session.request("tools/call", write)

    def ledger(self) -> list[str]:
        path = self.tmp / "ledger"
        return path.read_text().splitlines() if path.exists() else []


@contextmanager
def http_fuzz(tmp: Path) -> Iterator[HttpFuzz]:
    """The proxy over streamable HTTP in front of the ledger and the hostile upstream; the calm baseline measured."""
    hostile_port = free_port()
    with ExitStack() as stack:
        hostile = stack.enter_context(
            running([sys.executable, str(HOSTILE), "--port", str(hostile_port)], tmp / "hostile.stderr")
        )
        wait_until(
            lambda: http_get_status(f"http://127.0.0.1:{hostile_port}/x") is not None, 30, "hostile up", process=hostile
        )
        config, port = http_listen_config(tmp, hostile_port)
        stderr = tmp / "proxy.stderr"
        process = stack.enter_context(running(proxy_argv("serve", "--config", str(config)), stderr))
        wait_healthy(f"http://127.0.0.1:{port}", process, stderr)
        fuzz = HttpFuzz(tmp, port, process.pid, HttpSession(port).open(), HttpSession(port).open())
        calm = sorted(fuzz.calm() for _ in range(20))
        fuzz.stats.baseline_ms = calm[len(calm) // 2]
        fuzz.stats.rss_start_kb = fuzz.stats.rss_peak_kb = rss_kb(process.pid)
        yield fuzz
