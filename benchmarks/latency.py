"""Latency of one tool call through resilient-mcp, against a direct call and FastMCP's proxy, in one run.

    python benchmarks/latency.py            # ~2-3 min on a 2-core machine; writes benchmarks/out/latency.json
    python benchmarks/latency.py --short    # the CI version, well under a minute

One client (the SDK's ``ClientSession``, legacy handshake) makes sequential ``tools/call`` of an echo tool, each
with a new message (so an idempotent write is never a replay), after a warm-up. Modes, all in front of
``raw_upstream.py`` (hand-written JSON-RPC, the fastest upstream there is):

- ``direct``: the raw upstream itself, over stdio;
- ``resilient``: ``resilient-mcp wrap -- python raw_upstream.py``, default chain (echo is unannotated, so
  write_unsafe: validation, output caps and idempotency all on);
- ``resilient_read_only``: the same with a policy marking echo read_only (no idempotency stage);
- ``fastmcp``: FastMCP's proxy (``fastmcp_proxy.py``, in its own venv), when it can be installed;
- ``resilient_http``: ``resilient-mcp wrap --http 127.0.0.1:PORT``, the client over streamable HTTP;
- ``resilient_baseline`` / ``resilient_read_only_baseline`` (``--baseline DIR``): ``resilient`` and
  ``resilient_read_only`` with the package found in DIR (before/after a change, in the same rounds);
- ``floor_relay`` / ``floor_sdk`` (``--floors``): a raw line relay (the physical floor of one Python hop) and the
  SDK on both sides with nothing else;
- ``scale_1x50`` / ``scale_20x50``: ``resilient-mcp serve`` with 1 or 20 raw upstreams of 50 tools each; the
  calls cycle through every tool of every upstream;
- ``ops_off`` / ``ops_metrics`` / ``ops_on``: ``resilient-mcp serve`` (stdio), operations off; metrics and the status
  page only (``metrics.listen`` on a loopback port); and everything on: also OpenTelemetry traces through the
  batching OTLP/HTTP exporter to a local sink on 127.0.0.1 (in this process). After the rounds, the three are called
  in turn, call by call, and the summary gives the median added latency per call (ms and percent of ops off).

HTTP load (``--http-sessions`` x ``--http-calls``, default 50 x 100): that many concurrent SDK client sessions,
each making its calls one after another, against a direct SDK streamable HTTP server (``sdk_http_server.py``) and
against ``resilient-mcp wrap --http`` in front of the raw upstream (default chain); throughput (calls per second of
wall time, from the first call to the last answer) and the p99 latency per call, in alternating rounds; the summary
gives the medians' ratios to direct, and the paired ratios (the median over rounds of each round's ratio to direct's
round next to it: a shared machine's load swings between rounds mostly cancel out of them). ``--short`` is the CI
version: fewer calls, a 10 x 20 load, no scale or operations modes, the floors included; it prints the same ratios
(no assertion: the machine decides the figures).

Modes are measured in interleaved rounds (every mode gets a block of calls per round), so drift of the machine
affects all alike. Every process it starts is stopped at the end; only 127.0.0.1 is used.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import mcp
from bench_procs import free_port, otlp_sink, process_group, reap_leftovers, wait_for_port
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

HERE = Path(__file__).resolve().parent
RAW = str(HERE / "raw_upstream.py")
OUT = HERE / "out"
FASTMCP_VENV = HERE / ".venv-fastmcp"
FASTMCP_SPEC = "fastmcp==4.2.3"
PY = sys.executable
RATIO_TARGET = 2.2
"""``wrap`` defaults, read and write: median at most this many times direct's (issue 21)."""
FASTMCP_SHARE_TARGET = 1 / 5
"""``wrap`` defaults: added latency at most this share of FastMCP's proxy's."""
HTTP_THROUGHPUT_TARGET = 0.95
"""HTTP load: ``wrap --http`` at least this share of a direct SDK HTTP server's throughput, p99 no worse."""


