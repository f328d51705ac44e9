"""Where one ``tools/call`` spends the proxy's time: a cProfile of the proxy's event-loop thread, per call.

    python benchmarks/profile_calls.py [--calls 1000] [--policy FILE] [--top 25] [--clock cpu|wall] [--code DIR]
                                       [--save FILE] [--http SESSIONS]

Starts ``wrap`` in front of ``raw_upstream.py`` with a profiler installed but off, and a plain JSON-RPC client
(legacy handshake, sequential calls of ``echo``, each with a new message). After 100 warm-up calls SIGUSR1 turns the
profiler on, ``--calls`` calls run, SIGUSR2 turns it off and writes it; every figure is divided by the calls. Printed:
per call, the event-loop iterations, callbacks run, tasks created, thread hand-offs to the state worker
(``SimpleQueue.put``), pydantic validations and dumps (the SDK's models), structlog calls, and the functions with the
most own time. ``--clock cpu`` (default) times the event-loop thread's CPU (``time.thread_time``: what the proxy
spends, not what it waits for); ``wall`` includes waiting (GIL, pipes). ``--policy`` e.g. a file marking echo
``read_only``; ``--code DIR`` profiles another copy of the package; ``--save FILE`` keeps the profile. A figure, not
a test (cProfile slows the proxy down severalfold: compare counts and shares, not milliseconds, with latency.py).
``--http N``: ``wrap --http`` instead, driven by N concurrent SDK client sessions over streamable HTTP (20 warm-up
calls each, then ``--calls`` shared between them); ``RESILIENT_MCP_RAW_TOOL_CALLS=off`` profiles the SDK's path.
"""

from __future__ import annotations

import argparse
import os
import pstats
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_procs import EchoLines

HERE = Path(__file__).resolve().parent
UPSTREAM = HERE / "raw_upstream.py"

Key = tuple[str, int, str]


def _scope_line() -> int:
    from anyio._backends._asyncio import CancelScope

    return CancelScope.__enter__.__code__.co_firstlineno


_SCOPE_LINE = _scope_line()

COUNTERS: dict[str, tuple[str, ...]] = {
    "event-loop iterations": ("(_run_once)",),
    "callbacks run (Handle._run)": ("asyncio/events.py&(_run)",),
    "tasks created": ("base_events.py&(create_task)",),
    "thread hand-offs (call_soon_threadsafe)": ("call_soon_threadsafe",),
    "SimpleQueue.put (state worker wake-ups)": ("put' of '_queue.SimpleQueue",),
    "pydantic validate_python": ("validate_python",),
    "pydantic validate_json": ("validate_json",),
    "pydantic dumps (to_python / to_json)": ("to_python", "to_json"),
    "BaseModel.__init__": ("pydantic/main.py&(__init__)",),
    "model_copy": ("(model_copy)",),
    "structlog functions called": ("structlog/",),
    "structlog bind/unbind contextvars": ("bind_contextvars", "reset_contextvars", "clear_contextvars"),
    "contextvars Context.run": ("'run' of '_contextvars.Context'",),
    "anyio cancel scopes entered": (f"_backends/_asyncio.py:{_SCOPE_LINE}(__enter__)",),
    "memory-stream send/receive": ("send_nowait", "receive_nowait"),
    "os write (wire)": ("'write' of", "posix.write"),
}


def _label(key: Key) -> str:
    file, line, name = key
    if file == "~":
        return name
    parts = Path(file).parts
    short = "/".join(parts[-2:]) if len(parts) > 1 else file
    return f"{short}:{line}({name})"


def _package(key: Key) -> str:
    """Who owns a function: a site-packages distribution, this package's subpackage, the standard library module."""
    file, _, name = key
    if file == "~":
        return "builtins: " + ("pydantic_core" if "pydantic_core" in name else name.split(" of ")[0].strip("<>'"))
    parts = Path(file).parts
    if "resilient_mcp" in parts:
        rest = parts[parts.index("resilient_mcp") + 1 :]
        return "resilient_mcp." + (rest[0].removesuffix(".py") if rest else "")
    if "site-packages" in parts:
        return parts[parts.index("site-packages") + 1].removesuffix(".py")
    return "stdlib " + ("asyncio" if "asyncio" in parts else Path(file).stem)


def _matches(label: str, needles: tuple[str, ...]) -> bool:
    """Any needle matches; a needle ``a&b`` needs both parts in the label."""
    return any(all(part in label for part in needle.split("&")) for needle in needles)


_WRAPPER = """
import cProfile, os, runpy, signal, sys, time
clock = time.thread_time if os.environ["PROFILE_CLOCK"] == "cpu" else time.perf_counter
prof = cProfile.Profile(clock)
signal.signal(signal.SIGUSR1, lambda *_: prof.enable())
def done(*_):
    prof.disable()
    prof.dump_stats(os.environ["PROFILE_OUT"] + ".tmp")
    os.replace(os.environ["PROFILE_OUT"] + ".tmp", os.environ["PROFILE_OUT"])
signal.signal(signal.SIGUSR2, done)
sys.argv = ["resilient-mcp", *sys.argv[1:]]
runpy.run_module("resilient_mcp.cli", run_name="__main__", alter_sys=True)
"""


