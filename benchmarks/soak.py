"""Soak of the HTTP listener: many sessions, injected faults and a slowloris flood at once, with resources before/after.

    python benchmarks/soak.py                                   # full size: 50 sessions x 1,000 calls, 500 sockets
    python benchmarks/soak.py --sessions 10 --calls 100 --slowloris 100 --slow-bodies 100 --oversized 10  # reduced
    python benchmarks/soak.py --body-stall [--baseline DIR]    # another session's stall during a 3.6 MB body

Soak: ``resilient-mcp serve --http 127.0.0.1:PORT`` in front of ``raw_upstream.py`` in chaos mode (``faults:``):
about 1% of upstream calls (``--fault-rate``) get a fault the proxy is meant to absorb (a transient error result, a
502 before sending, a rate limit with a 20 ms hint), and echo is marked read_only so that they may be retried. After
a warm-up the proxy's RSS and open descriptors are the baseline. Two phases follow, each ``--sessions`` MCP sessions
(raw streamable HTTP, one keep-alive connection each) making ``--calls`` sequential ``tools/call``, every answer
checked against its unique message, and a health check every second: *calm*, then *flood*, where
``--slowloris`` sockets each send half a request and are reopened whenever the proxy closes them (header deadline,
connection cap). After each phase the sessions are deleted and, once descriptors settle (bounded wait), RSS and
descriptors are read again.

The flood also holds ``--slow-bodies`` sockets that send complete headers and the start of a body that never ends
(closed by the body deadline or to make room, and reopened), and, with ``--oversized`` > 0, a second upstream
(``tests/security/hostile_http_upstream.py``, streamable HTTP, ``max_message_bytes`` 4 MB) answers that many calls
per flood round with 16 MB results and endless bodies, each of which must come back as ``E4_oversized_result``. The
flood runs ``--rounds`` times; the proxy's RSS after each round is printed as a ratio to its RSS after the first
(target: within 10 %).

Printed per phase (and written to ``benchmarks/out/soak.json``): failed good calls (a wrong answer, an HTTP failure,
or an error that is not an injected fault), faulted calls not recovered (every attempt the policy allows was
faulted: 3, or 2 once a 502 may have executed), latency p50/p99, failed health checks, the proxy's RSS and
descriptors at peak and after, and how often the flood's sockets were shed. Target: zero failed good calls, and
descriptors back to the baseline and RSS flat from one phase to the next.

``--body-stall``: one session calls echo back to back while another POSTs a 3.6 MB body of 200,000 keys; prints the
first session's longest wait during that request, for this checkout and, with ``--baseline DIR`` (any copy of the
package, e.g. ``mkdir /tmp/base && git archive v0.1 resilient_mcp | tar -x -C /tmp/base``), for that one, in the
same run. Every process started is stopped at the end; only 127.0.0.1 is used.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
from anyio.abc import Process, SocketStream
from bench_procs import free_port, process_group, reap_leftovers, wait_for_port

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RAW = str(HERE / "raw_upstream.py")
OUT = HERE / "out"
PY = sys.executable
PROTOCOL = "2025-11-25"
PARTIAL = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
SLOW_BODY = (
    b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    b"Accept: application/json, text/event-stream\r\nContent-Length: 100000\r\n\r\n"
    b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {'
)
HOSTILE = str(REPO / "tests" / "security" / "hostile_http_upstream.py")
OVERSIZED_LIMIT = 4_000_000
FAULT_RATE = 0.01
FAULTS = [  # each a third of FAULT_RATE; the first rule that fires decides
    {"fault": "transient", "params": {"as": "result"}},
    {"fault": "5xx", "params": {"status": 502}},
    {"fault": "rate_limit", "params": {"retry_after_ms": 20}},
]


# --- the proxy --------------------------------------------------------------------------------------------------


@dataclass
class Proxy:
    process: Process
    port: int
    log: Path

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def rss_kb(self) -> int:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0

    def descriptors(self) -> int:
        return len(os.listdir(f"/proc/{self.process.pid}/fd"))

    def log_count(self, event: str) -> int:
        return sum(1 for line in self.log.read_text(errors="replace").splitlines() if event in line)


def write_config(tmp: Path, fault_rate: float, run_id: str, hostile_port: int | None = None) -> Path:
    policy = tmp / "soak-policy.yaml"
    echo = "raw__echo" if hostile_port is not None else "echo"  # several upstreams: names carry their prefix
    policy.write_text(f"version: 1\nsession: {{max_tool_calls: null}}\ntools:\n  {echo}: {{effect: read_only}}\n")
    config: dict[str, Any] = {
        "policies": [str(policy)],
        "upstreams": {"raw": {"command": PY, "args": [RAW, "--run-id", run_id]}},
    }
    if hostile_port is not None:  # tools then carry their upstream's prefix: raw__echo, hostile__big_json
        config["upstreams"]["hostile"] = {
            "url": f"http://127.0.0.1:{hostile_port}/mcp",
            "protocol": "legacy",
            "max_message_bytes": OVERSIZED_LIMIT,
        }
    if fault_rate:
        p = fault_rate / len(FAULTS)
        config["faults"] = {"seed": 7, "rules": [{"match": {"tool": "echo", "probability": p}, **r} for r in FAULTS]}
    path = tmp / "soak.json"
    path.write_text(json.dumps(config))
    return path


@asynccontextmanager
async def running_proxy(
    tmp: Path, code: Path, fault_rate: float, run_id: str, name: str, hostile_port: int | None = None
) -> AsyncIterator[Proxy]:
    port = free_port()
    config = write_config(tmp, fault_rate, run_id, hostile_port)
    log = tmp / f"proxy-{name}.log"
    env = {**os.environ, "PYTHONPATH": str(code), "PYTHONUNBUFFERED": "1"}
    argv = [PY, "-m", "resilient_mcp.cli", "serve", "--config", str(config), "--http", f"127.0.0.1:{port}"]
    with log.open("w") as err:
        async with process_group(argv, err, env=env) as process:
            await wait_for_port("127.0.0.1", port, timeout_s=120)
            proxy = Proxy(process, port, log)
            async with httpx2.AsyncClient(trust_env=False, timeout=10) as http:
                with anyio.fail_after(120):
                    while True:
                        if (await http.get(f"{proxy.base}/healthz")).status_code == 200:
                            break
                        await anyio.sleep(0.2)
            yield proxy


# --- a raw MCP session --------------------------------------------------------------------------------------------


def _message(response: httpx2.Response) -> dict[str, Any]:
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
        return dict(json.loads([d for d in data if d][-1]))
    return dict(json.loads(response.text))


class Session:
    def __init__(self, http: httpx2.AsyncClient, base: str, tool: str = "echo") -> None:
        self.http, self.url, self.sid, self.next_id = http, f"{base}/mcp", "", 0
        self.tool = tool

    def headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        if self.sid:
            headers |= {"Mcp-Session-Id": self.sid, "Mcp-Protocol-Version": PROTOCOL}
        return headers

    async def post(self, message: dict[str, Any] | bytes) -> httpx2.Response:
        body = message if isinstance(message, bytes) else json.dumps(message).encode()
        return await self.http.post(self.url, content=body, headers=self.headers())

    async def open(self) -> Session:
        info = {"name": "soak", "version": "0"}
        init = {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": info}
        response = await self.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
        response.raise_for_status()
        self.sid = response.headers["mcp-session-id"]
        (await self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})).raise_for_status()
        return self

    async def echo(self, text: str) -> str | None:
        """None when the answer is ``text``; else what went wrong."""
        self.next_id += 1
        call = {
            "jsonrpc": "2.0",
            "id": self.next_id,
            "method": "tools/call",
            "params": {"name": self.tool, "arguments": {"message": text}},
        }
        try:
            response = await self.post(call)
        except httpx2.HTTPError as exc:
            return f"http: {type(exc).__name__}"
        if response.status_code != 200:
            return f"status {response.status_code}"
        message = _message(response)
        result = message.get("result")
        if not isinstance(result, dict) or result.get("isError"):
            fault = (result or {}).get("_meta", {}).get("io.github.resilient-mcp/fault", {})
            attempts = fault.get("attempts")
            return f"error: {fault.get('fault_type') or str(message)[:200]} after {attempts} attempts"
        texts = [c.get("text") for c in result.get("content", []) if c.get("type") == "text"]
        return None if texts == [text] else f"wrong answer: {str(texts)[:100]}"

    async def close(self) -> None:
        with suppress(httpx2.HTTPError):
            await self.http.delete(self.url, headers=self.headers())

    async def oversized(self, tool: str, arguments: dict[str, Any]) -> str | None:
        """None when the call came back as E4_oversized_result; else what it came back as."""
        self.next_id += 1
        call = {"jsonrpc": "2.0", "id": self.next_id, "method": "tools/call"}
        call["params"] = {"name": tool, "arguments": arguments}
        try:
            response = await self.post(call)
        except httpx2.HTTPError as exc:
            return f"http: {type(exc).__name__}"
        message = _message(response)
        result = message.get("result") or {}
        fault = result.get("_meta", {}).get("io.github.resilient-mcp/fault", {})
        if fault.get("fault_type") == "E4_oversized_result":
            return None
        return str(fault.get("fault_type") or message or f"{response.status_code} {response.text[:150]}")[:200]


# --- the flood --------------------------------------------------------------------------------------------------


@dataclass
class Flood:
    port: int
    size: int
    payload: bytes = PARTIAL
    open: int = 0
    reopened: int = 0
    failed_connects: int = 0
    streams: set[SocketStream] = field(default_factory=set)
    ready: anyio.Event = field(default_factory=anyio.Event)
    """Set once every socket of the flood has been open at the same time."""

    async def hold_one(self) -> None:
        while True:
            try:
                stream = await anyio.connect_tcp("127.0.0.1", self.port)
            except OSError:
                self.failed_connects += 1
                await anyio.sleep(0.5)
                continue
            self.open += 1
            self.streams.add(stream)
            if self.open >= self.size:
                self.ready.set()
            try:
                await stream.send(self.payload)
                while await stream.receive():  # until the proxy closes it
                    pass
            except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                pass
            finally:
                self.open -= 1
                self.streams.discard(stream)
                await stream.aclose()
            self.reopened += 1

    async def run(self, tg: anyio.abc.TaskGroup) -> None:
        if not self.size:
            self.ready.set()
        for _ in range(self.size):
            tg.start_soon(self.hold_one)


# --- the soak -----------------------------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


INJECTED = ("D1_transient_execution_error", "C4_gateway_5xx", "D2_rate_limited")
"""What the plan injects: a call that fails with one of these had every attempt faulted (a faulted call, not a good
one); the policy's attempts (3, or 2 when a 502 may have executed) were used up."""


