"""The client side alone: one ``Upstream`` (resilient_mcp.upstream) calling ``echo`` of ``raw_upstream.py`` over stdio,
with the raw tools/call lane on and off (``RESILIENT_MCP_RAW_UPSTREAM_CALLS``), in interleaved rounds.

    python benchmarks/upstream_lane.py [--rounds 6] [--calls 500]

No host, no chain: what ``Upstream.call_tool`` costs on each path. Each round starts one upstream per mode (the order
reversed every other round), makes 50 warm-up calls, then ``--calls`` sequential calls. Printed per mode: the median
over rounds of the median latency (ms), and of this process's CPU per call (ms, every thread; the upstream is another
process), and every round's figures. A figure, not a test.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import anyio

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from resilient_mcp.policy.config import StdioUpstream  # noqa: E402
from resilient_mcp.upstream import NoHost, Upstream  # noqa: E402
from resilient_mcp.upstream.rawcall import RAW_SWITCH  # noqa: E402

UPSTREAM = HERE / "raw_upstream.py"


async def one_round(lane: str, calls: int) -> tuple[float, float]:
    os.environ[RAW_SWITCH] = lane
    config = StdioUpstream(command=sys.executable, args=[str(UPSTREAM)], connect_timeout_s=120)
    async with Upstream("raw", config, NoHost()).running(120) as up:
        for i in range(50):
            await up.call_tool("echo", {"message": f"warm {i}"}, timeout_s=60)
        times: list[float] = []
        cpu = time.process_time()
        for i in range(calls):
            began = time.perf_counter()
            await up.call_tool("echo", {"message": f"call {i}"}, timeout_s=60)
            times.append(time.perf_counter() - began)
        cpu = time.process_time() - cpu
        assert (up._raw is not None) is (lane == "on")
    return statistics.median(times) * 1000, cpu / calls * 1000


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--calls", type=int, default=500)
    args = p.parse_args()
    figures: dict[str, list[tuple[float, float]]] = {"on": [], "off": []}
    for r in range(args.rounds):
        for lane in ("on", "off") if r % 2 == 0 else ("off", "on"):
            figures[lane].append(await one_round(lane, args.calls))
    print(f"{'lane':<6}{'median ms':>10}{'CPU ms/call':>13}   per round (median ms, CPU ms)")
    for lane, rows in figures.items():
        med = statistics.median(m for m, _ in rows)
        cpu = statistics.median(c for _, c in rows)
        rounds = " ".join(f"({m:.3f} {c:.3f})" for m, c in rows)
        print(f"{lane:<6}{med:>10.3f}{cpu:>13.3f}   {rounds}")


if __name__ == "__main__":
    anyio.run(main)
