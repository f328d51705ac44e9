"""Scale out: the cost of the redis state backend and what a second replica buys, in one run.

    python benchmarks/replicas.py [--calls 300] [--seconds 10] [--sessions 50]   # needs redis-server on PATH

Every proxy is ``resilient-mcp serve`` over streamable HTTP on 127.0.0.1 in front of ``raw_upstream.py`` (its echo
tool is unannotated, so write_unsafe: validation, output caps and an idempotency claim on every call). Printed:

1. added latency per call of the redis backend vs sqlite, one replica, one client making sequential calls
   (stateless HTTP POSTs, median and p95 of ``--calls`` calls after a warm-up);
2. throughput of one vs two replicas (redis backend), ``--sessions`` concurrent MCP sessions for ``--seconds``,
   each session pinned to one replica (what a sticky balancer does);
3. Redis commands per call, counted by ``INFO commandstats`` around a block of calls, by command.

Everything (client, replicas, upstreams, Redis) shares this machine's cores, which are printed: on a 2-core machine
a second replica competes with the first for the same CPUs, so the throughput ratio says how much of a call is
serialised in one process, not what a second machine would add. Every process started is stopped by its pid.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import yaml
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

HERE = Path(__file__).resolve().parent
IN_SCRIPTS = {"hgetall", "hset", "hdel", "pexpireat", "exists"}
"""Commands only the Lua scripts of ``state/redis.py`` run (never one round trip each)."""
RAW = HERE / "raw_upstream.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(predicate: Any, limit_s: float, what: str) -> None:
    deadline = time.monotonic() + limit_s
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"{what}: not within {limit_s} s")
        time.sleep(0.05)


@contextmanager
def redis_server(tmp: Path) -> Iterator[int]:
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server is not installed (apt-get install -y redis-server)")
    port, log = free_port(), tmp / "redis.log"
    argv = [binary, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no"]
    process = subprocess.Popen([*argv, "--dir", str(tmp), "--logfile", str(log)], stdout=subprocess.DEVNULL)
    try:
        wait_for(lambda: log.exists() and "Ready to accept" in log.read_text(), 30, "redis-server")
        yield port
    finally:
        process.kill()
        process.wait()


def _healthy(port: int) -> bool:
    try:
        return httpx2.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200
    except httpx2.HTTPError:
        return False


@contextmanager
def proxy(tmp: Path, state: dict[str, Any], *, stateless: bool) -> Iterator[int]:
    port = free_port()
    name = uuid.uuid4().hex[:8]
    config = {
        "upstreams": {"raw": {"command": sys.executable, "args": [str(RAW)]}},
        "state_dir": str(tmp / f"state-{name}"),
        "state": state,
        "listen": {"http": f"127.0.0.1:{port}", "stateless": stateless},
        "logging": {"level": "warning"},
    }
    path = tmp / f"proxy-{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    argv = [sys.executable, "-m", "resilient_mcp.cli", "serve", "--config", str(path)]
    with (tmp / f"proxy-{name}.stderr").open("w") as err:
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
        try:
            wait_for(lambda: _healthy(port), 90, "the proxy")
            yield port
        finally:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


HEADERS = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-11-25"}


def sequential(port: int, calls: int) -> list[float]:
    """Milliseconds per stateless tools/call, after 30 warm-up calls."""
    url = f"http://127.0.0.1:{port}/mcp"
    out: list[float] = []
    with httpx2.Client(headers=HEADERS, timeout=30) as http:
        for i in range(calls + 30):
            body = {
                "jsonrpc": "2.0",
                "id": i,
                "method": "tools/call",
                "params": {"name": "echo", "arguments": {"message": uuid.uuid4().hex}},
            }
            start = time.perf_counter()
            response = http.post(url, json=body)
            elapsed = (time.perf_counter() - start) * 1000
            assert response.status_code == 200 and '"isError":true' not in response.text, response.text[:300]
            if i >= 30:
                out.append(elapsed)
    return out


async def throughput(ports: list[int], sessions: int, seconds: float) -> float:
    """Calls per second of ``sessions`` concurrent MCP sessions, session i pinned to replica i % len(ports)."""
    done = 0
    ready = anyio.Event()
    joined = 0

    async def session(i: int) -> None:
        nonlocal done, joined
        url = f"http://127.0.0.1:{ports[i % len(ports)]}/mcp"
        async with Client(streamable_http_client(url), mode="legacy", cache=None) as client:
            joined += 1
            if joined == sessions:
                ready.set()
            await ready.wait()
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                result = await client.call_tool("echo", {"message": uuid.uuid4().hex})
                assert not result.is_error
                done += 1

    with anyio.fail_after(seconds + 300):
        async with anyio.create_task_group() as tg:
            for i in range(sessions):
                tg.start_soon(session, i)
            await ready.wait()
            started = time.monotonic()
    return done / (time.monotonic() - started)


def commandstats(port: int) -> dict[str, int]:
    import redis

    client = redis.Redis(port=port)
    try:
        stats: dict[str, Any] = client.info("commandstats")
    finally:
        client.close()
    return {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in stats.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--sessions", type=int, default=50)
    args = parser.parse_args()
    cores = os.cpu_count()
    print(f"machine: {cores} cores ({platform.processor() or platform.machine()}), Python {platform.python_version()}")
    print("client, replicas, upstreams and Redis all share these cores\n")
    with tempfile.TemporaryDirectory(prefix="rmcp-replicas-") as raw_tmp, ExitStack() as stack:
        tmp = Path(raw_tmp)
        redis_port = stack.enter_context(redis_server(tmp))
        redis_state = {"backend": "redis", "url": f"redis://127.0.0.1:{redis_port}/0"}
        figures: dict[str, Any] = {"cores": cores}

        # 1. added latency, one replica
        lat: dict[str, list[float]] = {}
        for label, state in (("sqlite", {"backend": "sqlite"}), ("redis", redis_state)):
            with proxy(tmp, state, stateless=True) as port:
                lat[label] = sequential(port, args.calls)
        print(f"1. latency per call, one replica, {args.calls} sequential calls (ms):")
        for label, values in lat.items():
            p95 = statistics.quantiles(values, n=20)[18]
            print(f"   {label:7s} median {statistics.median(values):6.2f}   p95 {p95:6.2f}")
        added = statistics.median(lat["redis"]) - statistics.median(lat["sqlite"])
        print(f"   redis adds {added:+.2f} ms per call (median)\n")
        figures["latency_ms"] = {k: statistics.median(v) for k, v in lat.items()}

        # 3. Redis commands per call (before 2, on a quiet Redis)
        with proxy(tmp, redis_state, stateless=True) as port:
            sequential(port, 0)  # warm-up only
            before = commandstats(redis_port)
            n = 100
            sequential(port, n)
            time.sleep(1.0)  # let the audit batch (written every 0.5 s) reach Redis before counting
            after = commandstats(redis_port)
        per = {k: (after[k] - before.get(k, 0)) / (n + 30) for k in after if k != "info" and after[k] != before.get(k)}
        print("3. Redis commands per write call (INFO commandstats; commands run inside Lua scripts count too):")
        for k, v in sorted(per.items(), key=lambda kv: -kv[1]):
            print(f"   {k:10s} {v:5.2f}{'   (inside scripts)' if k in IN_SCRIPTS else ''}")
        trips = sum(v for k, v in per.items() if k not in IN_SCRIPTS)
        print(
            f"   round trips sent by the replica: {trips:.2f} per call (evalsha = one script, del = a release; "
            "xadd is pipelined in batches, off the call's path)\n"
        )
        figures["redis_round_trips_per_call"] = trips
        figures["redis_commands_per_call"] = per

        # 2. throughput, one vs two replicas
        tput: dict[int, float] = {}
        for n_replicas in (1, 2):
            with ExitStack() as group:
                ports = [group.enter_context(proxy(tmp, redis_state, stateless=False)) for _ in range(n_replicas)]
                tput[n_replicas] = anyio.run(throughput, ports, args.sessions, args.seconds)
        print(f"2. throughput, {args.sessions} concurrent sessions, {args.seconds:g} s, redis backend:")
        for k, v in tput.items():
            print(f"   {k} replica{'s' if k > 1 else ''}: {v:7.1f} calls/s")
        print(f"   ratio 2/1: {tput[2] / tput[1]:.2f} on {cores} cores\n")
        figures["throughput_calls_per_s"] = tput
        rtt_ms = figures["latency_ms"]["redis"] - figures["latency_ms"]["sqlite"]
        print(
            "Scaling to N machines: replicas share nothing but Redis, so N machines give up to N times one replica's "
            f"calls/s until Redis saturates. Each write call costs {figures['redis_round_trips_per_call']:.1f} round "
            "trips (reads that are not capped: none but the batched audit); one Redis core executes on the order of "
            "100k simple commands/s, i.e. roughly 100k / (round trips + script-internal commands) write calls/s "
            f"(here {sum(per.values()):.0f} commands per call), far above what the upstreams behind the replicas "
            f"serve. The added latency is one network round trip per Redis command on the path ({rtt_ms:+.2f} ms "
            "per call on loopback here): across machines expect ~0.2-0.5 ms per round trip in one zone. The next "
            "bottleneck after Redis CPU is its single audit stream (one key, one shard): shard it by replica "
            "(key_prefix) if the audit rate nears Redis' limit."
        )
        out = HERE / "out"
        out.mkdir(exist_ok=True)
        (out / "replicas.json").write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