def resources(proxy: Proxy) -> dict[str, int]:
    return {"rss_kb": proxy.rss_kb(), "descriptors": proxy.descriptors()}


async def settled(proxy: Proxy, baseline: dict[str, int], limit_s: float) -> dict[str, int]:
    """The proxy's resources once its descriptors are back to ``baseline`` (or after ``limit_s``)."""
    with anyio.move_on_after(limit_s):
        while True:  # the proxy is another process: nothing to wait on but its /proc entry
            if proxy.descriptors() <= baseline["descriptors"]:
                break
            await anyio.sleep(0.5)
    return resources(proxy)


async def phase(
    proxy: Proxy, http: httpx2.AsyncClient, args: argparse.Namespace, flood_size: int, hostile: bool = False
) -> dict[str, Any]:
    """``args.sessions`` sessions x ``args.calls`` calls, with ``flood_size`` slowloris sockets (and, in a flood,
    ``args.slow_bodies`` slow-body sockets and ``args.oversized`` oversized results) meanwhile."""
    latencies: list[float] = []
    failures: list[str] = []
    peak = resources(proxy)
    health = {"checks": 0, "failed": 0}
    flood = Flood(proxy.port, flood_size)
    bodies = Flood(proxy.port, args.slow_bodies if flood_size else 0, SLOW_BODY)
    tool = "raw__echo" if args.oversized else "echo"
    oversized: dict[str, Any] = {"calls": 0, "not_e4": []}

    async def big_calls() -> None:
        session = await Session(http, proxy.base).open()
        for i in range(args.oversized):
            name, arguments = (
                ("hostile__endless_json", {}) if i % 4 == 3 else ("hostile__big_json", {"bytes": 16_000_000})
            )
            problem = await session.oversized(name, arguments)
            oversized["calls"] += 1
            if problem:
                oversized["not_e4"].append(problem)
        await session.close()

    async def one_session(n: int) -> None:
        session = await Session(http, proxy.base, tool).open()
        for i in range(args.calls):
            t0 = time.perf_counter()
            problem = await session.echo(f"s{n}-c{i}-{uuid.uuid4().hex[:6]}")
            latencies.append(time.perf_counter() - t0)
            if problem:
                failures.append(problem)
        await session.close()

    async def watch(stop: anyio.Event) -> None:
        async with httpx2.AsyncClient(trust_env=False, timeout=5) as probe:
            while not stop.is_set():
                now = resources(proxy)
                peak.update({k: max(peak[k], now[k]) for k in peak})
                health["checks"] += 1
                try:
                    ok = (await probe.get(f"{proxy.base}/healthz")).status_code == 200
                except httpx2.HTTPError:
                    ok = False
                health["failed"] += not ok
                with anyio.move_on_after(1):
                    await stop.wait()

    stop = anyio.Event()
    async with anyio.create_task_group() as outer:
        outer.start_soon(watch, stop)
        async with anyio.create_task_group() as attack:
            await flood.run(attack)
            await bodies.run(attack)
            with anyio.fail_after(120):
                await flood.ready.wait()
                await bodies.ready.wait()
            held_at_start = flood.open + bodies.open
            started = time.perf_counter()
            async with anyio.create_task_group() as work:
                for n in range(args.sessions):
                    work.start_soon(one_session, n)
                if hostile and flood_size:
                    work.start_soon(big_calls)
            elapsed = time.perf_counter() - started
            held_at_end = flood.open + bodies.open
            attack.cancel_scope.cancel()
        stop.set()
    for stream in [*flood.streams, *bodies.streams]:
        await stream.aclose()
    faulted = [f for f in failures if any(f.startswith(f"error: {t} ") for t in INJECTED)]
    good = [f for f in failures if f not in faulted]
    return {
        "slowloris": flood_size,
        "slow_bodies": bodies.size,
        "oversized_calls": oversized["calls"],
        "oversized_not_e4": oversized["not_e4"],
        "calls": len(latencies),
        "failed_good_calls": len(good),
        "good_call_failures": sorted(set(good))[:10],
        "faulted_calls_not_recovered": len(faulted),
        "unrecovered": sorted(set(faulted)),
        "p50_ms": round(percentile(latencies, 0.50) * 1000, 1),
        "p99_ms": round(percentile(latencies, 0.99) * 1000, 1),
        "calls_per_s": round(len(latencies) / elapsed, 1),
        "elapsed_s": round(elapsed, 1),
        "health_checks": health,
        "flood": {
            "held_at_start": held_at_start,
            "held_at_end": held_at_end,
            "closed_by_proxy_and_reopened": flood.reopened + bodies.reopened,
            "failed_connects": flood.failed_connects + bodies.failed_connects,
        },
        "proxy_peak": peak,
    }


