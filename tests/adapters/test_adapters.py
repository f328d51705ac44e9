"""The private members of the MCP SDK and anyio the proxy reaches (``resilient_mcp/adapters/``), pinned: an upgrade
of either fails here, naming what to re-check, before it can fail in production."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from importlib.metadata import version
from types import SimpleNamespace
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import ClientSession
from mcp.client.session import _make_modern_stamp
from mcp.server.connection import Connection
from mcp.server.session import ServerSession
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp.shared.message import SessionMessage

from resilient_mcp.adapters.process import close_transport
from resilient_mcp.adapters.sdk import (
    SDK_SERIES,
    after_envelope_stamp,
    close_request,
    host_connection,
    loop_dispatcher,
    negotiate_auto,
    open_request,
)

pytestmark = pytest.mark.anyio


def test_the_adapters_were_written_for_the_installed_mcp_and_anyio() -> None:
    assert version("mcp").startswith(SDK_SERIES), "re-check resilient_mcp/adapters/sdk.py against this mcp release"
    assert version("anyio").startswith("4."), "re-check resilient_mcp/adapters/process.py against this anyio release"


def test_the_envelope_stamp_is_amended_after_the_sdks_own() -> None:
    send, receive = anyio.create_memory_object_stream[Any](1)
    session = ClientSession(receive, send)
    seen: list[tuple[dict[str, Any], Any, dict[str, Any]]] = []
    opts: dict[str, Any] = {}
    after_envelope_stamp(session, lambda data, private: seen.append((dict(data), private, dict(opts))), "x/private")
    session._stamp({"method": "initialize", "params": {}}, opts)  # type: ignore[arg-type]
    # the SDK's pre-connect stamp ran first (an initialize is never cancelled), then the amendment saw the data
    assert opts == {"cancel_on_abandon": False}
    assert seen == [({"method": "initialize", "params": {}}, None, {"cancel_on_abandon": False})]
    send.close()
    receive.close()


def test_the_private_key_reaches_the_amendment_and_never_the_wire() -> None:
    """The host's declaration rides the request under a private ``_meta`` key (no ambient context): the adapter takes
    it out before the SDK's 2026-07-28 stamp writes the envelope, and hands it to the amendment."""
    send, receive = anyio.create_memory_object_stream[Any](1)
    session = ClientSession(receive, send)
    session._stamp = _make_modern_stamp(  # what the SDK installs once a 2026-07-28 session is connected
        "2026-07-28", {"name": "proxy", "version": "1"}, {"sampling": {}}, lambda name, args: {}
    )
    seen: list[tuple[dict[str, Any], Any]] = []
    after_envelope_stamp(session, lambda data, private: seen.append((data, private)), "x/private")
    data = {"method": "tools/call", "params": {"name": "t", "_meta": {"x/private": {"log_level": "info"}, "k": 1}}}
    session._stamp(data, {})  # type: ignore[arg-type]
    [(stamped, private)] = seen
    assert private == {"log_level": "info"}
    meta = stamped["params"]["_meta"]
    assert "x/private" not in meta and meta["k"] == 1
    assert meta["io.modelcontextprotocol/clientCapabilities"] == {"sampling": {}}, "the SDK stamped after the take"
    send.close()
    receive.close()


def test_auto_negotiation_is_the_one_the_sdks_own_client_runs() -> None:
    """``negotiate_auto`` wraps the private ``mcp.client._probe.negotiate_auto``, the function the SDK's own
    ``mcp.Client(mode="auto")`` runs: an upstream's 2026-07-28 connection opens as the SDK's client would."""
    import inspect

    import mcp.client._probe as probe
    import mcp.client.client as client

    assert client.negotiate_auto is probe.negotiate_auto
    assert list(inspect.signature(probe.negotiate_auto).parameters) == ["session"]
    assert inspect.iscoroutinefunction(negotiate_auto)


