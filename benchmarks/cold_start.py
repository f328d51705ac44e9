"""Cold start: the time from spawning a stdio server to the answer of the first tools/call, direct vs ``wrap``.

    python benchmarks/cold_start.py [--rounds 5] [--baseline DIR] [--host-capabilities]

For each reference server, a Python one (PyPI ``mcp-server-time``) and a Node one (npm ``server-memory`` from
``.tools``), and for the raw JSON-RPC upstream of ``raw_upstream.py`` (the fastest server there is: what the proxy's
own start-up costs is measured in front of it), each mode is started fresh and timed from the spawn to the first
call's answer: ``initialize``, then one ``tools/call``, as a host does it. Modes:

- ``direct``: the server itself;
- ``wrap``: ``resilient-mcp wrap -- SERVER`` (this checkout);
- ``baseline``: (``--baseline DIR``) the same with the ``resilient_mcp`` package found in DIR, e.g. the previous
  main: ``mkdir /tmp/base && git archive main resilient_mcp | tar -x -C /tmp/base``.

Rounds are interleaved (each mode once per round, the order reversed every other round), so the load of a shared
machine falls on every mode alike. The host is an MCP SDK client declaring no capabilities (the case the proxy used
to restart every upstream for), or sampling and roots with ``--host-capabilities``.

Printed per server: the median first-call time of each mode, ``added`` (mode - direct) and ``x direct``; then the
proxy's own start-up (``wrap`` - ``direct`` in front of the raw upstream) and the target, first call through
``wrap`` <= direct + 50 ms + the proxy's own start-up, as ``margin_ms`` (>= 0 meets it). A figure, not a test: no
assertion. Writes ``benchmarks/out/cold_start.json``. Only stdio, only this machine; every process is stopped.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
OUT = HERE / "out"
PY = sys.executable
VENV_BIN = Path(PY).parent
MEMORY = REPO / ".tools/npm/node_modules/@modelcontextprotocol/server-memory/dist/index.js"
TARGET_MS = 50.0


async def _sampling(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    return types.CreateMessageResult(role="assistant", content=types.TextContent(text="-"), model="-")


async def _roots(context: Any) -> types.ListRootsResult:
    return types.ListRootsResult(roots=[])


def servers(tmp: Path) -> dict[str, tuple[list[str], str, dict[str, Any], dict[str, str]]]:
    """name -> (argv, tool, arguments, extra environment); servers that are not installed are left out."""
    found: dict[str, tuple[list[str], str, dict[str, Any], dict[str, str]]] = {
        "raw": ([PY, str(HERE / "raw_upstream.py")], "echo", {"message": "hi"}, {}),
    }
    time_server = VENV_BIN / "mcp-server-time"
    if time_server.exists():
        found["mcp-server-time"] = (
            [str(time_server), "--local-timezone", "UTC"],
            "get_current_time",
            {"timezone": "UTC"},
            {},
        )
    from shutil import which

    node = which("node")
    if node and MEMORY.exists():
        found["server-memory"] = (
            [node, str(MEMORY)],
            "read_graph",
            {},
            {"MEMORY_FILE_PATH": str(tmp / "memory.jsonl")},
        )
    return found


async def first_call(
    argv: list[str], tool: str, arguments: dict[str, Any], env: dict[str, str], log: Path, host: bool
) -> float:
    """Seconds from the spawn of ``argv`` to the answer of its first ``tools/call`` (initialize included)."""
    params = StdioServerParameters(command=argv[0], args=argv[1:], env={**os.environ, **env}, cwd=str(OUT))
    callbacks: dict[str, Any] = {"sampling_callback": _sampling, "list_roots_callback": _roots} if host else {}
    with log.open("a") as err, anyio.fail_after(120):
        started = time.perf_counter()
        async with Client(stdio_client(params, errlog=err), mode="legacy", cache=None, **callbacks) as client:
            result = await client.call_tool(tool, arguments)
            elapsed = time.perf_counter() - started
    if result.is_error:
        raise RuntimeError(f"{argv[0]} {tool}: {result.content}")
    return elapsed


def modes(args: argparse.Namespace, state: Path) -> dict[str, Callable[[list[str]], tuple[list[str], dict[str, str]]]]:
    def wrap_with(pythonpath: str) -> Callable[[list[str]], tuple[list[str], dict[str, str]]]:
        def build(argv: list[str]) -> tuple[list[str], dict[str, str]]:
            cmd = [PY, "-m", "resilient_mcp.cli", "wrap", "--state-dir", str(state), "--", *argv]
            return cmd, {"PYTHONPATH": pythonpath}

        return build

    found: dict[str, Callable[[list[str]], tuple[list[str], dict[str, str]]]] = {
        "direct": lambda argv: (argv, {}),
        "wrap": wrap_with(str(REPO)),
    }
    if args.baseline:
        found["baseline"] = wrap_with(str(Path(args.baseline).resolve()))
    return found


async def run(args: argparse.Namespace) -> dict[str, Any]:
    OUT.mkdir(exist_ok=True)
    samples: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory(prefix="cold-start-") as tmp_dir:
        tmp = Path(tmp_dir)
        targets = servers(tmp)
        how = modes(args, tmp / "state")
        for n in range(args.rounds):
            order = list(how) if n % 2 == 0 else list(reversed(how))
            for server, (argv, tool, arguments, env) in targets.items():
                for mode in order:
                    cmd, extra = how[mode](argv)
                    log = OUT / f"stderr-cold-{server}-{mode}.log"
                    took = await first_call(cmd, tool, arguments, {**env, **extra}, log, args.host_capabilities)
                    samples.setdefault(server, {}).setdefault(mode, []).append(took * 1000)
    return report(samples, args)


def report(samples: dict[str, dict[str, list[float]]], args: argparse.Namespace) -> dict[str, Any]:
    medians = {s: {m: statistics.median(v) for m, v in by_mode.items()} for s, by_mode in samples.items()}
    own = medians["raw"]["wrap"] - medians["raw"]["direct"]
    result: dict[str, Any] = {
        "rounds": args.rounds,
        "host_capabilities": "sampling, roots" if args.host_capabilities else "none",
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "proxy_own_startup_ms": round(own, 1),
        "servers": {},
    }
    for server, by_mode in medians.items():
        direct = by_mode["direct"]
        row: dict[str, Any] = {
            mode: {"median_ms": round(v, 1), "added_ms": round(v - direct, 1), "x_direct": round(v / direct, 2)}
            for mode, v in by_mode.items()
        }
        row["margin_ms"] = round(direct + TARGET_MS + own - by_mode["wrap"], 1)
        row["samples_ms"] = {m: [round(x, 1) for x in v] for m, v in samples[server].items()}
        result["servers"][server] = row
    return result


def show(result: dict[str, Any]) -> None:
    print(
        f"cold start, first tools/call after spawn ({result['rounds']} rounds, host declares "
        f"{result['host_capabilities']})"
    )
    print(f"{'server':18} {'mode':9} {'median ms':>10} {'added ms':>9} {'x direct':>9}")
    for server, row in result["servers"].items():
        for mode, cell in row.items():
            if isinstance(cell, dict) and "median_ms" in cell:
                print(f"{server:18} {mode:9} {cell['median_ms']:>10} {cell['added_ms']:>9} {cell['x_direct']:>9}")
    print(f"proxy_own_startup_ms (wrap - direct, raw upstream): {result['proxy_own_startup_ms']}")
    for server, row in result["servers"].items():
        if server != "raw":
            print(
                f"{server}: margin_ms = direct + {TARGET_MS:.0f} + own start-up - wrap = {row['margin_ms']} "
                "(>= 0 meets the target)"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--baseline", metavar="DIR", help="also run the resilient_mcp package found in DIR")
    parser.add_argument("--host-capabilities", action="store_true", help="the host declares sampling and roots")
    args = parser.parse_args()
    result = anyio.run(run, args)
    show(result)
    (OUT / "cold_start.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
