"""What hostile calls cost a real proxy process: time to answer, audit bytes written, log bytes written.

Runs ``resilient-mcp wrap`` (JSON logs at info level, a fresh state directory) in front of the bare fixture server
(tests/security/hostile_upstream.py) and sends, over stdio: ``--names`` calls of unknown tools with 1 MB names, then
one call of ``echo`` with ``--keys`` argument keys (refused: the arguments are over the size cap). Printed: the time
from the end of each request to its answer, the answer's size, the largest audit row, the database size, the
largest log line and the log's size. ``--code DIR`` runs the resilient_mcp package found in DIR (e.g. another
checkout, to compare with the same run's figures).

Usage: ``python benchmarks/refusal_cost.py [--names 20] [--keys 1000000] [--code DIR]``
"""

from __future__ import annotations

import argparse
import json
import os
import select
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "security" / "hostile_upstream.py"
MB = 1_000_000


class Pipe:
    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc, self.buffer, self.next_id = proc, b"", 0

    def request(self, method: str, params: dict[str, Any], timeout: float = 600.0) -> tuple[dict[str, Any], float, int]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.next_id += 1
        self.proc.stdin.write(
            json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}).encode() + b"\n"
        )
        self.proc.stdin.flush()
        sent = time.perf_counter()
        deadline = sent + timeout
        while True:
            while b"\n" not in self.buffer:
                ready, _, _ = select.select([self.proc.stdout], [], [], max(0.0, deadline - time.perf_counter()))
                if not ready:
                    raise TimeoutError(method)
                chunk = os.read(self.proc.stdout.fileno(), 1 << 16)
                if not chunk:
                    raise EOFError(method)
                self.buffer += chunk
            line, _, self.buffer = self.buffer.partition(b"\n")
            reply = json.loads(line)
            if reply.get("id") == self.next_id:
                return reply, time.perf_counter() - sent, len(line)


def main(names: int, keys: int, code: str | None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        state, log = Path(tmp) / "state", Path(tmp) / "proxy.log"
        env = dict(os.environ, PYTHONPATH=code or str(Path(__file__).resolve().parents[1]))
        argv = [
            sys.executable,
            "-m",
            "resilient_mcp.cli",
            "--log-format",
            "json",
            "--log-level",
            "info",
            "wrap",
            "--state-dir",
            str(state),
            "--",
            sys.executable,
            str(FIXTURE),
        ]
        with log.open("wb") as err:
            proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, env=env, cwd=tmp)
        try:
            pipe = Pipe(proc)
            pipe.request(
                "initialize",
                {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}},
            )
            times, sizes = [], []
            for i in range(names):
                _, took, size = pipe.request("tools/call", {"name": f"{i}" + "n" * MB, "arguments": {}})
                times.append(took)
                sizes.append(size)
            _, keys_took, keys_size = pipe.request(
                "tools/call", {"name": "echo", "arguments": {f"key{i}": i for i in range(keys)}}
            )
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        with sqlite3.connect(state / "state.sqlite3") as db:
            row = db.execute("SELECT MAX(LENGTH(tool) + LENGTH(argument_keys) + LENGTH(session)) FROM audit").fetchone()
        db_bytes = sum(f.stat().st_size for f in state.iterdir())
        lines = log.read_bytes().splitlines()
        print(f"code: {code or 'this checkout'}")
        if times:
            print(
                f"{names} calls with 1 MB tool names: answer median {sorted(times)[len(times) // 2] * 1000:.0f} ms, "
                f"largest answer {max(sizes)} bytes"
            )
        print(f"1 call with {keys} argument keys: answered in {keys_took:.2f} s, answer {keys_size} bytes")
        print(f"audit: largest row {row[0]} bytes; state directory {db_bytes / MB:.2f} MB")
        longest = max(map(len, lines), default=0)
        print(f"log: {len(lines)} lines, largest {longest} bytes, total {log.stat().st_size / MB:.2f} MB")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--names", type=int, default=20)
    parser.add_argument("--keys", type=int, default=MB)
    parser.add_argument("--code", default=None)
    ns = parser.parse_args()
    main(ns.names, ns.keys, ns.code)