def test_a_server_sessions_host_connection_is_the_connection_it_was_built_for() -> None:
    connection = SimpleNamespace(protocol_version="2025-11-25")
    session = ServerSession(object(), connection)  # type: ignore[arg-type]
    assert host_connection(session) is connection
    other = object()
    assert host_connection(other) is other  # no connection known: the session itself stands for it


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX process group")
async def test_the_subprocess_transport_is_closed_while_a_survivor_holds_its_pipe() -> None:
    # the server exits, its child keeps stdout open: asyncio keeps the transport open (and warns at GC) until closed
    survivor = "import subprocess, sys; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])"
    process = await anyio.open_process([sys.executable, "-c", survivor], start_new_session=True)
    try:
        with anyio.fail_after(30):
            # no event to wait on: wait() also waits for the pipes' EOF, which the survivor holds
            while process.returncode is None:  # noqa: ASYNC110
                await anyio.sleep(0.01)
        transport = process._process._transport  # type: ignore[attr-defined]
        assert not transport.is_closing()
        close_transport(process)
        assert transport.is_closing()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        for stream in (process.stdin, process.stdout, process.stderr):
            if stream is not None:
                await stream.aclose()


async def test_a_request_opened_on_the_loop_dispatcher_is_cancelled_and_reports_progress_as_the_sdks_own() -> None:
    """``open_request``/``close_request`` (the raw tools/call lane) against the SDK's real dispatcher and connection."""
    to_dispatcher, dispatcher_in = anyio.create_memory_object_stream[Any](4)
    dispatcher_out, from_dispatcher = anyio.create_memory_object_stream[Any](4)
    dispatcher: JSONRPCDispatcher[Any] = JSONRPCDispatcher(dispatcher_in, dispatcher_out)
    connection = Connection.for_loop(dispatcher)
    assert loop_dispatcher(ServerSession(object(), connection)) is dispatcher  # type: ignore[arg-type]
    assert (
        loop_dispatcher(ServerSession(object(), SimpleNamespace(outbound=object(), protocol_version="2025-11-25")))
        is None
    )  # type: ignore[arg-type]

    async def ignore(*_: Any) -> Any:
        return {}

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            await tg.start(dispatcher.run, ignore, ignore)
            dctx, scope = open_request(dispatcher, 7, "tok")
            await dctx.progress(1, 2, "half")
            sent = await from_dispatcher.receive()
            assert sent.message.method == "notifications/progress"
            assert sent.message.params == {"progressToken": "tok", "progress": 1, "total": 2, "message": "half"}
            cancel = types.JSONRPCNotification(
                jsonrpc="2.0", method="notifications/cancelled", params={"requestId": "7"}
            )
            await to_dispatcher.send(SessionMessage(cancel))
            with scope:
                await dctx.cancel_requested.wait()
                await anyio.sleep_forever()  # the dispatcher cancels the scope
            assert scope.cancelled_caught
            close_request(dispatcher, dctx)
            assert not dctx.can_send_request
            other, _ = open_request(dispatcher, 8, None)
            close_request(dispatcher, dctx)  # an entry that is not this context's stays
            assert dispatcher._in_flight[8].dctx is other
            close_request(dispatcher, other)
            assert not dispatcher._in_flight
            to_dispatcher.close()


def test_no_module_outside_the_adapters_imports_a_librarys_private_module_or_name() -> None:
    """A private member of a library (``mcp.client._probe``, ``_later_revision_fields``) is imported in
    ``resilient_mcp/adapters/`` only, where this file pins it."""
    import ast
    from pathlib import Path

    package = Path(__file__).resolve().parents[2] / "resilient_mcp"
    private: list[str] = []
    for path in sorted(package.rglob("*.py")):
        if path.parent.name == "adapters":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            private += [
                f"{path.relative_to(package.parent)}:{node.lineno}: {name}"
                for name in names
                if not name.startswith("resilient_mcp")
                and any(part.startswith("_") and not part.startswith("__") for part in name.split("."))
            ]
    assert not private, "private members of a library outside resilient_mcp/adapters/:\n" + "\n".join(private)