@dataclass
class Mode:
    name: str
    about: str
    open: Callable[[], Any]
    """An async context manager yielding an initialized ``ClientSession``."""
    tools: list[str] = field(default_factory=lambda: ["echo"])
    samples: list[float] = field(default_factory=list)
    warm_every_tool: bool = False
    """Warm up with one call to every tool first (steady state, not first-call costs, is what scale compares)."""


# --- how each mode is reached ----------------------------------------------------------------------------------------


def resilient_cmd() -> list[str]:
    script = Path(PY).with_name("resilient-mcp")
    return [str(script)] if script.exists() else [PY, "-m", "resilient_mcp.cli"]


@asynccontextmanager
async def stdio_session(command: list[str], errlog: Path, **env: str) -> AsyncIterator[ClientSession]:
    # cwd: not the repository root, where ``python -m`` would find the working tree before a PYTHONPATH baseline
    params = StdioServerParameters(command=command[0], args=command[1:], env={**os.environ, **env}, cwd=str(OUT))
    with errlog.open("a") as err:
        async with stdio_client(params, errlog=err) as (read, write), ClientSession(read, write) as session:
            with anyio.fail_after(60):
                await session.initialize()
            yield session


@asynccontextmanager
async def http_session(command: list[str], port: int, errlog: Path) -> AsyncIterator[ClientSession]:
    with errlog.open("a") as err:
        async with process_group(command, err):
            await wait_for_port("127.0.0.1", port, timeout_s=30)
            url = f"http://127.0.0.1:{port}/mcp"
            async with streamable_http_client(url) as streams, ClientSession(streams[0], streams[1]) as session:
                with anyio.fail_after(60):
                    await session.initialize()
                yield session


def scale_config(tmp: Path, upstreams: int, tools: int, run_id: str) -> Path:
    """``upstreams`` raw upstreams of ``tools`` tools each, default policy but for the session's call budget (every
    tool is called once in the warm-up, which can be more than the default budget of 1000 calls)."""
    policy = tmp / "unlimited-session.yaml"
    policy.write_text("version: 1\nsession: {max_tool_calls: null}\n")
    lines = [f"policies: [{json.dumps(str(policy))}]", "upstreams:"]
    for i in range(upstreams):
        args = json.dumps([RAW, "--tools", str(tools), "--run-id", run_id])
        lines.append(f"  u{i:02d}: {{command: {json.dumps(PY)}, args: {args}}}")
    lines.append(f"state_dir: {json.dumps(str(tmp / f'state-scale-{upstreams}'))}")
    path = tmp / f"scale-{upstreams}x{tools}.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def scale_tools(upstreams: int, tools: int) -> list[str]:
    names = ["echo", *(f"echo_{i}" for i in range(1, tools))]
    if upstreams == 1:
        return names
    return [f"u{u:02d}__{name}" for name in names for u in range(upstreams)]


