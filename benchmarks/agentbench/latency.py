"""Added latency of the proxy on fault-free calls, in real wall time, over stdio and over streamable HTTP.

Four real processes per run, one at a time: the chaos server spoken to directly (M0) and through ``resilient-mcp
wrap`` with the benchmark's policy (M3), each over stdio and over HTTP on 127.0.0.1. Each gets a warm-up, then
``calls`` sequential calls alternating a read (``get_stock``) and an unsafe write (``create_order`` with a fresh
client_ref, so the idempotency stage stores every one). Reported: p50/p95 per mode and the added p50/p95 (proxy
minus direct). Wall time varies between runs and machines; it is the one part of the report that does.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO, Any

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from benchmarks.bench_procs import free_port, process_group, wait_for_port

from .scenarios import BASE_POLICY


def _cli() -> list[str]:
    script = Path(sys.executable).with_name("resilient-mcp")
    return [str(script)] if script.exists() else [sys.executable, "-m", "resilient_mcp.cli"]


@asynccontextmanager
async def _stdio(command: list[str], err: Any) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    async with stdio_client(params, errlog=err) as (read, write), ClientSession(read, write) as session:
        with anyio.fail_after(60):
            await session.initialize()
        yield session


@asynccontextmanager
async def _http(command: list[str], port: int, err: Any) -> AsyncIterator[ClientSession]:
    async with process_group(command, err):
        await wait_for_port("127.0.0.1", port, timeout_s=30)
        async with (
            streamable_http_client(f"http://127.0.0.1:{port}/mcp") as streams,
            ClientSession(streams[0], streams[1]) as session,
        ):
            with anyio.fail_after(60):
                await session.initialize()
            yield session


async def _samples(session: ClientSession, calls: int, tag: str) -> list[float]:
    out = []
    for i in range(calls + 10):
        write = {"customer": "lat", "sku": "pear", "qty": 1, "client_ref": f"{tag}-{i}"}
        name, args = ("get_stock", {"sku": "apple"}) if i % 2 else ("create_order", write)
        started = time.perf_counter()
        result = await session.call_tool(name, args)
        elapsed = time.perf_counter() - started
        if result.is_error:
            raise RuntimeError(f"{tag}: {name} failed: {result.content}")
        if i >= 10:  # the first ten warm up
            out.append(elapsed * 1000)
    return out


def _pct(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    return round(ordered[min(len(ordered) - 1, int(p * len(ordered)))], 3)


def _policy_file(tmp: str) -> Path:
    policy = Path(tmp, "policy.json")
    unlimited = {**BASE_POLICY, "session": {"max_tool_calls": None, "max_failures": None}}
    policy.write_text(json.dumps(unlimited), encoding="utf-8")
    return policy


def _errlog(tmp: str) -> IO[str]:
    return open(Path(tmp, "stderr.log"), "a")


async def measure(calls: int = 200) -> dict[str, Any]:
    """p50/p95 (ms) per transport and mode, and the proxy's added p50/p95."""
    cli = _cli()
    results: dict[str, Any] = {"calls_per_mode": calls}
    with tempfile.TemporaryDirectory(prefix="agentbench-latency-") as tmp:
        policy = _policy_file(tmp)
        chaos = [*cli, "--log-level", "error", "chaos-server"]
        wrap = [*cli, "--log-level", "error", "wrap", "--policy", str(policy), "--state-dir", tmp]
        with _errlog(tmp) as err:
            modes: dict[str, Any] = {
                "stdio_direct": lambda: _stdio(chaos, err),
                "stdio_proxy": lambda: _stdio([*wrap, "--", *chaos], err),
            }
            p1, p2 = free_port(), free_port()
            modes["http_direct"] = lambda: _http([*chaos, "--http", f"127.0.0.1:{p1}"], p1, err)
            modes["http_proxy"] = lambda: _http([*wrap, "--http", f"127.0.0.1:{p2}", "--", *chaos], p2, err)
            for name, opener in modes.items():
                async with opener() as session:
                    samples = await _samples(session, calls, name)
                results[name] = {
                    "p50_ms": _pct(samples, 0.5),
                    "p95_ms": _pct(samples, 0.95),
                    "mean_ms": round(statistics.fmean(samples), 3),
                }
    for transport in ("stdio", "http"):
        direct, proxy = results[f"{transport}_direct"], results[f"{transport}_proxy"]
        results[f"{transport}_added"] = {
            "p50_ms": round(proxy["p50_ms"] - direct["p50_ms"], 3),
            "p95_ms": round(proxy["p95_ms"] - direct["p95_ms"], 3),
        }
    return results
