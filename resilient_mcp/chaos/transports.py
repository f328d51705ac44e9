"""Serving a ``ChaosServer``: over stdio, over streamable HTTP, and in-process (a transport for ``mcp.Client`` or the
proxy's ``Upstream``), each with the ``Link`` its handlers use to die mid-call or to write garbage on the wire.

- stdio: the wire is a private duplicate of fd 1 handed to ``stdio_server`` as its stdout, so a handler can write a
  raw line on it between two JSON-RPC frames (a lock keeps frames whole); dying is ``os._exit`` — the ledger file
  already holds any commit;
- HTTP: dying is ``os._exit`` too; there is no line-oriented wire, so wire pollution falls back to an invalid result;
- in-process (``connect``): memory streams as the SDK's ``InMemoryTransport`` uses; dying cancels the server's task
  and closes its streams, which the client sees as a closed connection, like a dead process; "garbage on the wire"
  is what ``stdio_client`` hands its session for an unparsable line (the parse exception); ``connect`` can be entered
  again, like a restarted process, against the same ledger.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, NoReturn, cast

import anyio
import mcp_types as types
import structlog
from mcp.server.stdio import stdio_server
from mcp.shared.memory import create_client_server_memory_streams
from mcp.shared.message import SessionMessage

from ..policy.config import split_host_port
from ..policy.source import SourceError
from .ledger import Ledger
from .plan import FaultPlan, load_plan
from .server import ChaosServer, check_plan

log = structlog.get_logger(__name__)


def _exit_now(exit_code: int, why: str) -> NoReturn:
    sys.stderr.write(f"chaos-server: {why}; exiting with {exit_code}\n")
    sys.stderr.flush()
    os._exit(exit_code)


class ProcessLink:
    """A real process: dying exits it; ``wire`` (stdio only) takes raw lines."""

    def __init__(self, wire: StdioWire | None = None) -> None:
        self.wire = wire

    async def die(self, exit_code: int) -> None:
        _exit_now(exit_code, "dying mid-call as the fault plan says")

    async def pollute(self, line: str) -> bool:
        if self.wire is None:
            return False
        await self.wire.write(line + "\n")
        return True


class StdioWire:
    """The stdio server's stdout: whole lines written under a lock, so pollution never tears a frame."""

    def __init__(self, fd: int) -> None:
        self._file = os.fdopen(fd, "wb")
        self._lock = anyio.Lock()

    def _put(self, data: bytes) -> None:
        self._file.write(data)
        self._file.flush()

    async def write(self, text: str) -> None:
        async with self._lock:
            await anyio.to_thread.run_sync(self._put, text.encode("utf-8"))

    async def flush(self) -> None:
        """Each ``write`` is flushed already."""


class _MemoryLink:
    def __init__(self, scope: anyio.CancelScope, server_streams: tuple[Any, Any]) -> None:
        self.scope = scope
        self.read, self.write = server_streams
        self.died = False

    async def die(self, exit_code: int) -> None:
        self.died = True
        log.info("chaos_died", exit_code=exit_code)
        self.read.close()
        self.write.close()
        self.scope.cancel()
        await anyio.sleep_forever()

    async def pollute(self, line: str) -> bool:
        try:  # exactly what stdio_client hands the session for this line
            message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except Exception as exc:
            await self.write.send(exc)
            return True
        await self.write.send(SessionMessage(message))
        return True


@asynccontextmanager
async def connect(chaos: ChaosServer) -> AsyncIterator[tuple[Any, Any]]:
    """An in-process connection to ``chaos``: yields ``(read, write)`` for ``mcp.Client`` or ``Upstream``."""
    async with create_client_server_memory_streams() as (client_streams, server_streams):
        scope = anyio.CancelScope()
        link = _MemoryLink(scope, server_streams)
        chaos.link = link

        async def serve() -> None:
            with scope:
                await chaos.server.run(server_streams[0], server_streams[1], chaos.init_options())

        async with anyio.create_task_group() as tg:
            tg.start_soon(serve)
            try:
                yield client_streams
            finally:
                scope.cancel()


async def serve_stdio(chaos: ChaosServer) -> None:
    wire = StdioWire(os.dup(1))
    os.dup2(2, 1)  # anything else that writes to fd 1 lands on stderr, not on the wire
    chaos.link = ProcessLink(wire)
    async with stdio_server(stdout=cast(Any, wire)) as (read, write):
        await chaos.server.run(read, write, chaos.init_options())


async def serve_http(chaos: ChaosServer, listen: str, path: str = "/mcp") -> None:
    import uvicorn

    host, port = split_host_port(listen)
    chaos.link = ProcessLink()
    app = chaos.server.streamable_http_app(streamable_http_path=path, host=host)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve()


def check_startup(plan: FaultPlan, ledger: Ledger) -> None:
    """C1/C5 at spawn: exit before reading anything when the plan's ``startup`` says this spawn fails."""
    spawn = ledger.count_spawn()
    fail = plan.startup.fail_spawns
    if fail == "always" or spawn <= fail:
        _exit_now(plan.startup.exit_code, f"spawn {spawn} fails before reading (startup.fail_spawns: {fail})")


def chaos_server_main(
    plan_path: str | None,
    *,
    http: str | None,
    ledger_path: str | None,
    seed: int | None,
    domain: str = "orders",
) -> int:
    """``resilient-mcp chaos-server``: load the plan (``SourceError`` on a bad one), apply startup faults, serve the
    ``domain``'s tools."""
    plan = load_plan(plan_path) if plan_path else FaultPlan()
    if seed is not None:
        plan = plan.model_copy(update={"seed": seed})
    where = plan_path or "command line"
    if plan.startup.fail_spawns not in (0, "always") and ledger_path is None:
        raise SourceError(where, [f"{where}: startup.fail_spawns counts spawns in the ledger file: pass --ledger"])
    problems = check_plan(plan)
    if problems:
        raise SourceError(where, [f"{where}: {p}" for p in problems])
    ledger = Ledger(ledger_path)
    check_startup(plan, ledger)
    chaos = ChaosServer(plan, ledger=ledger, domain=domain)
    if http:
        anyio.run(serve_http, chaos, http)
    else:
        anyio.run(serve_stdio, chaos)
    return 0