def ops_config(tmp: Path, name: str, run_id: str, *, tracing: bool, metrics: bool) -> Path:
    """``resilient-mcp serve`` of the raw upstream (stdio), with or without traces and metrics, otherwise identical."""
    args = json.dumps([RAW, "--run-id", run_id])
    lines = [
        f"upstreams: {{raw: {{command: {json.dumps(PY)}, args: {args}}}}}",
        f"state_dir: {json.dumps(str(tmp / f'state-{name}'))}",
        f"tracing: {{enabled: {'true' if tracing else 'false'}}}",
    ]
    if metrics:
        lines.append(f"metrics: {{listen: '127.0.0.1:{free_port()}'}}")
    path = tmp / f"{name}.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def build_modes(
    args: argparse.Namespace, tmp: Path, run_id: str, otlp: str | None = None
) -> tuple[list[Mode], dict[str, str]]:
    raw = [PY, RAW, "--run-id", run_id]
    rmcp = resilient_cmd()
    policy = tmp / "echo-read-only.yaml"
    policy.write_text("version: 1\ntools:\n  echo: {effect: read_only}\n")
    skipped: dict[str, str] = {}

    def wrap(name: str, *extra: str) -> list[str]:
        return [*rmcp, "wrap", "--state-dir", str(tmp / f"state-{name}"), *extra, "--", *raw]

    def log(name: str) -> Path:
        return OUT / f"stderr-{name}.log"

    modes = [
        Mode("direct", "raw upstream, called directly (stdio)", lambda: stdio_session(raw, log("direct"))),
        Mode(
            "resilient",
            "resilient-mcp wrap, default chain (write_unsafe: idempotency on)",
            lambda: stdio_session(wrap("resilient"), log("resilient")),
        ),
        Mode(
            "resilient_read_only",
            "resilient-mcp wrap, echo marked read_only (no idempotency stage)",
            lambda: stdio_session(wrap("ro", "--policy", str(policy)), log("resilient_read_only")),
        ),
    ]
    if args.baseline is not None:  # another copy of the package, e.g. `git archive HEAD resilient_mcp | tar -x -C DIR`
        base = [PY, "-m", "resilient_mcp.cli", "wrap", "--state-dir", str(tmp / "state-baseline"), "--", *raw]
        modes.append(
            Mode(
                "resilient_baseline",
                f"as resilient, with the package found in {args.baseline}",
                lambda: stdio_session(base, log("resilient_baseline"), PYTHONPATH=str(args.baseline)),
            )
        )
        base_ro = [*base[:5], str(tmp / "state-baseline-ro"), "--policy", str(policy), *base[6:]]
        modes.append(
            Mode(
                "resilient_read_only_baseline",
                f"as resilient_read_only, with the package found in {args.baseline}",
                lambda: stdio_session(base_ro, log("resilient_read_only_baseline"), PYTHONPATH=str(args.baseline)),
            )
        )
    fastmcp_python, why = fastmcp_interpreter(args)
    if fastmcp_python is not None:
        fm = [fastmcp_python, str(HERE / "fastmcp_proxy.py"), "--run-id", run_id]
        modes.append(
            Mode(
                "fastmcp",
                f"FastMCP's proxy ({fastmcp_version(fastmcp_python)}), stdio",
                lambda: stdio_session(fm, log("fastmcp")),
            )
        )
    else:
        skipped["fastmcp"] = why
    if not args.skip_http:
        port = free_port()
        http = wrap("http", "--http", f"127.0.0.1:{port}")
        modes.append(
            Mode(
                "resilient_http",
                "resilient-mcp wrap --http, client over streamable HTTP",
                lambda: http_session(http, port, log("resilient_http")),
            )
        )
    if args.floors:
        floors = {
            "floor_relay": ("floor_relay.py", "floor: a raw line relay (asyncio pipes, no parsing)"),
            "floor_sdk": ("floor_sdk_proxy.py", "floor: SDK Server + ClientSession forwarding, nothing else"),
        }
        for name, (script, about) in floors.items():
            floor_cmd = [PY, str(HERE / script), "--run-id", run_id]
            modes.append(Mode(name, about, lambda c=floor_cmd, m=name: stdio_session(c, log(m))))
    if otlp is not None:
        for name, tracing, metrics, about in (
            ("ops_off", False, False, "serve, operations off (the same config otherwise)"),
            ("ops_metrics", False, True, "serve, metrics + status page on, no traces"),
            ("ops_on", True, True, "serve, traces (batching OTLP/HTTP to a local sink) + metrics + status on"),
        ):
            config = ops_config(tmp, name, run_id, tracing=tracing, metrics=metrics)
            env = {"OTEL_EXPORTER_OTLP_ENDPOINT": otlp} if tracing else {}
            cmd = [*rmcp, "serve", "--config", str(config)]
            modes.append(Mode(name, about, lambda c=cmd, m=name, e=env: stdio_session(c, log(m), **e)))
    if not args.skip_scale:
        for n in (1, 20):
            config = scale_config(tmp, n, 50, run_id)
            modes.append(
                Mode(
                    f"scale_{n}x50",
                    f"resilient-mcp serve, {n} upstream(s) x 50 tools, calls cycle all",
                    (lambda c=config, m=f"scale_{n}x50": stdio_session([*rmcp, "serve", "--config", str(c)], log(m))),
                    tools=scale_tools(n, 50),
                    warm_every_tool=True,
                )
            )
    return modes, skipped


