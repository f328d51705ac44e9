"""Running the proxy: start upstreams, serve over stdio or HTTP, reload policy, stop everything on the way out.

However the proxy ends (EOF on stdin, SIGTERM, SIGINT, an error) the upstream task group is cancelled, and each
upstream's owner task closes its transport, which terminates a stdio server's whole process group.
"""

from __future__ import annotations

import signal
import sys

import anyio
import structlog
from mcp.server.stdio import stdio_server

from .catalog import CatalogConflict
from .config import ProxyConfig, split_host_port
from .pipeline import Pipeline
from .policy import Policy, PolicyFile
from .policyfile import PolicyWatcher
from .proxy import Proxy
from .server import build_server, init_options

log = structlog.get_logger(__name__)


class StartupError(Exception):
    """The proxy cannot start as configured; the message says what to change."""


async def _signals(scope: anyio.CancelScope) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as received:
        async for signum in received:
            log.info("signal_received", signal=signal.Signals(signum).name)
            scope.cancel()
            return


def _instructions() -> str | None:
    try:
        from .observations import INSTRUCTIONS
    except ImportError:  # pragma: no cover
        return None
    return INSTRUCTIONS


async def run_proxy(
    config: ProxyConfig, policy: Policy, *, http: str | None = None, base_policy: PolicyFile | None = None
) -> None:
    proxy = Proxy(config, policy, Pipeline)
    listen_at = http or config.listen.http
    try:
        async with proxy.running() as p, anyio.create_task_group() as tg:
            tg.start_soon(_signals, tg.cancel_scope)
            paths = config.policy_paths()
            if paths:
                watcher = PolicyWatcher(config.policy_paths, p.set_policy, base=base_policy)
                tg.start_soon(watcher.run)
            server = build_server(p, instructions=_instructions())
            if listen_at:
                from .http import serve_http

                host, port = split_host_port(listen_at)
                await serve_http(p, server, host, port, config.listen)
            else:
                async with stdio_server() as (read, write):
                    await server.run(read, write, init_options(server))
                log.info("stdin_closed")
            tg.cancel_scope.cancel()
    except CatalogConflict as exc:
        raise StartupError(str(exc)) from None
    finally:
        sys.stderr.flush()