async def soak(args: argparse.Namespace) -> dict[str, Any]:
    run_id = f"soak-{uuid.uuid4().hex[:8]}"
    phases: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp, (Path(tmp) / "hostile.log").open("w") as hostile_log:
        hostile_port = free_port() if args.oversized else None
        async with AsyncExitStack() as stack:
            if hostile_port is not None:
                argv = [PY, HOSTILE, "--port", str(hostile_port), "--run-id", run_id]
                await stack.enter_async_context(process_group(argv, hostile_log))
                await wait_for_port("127.0.0.1", hostile_port, timeout_s=30)
            proxy = await stack.enter_async_context(
                running_proxy(Path(tmp), REPO, args.fault_rate, run_id, "soak", hostile_port)
            )
            limits = httpx2.Limits(max_connections=args.sessions + 8, max_keepalive_connections=args.sessions + 8)
            async with httpx2.AsyncClient(trust_env=False, timeout=60, limits=limits) as http:
                warm = await Session(http, proxy.base, "raw__echo" if args.oversized else "echo").open()
                for i in range(args.warmup):
                    await warm.echo(f"warm-{i}")
                await warm.close()
                before = await settled(proxy, resources(proxy), 0)
                rounds = [
                    (f"flood{i + 1}" if args.rounds_soak > 1 else "flood", args.slowloris)
                    for i in range(args.rounds_soak)
                ]
                for name, flood in ([] if args.skip_calm else [("calm", 0)]) + rounds:
                    phases[name] = await phase(proxy, http, args, flood, hostile=hostile_port is not None)
                    phases[name]["proxy_after"] = await settled(proxy, before, args.settle_s)
            injected = proxy.log_count("chaos_fault_injected")
            shed_lines = proxy.log_count("http_connections_shed")
            log_lines = len(proxy.log.read_text(errors="replace").splitlines())
    return {
        "sessions": args.sessions,
        "calls_per_session": args.calls,
        "fault_rate": args.fault_rate,
        "faults_injected": injected,
        "proxy_before": before,
        "phases": phases,
        "proxy_log_lines": log_lines,
        "shed_log_lines": shed_lines,
        "leftover_processes": reap_leftovers(run_id),
    }