# --- FastMCP's own venv ----------------------------------------------------------------------------------------------


def fastmcp_interpreter(args: argparse.Namespace) -> tuple[str | None, str]:
    """The venv python that has FastMCP (created on first use), or None and why not."""
    if args.skip_fastmcp:
        return None, "skipped with --skip-fastmcp"
    python = FASTMCP_VENV / "bin" / "python"
    try:
        if not python.exists():
            print(f"creating {FASTMCP_VENV} with {FASTMCP_SPEC} (once) ...", flush=True)
            subprocess.run([sys.executable, "-m", "venv", str(FASTMCP_VENV)], check=True, timeout=120)
        probe = [str(python), "-c", "import fastmcp.client.transports"]
        if subprocess.run(probe, capture_output=True, timeout=60).returncode != 0:
            pip = [str(python), "-m", "pip", "install", "-q", FASTMCP_SPEC]
            done = subprocess.run(pip, capture_output=True, text=True, timeout=600)
            if done.returncode != 0:
                return None, f"pip install {FASTMCP_SPEC} failed: {done.stderr.strip().splitlines()[-1:]}"
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"cannot set up {FASTMCP_VENV}: {exc}"
    return str(python), ""


def fastmcp_version(python: str) -> str:
    code = "import fastmcp, importlib.metadata as m; print(fastmcp.__version__, 'on mcp', m.version('mcp'))"
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60)
    return "fastmcp " + out.stdout.strip()


# --- measuring -------------------------------------------------------------------------------------------------------


async def calls(mode: Mode, session: ClientSession, start: int, n: int, *, keep: bool) -> None:
    tools = mode.tools
    for i in range(start, start + n):
        message = f"{mode.name}-{i}"
        t0 = time.perf_counter()
        result = await session.call_tool(tools[i % len(tools)], {"message": message})
        elapsed = time.perf_counter() - t0
        text = getattr(result.content[0], "text", None) if result.content else None
        if result.is_error or text != message:
            raise RuntimeError(f"{mode.name}: unexpected result {result.model_dump(exclude_none=True)}")
        if keep:
            mode.samples.append(elapsed * 1000)


def stats(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)

    def pct(p: float) -> float:
        return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))]

    return {
        "n": len(ordered),
        "median_ms": statistics.median(ordered),
        "p95_ms": pct(95),
        "p99_ms": pct(99),
        "mean_ms": statistics.fmean(ordered),
        "min_ms": ordered[0],
    }


