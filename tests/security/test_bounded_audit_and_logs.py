"""Issue 10, defect 5: what one call can make the proxy write.

50 refused calls with 1 MB tool names added 50 MB to the state database and 50 MB of log; one call with 10^6
argument keys wrote a 10.9 MB audit row. Now every audit field and every log value is capped: the rows, the lines
and the error sent back stay small however large the call was. (Real proxy process, JSON logs, real state dir.)
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

from tests.helpers import JsonRpcPipe, proxy_argv, running

HOSTILE = Path(__file__).with_name("hostile_upstream.py")
START_S = 30.0
ANSWER_S = 120.0
BIG_NAMES = 20
MB = 1_000_000
KEYS = 45_000  # 1.5 MB of arguments (over the 1 MB cap) in 90,000 JSON items (under the stdio item limit)


def test_huge_tool_names_and_many_argument_keys_leave_small_rows_lines_and_answers(tmp_path: Path) -> None:
    state, stderr = tmp_path / "state", tmp_path / "proxy.stderr"
    argv = proxy_argv(
        "--log-format",
        "json",
        "--log-level",
        "debug",
        "wrap",
        "--state-dir",
        str(state),
        "--",
        sys.executable,
        str(HOSTILE),
    )
    with running(argv, stderr, stdin=subprocess.PIPE, stdout=subprocess.PIPE) as proxy:
        pipe = JsonRpcPipe(proxy, stderr)
        pipe.initialize(timeout=START_S)
        for i in range(BIG_NAMES):
            reply = pipe.request("tools/call", {"name": f"{i}" + "n" * MB, "arguments": {}}, timeout=ANSWER_S)
            assert "error" in reply or reply["result"]["isError"], str(reply)[:500]
            assert len(json.dumps(reply)) < 20_000, "the answer echoes the whole name"
        # Past 100,000 JSON items a message is refused unparsed at the wire (tests/security/test_stdio_many_keys.py),
        # before any audit; under it, arguments over their byte cap are refused by the chain and audited in short.
        keys = {f"key{i:07d}-{'p' * 16}": i for i in range(KEYS)}
        reply = pipe.request("tools/call", {"name": "echo", "arguments": keys}, timeout=ANSWER_S)
        assert reply["result"]["isError"], str(reply)[:500]
        assert len(json.dumps(reply)) < 20_000
        assert proxy.stdin is not None
        proxy.stdin.close()
        assert proxy.wait(timeout=START_S) == 0

    with sqlite3.connect(state / "state.sqlite3") as db:
        rows = db.execute("SELECT tool, argument_keys, session, upstream, outcome FROM audit").fetchall()
    assert len(rows) == BIG_NAMES + 1
    assert all(r[4] == "refused" for r in rows)
    assert max(sum(len(str(v)) for v in r) for r in rows) < 5_000
    assert json.loads(rows[-1][1])[-1] == f"…+{KEYS - 100} more keys"
    assert sum(f.stat().st_size for f in state.iterdir()) < 5 * MB, "the database grew with the calls' size"

    lines = stderr.read_bytes().splitlines()
    assert any(b'"tool_call"' in line for line in lines), "the calls were logged"
    longest = max(len(line) for line in lines)
    assert longest < 30_000, f"a log line of {longest} bytes"
