"""Issue 20, item 3: request bodies that never finish, after complete and valid headers.

Before: once a request's headers were complete the connection counted as busy: no deadline applied to its body and
it could never be closed to make room, so 704 sockets that each sent headers and a few bytes of a promised body held
every connection slot of a 1,024-descriptor proxy, and every other client (``/healthz`` too) was refused for as long
as they were held. Now the whole body is due within ``listen.body_timeout_s`` of the headers (408 and closed), and
past ``listen.max_connections`` a connection whose body has gone longest without a byte makes room.
"""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import Iterator
from pathlib import Path

from tests.helpers import RunningProxy, http_get_status, http_proxy, wait_until
from tests.security.http_proxy import CALL_S, PROTOCOL, RawSession
from tests.security.test_http_slowloris import PROXY_OPEN_FILES, _closed_by_peer, _descriptors, answer, queued

ATTACK_SOCKETS = 800  # more than the 704 connections a 1,024-descriptor proxy allows


START = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {'


def _slow_body_head(proxy: RunningProxy, expect: bool = False) -> bytes:
    return (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{proxy.port}\r\nContent-Type: application/json\r\n"
        "Accept: application/json, text/event-stream\r\nContent-Length: 100000\r\n"
        + ("Expect: 100-continue\r\n" if expect else "")
        + "\r\n"
    ).encode()


INITIALIZE = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
    }
).encode()


def _whole(proxy: RunningProxy, body: bytes) -> bytes:
    """A complete POST of ``body`` to the MCP endpoint, as one write."""
    return (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{proxy.port}\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode() + body


@contextlib.contextmanager
def _slow_bodies(proxy: RunningProxy, count: int, confirmed: bool = False) -> Iterator[list[socket.socket]]:
    """``count`` connections that each send complete headers and the start of a body that never ends. ``confirmed``:
    each waits for the proxy's ``100 Continue`` (its headers were read and the endpoint waits for the body) before
    the next one opens."""
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.create_connection((proxy.host, proxy.port), timeout=CALL_S)
            sockets.append(sock)
            with contextlib.suppress(OSError):  # the proxy may already have closed it to make room
                sock.sendall(_slow_body_head(proxy, expect=confirmed))
                if confirmed:
                    assert sock.recv(4096).startswith(b"HTTP/1.1 100"), "headers read, body awaited"
                sock.sendall(START)
        yield sockets
    finally:
        for sock in sockets:
            sock.close()


def test_a_body_that_does_not_arrive_in_time_gets_408_and_is_closed(tmp_path: Path) -> None:
    # Every request here is one write, there when the proxy accepts its connection (``queued``): its body arrives
    # with its headers, so only the body that never ends meets the 0.5 s (before: the whole request was sent by
    # ``http.client``, headers and body in two writes that a stalled test could space by more than 0.5 s).
    with http_proxy(tmp_path, listen={"body_timeout_s": 0.5}) as proxy:
        with queued(proxy, _slow_body_head(proxy) + START) as slow:
            reply = slow.recv(4096)  # blocks until the proxy gives up on the body (bounded by CALL_S)
            assert reply.startswith(b"HTTP/1.1 408"), reply
            assert _closed_by_peer(slow)
        with queued(proxy, _whole(proxy, INITIALIZE)) as whole:  # a body that arrives whole is served as before
            served = answer(whole)
        assert served.startswith(b"HTTP/1.1 200") and b"serverInfo" in served, served[:500]


def test_past_max_connections_the_slow_body_without_progress_longest_makes_room(tmp_path: Path) -> None:
    with (
        http_proxy(tmp_path, listen={"max_connections": 8}) as proxy,
        _slow_bodies(proxy, 8, confirmed=True) as held,
    ):
        assert http_get_status(f"{proxy.base}/healthz", timeout=CALL_S) == 200  # a 9th connection is served
        assert _closed_by_peer(held[0])  # by closing the body that has waited longest


def test_health_checks_and_calls_keep_working_while_800_slow_body_sockets_are_held(tmp_path: Path) -> None:
    with (
        _descriptors(ATTACK_SOCKETS + 256),
        http_proxy(tmp_path, open_files=PROXY_OPEN_FILES) as proxy,
        _slow_bodies(proxy, ATTACK_SOCKETS),
    ):
        wait_until(
            lambda: http_get_status(f"{proxy.base}/healthz", timeout=5.0) == 200,
            CALL_S,
            "/healthz to answer 200 during the attack",
            process=proxy.process,
            stderr=proxy.stderr,
        )
        session = RawSession(proxy).initialize()
        reply = session.call_tool("echo", {"text": "through the flood"})
        assert reply.status == 200 and "through the flood" in reply.text, (reply.status, reply.text[:300])
        lines = proxy.stderr_lines()
        assert not [line for line in lines if "out of system resource" in line]
