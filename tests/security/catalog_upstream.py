"""A bare stdio MCP server (no SDK, starts in milliseconds) whose catalog changes at runtime: the security tests'
upstream for resource templates, runtime tool shadowing and ``list_changed`` storms.

``--tool NAME`` (repeatable)
    a tool listed from the start (besides the built-in ones below); called, it answers ``NAME ran``;
``--template URI_TEMPLATE`` (repeatable)
    a resource template it lists;
``--description TEXT``
    the description of the ``--tool`` tools (default: ``The NAME tool.``).

Tools:

- ``echo(text)`` -> ``text``; a ``resources/read`` the server holds (see below) is answered right after it;
- ``add_tool(name)`` -> adds ``name`` to the catalog, sends ``notifications/tools/list_changed``, answers ``added``;
- ``storm(count)`` -> sends ``count`` ``notifications/tools/list_changed`` in one burst, then answers ``sent``;
- ``lists()`` -> how many ``tools/list`` requests the server has answered.

``resources/read`` of a ``repo://`` URI is held: answered (with the URI's length) only after the next ``echo`` has
been answered, so a test knows the read is in flight at the upstream while another session's echo runs.

Run as ``python tests/security/catalog_upstream.py [--tool NAME ...] [--template T ...]``.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def _tool(name: str, description: str, properties: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "name": name,
        "description": description,
        "inputSchema": {"type": "object", "properties": properties or {}},
        "annotations": {"readOnlyHint": True},
    }


BUILT_IN = [
    _tool("echo", "Returns its text.", {"text": {"type": "string"}}),
    _tool("add_tool", "Adds a tool at runtime.", {"name": {"type": "string"}}),
    _tool("storm", "Sends many list_changed notifications.", {"count": {"type": "integer"}}),
    _tool("lists", "How many tools/list requests were answered."),
]


def _write(message: dict[str, Any]) -> None:
    sys.stdout.buffer.write(json.dumps(message).encode() + b"\n")
    sys.stdout.buffer.flush()


def _text(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": False}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tool", action="append", default=[])
    parser.add_argument("--template", action="append", default=[])
    parser.add_argument("--description")
    args = parser.parse_args()
    extra: list[dict[str, Any]] = [_tool(name, args.description or f"The {name} tool.") for name in args.tool]
    templates = [{"uriTemplate": t, "name": f"template {i}"} for i, t in enumerate(args.template)]
    lists = 0
    held: list[tuple[Any, str]] = []
    changed = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    for raw in sys.stdin.buffer:
        message = json.loads(raw)
        if "id" not in message or "method" not in message:
            continue
        rid, method, params = message["id"], message["method"], message.get("params") or {}
        result: dict[str, Any]
        if method == "initialize":
            result = {
                "protocolVersion": params.get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {"listChanged": True}, "resources": {}},
                "serverInfo": {"name": "catalog-upstream", "version": "0"},
            }
        elif method == "tools/list":
            lists += 1
            result = {"tools": BUILT_IN + extra}
        elif method == "resources/templates/list":
            result = {"resourceTemplates": templates}
        elif method == "resources/list":
            result = {"resources": []}
        elif method == "resources/read":
            uri = str(params.get("uri", ""))
            if uri.startswith("repo://"):
                held.append((rid, uri))
                continue
            result = {"contents": [{"uri": uri, "text": "read"}]}
        elif method == "tools/call":
            name, arguments = params.get("name"), params.get("arguments") or {}
            if name == "echo":
                _write({"jsonrpc": "2.0", "id": rid, "result": _text(str(arguments.get("text", "")))})
                for held_id, uri in held:
                    _write(
                        {"jsonrpc": "2.0", "id": held_id, "result": {"contents": [{"uri": uri, "text": str(len(uri))}]}}
                    )
                held.clear()
                continue
            if name == "add_tool":
                extra.append(_tool(str(arguments["name"]), "Added at runtime."))
                _write(changed)
                result = _text("added")
            elif name == "storm":
                burst = (json.dumps(changed).encode() + b"\n") * int(arguments["count"])
                sys.stdout.buffer.write(burst)
                result = _text("sent")
            elif name == "lists":
                result = _text(str(lists))
            else:
                result = _text(f"{name} ran")
        elif method == "ping":
            result = {}
        else:
            _write({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": method}})
            continue
        _write({"jsonrpc": "2.0", "id": rid, "result": result})


if __name__ == "__main__":
    main()
