"""What one ``tools/call`` costs the proxy process, this checkout vs another: CPU time and context switches per call.

    python benchmarks/cpu_ab.py --baseline DIR [--rounds 6] [--calls 300] [--policy FILE] [--http SESSIONS]

On a shared, loaded machine latency medians move by more than a change is worth; the proxy's own CPU time and its
context switches per call (every thread, from ``/proc``) move much less. Each round starts ``wrap`` in front of
``raw_upstream.py`` once per package (this checkout, then DIR; the order reversed every other round), makes 50
warm-up calls of ``echo`` (unannotated: a default write) with a plain JSON-RPC client, then ``--calls`` measured
calls, each with a new message. Printed per package: the median over rounds of the median latency, the CPU ms per
call and the context switches per call, and every round's figures. Linux only (``/proc``). A figure, not a test.
``--http N``: ``wrap --http`` instead, N concurrent SDK client sessions over streamable HTTP (10 warm-up calls each,
then ``--calls`` shared between them); the CPU is the proxy process's (not its upstream's).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_procs import EchoLines

HERE = Path(__file__).resolve().parent
UPSTREAM = HERE / "raw_upstream.py"


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _switches(pid: int) -> int:
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        for line in (task / "status").read_text().splitlines():
            if "ctxt_switches" in line:
                total += int(line.split()[1])
    return total


def one_run(code: Path, calls: int, policy: str | None) -> tuple[float, float, float]:
    """(median ms, CPU ms per call, context switches per call) of one proxy of the package under ``code``."""
    with tempfile.TemporaryDirectory(prefix="cpu-ab-") as state:
        extra = ["--policy", policy] if policy else []
        argv = [sys.executable, "-m", "resilient_mcp.cli", "--log-level", "warning", "wrap", "--state-dir", state]
        proc = subprocess.Popen(
            [*argv, *extra, "--", sys.executable, str(UPSTREAM)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=tempfile.gettempdir(),
            env={**os.environ, "PYTHONPATH": str(code)},
        )
        lines = EchoLines(proc)
        try:
            lines.open("ab")
            for _ in range(50):
                lines.call()
            cpu0, sw0, took = _cpu_s(proc.pid), _switches(proc.pid), []
            for _ in range(calls):
                started = time.perf_counter()
                lines.call()
                took.append(time.perf_counter() - started)
            cpu1, sw1 = _cpu_s(proc.pid), _switches(proc.pid)
        finally:
            lines.close()
            proc.wait(timeout=60)
    return statistics.median(took) * 1000, (cpu1 - cpu0) / calls * 1000, (sw1 - sw0) / calls


def one_run_http(code: Path, calls: int, sessions: int, policy: str | None) -> tuple[float, float, float]:
    """As ``one_run``, over streamable HTTP: ``wrap --http`` and ``sessions`` concurrent SDK client sessions (in this
    process) making ``calls`` calls between them, after 10 warm-up calls each."""
    import anyio
    from bench_procs import echo_sessions, free_port, wait_for_port

    with tempfile.TemporaryDirectory(prefix="cpu-ab-") as state:
        port = free_port()
        extra = ["--policy", policy] if policy else []
        argv = [sys.executable, "-m", "resilient_mcp.cli", "--log-level", "warning", "wrap", "--state-dir", state]
        proc = subprocess.Popen(
            [*argv, "--http", f"127.0.0.1:{port}", *extra, "--", sys.executable, str(UPSTREAM)],
            stdin=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=tempfile.gettempdir(),
            env={**os.environ, "PYTHONPATH": str(code)},
        )
        took: list[float] = []
        mark: dict[str, tuple[float, int]] = {}

        async def start() -> None:
            mark["start"] = (_cpu_s(proc.pid), _switches(proc.pid))

        async def drive() -> None:
            await wait_for_port("127.0.0.1", port, timeout_s=60)
            url = f"http://127.0.0.1:{port}/mcp"
            await echo_sessions(url, sessions, calls, warm_calls=10, ready=start, took=took)
            mark["end"] = (_cpu_s(proc.pid), _switches(proc.pid))

        try:
            anyio.run(drive)
        finally:
            proc.terminate()
            proc.wait(timeout=60)
    (cpu0, sw0), (cpu1, sw1) = mark["start"], mark["end"]
    n = len(took)
    return statistics.median(took) * 1000, (cpu1 - cpu0) / n * 1000, (sw1 - sw0) / n


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--baseline", type=Path, required=True, help="a directory holding another resilient_mcp package")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--calls", type=int, default=300)
    p.add_argument("--policy", help="a policy file for both (e.g. echo read_only)")
    p.add_argument("--http", type=int, metavar="SESSIONS", help="over streamable HTTP, this many sessions at once")
    args = p.parse_args()
    codes = {"this checkout": HERE.parent, "baseline": args.baseline.resolve()}
    runs: dict[str, list[tuple[float, float, float]]] = {label: [] for label in codes}
    for r in range(args.rounds):
        for label in list(codes) if r % 2 == 0 else list(reversed(codes)):
            if args.http:
                runs[label].append(one_run_http(codes[label], args.calls, args.http, args.policy))
            else:
                runs[label].append(one_run(codes[label], args.calls, args.policy))
    print(f"{'package':14} {'median ms':>10} {'CPU ms/call':>12} {'switches/call':>14}   per round")
    for label, rows in runs.items():
        med = [statistics.median(row[i] for row in rows) for i in range(3)]
        rounds = " ".join(f"({a:.2f} {b:.2f} {c:.1f})" for a, b, c in rows)
        print(f"{label:14} {med[0]:>10.3f} {med[1]:>12.3f} {med[2]:>14.2f}   {rounds}")


if __name__ == "__main__":
    main()
