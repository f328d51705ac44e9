"""What a diagnosis costs the host path, model time excluded: ``resilient-mcp wrap`` in front of mcp-server-time over
stdio, a host whose sampling callback answers at once, N distinct untyped errors (unknown timezones: no cache hits),
then the same error again (cache hits). Diagnosis off vs on, medians in the same run.

    python -m benchmarks.errors.host_cost [--n 30]

A real model adds its own time per diagnosis (one round trip, about 925 prompt and 35 answer tokens on the corpus)."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.session import ClientRequestContext
from mcp.client.stdio import stdio_client

REPO = Path(__file__).resolve().parents[2]
VERDICT = {
    "fault_type": "B4_semantic_argument_rejection",
    "is_transient": False,
    "repair_action": "fix_parameter",
    "suggestion": "Pass an IANA timezone name as timezone.",
}


async def _sample(
    context: ClientRequestContext, params: types.CreateMessageRequestParams
) -> types.CreateMessageResult | types.ErrorData:
    return types.CreateMessageResult(role="assistant", content=types.TextContent(text=json.dumps(VERDICT)), model="x")


async def _series(enabled: bool, n: int, workdir: Path) -> tuple[list[float], list[float]]:
    policy = workdir / f"policy-{enabled}.json"
    policy.write_text(json.dumps({"diagnosis": {"enabled": enabled, "max_per_minute": 10_000}}))
    server = Path(sys.executable).parent / "mcp-server-time"
    argv = [
        "-m",
        "resilient_mcp.cli",
        "wrap",
        "--policy",
        str(policy),
        "--state-dir",
        str(workdir / "state"),
        "--",
        str(server),
        "--local-timezone",
        "UTC",
    ]
    params = StdioServerParameters(command=sys.executable, args=argv, cwd=str(REPO))
    distinct: list[float] = []
    repeated: list[float] = []
    with (workdir / "proxy.stderr").open("w") as err:
        async with Client(stdio_client(params, errlog=err), mode="legacy", cache=None, sampling_callback=_sample) as c:
            await c.call_tool("get_current_time", {"timezone": "UTC"})  # warm up
            for i in range(n):
                t0 = time.perf_counter()
                await c.call_tool("get_current_time", {"timezone": f"Mars/Crater{chr(65 + i % 26)}{chr(97 + i // 26)}"})
                distinct.append((time.perf_counter() - t0) * 1000)
            for _ in range(n):
                t0 = time.perf_counter()
                await c.call_tool("get_current_time", {"timezone": "Mars/CraterAa"})
                repeated.append((time.perf_counter() - t0) * 1000)
    return distinct, repeated


async def main_async(n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        off = await _series(False, n, Path(tmp))
        on = await _series(True, n, Path(tmp))
    med = statistics.median
    print(f"{n} distinct untyped errors through resilient-mcp wrap (stdio), medians:")
    print(f"  diagnosis off:                 {med(off[0]):7.2f} ms per failed call")
    print(f"  diagnosis on (sampling, host answers at once): {med(on[0]):7.2f} ms (+{med(on[0]) - med(off[0]):.2f} ms)")
    print(f"  diagnosis on, cache hit:       {med(on[1]):7.2f} ms (off: {med(off[1]):.2f} ms)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=30)
    anyio.run(main_async, parser.parse_args().n)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
