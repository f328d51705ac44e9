"""A bare stdio MCP server (no SDK, starts in milliseconds) that misbehaves on request: the security tests' upstream.

``--child-file PATH``
    at start, runs ``sleep 600`` in the server's own process group and writes that child's PID to ``PATH`` (a
    server that started a helper process); the server itself exits as soon as its stdin closes, so only a proxy
    that terminates the whole group stops the child.

Tools:

- ``big(bytes, id_last)`` -> one text content of ``bytes`` bytes, written as one line; with ``id_last`` the
  response's ``"id"`` comes after ``"result"`` (as the TypeScript SDK writes it);
- ``echo(text)`` -> ``text``;
- ``pid()`` -> the server's PID.

Run as ``python tests/security/hostile_upstream.py [--child-file PATH]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

TOOLS: list[dict[str, Any]] = [
    {
        "name": "big",
        "description": "Returns `bytes` bytes of text.",
        "inputSchema": {
            "type": "object",
            "properties": {"bytes": {"type": "integer"}, "id_last": {"type": "boolean"}},
            "required": ["bytes"],
        },
        "annotations": {"readOnlyHint": True},
    },
    {
        "name": "echo",
        "description": "Returns its text.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
        "annotations": {"readOnlyHint": True},
    },
    {
        "name": "pid",
        "description": "The server's PID.",
        "inputSchema": {"type": "object"},
        "annotations": {"readOnlyHint": True},
    },
]


def _write(out: Any, data: bytes) -> None:
    out.write(data)
    out.flush()


def _text(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": False}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--child-file", type=Path)
    args = parser.parse_args()
    if args.child_file is not None:
        child = subprocess.Popen(["sleep", "600"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        args.child_file.write_text(f"{child.pid}\n", encoding="utf-8")
    out = sys.stdout.buffer
    for raw in sys.stdin.buffer:
        message = json.loads(raw)
        if "id" not in message or "method" not in message:
            continue
        rid, method, params = message["id"], message["method"], message.get("params") or {}
        if method == "initialize":
            result: dict[str, Any] = {
                "protocolVersion": params.get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "hostile-upstream", "version": "0"},
            }
        elif method == "tools/list":
            result = {"tools": TOOLS}
        elif method == "tools/call":
            name, arguments = params.get("name"), params.get("arguments") or {}
            if name == "big":
                size = int(arguments["bytes"])
                rid_json = json.dumps(rid).encode()
                head = b'{"content": [{"type": "text", "text": "'
                tail = b'"}], "isError": false}'
                if arguments.get("id_last"):
                    head, tail = b'{"result": ' + head, tail + b', "jsonrpc": "2.0", "id": ' + rid_json + b"}\n"
                else:
                    head, tail = b'{"jsonrpc": "2.0", "id": ' + rid_json + b', "result": ' + head, tail + b"}\n"
                out.write(head)
                block = b"x" * (1 << 20)
                for start in range(0, size, len(block)):  # written in pieces: a 200 MB result costs 1 MB here
                    out.write(block[: min(len(block), size - start)])
                _write(out, tail)
                continue
            result = _text(str(arguments.get("text", "")) if name == "echo" else str(os.getpid()))
        elif method == "ping":
            result = {}
        else:
            error = {"code": -32601, "message": method}
            _write(out, json.dumps({"jsonrpc": "2.0", "id": rid, "error": error}).encode() + b"\n")
            continue
        _write(out, json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}).encode() + b"\n")


if __name__ == "__main__":
    main()