def profile(code: Path, calls: int, policy: str | None, clock: str, save: Path | None = None) -> pstats.Stats:
    with tempfile.TemporaryDirectory(prefix="rmcp-prof-") as tmp:
        out = Path(tmp) / "proxy.prof"
        extra = ["--policy", policy] if policy else []
        argv = [sys.executable, "-c", _WRAPPER, "--log-level", "warning", "wrap", "--state-dir", str(Path(tmp) / "s")]
        proc = subprocess.Popen(
            [*argv, *extra, "--", sys.executable, str(UPSTREAM)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=tempfile.gettempdir(),
            env={**os.environ, "PYTHONPATH": str(code), "PROFILE_OUT": str(out), "PROFILE_CLOCK": clock},
        )
        lines = EchoLines(proc)
        try:
            lines.open("prof")
            for _ in range(100):
                lines.call()
            proc.send_signal(signal.SIGUSR1)
            lines.ask({"jsonrpc": "2.0", "id": "sync", "method": "ping"})  # the handler has run once this is answered
            for _ in range(calls):
                lines.call()
            proc.send_signal(signal.SIGUSR2)
            deadline = time.monotonic() + 60
            while not out.exists() and time.monotonic() < deadline:
                time.sleep(0.05)  # a figure, not a test: polling for the dump is fine here
            stats = pstats.Stats(str(out))
            if save is not None:
                stats.dump_stats(str(save))
        finally:
            lines.close()
            proc.wait(timeout=120)
        return stats


def profile_http(
    code: Path, calls: int, sessions: int, policy: str | None, clock: str, save: Path | None = None
) -> pstats.Stats:
    """As ``profile``, over streamable HTTP: ``wrap --http`` and ``sessions`` concurrent SDK client sessions (in this
    process) sharing ``calls`` calls of ``echo``, after 20 warm-up calls each."""
    import anyio
    from bench_procs import echo_sessions, free_port, wait_for_port

    with tempfile.TemporaryDirectory(prefix="rmcp-prof-") as tmp:
        out = Path(tmp) / "proxy.prof"
        port = free_port()
        extra = ["--policy", policy] if policy else []
        argv = [sys.executable, "-c", _WRAPPER, "--log-level", "warning", "wrap", "--state-dir", str(Path(tmp) / "s")]
        argv += ["--http", f"127.0.0.1:{port}", *extra, "--", sys.executable, str(UPSTREAM)]
        env = {**os.environ, "PYTHONPATH": str(code), "PROFILE_OUT": str(out), "PROFILE_CLOCK": clock}
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tempfile.gettempdir(), env=env
        )

        async def start() -> None:
            proc.send_signal(signal.SIGUSR1)
            await anyio.sleep(0.2)  # a figure, not a test: the handler runs at the proxy's next bytecode

        async def drive() -> None:
            await wait_for_port("127.0.0.1", port, timeout_s=60)
            await echo_sessions(f"http://127.0.0.1:{port}/mcp", sessions, calls, warm_calls=20, ready=start)
            proc.send_signal(signal.SIGUSR2)

        try:
            anyio.run(drive)
            deadline = time.monotonic() + 60
            while not out.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            stats = pstats.Stats(str(out))
            if save is not None:
                stats.dump_stats(str(save))
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=120)
        return stats


def per_call(stats: pstats.Stats, calls: int) -> dict[Key, tuple[float, float, float]]:
    """key -> (calls, own seconds, cumulative seconds) per tools/call."""
    raw: dict[Key, Any] = stats.stats  # type: ignore[attr-defined]
    return {key: (nc / calls, tt / calls, ct / calls) for key, (_, nc, tt, ct, _callers) in raw.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--calls", type=int, default=1000)
    p.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    p.add_argument("--policy")
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--code", type=Path, default=HERE.parent)
    p.add_argument("--save", type=Path, help="also write the profile there (for pstats' print_callers)")
    p.add_argument("--http", type=int, metavar="SESSIONS", help="over streamable HTTP, this many sessions at once")
    args = p.parse_args()
    if args.http:
        args.calls -= args.calls % args.http
        stats = profile_http(args.code.resolve(), args.calls, args.http, args.policy, args.clock, args.save)
    else:
        stats = profile(args.code.resolve(), args.calls, args.policy, args.clock, args.save)
    rows = per_call(stats, args.calls)
    total = sum(tt for _, tt, _ in rows.values())
    print(f"per tools/call ({args.calls} calls, {args.clock} clock): {total * 1e6:.0f} µs under cProfile")
    print("\ncounts per call:")
    for title, needles in COUNTERS.items():
        n = sum(nc for key, (nc, _, _) in rows.items() if _matches(_label(key), needles))
        print(f"  {title:45} {n:8.1f}")
    owners: dict[str, float] = {}
    for key, (_, tt, _) in rows.items():
        owners[_package(key)] = owners.get(_package(key), 0.0) + tt
    print("\nown time by owner (µs per call, share):")
    for owner, tt in sorted(owners.items(), key=lambda kv: -kv[1])[:20]:
        print(f"  {tt * 1e6:8.1f} {tt / total:6.1%}  {owner}")
    print(f"\ntop {args.top} by own time (µs per call, calls per call, share):")
    for key, (nc, tt, ct) in sorted(rows.items(), key=lambda kv: -kv[1][1])[: args.top]:
        print(f"  {tt * 1e6:7.1f} {nc:6.1f} {tt / total:6.1%}  cum {ct * 1e6:7.1f}  {_label(key)[:110]}")


if __name__ == "__main__":
    main()
