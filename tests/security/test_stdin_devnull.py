"""Issue 20.10: ``resilient-mcp wrap -- CMD < /dev/null | cat`` ends (as does ``serve`` in stdio mode).

Before: epoll cannot watch ``/dev/null`` (``PermissionError`` in ``_add_reader``, logged by asyncio), the read side
was never registered, and the proxy waited forever for input that had already ended. Now a stdin (or stdout) the
event loop cannot watch is served by the SDK's thread-backed transport: end of input ends the session, the upstream
is stopped and the proxy exits 0.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from tests.helpers import proxy_argv, running, write_yaml

pytestmark = pytest.mark.anyio

HOSTILE = Path(__file__).with_name("hostile_upstream.py")
EXIT_S = 60.0
"""The proxy starts its upstream, reads end of input and stops it (seconds; minutes on a saturated machine)."""


def _wrap() -> list[str]:
    return proxy_argv("wrap", "--", sys.executable, str(HOSTILE))


def _serve(tmp_path: Path) -> list[str]:
    config = write_yaml(
        tmp_path / "config.yaml", {"upstreams": {"hostile": {"command": sys.executable, "args": [str(HOSTILE)]}}}
    )
    return proxy_argv("serve", "--config", str(config))


@pytest.mark.parametrize(
    ("command", "stdout"),
    [("wrap", subprocess.PIPE), ("wrap", subprocess.DEVNULL), ("serve", subprocess.PIPE)],
    ids=["wrap-stdout-pipe", "wrap-stdout-devnull", "serve-stdout-pipe"],
)
async def test_end_of_input_on_dev_null_ends_the_proxy(tmp_path: Path, command: str, stdout: int) -> None:
    argv = _wrap() if command == "wrap" else _serve(tmp_path)
    stderr = tmp_path / "proxy.stderr"
    with running(argv, stderr, stdin=subprocess.DEVNULL, stdout=stdout) as proxy:
        with anyio.fail_after(EXIT_S):
            code = await anyio.to_thread.run_sync(proxy.wait, abandon_on_cancel=True)
        assert code == 0, stderr.read_text(errors="replace")[-2000:]
        if proxy.stdout is not None:
            assert proxy.stdout.read() == b""  # nothing but JSON-RPC is ever written, and nothing was asked
    log = stderr.read_text(errors="replace")
    assert "PermissionError" not in log and "Traceback" not in log, log[-2000:]
