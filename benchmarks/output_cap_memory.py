"""Peak memory of capping one huge tool result with the output stage (and storing its full copy).

For each kind of text (ASCII, multi-byte UTF-8, JSON) it builds one result of ``--mb`` megabytes, then runs it
through ``OutputCap`` with the default 100 kB cap and a real ``StateStore`` in a temporary directory (the full copy
goes to SQLite). Two figures per kind, each measured after the result already exists:

- Python heap peak (``tracemalloc``, every thread, so the store's worker is included), as a multiple of the result
  size and of the cap;
- growth of the process's peak RSS over its RSS before the call (``VmHWM`` reset through ``/proc/self/clear_refs``
  on Linux, else ``ru_maxrss``, a lower bound), which also sees SQLite's own buffers.

Usage: ``python benchmarks/output_cap_memory.py [--mb 50] [--cap 100000] [--kinds ascii,utf8,json]``
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
import tracemalloc
from typing import Any

import anyio
import mcp_types as types
import structlog

from resilient_mcp.call.chain import ToolCall
from resilient_mcp.call.meta import TRUNCATED_META
from resilient_mcp.policy import OutputRule, ToolRule
from resilient_mcp.stages.output import OutputCap, StoredOutputs
from resilient_mcp.state.sqlite import StateStore
from resilient_mcp.text import utf8_len

CALL = ToolCall(name="bench__dump", arguments={}, upstream="bench", upstream_tool="dump", rule=ToolRule())


def make_text(kind: str, size: int) -> str:
    if kind == "ascii":
        line = "2026-01-01T00:00:00Z INFO request served in 12 ms path=/api/v1/items?page=42\n"
    elif kind == "utf8":
        line = "Grüße aus Köln — 東京からこんにちは — emoji 😀✓ — naïve café\n"
    else:
        row = json.dumps({"id": 123456, "name": "naïve “row”", "tags": ["a", "b"], "score": 0.333}, ensure_ascii=False)
        n = size // (len(row.encode()) + 1)
        return "[" + ",".join([row] * n) + "]"
    return line * (size // len(line.encode()))


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(field + ":"))


def reset_peak_rss() -> int:
    """Reset the peak RSS (Linux ``clear_refs``) and return the current RSS; without it, the lifetime peak."""
    try:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")
        return _status_kb("VmRSS") * 1024
    except OSError:
        return max_rss_bytes()


def max_rss_bytes() -> int:
    try:
        return _status_kb("VmHWM") * 1024
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: kilobytes


async def cap_once(store: StateStore, result: types.CallToolResult, cap: int) -> types.CallToolResult:
    async def call_next(call: ToolCall) -> types.CallToolResult:
        return result

    return await OutputCap(OutputRule(max_text_bytes=cap), None, store)(CALL, call_next)


async def measure(kind: str, mb: int, cap: int) -> dict[str, Any]:
    text = make_text(kind, mb * 1_000_000)
    size = utf8_len(text)
    result = types.CallToolResult(content=[types.TextContent(text=text)])
    with tempfile.TemporaryDirectory() as tmp:
        async with await StateStore.open(tmp) as store:
            rss_before = reset_peak_rss()
            started = time.perf_counter()
            capped = await cap_once(store, result, cap)
            elapsed = time.perf_counter() - started
            rss_growth = max_rss_bytes() - rss_before

            tracemalloc.start()
            baseline = tracemalloc.get_traced_memory()[0]
            capped = await cap_once(store, result, cap)
            peak = tracemalloc.get_traced_memory()[1] - baseline
            tracemalloc.stop()

            handle = (capped.meta or {})[TRUNCATED_META]["handle"]
            page = await StoredOutputs(store).read_page(handle, 0, cap)
            assert text.encode().startswith(page.text.encode())
    return {
        "kind": kind,
        "result_bytes": size,
        "cap_bytes": cap,
        "seconds": round(elapsed, 3),
        "heap_peak_bytes": peak,
        "heap_peak_x_result": round(peak / size, 4),
        "heap_peak_x_cap": round(peak / cap, 1),
        "rss_growth_bytes": rss_growth,
        "rss_growth_x_result": round(rss_growth / size, 3),
    }


async def main() -> None:
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))  # stdout is for the figures
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=50)
    parser.add_argument("--cap", type=int, default=100_000)
    parser.add_argument("--kinds", default="ascii,utf8,json")
    args = parser.parse_args()
    for kind in args.kinds.split(","):
        row = await measure(kind, args.mb, args.cap)
        print(
            f"{row['kind']:>5}: result {row['result_bytes'] / 1e6:.1f} MB, cap {row['cap_bytes']} B, "
            f"{row['seconds']} s; heap peak {row['heap_peak_bytes'] / 1e6:.2f} MB = "
            f"{row['heap_peak_x_result']}x result = {row['heap_peak_x_cap']}x cap; "
            f"peak RSS grew {row['rss_growth_bytes'] / 1e6:.1f} MB = {row['rss_growth_x_result']}x result"
        )
        print(json.dumps(row))


if __name__ == "__main__":
    anyio.run(main)
