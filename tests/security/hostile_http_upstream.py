"""A bare HTTP MCP server (asyncio streams, no SDK, starts in milliseconds) whose results are too large: the security
tests' remote upstream. It speaks both remote transports on one port:

- streamable HTTP on ``POST /mcp`` (JSON answers, or an SSE answer for ``big_sse``; no sessions, no GET stream);
- the legacy SSE transport: ``GET /sse`` opens the stream (first event ``endpoint``), ``POST /messages`` gets 202
  and its answer goes out on that stream.

Tools (all read-only):

- ``big_json(bytes)``: a JSON body with one text content of ``bytes`` bytes;
- ``endless_json()``: a JSON body that never ends (chunks of text until the client goes away); the bytes it got out
  are appended to ``--sent PATH`` when the client closes;
- ``big_sse(bytes)``: an SSE answer (streamable HTTP) whose one event is ``bytes`` long, or over the legacy stream;
- ``echo(text)``: ``text``;
- ``raw_reply(body, content_type)``: answers with ``body`` verbatim (``{{id}}`` replaced by the request's id, as JSON)
  as the HTTP response, whatever it is (the fuzzer's hostile upstream answers);
- ``fail(text)``: an ``isError`` result whose only content is ``text`` (free text: the proxy's diagnosis asks the
  host's model about it).

Every response says ``Connection: close`` (one request per connection, a body ends when the connection does).
Run as ``python tests/security/hostile_http_upstream.py --port N [--sent PATH]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
from pathlib import Path
from typing import Any

TOOLS = [
    {
        "name": name,
        "description": f"{name} (a hostile upstream's tool)",
        "inputSchema": {"type": "object", "properties": props},
        "annotations": {"readOnlyHint": True},
    }
    for name, props in [
        ("big_json", {"bytes": {"type": "integer"}}),
        ("endless_json", {}),
        ("big_sse", {"bytes": {"type": "integer"}}),
        ("echo", {"text": {"type": "string"}}),
        ("raw_reply", {"body": {"type": "string"}, "content_type": {"type": "string"}}),
        ("fail", {"text": {"type": "string"}}),
    ]
]
CHUNK = 1 << 16


class Hostile:
    def __init__(self, sent: Path | None) -> None:
        self.sent = sent
        self.streams: dict[str, asyncio.StreamWriter] = {}

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, target, _ = lines[0].split(" ", 2)
            headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            path, _, query = target.partition("?")
            if method == "GET" and path == "/sse":
                await self.legacy_stream(writer)
                return
            if method != "POST":
                await self.send(writer, 405, b"", "text/plain")
                return
            message = json.loads(body)
            if path == "/messages":
                await self.send(writer, 202, b"", "text/plain")
                stream = self.streams.get(query.partition("=")[2])
                if stream is not None and "id" in message:
                    await self.answer(message, stream, sse=True, legacy=True)
                return
            if "id" not in message:
                await self.send(writer, 202, b"", "text/plain")
                return
            await self.answer(message, writer, sse=False, legacy=False)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    async def legacy_stream(self, writer: asyncio.StreamWriter) -> None:
        sid = str(len(self.streams) + 1)
        self.streams[sid] = writer
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n")
        writer.write(f"event: endpoint\ndata: /messages?session_id={sid}\n\n".encode())
        await writer.drain()
        with contextlib.suppress(Exception):
            await asyncio.Event().wait()  # held open until the client goes away (or the server is stopped)

    async def send(self, writer: asyncio.StreamWriter, status: int, body: bytes, ctype: str) -> None:
        head = (
            f"HTTP/1.1 {status} X\r\ncontent-type: {ctype}\r\ncontent-length: {len(body)}\r\nconnection: close\r\n\r\n"
        )
        writer.write(head.encode() + body)
        await writer.drain()

    async def answer(self, message: dict[str, Any], writer: asyncio.StreamWriter, *, sse: bool, legacy: bool) -> None:
        rid, method = message["id"], message.get("method")
        params = message.get("params") or {}
        if method == "initialize":
            result: dict[str, Any] = {
                "protocolVersion": params.get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "hostile-http", "version": "0"},
            }
        elif method == "tools/list":
            result = {"tools": TOOLS}
        elif method == "tools/call":
            name, args = params.get("name"), params.get("arguments") or {}
            if name == "endless_json" and not legacy:
                await self.endless(rid, writer)
                return
            if name == "raw_reply" and not legacy:
                body = str(args.get("body", "")).replace("{{id}}", json.dumps(rid)).encode("utf-8", "replace")
                ctype = "".join(c for c in str(args.get("content_type") or "application/json") if " " <= c <= "~")
                await self.send(writer, 200, body, ctype[:100] or "application/json")
                return
            if name == "fail":
                result = {"content": [{"type": "text", "text": str(args.get("text", ""))}], "isError": True}
                await self.reply({"jsonrpc": "2.0", "id": rid, "result": result}, writer, sse=sse, legacy=legacy)
                return
            size = int(args.get("bytes", 0))
            text = args.get("text", "") if name == "echo" else "x" * size
            result = {"content": [{"type": "text", "text": text}]}
            if name == "big_sse" and not legacy:
                sse = True
        elif method == "ping":
            result = {}
        else:
            out = {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "Method not found"}}
            await self.reply(out, writer, sse=sse, legacy=legacy)
            return
        await self.reply({"jsonrpc": "2.0", "id": rid, "result": result}, writer, sse=sse, legacy=legacy)

    async def reply(self, out: dict[str, Any], writer: asyncio.StreamWriter, *, sse: bool, legacy: bool) -> None:
        data = json.dumps(out).encode()
        if legacy:
            writer.write(b"event: message\ndata: " + data + b"\n\n")
            await writer.drain()
        elif sse:
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n")
            writer.write(b"event: message\ndata: " + data + b"\n\n")
            await writer.drain()
        else:
            await self.send(writer, 200, data, "application/json")

    async def endless(self, rid: Any, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n")
        opening = b'{"jsonrpc": "2.0", "id": ' + json.dumps(rid).encode() + b', "result": {"content": [{"text": "'
        writer.write(opening)
        sent = len(opening)
        chunk = b"y" * CHUNK
        try:
            while True:
                writer.write(chunk)
                await writer.drain()
                sent += len(chunk)
        finally:
            if self.sent is not None:
                with self.sent.open("a") as f:
                    f.write(f"{sent}\n")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--sent", type=Path)
    parser.add_argument("--run-id", help="ignored: marks the process for a benchmark's leftover check")
    args = parser.parse_args()
    hostile = Hostile(args.sent)
    server = await asyncio.start_server(hostile.handle, "127.0.0.1", args.port, limit=1 << 20)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
