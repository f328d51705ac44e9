"""Running the proxy: start upstreams, serve over stdio or HTTP, reload policy, stop everything on the way out.

However the proxy ends (EOF on stdin, SIGTERM, SIGINT, an error) the upstream task group is cancelled, and each
upstream's owner task closes its transport, which terminates a stdio server's whole process group.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable
from typing import Any

import anyio
import structlog

from .host.heap import settled_heap
from .host.opening import declared_capabilities, read_opening, speaks_2026
from .host.server import build_server, init_options
from .host.stdio import stdio_transport
from .host.toolcall import RawToolCalls, raw_lanes_on
from .ops.runtime import Ops, OpsUnavailable
from .policy import Policy, PolicyFile
from .policy.config import ProxyConfig, StdioUpstream, command_problem, split_host_port
from .policy.files import PolicyWatcher
from .proxy.catalog import CatalogConflict
from .proxy.pipeline import Pipeline, Services
from .proxy.proxy import Proxy
from .proxy.routing import CallLayer, Router
from .state.errors import StateError
from .upstream import Upstream

log = structlog.get_logger(__name__)

HOST_OPENING_S = 2.0
"""How long a stdio proxy waits for the host's opening request before starting its upstreams without knowing the
host's capabilities (a host sends it at once: it is normally in the pipe before the proxy has finished importing)."""


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
    if listen_at:
        await _serve_on(proxy, config, listen_at, base, ops, None)
        return
    refused: CatalogConflict | StateError | None = None
    raw = RawToolCalls() if raw_lanes_on() else None
    async with stdio_transport(raw) as (read, write):
        # The host's opening request first: each upstream then starts once, with the host's own capabilities, in
        # the host's own era (``protocol: auto``).
        opening, replay = await read_opening(read, HOST_OPENING_S)
        proxy.serve_one_host(declared_capabilities(opening), modern=speaks_2026(opening))
        try:
            await _serve_on(proxy, config, None, base, ops, (replay, write, raw))
        except (CatalogConflict, StateError) as exc:  # raised outside the transport's task group, unwrapped
            refused = exc
        finally:
            await write.aclose()  # (the server closes it when it ran; the SDK's transport waits for that)
    if refused is not None:
        raise refused
    log.info("stdin_closed")


async def _serve_on(
    proxy: Proxy, config: ProxyConfig, listen_at: str | None, base: PolicyFile | None, ops: Ops, stdio: Any
) -> None:
    async with proxy.running() as p, anyio.create_task_group() as tg:
        if config.policy_paths():
            tg.start_soon(PolicyWatcher(config.policy_paths, p.set_policy, base=base).run)
        raw: Any = stdio[2] if stdio else None
        if listen_at and raw_lanes_on():
            from .host.httpcall import HttpToolCalls

            raw = HttpToolCalls()
        server = build_server(p, instructions=_with_notice(_instructions(), startup_notice(p)), raw=raw)
        ops.instrument(server)
        if raw is not None:
            raw.attach(p, server, tracing=ops.tracing is not None)
        if config.metrics.listen and not listen_at and (ops.metrics or ops.status):
            from .host.http import serve_loopback

            tg.start_soon(serve_loopback, ops, *split_host_port(config.metrics.listen))
        if listen_at:
            from .host.http import serve_http

            host, port = split_host_port(listen_at)
            await serve_http(p, server, host, port, config.listen, ops, lane=raw)
        else:
            read, write, _ = stdio
            with settled_heap(full=False):  # started: the collector never walks start-up's heap again
                await server.run(read, write, init_options(server))
        tg.cancel_scope.cancel()


def pipeline_factory(ops: Ops, services: Services | None = None) -> Callable[[Router, Policy], Pipeline]:
    """The ``Proxy``'s pipeline factory: each pipeline it builds (at start and on every policy or tool-list change)
    reports to ``ops``, and ``ops`` reads its upstreams and shared services."""

    def build(router: Router, policy: Policy) -> Pipeline:
        shared = services or Services()
        shared.events = ops.events
        pipeline = Pipeline(router, policy, shared)
        ops.watch(router.upstreams, shared)
        return pipeline

    return build


