"""`resilient-mcp demo` (the README's run command) runs end to end and shows each fault handled."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.helpers import child_env


def test_demo_shows_each_fault_direct_and_through_the_proxy(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "resilient_mcp.cli", "demo"],
        capture_output=True, text=True, timeout=120, env=child_env(state_home=tmp_path),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert out.count("through resilient-mcp:") == 8
    assert "candidates=['lookup_order']" in out
    assert "#1 C3_attempt_timeout, #2 ok" in out, "the hanging read is absorbed by a retry"
    assert "#1 D1_transient_execution_error, #2 ok" in out
    assert "repair_action=verify_state" in out and "C2_connection_lost_after_send" in out
    assert out.count('"client_ref": "r-2-crash"}]') == 2, "the write that died after committing exists once each way"
    assert "output truncated: kept 100000 of 5130026 bytes" in out
    assert "This identical call already failed" in out
