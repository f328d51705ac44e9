"""``Ops``: the recorders the configuration asks for, wired into a proxy, and their HTTP endpoints."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import structlog

from ..call.events import NULL, CallEvents, combine
from .secrets import Scrubber, configured_secrets
from .view import ProxyView, SharedServices

if TYPE_CHECKING:
    from mcp.server import Server
    from opentelemetry.trace import TracerProvider

    from ..policy.config import ProxyConfig
    from ..upstream import Upstream
    from .metrics import MetricsRecorder
    from .status import StatusRecorder
    from .telemetry import TraceRecorder

log = structlog.get_logger(__name__)

OTLP_ENDPOINT_VARS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


class OpsUnavailable(Exception):
    """Operations are configured but cannot run (a missing extra); the message says what to install."""


class Ops:
    """Metrics, the status page and traces for one proxy. Build, then hand ``app.pipeline_factory(ops)`` to the
    proxy, which calls ``watch`` with each pipeline it builds."""

    def __init__(
        self,
        config: ProxyConfig,
        *,
        served: bool,
        tracer_provider: TracerProvider | None = None,
    ) -> None:
        """``served``: there is an HTTP listener or ``metrics.listen`` to serve /metrics and /status on; with a
        ``tracer_provider`` tool calls are traced through it."""
        self.config = config
        self.proxy: ProxyView | None = None
        self.metrics: MetricsRecorder | None = None
        self.status: StatusRecorder | None = None
        self.tracing: TraceRecorder | None = None
        self._shutdown: Callable[[], Any] | None = None
        max_tools = config.metrics.max_tools
        if served and config.metrics.enabled:
            from .metrics import MetricsRecorder

            self.metrics = MetricsRecorder(max_tools=max_tools)
        if served and config.status.enabled:
            from .status import StatusRecorder

            self.status = StatusRecorder(scrubber=Scrubber(configured_secrets(config)), max_tools=max_tools)
        if tracer_provider is not None:
            from .telemetry import TraceRecorder

            self.tracing = TraceRecorder(tracer_provider)
        recorders: list[CallEvents] = [r for r in (self.tracing, self.metrics, self.status) if r is not None]
        self.events = combine(recorders)

    @classmethod
    def from_config(cls, config: ProxyConfig, *, http: bool, environ: dict[str, str] | None = None) -> Ops:
        """As configured for a proxy serving HTTP (``http``) or stdio; installs the OTLP exporter when tracing is on."""
        env = os.environ if environ is None else environ
        want = config.tracing.enabled
        tracing = False
        if want is True or (want == "auto" and any(env.get(v) for v in OTLP_ENDPOINT_VARS)):
            from .telemetry import sdk_available

            if sdk_available():
                tracing = True
            elif want is True:
                raise OpsUnavailable(
                    "tracing.enabled is true but the OpenTelemetry SDK is not installed: "
                    "pip install 'resilient-mcp[otel]' (or set tracing.enabled: false)"
                )
            else:
                log.warning(
                    "tracing_unavailable",
                    hint="OTEL_EXPORTER_OTLP_ENDPOINT is set: pip install 'resilient-mcp[otel]' to export traces",
                )
        provider = None
        if tracing:
            from .telemetry import start_tracing

            provider = start_tracing()
            log.info("tracing_on", exporter="otlp/http")
        ops = cls(config, served=http or config.metrics.listen is not None, tracer_provider=provider)
        if provider is not None:
            ops._shutdown = provider.shutdown
        return ops

    @property
    def enabled(self) -> bool:
        return self.events is not NULL

    def watch(self, upstreams: Mapping[str, Upstream], services: SharedServices) -> None:
        """Feed the recorders from a pipeline just built (``app.pipeline_factory``): its upstreams' state changes,
        and its shared services for the gauges and the status page."""
        self.proxy = ProxyView(upstreams, services)
        if self.events is not NULL:
            for upstream in upstreams.values():
                upstream.on_state = self.events.upstream_state
        if self.metrics is not None:
            self.metrics.watch(self.proxy)

    def instrument(self, server: Server[Any]) -> None:
        """Over HTTP, a request's ``traceparent`` header is joined when its ``_meta`` names no trace."""
        if self.tracing is not None:
            from .telemetry import HeaderTraceContext

            server.middleware.insert(0, HeaderTraceContext())

    def public_paths(self) -> tuple[str, ...]:
        return ("/metrics",) if self.metrics is not None and self.config.metrics.public else ()

    def shutdown(self) -> None:
        """Flush and stop the trace exporter (spans still queued are sent)."""
        if self._shutdown is not None:
            shutdown, self._shutdown = self._shutdown, None
            try:
                shutdown()
            except Exception:
                log.exception("tracing_shutdown_failed")