def startup_notice(proxy: Proxy) -> str | None:
    """What the host must know when upstreams could not start: their names and errors, and whether any tool is left.
    Logged as an error and put in the proxy's MCP instructions (a host shows them to the model and often to the
    user), so missing tools are never silent. None when every upstream is ready."""
    down = {name: up for name, up in proxy.upstreams.items() if up.state != "ready"}
    if not down:
        return None
    tools = len(proxy.routing.visible_tools)
    reasons = "; ".join(f"{name!r}: {_why_down(up)}" for name, up in down.items())
    if tools == 0:
        log.error(
            "no_tools_available",
            upstreams_down=sorted(down),
            hint="every upstream failed to start: the host sees no tools; `resilient-mcp check --config FILE` "
            "names a missing command",
        )
        head = "No tools are available: every upstream MCP server behind this proxy failed to start"
    else:
        head = f"{len(down)} of {len(proxy.upstreams)} upstream MCP servers behind this proxy failed to start"
    return (
        f"NOTICE: {head} ({reasons}). Their tools are missing (they appear once the server starts). Tell the user; "
        "the fix is in the proxy's configuration or the server's installation, not in the tool calls."
    )


def _why_down(up: Upstream) -> str:
    """The upstream's fault type and what happened, the server's own words short and fenced as untrusted (the notice
    goes into the MCP instructions, which hosts put in the model's prompt: an upstream must not write them)."""
    failure = up.start_failure
    if failure is None:
        return up.state
    return ("not restarted: " if up.given_up else "") + failure.summary()


def _with_notice(instructions: str | None, notice: str | None) -> str | None:
    if notice is None:
        return instructions
    return notice if instructions is None else f"{notice}\n\n{instructions}"


def _log_config(config: ProxyConfig) -> None:
    """Once per start: upstreams left out on purpose, and what a host's file said that the proxy reads differently."""
    for name, up in config.upstreams.items():
        if not up.enabled:
            log.info("upstream_disabled", upstream=name, hint="enabled: false / disabled: true in the config")
    for event, fields in config.host.notes:
        log.info(event, **fields)
    for name, up in config.enabled_upstreams().items():
        if isinstance(up, StdioUpstream) and (problem := command_problem(up)) is not None:
            log.error("upstream_command_not_found", upstream=name, error=problem)


def chaos_calls(config: ProxyConfig) -> CallLayer | None:
    """Chaos mode (``faults:``): the fault injector wraps how the proxy calls its upstreams. The chaos package is
    imported here only, and only when the config asks for faults."""
    if config.faults is None:
        return None
    from .chaos.inject import calls_for

    return calls_for(config)


def _instructions() -> str | None:
    try:
        from .verdict.observations import INSTRUCTIONS
    except ImportError:  # pragma: no cover
        return None
    return INSTRUCTIONS


async def run_proxy(
    config: ProxyConfig, policy: Policy, *, http: str | None = None, base_policy: PolicyFile | None = None
) -> None:
    listen_at = http or config.listen.http
    if listen_at:
        from .host.http import ensure_bindable

        try:
            ensure_bindable(*split_host_port(listen_at))
        except OSError as exc:
            raise StartupError(str(exc)) from None
    if config.metrics.listen and not listen_at:
        from .host.http import ensure_bindable

        try:
            ensure_bindable(*split_host_port(config.metrics.listen))
        except OSError as exc:
            raise StartupError(f"metrics.listen: {exc}") from None
    _log_config(config)
    try:
        ops = Ops.from_config(config, http=bool(listen_at))
    except OpsUnavailable as exc:
        raise StartupError(str(exc)) from None
    proxy = Proxy(config, policy, pipeline_factory(ops), calls=chaos_calls(config))
    conflict: CatalogConflict | StateError | None = None
    async with anyio.create_task_group() as outer:
        stop = anyio.CancelScope()
        outer.start_soon(_signals, stop)
        with stop:
            try:
                await _serve(proxy, config, listen_at, base_policy, ops)
            except (CatalogConflict, StateError) as exc:  # kept out of the task group, which would wrap it in a group
                conflict = exc
            finally:
                ops.shutdown()
        outer.cancel_scope.cancel()  # every upstream is closed: signals may have their default effect again
    if conflict is not None:
        raise StartupError(str(conflict))
    sys.stderr.flush()