def report(
    modes: list[Mode], skipped: dict[str, str], args: argparse.Namespace, paired: dict[str, list[float]] | None = None
) -> dict[str, Any]:
    by = {m.name: stats(m.samples) for m in modes}
    direct = by["direct"]["median_ms"]
    for s in by.values():
        s["ratio_to_direct"] = s["median_ms"] / direct
        s["added_ms"] = s["median_ms"] - direct
    summary: dict[str, Any] = {
        "ratio_resilient_to_direct": by["resilient"]["ratio_to_direct"],
        "ratio_resilient_read_only_to_direct": by["resilient_read_only"]["ratio_to_direct"],
        "target_ratio_to_direct": RATIO_TARGET,
    }
    summary["meets_ratio_target"] = (
        max(summary["ratio_resilient_to_direct"], summary["ratio_resilient_read_only_to_direct"]) <= RATIO_TARGET
    )
    if "fastmcp" in by:
        fm_added = by["fastmcp"]["added_ms"]
        for name in ("resilient", "resilient_read_only"):
            summary[f"added_{name}_to_added_fastmcp"] = by[name]["added_ms"] / fm_added
        summary["target_added_to_added_fastmcp"] = FASTMCP_SHARE_TARGET
        summary["meets_fastmcp_target"] = (
            max(summary["added_resilient_to_added_fastmcp"], summary["added_resilient_read_only_to_added_fastmcp"])
            <= FASTMCP_SHARE_TARGET
        )
    for name in ("resilient_baseline", "resilient_read_only_baseline"):  # --baseline: the same, before/after
        if name in by:
            summary[f"ratio_{name}_to_direct"] = by[name]["ratio_to_direct"]
    if "floor_relay" in by:
        summary["ratio_floor_relay_to_direct"] = by["floor_relay"]["ratio_to_direct"]
    if "resilient_http" in by:
        summary["http_to_stdio_median"] = by["resilient_http"]["median_ms"] / by["resilient"]["median_ms"]
    if paired:
        off = paired["ops_off"]
        base = statistics.median(off)
        summary["ops_paired_calls"] = len(off)
        summary["ops_off_median_ms"] = base
        for name, key in (("ops_metrics", "metrics"), ("ops_on", "all")):  # all: traces + metrics + status
            diffs = [b - a for a, b in zip(off, paired[name], strict=True)]
            summary[f"ops_{key}_added_ms"] = statistics.median(diffs)
            summary[f"ops_{key}_added_pct"] = statistics.median(diffs) / base * 100
        summary["ops_target_added_pct"] = 10.0
        summary["meets_ops_target"] = summary["ops_all_added_pct"] < 10.0
    if "scale_1x50" in by and "scale_20x50" in by:
        summary["scale_added_20x50_to_1x50"] = by["scale_20x50"]["added_ms"] / by["scale_1x50"]["added_ms"]
    return {
        "benchmark": "latency",
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {
            "cores": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "mcp": mcp.__version__ if hasattr(mcp, "__version__") else _version("mcp"),
        },
        "calls_per_mode": args.calls,
        "warmup_per_mode": args.warmup,
        "rounds": args.rounds,
        "modes": {m.name: {"about": m.about, **by[m.name]} for m in modes},
        "skipped": skipped,
        "summary": summary,
    }


def _version(dist: str) -> str:
    from importlib.metadata import version

    return version(dist)


def show(result: dict[str, Any]) -> None:
    print(f"\n{'mode':<22}{'median':>9}{'p95':>9}{'p99':>9}{'x direct':>10}{'added':>9}   (ms)")
    for name, s in result.get("modes", {}).items():
        print(
            f"{name:<22}{s['median_ms']:>9.3f}{s['p95_ms']:>9.3f}{s['p99_ms']:>9.3f}{s['ratio_to_direct']:>10.2f}"
            f"{s['added_ms']:>9.3f}"
        )
    for name, why in result.get("skipped", {}).items():
        print(f"{name:<22}skipped: {why}")
    if "http_load" in result:
        load = result["http_load"]
        print(f"\nHTTP load, {load['sessions']} sessions x {load['calls_per_session']} calls (median of rounds)")
        print(f"{'target':<22}{'calls/s':>9}{'p50':>9}{'p99':>9}   (ms)")
        for name, t in load["targets"].items():
            print(f"{name:<22}{t['throughput_per_s']:>9.1f}{t['p50_ms']:>9.3f}{t['p99_ms']:>9.3f}")
    print()
    for key, value in result["summary"].items():
        print(f"{key:<46}{value:.3f}" if isinstance(value, float) else f"{key:<46}{value}")


