"""The thread-free stdio transport (``resilient_mcp.host.stdio``), driven through a real process's stdin and stdout."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

ECHO_SERVER = textwrap.dedent(
    """
    import anyio
    import mcp_types as types
    from mcp.shared.message import SessionMessage
    from resilient_mcp.host.stdio import stdio_transport

    async def main():
        async with stdio_transport() as (read, write):
            print("stray print on stdout", flush=True)
            async for item in read:
                if isinstance(item, Exception):
                    reply = types.JSONRPCNotification(jsonrpc="2.0", method="test/parse_error", params={})
                else:
                    reply = item.message
                await write.send(SessionMessage(reply))
        print("restored", flush=True)

    anyio.run(main)
    """
)


def _run(stdin: bytes) -> subprocess.CompletedProcess[bytes]:
    """The echo server run to its end on ``stdin``; 120 s is only a bound (as ``run_cli``'s): its whole run is a
    Python start-up and a few lines, which took over 60 s under the CPU hog on a machine loaded by other work."""
    return subprocess.run(
        [sys.executable, "-c", ECHO_SERVER], input=stdin, capture_output=True, timeout=120, check=False
    )


def _replies(done: subprocess.CompletedProcess[bytes]) -> list[dict[str, object]]:
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith(b"{")]


def _request(n: int, text: str) -> bytes:
    return json.dumps(
        {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": text}}}
    ).encode()


def test_messages_of_any_size_cross_the_wire_intact_and_in_order() -> None:
    big = "é" * 1_500_000  # several reads of the pipe, multi-byte characters split across them
    done = _run(b"\n".join([_request(1, "small"), _request(2, big), _request(3, "last")]) + b"\n")
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    replies = _replies(done)
    assert [r["id"] for r in replies] == [1, 2, 3]
    assert replies[1]["params"]["arguments"]["text"] == big


def test_a_line_that_is_not_json_is_answered_with_a_parse_error_and_serving_goes_on() -> None:
    done = _run(b"this is not json\n" + _request(7, "after") + b"\n")
    replies = _replies(done)
    assert replies[0]["id"] is None and replies[0]["error"]["code"] == -32700
    assert replies[1]["id"] == 7


def test_invalid_utf8_is_replaced_as_the_sdk_transport_does_not_refused() -> None:
    line = _request(4, "X").replace(b'"X"', b'"caf\xe9"')
    done = _run(line + b"\n")
    replies = _replies(done)
    assert replies[0]["params"]["arguments"]["text"] == "caf\ufffd"


def test_stray_output_goes_to_stderr_while_serving_and_eof_ends_serving_and_gives_stdout_back() -> None:
    done = _run(b"")
    assert done.returncode == 0
    assert done.stdout == b"restored\n"
    assert b"stray print on stdout" in done.stderr
