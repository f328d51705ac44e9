"""Issue 20.15: a stdio request of 10^6 argument keys is refused without being parsed.

Before: the line (12 MB, under the 32 MB line cap) was parsed whole with ``json.loads`` and validated by pydantic:
7.5 s of CPU and 269 MB resident before the tool's own validation refused it. Now a line whose cheap upper bound of
JSON items is over ``MAX_JSON_ITEMS`` is counted token by token in a worker thread and refused with -32600 naming the
limit; the proxy keeps serving and its peak memory grows by a small multiple of the line, not by a parsed dict.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from resilient_mcp.text.jsonlines import MAX_JSON_ITEMS
from tests.helpers import JsonRpcPipe, proxy_argv, running

HOSTILE = Path(__file__).with_name("hostile_upstream.py")
START_S = 60.0
ANSWER_S = 120.0
KEYS = 1_000_000


def _peak_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) / 1024


def test_a_million_argument_keys_are_refused_unparsed_and_the_proxy_keeps_serving(tmp_path: Path) -> None:
    stderr = tmp_path / "proxy.stderr"
    argv = proxy_argv("wrap", "--", sys.executable, str(HOSTILE))
    with running(argv, stderr, stdin=subprocess.PIPE, stdout=subprocess.PIPE) as proxy:
        pipe = JsonRpcPipe(proxy, stderr)
        pipe.initialize(timeout=START_S)
        echo = {"name": "echo", "arguments": {"text": "warm"}}
        assert pipe.request("tools/call", echo, timeout=ANSWER_S)["result"]["content"][0]["text"] == "warm"
        before = _peak_rss_mb(proxy.pid)

        keys = b",".join(b'"k%07d":0' % i for i in range(KEYS))
        line = b'{"jsonrpc":"2.0","id":"many","method":"tools/call","params":{"name":"echo","arguments":{'
        line += keys + b"}}}\n"
        assert proxy.stdin is not None
        proxy.stdin.write(line)
        proxy.stdin.flush()
        reply = pipe.receive(ANSWER_S)
        assert reply["id"] == "many" and reply["error"]["code"] == -32600, reply
        assert f"more than {MAX_JSON_ITEMS} JSON items" in reply["error"]["message"], reply

        grown = _peak_rss_mb(proxy.pid) - before
        line_mb = len(line) / (1 << 20)
        assert grown <= 5 * line_mb, f"peak RSS grew {grown:.0f} MB for a {line_mb:.0f} MB line"
        again = {"name": "echo", "arguments": {"text": "still here"}}
        assert pipe.request("tools/call", again, timeout=ANSWER_S)["result"]["content"][0]["text"] == "still here"
