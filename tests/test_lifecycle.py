"""The proxy as a process: how it ends, what it leaves behind, and how it treats bad configurations.

Every test runs ``python -m resilient_mcp.cli`` as a real subprocess in front of the probe fixture
(tests/fixtures/probe_server.py), which writes its PID to a file, so a test can prove that no upstream survives
the proxy. All waits are bounded; every process a test starts is stopped by it, also on failure.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.helpers import (
    REPO,
    STARTUP_S,
    JsonRpcPipe,
    child_env,
    free_port,
    probe_argv,
    proxy_argv,
    read_events,
    read_pid_file,
    run_cli,
    running,
    wait_healthy,
    wait_pid_gone,
    wait_until,
    write_yaml,
)

pytestmark = pytest.mark.anyio

EXIT_S = 20.0
GONE_S = 10.0


def _text_of(reply: dict[str, Any]) -> str:
    assert "result" in reply, reply
    return "".join(c.get("text", "") for c in reply["result"]["content"])


def _end(process: subprocess.Popen[bytes], how: str) -> None:
    if how == "eof":
        assert process.stdin is not None
        process.stdin.close()
    else:
        process.send_signal(signal.SIGTERM if how == "sigterm" else signal.SIGINT)


def _exit_code(process: subprocess.Popen[bytes], after: str) -> int:
    """The exit code of ``process``; fails the test when it has not exited within ``EXIT_S`` of ``after``."""
    try:
        return process.wait(timeout=EXIT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the proxy did not exit within {EXIT_S} s of {after}")


@pytest.mark.parametrize("how", ["eof", "sigterm", "sigint"])
def test_proxy_exits_0_and_leaves_no_upstream_running_when_ended_by(how: str, tmp_path: Path) -> None:
    pid_file = tmp_path / "upstream.pid"
    stderr = tmp_path / "proxy.stderr"
    argv = proxy_argv("wrap", "--", *probe_argv(pid_file=pid_file))
    with running(argv, stderr, stdin=subprocess.PIPE, stdout=subprocess.PIPE) as proxy:
        pipe = JsonRpcPipe(proxy, stderr)
        pipe.initialize(timeout=STARTUP_S)
        upstream_pid = int(_text_of(pipe.request("tools/call", {"name": "pid", "arguments": {}})))
        assert read_pid_file(pid_file) == upstream_pid

        _end(proxy, how)
        code = _exit_code(proxy, how)
        assert code == 0, stderr.read_text(errors="replace")[-3000:]
        wait_pid_gone(upstream_pid, GONE_S, "upstream")


def test_a_sigterm_while_the_proxy_waits_for_a_lingering_upstream_to_exit_still_stops_that_upstream(
    tmp_path: Path,
) -> None:
    """What an MCP SDK host does on close: stdin closed, 2 s grace, then SIGTERM. An upstream that does not exit on
    EOF keeps the proxy in its own grace period when that SIGTERM lands; the upstream must not be orphaned."""
    pid_file, events = tmp_path / "upstream.pid", tmp_path / "upstream.events"
    stderr = tmp_path / "proxy.stderr"
    upstream = [*probe_argv(pid_file=pid_file, events=events), "--linger", "30"]
    with running(proxy_argv("wrap", "--", *upstream), stderr, stdin=subprocess.PIPE, stdout=subprocess.PIPE) as proxy:
        JsonRpcPipe(proxy, stderr).initialize(timeout=STARTUP_S)
        upstream_pid = read_pid_file(pid_file)
        assert upstream_pid is not None
        _end(proxy, "eof")
        wait_until(
            lambda: any(e.startswith("stdin_closed ") for e in read_events(events)),
            EXIT_S,
            "the proxy to close the upstream's stdin",
            stderr=stderr,
        )
        _end(proxy, "sigterm")
        code = _exit_code(proxy, "EOF and SIGTERM")
        wait_pid_gone(upstream_pid, GONE_S, "lingering upstream")
        assert code == 0, f"exit {code}\n" + stderr.read_text(errors="replace")[-3000:]


@pytest.mark.parametrize("how", ["sigterm", "sigint"])
def test_the_http_proxy_exits_0_and_leaves_no_upstream_running_when_ended_by(how: str, tmp_path: Path) -> None:
    pid_file = tmp_path / "upstream.pid"
    stderr = tmp_path / "proxy.stderr"
    port = free_port()
    argv = proxy_argv("wrap", "--http", f"127.0.0.1:{port}", "--", *probe_argv(pid_file=pid_file))
    with running(argv, stderr) as proxy:
        wait_healthy(f"http://127.0.0.1:{port}", proxy, stderr, STARTUP_S)
        upstream_pid = read_pid_file(pid_file)
        assert upstream_pid is not None
        _end(proxy, how)
        code = _exit_code(proxy, how)
        assert code == 0, stderr.read_text(errors="replace")[-3000:]
        wait_pid_gone(upstream_pid, GONE_S, "upstream")


@pytest.mark.parametrize("how", ["sigterm", "sigint"])
def test_a_signal_while_an_upstream_is_still_starting_leaves_no_upstream_running(how: str, tmp_path: Path) -> None:
    pid_file = tmp_path / "stalled.pid"
    config = write_yaml(
        tmp_path / "config.yaml",
        {
            "upstreams": {
                "stalled": {
                    "command": sys.executable,
                    "args": [*probe_argv(pid_file=pid_file)[1:], "--stall", "60"],
                    "connect_timeout_s": 60,
                }
            }
        },
    )
    stderr = tmp_path / "proxy.stderr"
    with running(proxy_argv("serve", "--config", str(config)), stderr, stdin=subprocess.PIPE) as proxy:
        upstream_pid = wait_until(
            lambda: read_pid_file(pid_file), STARTUP_S, "stalled upstream started", process=proxy, stderr=stderr
        )
        _end(proxy, how)
        code = _exit_code(proxy, f"{how} during startup")
        wait_pid_gone(upstream_pid, GONE_S, "upstream still in its handshake")
        assert code == 0, f"exit {code}\n" + stderr.read_text(errors="replace")[-3000:]


# --- an upstream that cannot start ------------------------------------------------------------------------------------


def _good_and_broken_config(tmp_path: Path) -> Path:
    return write_yaml(
        tmp_path / "config.yaml",
        {
            "upstreams": {
                "good": {"command": sys.executable, "args": probe_argv()[1:]},
                "broken": {"command": str(tmp_path / "no-such-server")},
            }
        },
    )


def _client(argv: list[str], errlog: Any, state_home: Path) -> Client:
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=child_env(state_home), cwd=REPO)
    return Client(stdio_client(params, errlog=errlog), mode="legacy", cache=None)


async def test_an_upstream_that_cannot_start_does_not_stop_the_others_from_being_served(tmp_path: Path) -> None:
    config = _good_and_broken_config(tmp_path)
    stderr = tmp_path / "proxy.stderr"
    with stderr.open("w") as errlog, anyio.fail_after(STARTUP_S + 10):
        async with _client(proxy_argv("serve", "--config", str(config)), errlog, tmp_path / "state") as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert {"good__echo", "good__slow", "good__pid", "good__counter_add"} <= names
            assert not any(n.startswith("broken__") for n in names)
            result = await client.call_tool("good__echo", {"text": "still served"})
            assert not result.is_error
            assert [c.text for c in result.content if c.type == "text"] == ["still served"]
    log = stderr.read_text(errors="replace")
    failing = [line for line in log.splitlines() if "broken" in line and "no-such-server" in line]
    assert failing, f"the log does not name the failing upstream and its command:\n{log[-3000:]}"


async def test_a_call_to_a_tool_of_an_upstream_whose_command_is_missing_says_so_and_asks_the_user(
    tmp_path: Path,
) -> None:
    config = _good_and_broken_config(tmp_path)
    with (tmp_path / "proxy.stderr").open("w") as errlog, anyio.fail_after(STARTUP_S + 10):
        async with _client(proxy_argv("serve", "--config", str(config)), errlog, tmp_path / "state") as client:
            result = await client.call_tool("broken__echo", {"text": "x"})
            assert result.is_error
            text = " ".join(c.text for c in result.content if c.type == "text")
            assert "'broken' could not start (the command was not found)" in text, text
            assert "no-such-server" in text, "the missing command is named"
            assert result.structured_content is not None
            assert result.structured_content["fault_type"] == "D4_permanent_execution_error"
            assert result.structured_content["retry_safety"] == "not_sent"
            assert result.structured_content["repair_action"] == "ask_user"
            healthy = await client.call_tool("good__echo", {"text": "after"})
            assert not healthy.is_error


# --- configurations refused at startup ------------------------------------------------------------------------------


@pytest.mark.parametrize("command", [["serve"], ["check", "--connect"]], ids=["serve", "check-connect"])
def test_two_upstreams_offering_the_same_unprefixed_tool_name_are_refused_naming_both(
    command: list[str], tmp_path: Path
) -> None:
    probe = {"command": sys.executable, "args": probe_argv()[1:], "prefix": ""}
    config = write_yaml(tmp_path / "config.yaml", {"upstreams": {"alpha": probe, "beta": probe}})
    done = run_cli(*command, "--config", str(config), env=child_env(tmp_path / "state"), timeout=STARTUP_S + 10)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "'alpha'" in done.stderr and "'beta'" in done.stderr, done.stderr[-3000:]
    assert "echo" in done.stderr
    assert "Traceback" not in done.stderr


BAD_CONFIGS = {
    "unknown key": ("upstreams:\n  a:\n    command: echo\n    comand_args: [x]\n", 4, "upstreams.a.comand_args"),
    "wrong type": ("upstreams:\n  a:\n    command: echo\n    args: 5\n", 4, "upstreams.a.args"),
    "missing command": ("upstreams:\n  a:\n    type: stdio\n    args: [x]\n", 2, "upstreams.a.command"),
    "invalid YAML": ("upstreams:\n  a:\n    command: echo\n    args: [x, y\n  b: {\n", None, None),
}


@pytest.mark.parametrize("case", list(BAD_CONFIGS))
def test_check_refuses_a_bad_config_with_one_error_naming_file_line_and_key(case: str, tmp_path: Path) -> None:
    text, line, key = BAD_CONFIGS[case]
    path = tmp_path / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    done = run_cli("check", "--config", str(path), env=child_env(tmp_path / "state"), timeout=STARTUP_S + 10)
    assert done.returncode == 2, done
    assert "Traceback" not in done.stderr
    located = [ln for ln in done.stderr.splitlines() if re.search(rf"{re.escape(str(path))}:\d+:", ln)]
    assert len(located) == 1, done.stderr
    if line is not None:
        assert f"{path}:{line}:" in located[0], done.stderr
    if key is not None:
        assert key in located[0], done.stderr
    else:
        assert "YAML" in located[0], done.stderr
    assert done.stdout == ""


# --- stdin that is not a host ---------------------------------------------------------------------------------------


def test_serve_over_stdio_with_stdin_on_dev_null_says_so_and_stops_instead_of_hanging(tmp_path: Path) -> None:
    """``docker run`` without ``-i``: stdin is /dev/null, stdout a pipe. It used to wait forever (the event loop
    cannot watch /dev/null, so its end was never seen)."""
    probe = {"command": sys.executable, "args": probe_argv()[1:]}
    config = write_yaml(tmp_path / "config.yaml", {"upstreams": {"probe": probe}, "state_dir": str(tmp_path / "s")})
    done = run_cli("serve", "--config", str(config), env=child_env(tmp_path / "state"), timeout=STARTUP_S + 10)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "stdin is not connected (/dev/null)" in done.stderr and "--http HOST:PORT" in done.stderr
    assert "stdin_closed" in done.stderr, "it started and stopped as when a host closes stdin"
