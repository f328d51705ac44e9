"""Processes and ports for the benchmarks: start a server in its own process group, wait for its port, stop it,
and make sure nothing a run started outlives it; talk to a stdio proxy in raw JSON-RPC lines. Only 127.0.0.1 is
used."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager, suppress
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import IO, Any

import anyio
from anyio.abc import Process


class OtlpSink:
    """A local OTLP/HTTP endpoint that accepts export requests: counts their bytes, and keeps their bodies when
    asked to (``keep``: the tests read the spans back; a benchmark only counts)."""

    def __init__(self, keep: bool = False) -> None:
        self.url = ""
        self.received = 0
        self.keep = keep
        self.bodies: list[bytes] = []
        self.lock = threading.Lock()


@contextmanager
def otlp_sink(sink: OtlpSink | None = None) -> Iterator[OtlpSink]:
    """Serve ``sink`` (a new counting one by default) on 127.0.0.1 until the block ends."""
    sink = sink if sink is not None else OtlpSink()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            with sink.lock:
                sink.received += len(body)
                if sink.keep:
                    sink.bodies.append(body)
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    sink.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, name="otlp-sink", daemon=True)
    thread.start()
    try:
        yield sink
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def wait_for_port(host: str, port: int, *, timeout_s: float) -> None:
    with anyio.fail_after(timeout_s):
        while True:
            try:
                stream = await anyio.connect_tcp(host, port)
            except OSError:
                await anyio.sleep(0.05)
                continue
            await stream.aclose()
            return


async def echo_sessions(
    url: str,
    sessions: int,
    calls: int,
    *,
    warm_calls: int,
    ready: Callable[[], Awaitable[None]],
    took: list[float] | None = None,
) -> None:
    """``sessions`` concurrent SDK client sessions over streamable HTTP to ``url``, each warmed up with
    ``warm_calls`` calls of ``echo``; once every one is warm, ``await ready()`` (a mark or a signal to the proxy), then
    ``calls`` calls of ``echo`` shared between them (each one's seconds appended to ``took`` when given)."""
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    warm, go, counts = anyio.Event(), anyio.Event(), {"warm": 0}

    async def one(s: int) -> None:
        async with streamable_http_client(url) as streams, ClientSession(streams[0], streams[1]) as session:
            await session.initialize()
            for i in range(warm_calls):
                await session.call_tool("echo", {"message": f"warm-{s}-{i}"})
            counts["warm"] += 1
            if counts["warm"] == sessions:
                warm.set()
            await go.wait()
            for i in range(calls // sessions):
                started = time.perf_counter()
                await session.call_tool("echo", {"message": f"m-{s}-{i}"})
                if took is not None:
                    took.append(time.perf_counter() - started)

    async with anyio.create_task_group() as tg:
        for s in range(sessions):
            tg.start_soon(one, s)
        await warm.wait()
        await ready()
        go.set()


@asynccontextmanager
async def process_group(
    command: list[str], stderr: IO[str], env: Mapping[str, str] | None = None
) -> AsyncIterator[Process]:
    """``command`` as the leader of a new process group; SIGTERM on exit (SIGKILL to the group after 10 s)."""
    proc = await anyio.open_process(
        command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True, env=env
    )
    try:
        yield proc
    finally:
        with anyio.CancelScope(shield=True):
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
                with anyio.move_on_after(10):
                    await proc.wait()
            if proc.returncode is None:
                with suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                await proc.wait()


def reap_leftovers(run_id: str) -> int:
    """Stop every process whose command line carries ``run_id`` (none should be left); how many there were."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if run_id.encode() in f.read():
                    found.append(int(entry))
        except OSError:
            continue
    for pid in found:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return len(found)


class EchoLines:
    """A raw JSON-RPC line client of ``raw_upstream.py``'s ``echo`` tool behind a stdio proxy (``proc``'s pipes): one
    line out, one line back, no SDK on the client side, so a measurement sees only the proxy."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self.stdin, self.stdout = proc.stdin, proc.stdout
        self.calls = 0

    def ask(self, message: dict[str, Any]) -> dict[str, Any]:
        self.stdin.write((json.dumps(message) + "\n").encode())
        self.stdin.flush()
        answer: dict[str, Any] = json.loads(self.stdout.readline())
        return answer

    def open(self, client: str) -> None:
        """The handshake: ``initialize`` as ``client``, then ``notifications/initialized``."""
        hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": client, "version": "1"}}
        self.ask({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello})
        self.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')

    def call(self) -> None:
        """One ``echo`` call; a failed one raises (a figure from failed calls would mean nothing)."""
        self.calls += 1
        params = {"name": "echo", "arguments": {"message": f"m{self.calls}"}}
        answer = self.ask({"jsonrpc": "2.0", "id": self.calls, "method": "tools/call", "params": params})
        if "result" not in answer or answer["result"].get("isError"):
            raise RuntimeError(f"call {self.calls} failed: {answer}")

    def close(self) -> None:
        self.stdin.close()
