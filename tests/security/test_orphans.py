"""Issue 10, defect 2: a process the upstream started in its own process group must not outlive the proxy.

The fixture upstream (tests/security/hostile_upstream.py) starts ``sleep 600`` in its group and exits at once when
its stdin closes, so only a proxy that terminates the whole group (not just a leader that outlives its grace
period) stops the ``sleep``. Covered: an upstream restart, the proxy ended by EOF and by SIGTERM, and a SIGKILL of
the proxy (the watchdog). Every wait is bounded; a surviving child is killed by the test, which then fails.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from resilient_mcp.policy.config import StdioUpstream
from resilient_mcp.upstream import NoHost, Upstream
from tests.helpers import (
    STARTUP_S,
    JsonRpcPipe,
    await_until,
    pid_running,
    proxy_argv,
    read_pid_file,
    running,
    wait_until,
)

HOSTILE = Path(__file__).with_name("hostile_upstream.py")
START_S = STARTUP_S
GONE_S = 15.0


@contextlib.contextmanager
def reaped(*pid_files: Path) -> Iterator[None]:
    """Whatever the test's outcome, no ``sleep`` the fixture started is left running."""
    try:
        yield
    finally:
        for path in pid_files:
            pid = read_pid_file(path)
            if pid is not None and pid_running(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


@pytest.mark.anyio
async def test_the_child_of_an_upstream_is_stopped_when_the_upstream_is_restarted(tmp_path: Path) -> None:
    first, second = tmp_path / "first.pid", tmp_path / "second.pid"
    child_file = tmp_path / "child.pid"
    config = StdioUpstream(command=sys.executable, args=[str(HOSTILE), "--child-file", str(child_file)])
    upstream = Upstream("hostile", config, NoHost("not in this test"))
    with reaped(first, second):
        async with anyio.create_task_group() as tg:
            tg.start_soon(upstream.run)
            await upstream.wait_ready(START_S)
            old_child = await await_until(lambda: read_pid_file(child_file), START_S, "the upstream's child")
            first.write_text(f"{old_child}\n")
            child_file.unlink()

            upstream.request_restart()
            await upstream.wait_ready(START_S)
            new_child = await await_until(lambda: read_pid_file(child_file), START_S, "the new upstream's child")
            second.write_text(f"{new_child}\n")
            await await_until(lambda: not pid_running(old_child), GONE_S, "the old child to be stopped")
            assert pid_running(new_child), "the new upstream's child belongs to the new, running upstream"
            tg.cancel_scope.cancel()
        await await_until(lambda: not pid_running(new_child), GONE_S, "the child to be stopped with the upstream")


@pytest.mark.parametrize("how", ["eof", "sigterm", "sigkill"])
def test_the_child_of_an_upstream_does_not_outlive_the_proxy_ended_by(how: str, tmp_path: Path) -> None:
    child_file = tmp_path / "child.pid"
    stderr = tmp_path / "proxy.stderr"
    argv = proxy_argv("wrap", "--", sys.executable, str(HOSTILE), "--child-file", str(child_file))
    with reaped(child_file), running(argv, stderr, stdin=subprocess.PIPE, stdout=subprocess.PIPE) as proxy:
        pipe = JsonRpcPipe(proxy, stderr)
        pipe.initialize(timeout=START_S)
        reply = pipe.request("tools/call", {"name": "pid", "arguments": {}})
        assert "result" in reply, reply
        child = wait_until(lambda: read_pid_file(child_file), START_S, "the upstream's child", stderr=stderr)
        assert pid_running(child)

        if how == "eof":
            assert proxy.stdin is not None
            proxy.stdin.close()
        else:
            proxy.send_signal(signal.SIGTERM if how == "sigterm" else signal.SIGKILL)
        proxy.wait(timeout=START_S)
        wait_until(lambda: not pid_running(child), GONE_S, f"the upstream's child to be gone after {how}")