def report_soak(r: dict[str, Any]) -> None:
    b = r["proxy_before"]
    print(
        f"{r['sessions']} sessions x {r['calls_per_session']} calls per phase, {r['fault_rate']:.0%} faults injected "
        f"({r['faults_injected']} in all); proxy before: RSS {b['rss_kb'] / 1024:.1f} MB, {b['descriptors']} "
        "descriptors"
    )
    for name, p in r["phases"].items():
        f, peak, after = p["flood"], p["proxy_peak"], p["proxy_after"]
        print(
            f"[{name}] {p['calls']} calls in {p['elapsed_s']} s ({p['calls_per_s']}/s) with {p['slowloris']} "
            f"slowloris sockets: failed good calls {p['failed_good_calls']} {p['good_call_failures'] or ''}, "
            f"faulted calls not recovered {p['faulted_calls_not_recovered']} {p['unrecovered'] or ''}"
        )
        print(
            f"    latency p50 {p['p50_ms']} ms, p99 {p['p99_ms']} ms; health checks {p['health_checks']['checks']}, "
            f"failed {p['health_checks']['failed']}"
        )
        if p["slowloris"]:
            print(
                f"    slow bodies {p['slow_bodies']}; oversized results {p['oversized_calls']}, not E4: "
                f"{len(p['oversized_not_e4'])} {p['oversized_not_e4'][:3] or ''}"
            )
            print(
                f"    flood: held {f['held_at_start']} at start, {f['held_at_end']} at end; closed by the proxy and "
                f"reopened {f['closed_by_proxy_and_reopened']} times; failed connects {f['failed_connects']}"
            )
        print(
            f"    proxy RSS MB peak {peak['rss_kb'] / 1024:.1f}, after {after['rss_kb'] / 1024:.1f}; descriptors "
            f"peak {peak['descriptors']}, after {after['descriptors']}"
        )
    floods = [p for name, p in r["phases"].items() if name.startswith("flood")]
    if len(floods) > 1:
        first = floods[0]["proxy_after"]["rss_kb"]
        ratios = ", ".join(f"{p['proxy_after']['rss_kb'] / first:.3f}" for p in floods[1:])
        print(f"RSS after each later flood round / after the first: {ratios} (target: within 1.10)")
    print(
        f"proxy log: {r['proxy_log_lines']} lines ({r['shed_log_lines']} shed summaries); "
        f"leftover processes: {r['leftover_processes']}"
    )


