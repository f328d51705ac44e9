"""The early start of ``wrap``'s stdio server (``resilient_mcp/spawn/prestart.py``): the environment it computes
before the proxy is imported, and a process started early that no upstream adopts."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp.client.stdio import get_default_environment

from resilient_mcp.policy.config import StdioUpstream, stdio_environment
from resilient_mcp.spawn.prestart import environment, prestart
from resilient_mcp.upstream.startup import StderrTail
from resilient_mcp.upstream.stdio import stdio_upstream
from tests.helpers import await_until, pid_running, probe_argv, read_pid_file

pytestmark = pytest.mark.anyio

LIMIT_S = 90.0
"""Bound on one test (process start-up included); never reached when things work."""


def test_the_prestarted_server_gets_the_environment_the_upstream_asks_for() -> None:
    """``wrap`` computes its server's environment before importing the proxy; it must be exactly what the upstream
    then starts with, or the early process is not adopted (and the server starts twice)."""
    extra = {"API_TOKEN": "x", "PATH": "/opt/bin"}
    up = StdioUpstream(command="server", env=extra)
    environ = {"HOME": "/home/u", "PATH": "/usr/bin", "USER": "u", "SECRET": "s", "TERM": "() { :; }"}
    with pytest.MonkeyPatch.context() as mp:
        for key in ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "SECRET"):
            mp.delenv(key, raising=False)
        for key, value in environ.items():
            mp.setenv(key, value)
        assert environment("minimal", extra) == get_default_environment() | stdio_environment(up)


async def test_a_prestarted_server_nobody_asks_for_is_stopped(tmp_path: Path) -> None:
    """A process started early for a command line the upstream does not run (another environment) is stopped when
    the upstream starts its own: none is left behind."""
    early_pid, own_pid = tmp_path / "early.pid", tmp_path / "own.pid"
    env = environment("minimal", {})
    with anyio.fail_after(LIMIT_S):
        assert await prestart(probe_argv(pid_file=early_pid), env)
        pid = await await_until(lambda: read_pid_file(early_pid), LIMIT_S, "the early start")
        argv = probe_argv(pid_file=own_pid)
        async with stdio_upstream(argv[0], argv[1:], env | {"OTHER": "1"}, None, tail=StderrTail()):
            assert not pid_running(pid)
            assert await await_until(lambda: read_pid_file(own_pid), LIMIT_S, "the upstream's own start") != pid