async def ops_pairs(modes: list[Mode], sessions: dict[str, ClientSession], n: int) -> dict[str, list[float]]:
    """Operations off, metrics and status only, and everything on, call by call (rotating which goes first), so all
    see the same machine load: the added cost per call is the median of the differences to the call with ops off."""
    by = {m.name: m for m in modes}
    names = ["ops_off", "ops_metrics", "ops_on"]
    if any(name not in by for name in names):
        return {}
    paired: dict[str, list[float]] = {name: [] for name in names}
    for i in range(n):
        order = names[i % 3 :] + names[: i % 3]  # each goes first, second and third in turn
        for name in order:
            mode = by[name]
            before = len(mode.samples)
            await calls(mode, sessions[name], 10_000_000 + i, 1, keep=True)
            paired[name].append(mode.samples.pop())
            assert len(mode.samples) == before
    return paired


# --- HTTP load: many sessions at once ------------------------------------------------------------------------------


async def http_load(url: str, sessions: int, calls: int, tag: str) -> dict[str, float]:
    """``sessions`` concurrent client sessions of ``calls`` sequential calls each: throughput and latency."""
    latencies: list[float] = []
    ready, go, done = anyio.Event(), anyio.Event(), anyio.Event()
    counts = {"ready": 0, "done": 0}
    span = {"start": 0.0, "end": 0.0}

    async def one(s: int) -> None:
        async with streamable_http_client(url) as streams, ClientSession(streams[0], streams[1]) as session:
            with anyio.fail_after(120):
                await session.initialize()
                await session.call_tool("echo", {"message": "warm-up"})  # the client's first-call list_tools
            counts["ready"] += 1
            if counts["ready"] == sessions:
                ready.set()
            await go.wait()
            for i in range(calls):
                message = f"{tag}-{s}-{i}"
                t0 = time.perf_counter()
                with anyio.fail_after(120):
                    result = await session.call_tool("echo", {"message": message})
                latencies.append((time.perf_counter() - t0) * 1000)
                text = getattr(result.content[0], "text", None) if result.content else None
                if result.is_error or text != message:
                    raise RuntimeError(f"http load {tag}: unexpected result {result.model_dump(exclude_none=True)}")
            counts["done"] += 1
            if counts["done"] == sessions:
                span["end"] = time.perf_counter()
                done.set()
            await done.wait()  # no session closes while others are measured

    async with anyio.create_task_group() as tg:
        for s in range(sessions):
            tg.start_soon(one, s)
        with anyio.fail_after(300):
            await ready.wait()
        span["start"] = time.perf_counter()
        go.set()
    stats_ = stats(latencies)
    return {"throughput_per_s": len(latencies) / (span["end"] - span["start"]), **stats_}


