"""Running the proxy: start upstreams, serve over stdio or HTTP, reload policy, stop everything on the way out.

However the proxy ends (EOF on stdin, SIGTERM, SIGINT, an error) the upstream task group is cancelled, and each
upstream's owner task closes its transport, which terminates a stdio server's whole process group.
"""

from __future__ import annotations

import signal
import sys

import anyio
import structlog

from .catalog import CatalogConflict
from .config import ProxyConfig, split_host_port
from .ops.runtime import Ops, OpsUnavailable
from .policy import Policy, PolicyFile
from .policyfile import PolicyWatcher
from .proxy import Proxy
from .server import build_server, init_options
from .stdio import stdio_transport

log = structlog.get_logger(__name__)


class StartupError(Exception):
    """The proxy cannot start as configured; the message says what to change."""


async def _signals(stop: anyio.CancelScope) -> None:
    """The first SIGTERM/SIGINT/SIGHUP stops the proxy; later ones are absorbed while it closes its upstreams.

    The receiver is installed before any upstream starts and stays until every upstream has stopped, so that a
    signal during startup or during shutdown (a host's SIGTERM after its grace period) never kills the proxy
    before its upstreams are closed."""
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as received:
        async for signum in received:
            name = signal.Signals(signum).name
            if stop.cancel_called:
                log.info("signal_received_while_stopping", signal=name)
            else:
                log.info("signal_received", signal=name)
                stop.cancel()


async def _serve(proxy: Proxy, config: ProxyConfig, listen_at: str | None, base: PolicyFile | None, ops: Ops) -> None:
    async with proxy.running() as p, anyio.create_task_group() as tg:
        if config.policy_paths():
            tg.start_soon(PolicyWatcher(config.policy_paths, p.set_policy, base=base).run)
        server = build_server(p, instructions=_instructions())
        ops.instrument(server)
        if config.metrics.listen and not listen_at and (ops.metrics or ops.status):
            from .ops.web import serve_loopback

            tg.start_soon(serve_loopback, ops, *split_host_port(config.metrics.listen))
        if listen_at:
            from .http import serve_http

            host, port = split_host_port(listen_at)
            await serve_http(p, server, host, port, config.listen, ops)
        else:
            async with stdio_transport() as (read, write):
                await server.run(read, write, init_options(server))
            log.info("stdin_closed")
        tg.cancel_scope.cancel()


def _instructions() -> str | None:
    try:
        from .observations import INSTRUCTIONS
    except ImportError:  # pragma: no cover
        return None
    return INSTRUCTIONS


async def run_proxy(
    config: ProxyConfig, policy: Policy, *, http: str | None = None, base_policy: PolicyFile | None = None
) -> None:
    listen_at = http or config.listen.http
    if listen_at:
        from .http import ensure_bindable

        try:
            ensure_bindable(*split_host_port(listen_at))
        except OSError as exc:
            raise StartupError(str(exc)) from None
    if config.metrics.listen and not listen_at:
        from .http import ensure_bindable

        try:
            ensure_bindable(*split_host_port(config.metrics.listen))
        except OSError as exc:
            raise StartupError(f"metrics.listen: {exc}") from None
    try:
        ops = Ops.from_config(config, http=bool(listen_at))
    except OpsUnavailable as exc:
        raise StartupError(str(exc)) from None
    proxy = Proxy(config, policy, ops.pipeline())
    conflict: CatalogConflict | None = None
    async with anyio.create_task_group() as outer:
        stop = anyio.CancelScope()
        outer.start_soon(_signals, stop)
        with stop:
            try:
                await _serve(proxy, config, listen_at, base_policy, ops)
            except CatalogConflict as exc:  # kept out of the task group, which would wrap it in a group
                conflict = exc
            finally:
                ops.shutdown()
        outer.cancel_scope.cancel()  # every upstream is closed: signals may have their default effect again
    if conflict is not None:
        raise StartupError(str(conflict))
    sys.stderr.flush()
