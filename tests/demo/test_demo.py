"""`resilient-mcp demo` (the README's run command) runs end to end and shows each fault handled, also on a busy
machine (``.ci/run`` runs it with every core saturated)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.helpers import REPO, child_env


def test_demo_shows_each_fault_direct_and_through_the_proxy(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "resilient_mcp.cli", "demo"],
        capture_output=True,
        text=True,
        timeout=300,
        env=child_env(state_home=tmp_path),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert out.count("through resilient-mcp:") == 8
    assert "candidates=['lookup_order']" in out
    # On a saturated machine an ordinary attempt may also miss the 1 s attempt timeout: one more retry, same outcome.
    slow_retry = r"#1 C3_attempt_timeout(, #\d C3_attempt_timeout)*, #\d ok"
    assert re.search(slow_retry, out), "the hanging read is absorbed by a retry"
    assert re.search(r"#1 D1_transient_execution_error(, #\d C3_attempt_timeout)*, #\d ok", out)
    assert "Request 'tools/call' timed out" in out, "directly, the host's own timeout ends the hanging read"
    assert "repair_action=verify_state" in out and "C2_connection_lost_after_send" in out
    assert out.count('"client_ref": "r-2-crash"}]') == 2, "the write that died after committing exists once each way"
    assert "output truncated: kept 100000 of 5130026 bytes" in out
    assert "This identical call already failed" in out
    # Stderr never lands in the middle of the steps: the direct server's is summarised under its answer, the proxy's
    # log and the stderr it relays in one section at the end.
    assert "Traceback (most recent call last)" not in done.stderr + out
    assert "upstream_died" not in done.stderr and "crashing before answering" not in done.stderr
    assert out.count("└ the server's stderr: a Python traceback") == 2 and "ending in KeyError: 'client_ref'" in out
    assert "└ the server's stderr: demo upstream: committed the order, now crashing before answering" in out
    behind = out[out.index("▶ Behind the scenes") :]
    assert "warning upstream_died (orders)" in behind and "relayed by the proxy: demo upstream: committed" in behind
    # The README's before/after example is this run's output, verbatim.
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    example = readme[readme.index("```text\n▶ ") + len("```text\n") :]
    example = example[: example.index("```")]
    assert example in out, "README.md's before/after example is not what the demo prints: copy the step from its output"
