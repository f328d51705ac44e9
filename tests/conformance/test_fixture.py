"""The conformance fixture server passes the official MCP conformance suite on its own.

This is the baseline for the differential proxy tests: every scenario that passes here, directly against
``tests/fixtures/conformance_server.py``, must also pass through resilient-mcp.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters, types

from tests.conformance.run_suite import missing_tools, run_suite

TESTS_DIR = Path(__file__).resolve().parents[1]

FIXTURE = TESTS_DIR / "fixtures" / "conformance_server.py"
STARTUP_TIMEOUT = 20.0
SUITE_TIMEOUT = 180.0


@dataclass
class RunningFixture:
    url: str
    process: subprocess.Popen[bytes]
    stdout_file: Path
    stderr_file: Path


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _wait_for_port(process: subprocess.Popen[bytes], port: int, stderr_file: Path, timeout: float) -> None:
    """Poll until the port accepts connections; fail early if the process dies or the deadline passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"fixture exited with {process.returncode}:\n{stderr_file.read_text(errors='replace')}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    pytest.fail(f"fixture did not listen on port {port} within {timeout}s:\n{stderr_file.read_text(errors='replace')}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@pytest.fixture(scope="module")
def fixture_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningFixture]:
    """The fixture over streamable HTTP on a free loopback port, stopped after the module's tests."""
    reason = missing_tools()
    if reason is not None:
        pytest.skip(f"conformance suite unavailable: {reason}")
    logs = tmp_path_factory.mktemp("fixture-logs")
    port = _free_port()
    stdout_file, stderr_file = logs / "stdout.log", logs / "stderr.log"
    with stdout_file.open("wb") as stdout, stderr_file.open("wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, str(FIXTURE), "--http", f"127.0.0.1:{port}"], stdout=stdout, stderr=stderr
        )
    try:
        _wait_for_port(process, port, stderr_file, STARTUP_TIMEOUT)
        yield RunningFixture(f"http://127.0.0.1:{port}/mcp", process, stdout_file, stderr_file)
    finally:
        _stop(process)


@pytest.mark.conformance
@pytest.mark.parametrize("suite", ["active", "pending"])
def test_fixture_passes_conformance_suite(fixture_server: RunningFixture, suite: str, tmp_path: Path) -> None:
    run = run_suite(fixture_server.url, suite=suite, output_dir=tmp_path / "results", timeout=SUITE_TIMEOUT)

    assert run.results, f"no scenario results in {run.output_dir}"
    failures = "\n".join(f"{name}: {'; '.join(messages)}" for name, messages in run.failed.items())
    assert not run.failed, f"{len(run.failed)} {suite} scenario(s) failed:\n{failures}\n\n{run.summary()}"
    assert fixture_server.process.poll() is None, "fixture died during the suite"
    assert fixture_server.stdout_file.read_bytes() == b"", "the fixture must not write to stdout"


def test_fixture_serves_stdio() -> None:
    """Stdio mode answers the handshake-era client with the exact fixture results, and keeps stdout clean."""
    params = StdioServerParameters(command=sys.executable, args=[str(FIXTURE), "--stdio"])
    logs: list[Any] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params.data)

    async def scenario() -> None:
        with anyio.fail_after(30):
            await exercise()

    async def exercise() -> None:
        async with Client(params, mode="legacy", cache=None, logging_callback=on_log) as client:
            tools = {tool.name for tool in (await client.list_tools()).tools}
            assert {"test_simple_text", "test_error_handling", "test_tool_with_logging"} <= tools

            simple = await client.call_tool("test_simple_text", {})
            assert not simple.is_error
            assert [c.text for c in simple.content if isinstance(c, types.TextContent)] == [
                "This is a simple text response for testing."
            ]

            error = await client.call_tool("test_error_handling", {})
            assert error.is_error

            await client.call_tool("test_tool_with_logging", {})
            text = await client.read_resource("test://static-text")
            assert isinstance(text.contents[0], types.TextResourceContents)
            assert text.contents[0].text == "This is the content of the static text resource."

    anyio.run(scenario)
    assert logs == ["Tool execution started", "Tool processing data", "Tool execution completed"]