# --- the body stall -----------------------------------------------------------------------------------------------


async def body_stall(code: Path, keys: int, rounds: int) -> dict[str, Any]:
    run_id = f"stall-{uuid.uuid4().hex[:8]}"
    args = {f"k{i}": i for i in range(keys)}
    body = json.dumps(
        {"jsonrpc": "2.0", "id": 99, "method": "tools/call", "params": {"name": "echo", "arguments": args}}
    ).encode()
    stalls: list[float] = []
    quiet: list[float] = []
    outcome = ""
    with tempfile.TemporaryDirectory() as tmp:
        async with (
            running_proxy(Path(tmp), code, 0.0, run_id, "stall") as proxy,
            httpx2.AsyncClient(trust_env=False, timeout=120) as http,
        ):
            bystander, sender = await Session(http, proxy.base).open(), await Session(http, proxy.base).open()
            for _ in range(rounds):
                waits: list[tuple[float, float]] = []
                done = anyio.Event()

                async def calls(waits: list[tuple[float, float]] = waits, done: anyio.Event = done) -> None:
                    i = 0
                    while not done.is_set():
                        t0 = time.perf_counter()
                        await bystander.echo(f"b{i}")
                        waits.append((t0, time.perf_counter()))
                        i += 1

                async with anyio.create_task_group() as tg:
                    tg.start_soon(calls)
                    await anyio.sleep(0.5)
                    t0 = time.perf_counter()
                    response = await sender.post(body)
                    t1 = time.perf_counter()
                    await anyio.sleep(0.5)
                    done.set()
                outcome = f"{response.status_code} in {t1 - t0:.2f} s"
                during = [end - start for start, end in waits if end >= t0 and start <= t1]
                before = [end - start for start, end in waits if end < t0]
                stalls.append(max(during, default=0.0))
                quiet.extend(before)
    reap_leftovers(run_id)
    return {
        "code": str(code),
        "body_bytes": len(body),
        "keys": keys,
        "big_request": outcome,
        "bystander_p50_quiet_ms": round(statistics.median(quiet) * 1000, 1),
        "bystander_longest_wait_ms": [round(s * 1000) for s in stalls],
        "median_longest_wait_ms": round(statistics.median(stalls) * 1000),
    }


