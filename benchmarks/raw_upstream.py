"""The fastest possible MCP upstream: hand-written JSON-RPC over stdio, no SDK, no validation.

Answers ``initialize`` (echoing the client's protocol version), ``ping``, ``tools/list`` (one page) and
``tools/call``; ignores notifications; every other method is ``-32601``. Tools: ``echo`` (returns its ``message``
argument as text) and, with ``--tools N``, ``N - 1`` more echo tools named ``echo_1`` ... so that a catalog can be
made as large as a scale benchmark needs. Standard library only, so any Python can run it.

    python benchmarks/raw_upstream.py [--tools N]
"""

from __future__ import annotations

import json
import sys

HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
ECHO_SCHEMA = {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}


def tool_list(n: int) -> list[dict[str, object]]:
    names = ["echo", *(f"echo_{i}" for i in range(1, n))]
    return [{"name": name, "description": "Echo the message back.", "inputSchema": ECHO_SCHEMA} for name in names]


def answer(request: dict[str, object], tools: list[dict[str, object]]) -> dict[str, object]:
    method, params = request.get("method"), request.get("params") or {}
    assert isinstance(params, dict)
    if method == "tools/call":
        args = params.get("arguments") or {}
        text = str(args.get("message", "")) if isinstance(args, dict) else ""
        return {"result": {"content": [{"type": "text", "text": text}], "isError": False}}
    if method == "initialize":
        asked = params.get("protocolVersion")
        version = asked if asked in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1]
        return {
            "result": {
                "protocolVersion": version,
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": {"name": "raw-upstream", "version": "1.0"},
            }
        }
    if method == "tools/list":
        return {"result": {"tools": tools}}
    if method == "ping":
        return {"result": {}}
    return {"error": {"code": -32601, "message": f"Method not found: {method}"}}


def main() -> None:
    n = int(sys.argv[sys.argv.index("--tools") + 1]) if "--tools" in sys.argv else 1
    tools = tool_list(max(n, 1))
    read, write = sys.stdin.buffer, sys.stdout.buffer
    for line in read:
        if not line.strip():
            continue
        request = json.loads(line)
        if "id" not in request or "method" not in request:  # a notification, or a response to us
            continue
        reply = {"jsonrpc": "2.0", "id": request["id"], **answer(request, tools)}
        write.write(json.dumps(reply, separators=(",", ":")).encode() + b"\n")
        write.flush()


if __name__ == "__main__":
    main()