async def http_load_rounds(args: argparse.Namespace, tmp: Path, run_id: str) -> dict[str, Any]:
    """The HTTP load against a direct SDK HTTP server and ``wrap --http``, in alternating rounds."""
    direct_port, proxy_port = free_port(), free_port()
    direct = [PY, str(HERE / "sdk_http_server.py"), "--port", str(direct_port), "--run-id", run_id]
    state = str(tmp / "state-http-load")
    proxy = [*resilient_cmd(), "wrap", "--state-dir", state, "--http", f"127.0.0.1:{proxy_port}", "--"]
    proxy += [PY, RAW, "--run-id", run_id]
    targets = {"direct_sdk_http": (direct, direct_port), "resilient_http_load": (proxy, proxy_port)}
    envs: dict[str, dict[str, str]] = {}
    if args.baseline is not None:  # the same ``wrap --http``, the package found in DIR (the script, not ``-m``: the
        # working directory would come first on ``sys.path``)
        base_port = free_port()
        base = [*resilient_cmd(), "wrap", "--state-dir", str(tmp / "state-http-baseline")]
        base += ["--http", f"127.0.0.1:{base_port}", "--", PY, RAW, "--run-id", run_id]
        targets["resilient_http_baseline"] = (base, base_port)
        envs["resilient_http_baseline"] = {**os.environ, "PYTHONPATH": str(args.baseline)}
    rounds: dict[str, list[dict[str, float]]] = {name: [] for name in targets}
    async with AsyncExitStack() as stack:
        for name, (command, port) in targets.items():
            err = stack.enter_context((OUT / f"stderr-{name}.log").open("a"))
            await stack.enter_async_context(process_group(command, err, envs.get(name)))
            await wait_for_port("127.0.0.1", port, timeout_s=30)
        for r in range(args.http_rounds):
            for name in targets if r % 2 == 0 else reversed(list(targets)):
                url = f"http://127.0.0.1:{targets[name][1]}/mcp"
                rounds[name].append(await http_load(url, args.http_sessions, args.http_calls, f"{name}-{r}"))
    out: dict[str, Any] = {"sessions": args.http_sessions, "calls_per_session": args.http_calls, "targets": {}}
    for name, got in rounds.items():
        out["targets"][name] = {
            "throughput_per_s": statistics.median(g["throughput_per_s"] for g in got),
            "p50_ms": statistics.median(g["median_ms"] for g in got),
            "p99_ms": statistics.median(g["p99_ms"] for g in got),
            "rounds": got,
        }
    d, p = out["targets"]["direct_sdk_http"], out["targets"]["resilient_http_load"]
    out["throughput_ratio"] = p["throughput_per_s"] / d["throughput_per_s"]
    out["p99_ratio"] = p["p99_ms"] / d["p99_ms"]
    out.update(paired_ratios(rounds["resilient_http_load"], rounds["direct_sdk_http"], ""))
    if "resilient_http_baseline" in out["targets"]:
        b = out["targets"]["resilient_http_baseline"]
        out["baseline_throughput_ratio"] = b["throughput_per_s"] / d["throughput_per_s"]
        out["baseline_p99_ratio"] = b["p99_ms"] / d["p99_ms"]
        out.update(paired_ratios(rounds["resilient_http_baseline"], rounds["direct_sdk_http"], "baseline_"))
    return out