# --- main ---------------------------------------------------------------------------------------------------------


def raise_descriptor_limit(needed: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < needed:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(needed, hard) if hard > 0 else needed, hard))


async def main(args: argparse.Namespace, codes: list[Path]) -> None:
    if args.body_stall:
        results = []
        for code in codes:
            result = await body_stall(code, args.keys, args.rounds)
            results.append(result)
            print(
                f"{result['code']}: {result['body_bytes']} bytes, {result['keys']} keys -> {result['big_request']}; "
                f"other session: p50 {result['bystander_p50_quiet_ms']} ms when quiet, longest wait during the "
                f"request {result['bystander_longest_wait_ms']} ms (median {result['median_longest_wait_ms']})"
            )
        (OUT / "body_stall.json").write_text(json.dumps(results, indent=2))
        return
    raise_descriptor_limit(args.slowloris + args.slow_bodies + args.sessions + 256)
    result = await soak(args)
    report_soak(result)
    (OUT / "soak.json").write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--calls", type=int, default=1000, help="calls per session")
    parser.add_argument("--slowloris", type=int, default=500, help="partial-header sockets held open")
    parser.add_argument("--warmup", type=int, default=200, help="calls before the baseline is taken")
    parser.add_argument("--settle-s", type=float, default=30.0, help="longest wait for descriptors to settle")
    parser.add_argument("--fault-rate", type=float, default=FAULT_RATE, help="share of upstream calls faulted")
    parser.add_argument("--skip-calm", action="store_true", help="no phase without the flood first")
    parser.add_argument("--slow-bodies", type=int, default=200, help="slow-body sockets held open during a flood")
    parser.add_argument("--oversized", type=int, default=20, help="oversized results per flood round (0: none)")
    parser.add_argument("--rounds-soak", type=int, default=2, help="flood rounds (RSS compared to the first)")
    parser.add_argument("--body-stall", action="store_true", help="measure the 3.6 MB body stall instead")
    parser.add_argument("--keys", type=int, default=200_000, help="keys of the --body-stall body")
    parser.add_argument("--rounds", type=int, default=3, help="--body-stall repetitions")
    parser.add_argument("--baseline", help="--body-stall: also run the resilient_mcp package in this directory")
    parsed = parser.parse_args()
    OUT.mkdir(exist_ok=True)
    anyio.run(main, parsed, ([Path(parsed.baseline).resolve()] if parsed.baseline else []) + [REPO])
