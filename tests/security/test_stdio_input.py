"""Issue 10, defect 6 (stdio): what a host writes to the proxy's stdin.

A line that is not JSON, or a request nested deeper than the parser allows, got no answer (the host waited for its
own timeout); a line of any length was held whole (a 300 MB line took the proxy to 1.4 GB resident). Now the first
two get -32700 at once, a line over the cap is read through and refused with -32600, and the proxy keeps serving.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from resilient_mcp.host.stdio import MAX_LINE_BYTES
from tests.helpers import JsonRpcPipe, proxy_argv, running

HOSTILE = Path(__file__).with_name("hostile_upstream.py")
START_S = 30.0
ANSWER_S = 30.0


def _proxy(tmp_path: Path) -> tuple[list[str], Path]:
    return proxy_argv("wrap", "--", sys.executable, str(HOSTILE)), tmp_path / "proxy.stderr"


def _still_serving(pipe: JsonRpcPipe) -> None:
    reply = pipe.request("tools/call", {"name": "echo", "arguments": {"text": "still here"}}, timeout=ANSWER_S)
    assert reply["result"]["content"][0]["text"] == "still here", reply


def _peak_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) / 1024


def test_a_line_that_is_not_json_gets_a_parse_error_at_once(tmp_path: Path) -> None:
    argv, stderr = _proxy(tmp_path)
    with running(argv, stderr, stdin=subprocess.PIPE, stdout=subprocess.PIPE) as proxy:
        pipe = JsonRpcPipe(proxy, stderr)
        pipe.initialize(timeout=START_S)
        assert proxy.stdin is not None
        proxy.stdin.write(b"this is not json {\n")
        proxy.stdin.flush()
        reply = pipe.receive(ANSWER_S)
        assert reply["id"] is None and reply["error"]["code"] == -32700, reply
        _still_serving(pipe)


def test_a_request_nested_too_deep_gets_a_parse_error_and_a_batch_a_short_invalid_request(tmp_path: Path) -> None:
    argv, stderr = _proxy(tmp_path)
    with running(argv, stderr, stdin=subprocess.PIPE, stdout=subprocess.PIPE) as proxy:
        pipe = JsonRpcPipe(proxy, stderr)
        pipe.initialize(timeout=START_S)
        assert proxy.stdin is not None
        deep = b'{"a":' * 5000 + b"1" + b"}" * 5000
        proxy.stdin.write(b'{"jsonrpc":"2.0","id":41,"method":"tools/call","params":' + deep + b"}\n")
        proxy.stdin.flush()
        reply = pipe.receive(ANSWER_S)
        assert reply["error"]["code"] == -32700, reply
        assert len(reply["error"]["message"]) < 300

        pipe.send([{"jsonrpc": "2.0", "id": 42, "method": "ping"}])  # type: ignore[arg-type]
        reply = pipe.receive(ANSWER_S)
        assert reply["error"]["code"] == -32600 and len(reply["error"]["message"]) < 300, reply
        _still_serving(pipe)


def test_a_line_over_the_cap_is_refused_without_being_held_in_memory(tmp_path: Path) -> None:
    argv, stderr = _proxy(tmp_path)
    with running(argv, stderr, stdin=subprocess.PIPE, stdout=subprocess.PIPE) as proxy:
        pipe = JsonRpcPipe(proxy, stderr)
        pipe.initialize(timeout=START_S)
        _still_serving(pipe)
        before = _peak_rss_mb(proxy.pid)
        assert proxy.stdin is not None
        size = MAX_LINE_BYTES * 3
        proxy.stdin.write(b'{"jsonrpc":"2.0","id":"huge","method":"tools/call","params":{"name":"echo","arguments":')
        proxy.stdin.write(b'{"text":"')
        block = b"x" * (1 << 20)
        for _ in range(size // len(block)):
            proxy.stdin.write(block)
        proxy.stdin.write(b'"}}}\n')
        proxy.stdin.flush()
        reply = pipe.receive(ANSWER_S * 4)
        assert reply["id"] == "huge" and reply["error"]["code"] == -32600, reply
        assert "larger than" in reply["error"]["message"]
        grown = _peak_rss_mb(proxy.pid) - before
        assert grown < MAX_LINE_BYTES / 2**20, f"the proxy grew by {grown:.0f} MB reading a {size >> 20} MB line"
        _still_serving(pipe)