def paired_ratios(target: list[dict[str, float]], direct: list[dict[str, float]], prefix: str) -> dict[str, float]:
    """The median over rounds of each round's ratio to direct's same round (run next to it): on a shared machine
    the load swings between rounds (direct alone: 43 vs 98 calls/s in two rounds of one run), which the ratio of
    medians mixes in and the paired ratio mostly cancels."""
    return {
        f"{prefix}paired_throughput_ratio": statistics.median(
            t["throughput_per_s"] / d["throughput_per_s"] for t, d in zip(target, direct, strict=True)
        ),
        f"{prefix}paired_p99_ratio": statistics.median(
            t["p99_ms"] / d["p99_ms"] for t, d in zip(target, direct, strict=True)
        ),
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    OUT.mkdir(exist_ok=True)
    for old in OUT.glob("stderr-*.log"):
        old.unlink()
    run_id = uuid.uuid4().hex[:12]
    with (
        tempfile.TemporaryDirectory(prefix=f"rmcp-bench-{run_id}-") as tmp_name,
        otlp_sink() as sink,
    ):
        try:
            if args.http_only:
                load = await http_load_rounds(args, Path(tmp_name), run_id)
                return {"http_load": load, "summary": http_summary(load)}
            modes, skipped = build_modes(args, Path(tmp_name), run_id, None if args.skip_ops else sink.url)
            async with AsyncExitStack() as stack:
                sessions = {}
                for mode in modes:
                    sessions[mode.name] = await stack.enter_async_context(mode.open())
                    warmup = max(args.warmup, len(mode.tools)) if mode.warm_every_tool else args.warmup
                    await calls(mode, sessions[mode.name], -warmup, warmup, keep=False)
                per_round = args.calls // args.rounds
                for r in range(args.rounds):
                    for mode in modes if r % 2 == 0 else reversed(modes):
                        await calls(mode, sessions[mode.name], r * per_round, per_round, keep=True)
                paired = await ops_pairs(modes, sessions, args.calls)
            load = None if args.skip_http_load else await http_load_rounds(args, Path(tmp_name), run_id)
        finally:
            leftovers = reap_leftovers(run_id)
            if leftovers:
                print(f"stopped {leftovers} leftover process(es) of this run", file=sys.stderr)
    result = report(modes, skipped, args, paired)
    if load is not None:
        result["http_load"] = load
        result["summary"].update(http_summary(load))
    if not args.skip_ops:
        result["summary"]["ops_spans_exported_bytes"] = sink.received
    return result


def http_summary(load: dict[str, Any]) -> dict[str, Any]:
    summary: dict[str, Any] = {"http_load": f"{load['sessions']} sessions x {load['calls_per_session']} calls"}
    summary["http_throughput_ratio_to_direct_sdk"] = load["throughput_ratio"]
    summary["http_p99_ratio_to_direct_sdk"] = load["p99_ratio"]
    summary["http_paired_throughput_ratio"] = load["paired_throughput_ratio"]
    summary["http_paired_p99_ratio"] = load["paired_p99_ratio"]
    if "baseline_throughput_ratio" in load:
        summary["http_baseline_throughput_ratio_to_direct_sdk"] = load["baseline_throughput_ratio"]
        summary["http_baseline_p99_ratio_to_direct_sdk"] = load["baseline_p99_ratio"]
        summary["http_baseline_paired_throughput_ratio"] = load["baseline_paired_throughput_ratio"]
        summary["http_baseline_paired_p99_ratio"] = load["baseline_paired_p99_ratio"]
    summary["target_http_throughput_ratio"] = HTTP_THROUGHPUT_TARGET
    summary["meets_http_target"] = load["throughput_ratio"] >= HTTP_THROUGHPUT_TARGET and load["p99_ratio"] <= 1
    return summary


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--calls", type=int, default=500, help="measured calls per mode (default 500)")
    p.add_argument("--warmup", type=int, default=50, help="unmeasured calls per mode first (default 50)")
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds the calls are split into (default 5)")
    p.add_argument("--skip-fastmcp", action="store_true")
    p.add_argument("--skip-http", action="store_true")
    p.add_argument("--skip-scale", action="store_true")
    p.add_argument("--skip-ops", action="store_true", help="skip the operations on/off pair")
    p.add_argument("--floors", action="store_true", help="also measure the two floors (raw relay, bare SDK proxy)")
    p.add_argument("--baseline", type=Path, help="also measure the resilient_mcp package under DIR (before/after)")
    p.add_argument("--http-sessions", type=int, default=50, help="concurrent sessions of the HTTP load (default 50)")
    p.add_argument("--http-calls", type=int, default=100, help="calls per session of the HTTP load (default 100)")
    p.add_argument("--http-rounds", type=int, default=2, help="alternating rounds of the HTTP load (default 2)")
    p.add_argument("--skip-http-load", action="store_true")
    p.add_argument("--http-only", action="store_true", help="only the HTTP load (with --baseline: a third target)")
    p.add_argument("--short", action="store_true", help="the CI version: few calls, a 10 x 20 load, floors on")
    p.add_argument("--out", type=Path, default=OUT / "latency.json")
    args = p.parse_args()
    if args.short:
        args.calls, args.warmup, args.rounds = min(args.calls, 100), min(args.warmup, 10), 2
        args.http_sessions, args.http_calls = min(args.http_sessions, 10), min(args.http_calls, 20)
        args.skip_scale = args.skip_ops = args.floors = True
    result = anyio.run(run, args)
    show(result)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nwritten: {args.out}")


if __name__ == "__main__":
    main()
