"""Shared helpers for tests that run resilient-mcp and MCP servers as real processes.

Everything binds 127.0.0.1 and every wait is bounded: helpers poll a condition until a deadline and fail with a
message that includes the process's stderr, so a hung or crashed child never hangs the suite.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, TypeVar

import anyio
import pytest

T = TypeVar("T")

REPO = Path(__file__).resolve().parent.parent
TESTS_DIR = REPO / "tests"
FIXTURES = TESTS_DIR / "fixtures"
PROBE_SERVER = FIXTURES / "probe_server.py"
VENV_BIN = Path(sys.executable).parent

SERVER_EVERYTHING = REPO / ".tools/npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
MCP_SERVER_TIME = VENV_BIN / "mcp-server-time"

POLL_INTERVAL_S = 0.02


# --- commands and environment ---------------------------------------------------------------------------------------


def child_env(state_home: Path | None = None, **extra: str) -> dict[str, str]:
    """The full environment for a child process, with the venv's bin first on PATH (and ``extra`` set).

    ``state_home`` becomes ``XDG_STATE_HOME``, where resilient-mcp keeps its state (idempotency records, stored
    outputs, audit) unless configured otherwise: give each test its own, or one test's recorded writes are replayed
    to the next."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(VENV_BIN), env.get("PATH", "/usr/local/bin:/usr/bin:/bin")])
    env["PYTHONUNBUFFERED"] = "1"
    if state_home is not None:
        env["XDG_STATE_HOME"] = str(state_home)
    env.update(extra)
    return env


def proxy_argv(*args: str) -> list[str]:
    """``resilient-mcp ARGS`` run from this interpreter."""
    return [sys.executable, "-m", "resilient_mcp.cli", *args]


def run_cli(
    *args: str, env: Mapping[str, str] | None = None, timeout: float = 120.0
) -> subprocess.CompletedProcess[str]:
    """``resilient-mcp ARGS`` run to completion with stdin empty (a proxy that starts serving ends at once) and its
    output captured as text; ``env``: default ``child_env()``. Fails the test, with what it wrote to stderr, when it
    has not finished within ``timeout`` s."""
    try:
        return subprocess.run(
            proxy_argv(*args),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            env=dict(env) if env is not None else child_env(),
            cwd=REPO,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"resilient-mcp {' '.join(args)} did not finish within {timeout} s: {exc.stderr!r}")


def probe_argv(pid_file: Path | None = None, events: Path | None = None) -> list[str]:
    """The probe fixture server (tests/fixtures/probe_server.py) as a command line."""
    argv = [sys.executable, str(PROBE_SERVER)]
    if pid_file is not None:
        argv += ["--pid-file", str(pid_file)]
    if events is not None:
        argv += ["--events", str(events)]
    return argv


def node_binary() -> str | None:
    """The ``node`` on PATH (server-everything runs on Node 20)."""
    from shutil import which

    return which("node", path=child_env()["PATH"])


def server_everything_missing() -> str | None:
    """Why server-everything cannot run here, or None when it can."""
    if node_binary() is None:
        return "node is not on PATH (server-everything needs Node 20+)"
    if not SERVER_EVERYTHING.is_file():
        return (
            f"@modelcontextprotocol/server-everything@2026.8.31 is not installed at {SERVER_EVERYTHING} "
            "(npm install --prefix .tools/npm @modelcontextprotocol/server-everything@2026.8.31)"
        )
    return None


def server_time_missing() -> str | None:
    """Why mcp-server-time cannot run here, or None when it can."""
    if not MCP_SERVER_TIME.exists():
        return f"mcp-server-time==2026.10.19 is not installed in the venv ({MCP_SERVER_TIME} missing)"
    return None


def write_yaml(path: Path, data: Mapping[str, Any]) -> Path:
    """Write ``data`` as a config file (JSON is valid YAML, so no YAML writer is needed)."""
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    return path


# --- waiting --------------------------------------------------------------------------------------------------------


def stderr_tail(path: Path | None, limit: int = 4000) -> str:
    if path is None or not path.exists():
        return "(no stderr captured)"
    text = path.read_text(errors="replace")
    return text[-limit:] or "(stderr empty)"


def wait_until(
    predicate: Callable[[], T | None],
    timeout: float,
    what: str,
    *,
    process: subprocess.Popen[Any] | None = None,
    stderr: Path | None = None,
) -> T:
    """Poll ``predicate`` until it returns something truthy; fail after ``timeout`` s or if ``process`` exits."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if process is not None and process.poll() is not None:
            pytest.fail(f"{what}: process exited with {process.returncode} first\n{stderr_tail(stderr)}")
        if time.monotonic() >= deadline:
            pytest.fail(f"{what}: not within {timeout} s\n{stderr_tail(stderr)}")
        time.sleep(POLL_INTERVAL_S)


async def await_until(predicate: Callable[[], T | None], limit_s: float, what: str) -> T:
    """The async twin of ``wait_until``: polls without blocking the event loop, for at most ``limit_s``."""
    try:
        with anyio.fail_after(limit_s):
            while True:
                value = predicate()
                if value:
                    return value
                await anyio.sleep(POLL_INTERVAL_S)
    except TimeoutError:
        pytest.fail(f"{what}: not within {limit_s} s")


def read_pid_file(path: Path) -> int | None:
    try:
        text = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    return int(text) if text.isdigit() else None


def read_events(path: Path) -> list[str]:
    """The probe server's events, one per line (empty when the file does not exist yet)."""
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []


def logged_request_ids(stderr: Path, event: str) -> list[Any]:
    """The ``request_id`` of every JSON log line named ``event`` in a proxy's stderr (``--log-format json``, as when
    stderr is not a TTY): which requests took a path that logs it (the raw tools/call lanes' debug lines)."""
    ids = []
    for line in stderr.read_text(errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("event") == event:
            ids.append(entry.get("request_id"))
    return ids


def pid_running(pid: int) -> bool:
    """True while ``pid`` is a live process; a zombie (exited, not yet reaped) counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - exists, owned by someone else
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc: trust kill(0)
    state = stat.rsplit(")", 1)[-1].split()[0]
    return state not in ("Z", "X")


def wait_pid_gone(pid: int, timeout: float, what: str = "process") -> None:
    deadline = time.monotonic() + timeout
    while pid_running(pid):
        if time.monotonic() >= deadline:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)  # do not leak it past the test
            pytest.fail(f"{what} (pid {pid}) still running {timeout} s after the proxy ended")
        time.sleep(POLL_INTERVAL_S)


def _proc_entries() -> Iterator[int]:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            yield int(entry.name)


def child_pids(pid: int) -> list[int]:
    """The live children of ``pid`` (Linux /proc)."""
    children = []
    for candidate in _proc_entries():
        try:
            stat = Path(f"/proc/{candidate}/stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[-1].split()[1]) == pid:
            children.append(candidate)
    return children


def pids_with_env(name: str, value: str, cmdline_contains: str) -> list[int]:
    """Processes whose environment has ``name=value`` and whose command line contains ``cmdline_contains``.

    How a test finds the proxy process that an SDK client started for it (the SDK does not expose the PID): give
    each test its own ``XDG_STATE_HOME`` (``child_env(state_home=...)``) and look for it."""
    wanted = f"{name}={value}".encode()
    found = []
    for pid in _proc_entries():
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        if cmdline_contains.encode() in cmdline and wanted in environ.split(b"\0"):
            found.append(pid)
    return found


def stop_leftovers(pids: Sequence[int], grace_s: float = 5.0) -> list[int]:
    """Give ``pids`` ``grace_s`` to be gone, then SIGKILL the rest. Returns those that had to be killed.

    Lets a test stop, also on failure, processes it caused to be started but could not stop directly (a proxy's
    upstreams, when the proxy fails to stop them); the lifecycle tests are where such a leak fails a test."""
    deadline = time.monotonic() + grace_s
    while any(pid_running(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(POLL_INTERVAL_S)
    killed = [p for p in pids if pid_running(p)]
    for pid in killed:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return killed


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


LOCAL_HTTP = urllib.request.build_opener(urllib.request.ProxyHandler({}))
"""A urllib opener that ignores HTTP(S)_PROXY: tests talk only to 127.0.0.1, never through a proxy."""


def http_get_status(url: str, timeout: float = 1.0) -> int | None:
    """The HTTP status of GET ``url``, or None when nothing answers."""
    try:
        with LOCAL_HTTP.open(url, timeout=timeout) as response:
            status: int = response.status
            return status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return None


# --- processes ------------------------------------------------------------------------------------------------------


def stop_process(process: subprocess.Popen[Any], timeout: float = 10.0) -> None:
    """SIGTERM, then SIGKILL after ``timeout`` s; always reaps. Safe on an already-exited process."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            process.terminate()
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=timeout)
    for stream in (process.stdin, process.stdout, process.stderr):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()


@contextlib.contextmanager
def running(
    argv: Sequence[str],
    stderr_path: Path,
    *,
    env: Mapping[str, str] | None = None,
    stdin: int | IO[Any] | None = subprocess.DEVNULL,
    stdout: int | IO[Any] | None = subprocess.DEVNULL,
    preexec_fn: Callable[[], object] | None = None,
) -> Iterator[subprocess.Popen[bytes]]:
    """Start ``argv`` with stderr to ``stderr_path``; stop and reap it on exit, also when the test fails.

    Without ``env`` it gets ``child_env`` with its state kept beside ``stderr_path``. ``preexec_fn`` runs in the
    child before it starts (e.g. to lower a resource limit)."""
    if env is None:
        env = child_env(state_home=stderr_path.parent / "state")
    with stderr_path.open("wb") as err:
        process = subprocess.Popen(
            list(argv), stdin=stdin, stdout=stdout, stderr=err, env=dict(env), cwd=REPO, preexec_fn=preexec_fn
        )
    try:
        yield process
    finally:
        stop_process(process)


