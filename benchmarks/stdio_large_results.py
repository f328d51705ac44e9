"""Large results from a stdio upstream: the MCP SDK's ``stdio_client`` against resilient-mcp's ``stdio_upstream``.

For each size (default 16, 32, 50 MB) and each transport, one client session calls ``big`` on the bare fixture
server (tests/security/hostile_upstream.py, which writes the result in 1 MB pieces) while a second session on a
second upstream process calls ``echo`` in a loop, in the same event loop (as two host sessions share one proxy).
Printed per run: the time until the big result is parsed (or "none within LIMIT s"), the echo latency p50 / p90 /
max during that read, and the growth of the process's peak RSS (memory an earlier run freed but the allocator
still holds is reused, so later runs can read lower, even 0). A first line gives the echo latency with no big
read. Then one result over the default ``max_message_bytes`` (64 MiB; default 200 MB) through ``stdio_upstream``:
the time until its stand-in E4 error arrives.

Usage: ``python benchmarks/stdio_large_results.py [--sizes 16,32,50] [--oversized 200] [--sdk-limit 30]``
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import get_default_environment, stdio_client
from mcp.shared.exceptions import MCPError

from resilient_mcp.upstream.stdio import stdio_upstream

FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "security" / "hostile_upstream.py"
MB = 1_000_000


def _transport(kind: str) -> AbstractAsyncContextManager[Any]:
    if kind == "sdk":
        params = StdioServerParameters(command=sys.executable, args=[str(FIXTURE)])
        return stdio_client(params)
    return stdio_upstream(sys.executable, [str(FIXTURE)], get_default_environment(), None)


@asynccontextmanager
async def session(kind: str) -> AsyncIterator[ClientSession]:
    async with _transport(kind) as (read, write), ClientSession(read, write) as client:
        await client.initialize()
        yield client


def _call(name: str, arguments: dict[str, Any]) -> types.CallToolRequest:
    return types.CallToolRequest(params=types.CallToolRequestParams(name=name, arguments=arguments))


def _rss_peak_reset() -> int:
    try:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")
    except OSError:
        return 0
    return _status_kb("VmRSS")


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(field + ":"))


def _ms(values: list[float], q: float) -> str:
    if not values:
        return "-"
    if q >= 1:
        return f"{max(values) * 1000:.1f}"
    if len(values) < 3:
        return "-"
    return f"{statistics.quantiles(values, n=100, method='inclusive')[int(q * 100) - 1] * 1000:.1f}"


async def run(kind: str, size: int, limit_s: float) -> str:
    async with session(kind) as big, session(kind) as other:
        latencies: list[float] = []
        done = anyio.Event()

        async def echo_loop() -> None:
            while not done.is_set():
                start = time.perf_counter()
                await other.send_request(_call("echo", {"text": "ping"}), types.CallToolResult)
                latencies.append(time.perf_counter() - start)
                await anyio.sleep(0.005)

        base_kb = _rss_peak_reset()
        outcome = f"none within {limit_s:.0f} s"
        async with anyio.create_task_group() as tg:
            tg.start_soon(echo_loop)
            start = time.perf_counter()
            with anyio.move_on_after(limit_s):
                try:
                    result = await big.send_request(_call("big", {"bytes": size}), types.CallToolResult)
                    got = sum(len(c.text) for c in result.content if isinstance(c, types.TextContent))
                    outcome = f"{time.perf_counter() - start:6.2f} s ({got // MB} MB text)"
                except MCPError as exc:
                    outcome = f"{time.perf_counter() - start:6.2f} s error {exc.error.code}: {exc.error.message[:60]}"
            done.set()
            tg.cancel_scope.cancel()
        grown = max(0, _status_kb("VmHWM") - base_kb) // 1024 if base_kb else 0
    return (
        f"{kind:10} {size // MB:5} MB  {outcome:42}  echo p50 {_ms(latencies, 0.5):>7} ms  "
        f"p90 {_ms(latencies, 0.9):>7} ms  max {_ms(latencies, 1):>7} ms  peak RSS +{grown} MB"
    )


async def idle(kind: str, calls: int = 200) -> str:
    async with session(kind) as other:
        latencies = []
        for _ in range(calls):
            start = time.perf_counter()
            await other.send_request(_call("echo", {"text": "ping"}), types.CallToolResult)
            latencies.append(time.perf_counter() - start)
    return f"{kind:10} idle       echo p50 {_ms(latencies, 0.5)} ms  p90 {_ms(latencies, 0.9)} ms"


async def main(sizes: list[int], oversized: int, sdk_limit_s: float) -> None:
    print(f"python {sys.version.split()[0]}; sizes in MB of 10^6 bytes; limit for the SDK {sdk_limit_s:.0f} s")
    for kind in ("sdk", "resilient"):
        print(await idle(kind))
    for size in sizes:
        for kind in ("sdk", "resilient"):
            print(await run(kind, size * MB, sdk_limit_s if kind == "sdk" else 600.0), flush=True)
    if oversized:
        print(await run("resilient", oversized * MB, 600.0))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="16,32,50")
    parser.add_argument("--oversized", type=int, default=200)
    parser.add_argument("--sdk-limit", type=float, default=30.0)
    ns = parser.parse_args()
    anyio.run(main, [int(s) for s in ns.sizes.split(",") if s], ns.oversized, ns.sdk_limit)