# --- the proxy over HTTP --------------------------------------------------------------------------------------------

STARTUP_S = 60.0
"""How long a proxy process may take to answer ``/healthz`` (a loaded 2-core machine starts Python slowly)."""


def wait_healthy(base: str, process: subprocess.Popen[Any], stderr: Path, limit_s: float = STARTUP_S) -> None:
    """Wait (bounded) until the proxy at ``base`` (``http://127.0.0.1:PORT``) answers ``/healthz`` with 200; fail the
    test, with the proxy's stderr, when it exits first or takes longer than ``limit_s``."""
    wait_until(
        lambda: http_get_status(f"{base}/healthz") == 200,
        limit_s,
        "the proxy's /healthz to answer 200",
        process=process,
        stderr=stderr,
    )


@dataclass
class RunningProxy:
    host: str
    port: int
    process: subprocess.Popen[bytes]
    stderr: Path

    @property
    def base(self) -> str:
        return f"http://{self.host}:{self.port}"

    def stderr_lines(self) -> list[str]:
        return self.stderr.read_text(errors="replace").splitlines()


def _limit_open_files(soft: int) -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))


@contextlib.contextmanager
def http_proxy(
    tmp_path: Path,
    listen: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
    open_files: int | None = None,
) -> Iterator[RunningProxy]:
    """``resilient-mcp serve --http`` on a free loopback port in front of the probe server, ready (``/healthz``
    200), stopped on exit. ``listen``: the config's ``listen`` section; ``env``: added to its environment.

    ``open_files`` lowers the proxy's soft open-descriptor limit (as on a default Linux box: 1024)."""
    port = free_port()
    config: dict[str, Any] = {"upstreams": {"probe": {"command": sys.executable, "args": probe_argv()[1:]}}}
    if listen:
        config["listen"] = listen
    path = write_yaml(tmp_path / f"config-{port}.yaml", config)
    stderr = tmp_path / f"proxy-{port}.stderr"

    limit = None if open_files is None else functools.partial(_limit_open_files, open_files)
    argv = proxy_argv("serve", "--config", str(path), "--http", f"127.0.0.1:{port}")
    with running(argv, stderr, env=child_env(tmp_path / "state", **(env or {})), preexec_fn=limit) as process:
        proxy = RunningProxy("127.0.0.1", port, process, stderr)
        wait_healthy(proxy.base, process, stderr)
        yield proxy


class JsonRpcPipe:
    """Newline-delimited JSON-RPC over a child's raw stdin/stdout, for driving a stdio server by hand."""

    def __init__(self, process: subprocess.Popen[bytes], stderr: Path | None = None) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.process = process
        self.stderr = stderr
        self._buffer = b""
        self._next_id = 0

    def send(self, message: Mapping[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def receive(self, timeout: float) -> dict[str, Any]:
        """The next message from the child, within ``timeout`` s."""
        import select

        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                pytest.fail(f"no JSON-RPC message within {timeout} s\n{stderr_tail(self.stderr)}")
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    pytest.fail(f"the child closed stdout (exit {self.process.poll()})\n{stderr_tail(self.stderr)}")
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        message: dict[str, Any] = json.loads(line)
        return message

    def request(self, method: str, params: Mapping[str, Any] | None = None, timeout: float = 20.0) -> dict[str, Any]:
        """Send a request and return its response, skipping notifications and other traffic in between."""
        self._next_id += 1
        request_id = self._next_id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = dict(params)
        self.send(message)
        deadline = time.monotonic() + timeout
        while True:
            reply = self.receive(max(0.01, deadline - time.monotonic()))
            if reply.get("id") == request_id and "method" not in reply:
                return reply

    def initialize(self, timeout: float = STARTUP_S) -> dict[str, Any]:
        """The MCP handshake: initialize, then notifications/initialized. Returns the initialize result."""
        reply = self.request(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "resilient-mcp-tests", "version": "0"},
            },
            timeout=timeout,
        )
        assert "result" in reply, reply
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        result: dict[str, Any] = reply["result"]
        return result


# --- virtual time ---------------------------------------------------------------------------------------------------


def virtual_time(test: Callable[..., Any]) -> Callable[..., Any]:
    """Run an in-process async test on trio's virtual clock (``MockClock(autojump_threshold=0)``): time stands still
    while any task can run and jumps to the next deadline only when every task waits. A handler that sleeps 0.3 s
    meets a 0.5 s attempt timeout exactly as written, however slow the machine. Only for tests with no real I/O (no
    subprocess, no socket: waiting on one would look idle and jump the clock); the state store's SQLite jobs run
    inline (``inline_state_worker``) for the same reason."""
    from trio.testing import MockClock

    backend = pytest.param(("trio", {"clock": MockClock(autojump_threshold=0)}), id="virtual-time")
    marked = pytest.mark.usefixtures("inline_state_worker")(test)
    return pytest.mark.parametrize("anyio_backend", [backend])(marked)
