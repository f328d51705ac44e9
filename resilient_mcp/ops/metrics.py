"""Prometheus metrics: counters and histograms fed by call events, gauges read from the proxy at scrape time.

Every series has bounded labels: ``upstream`` comes from the configuration, ``outcome``/``stage``/``fault_type`` from
fixed sets, and ``tool`` is the host-visible name (in every metric, ``breaker_state`` included), capped at
``metrics.max_tools`` distinct values per process (later names are counted as ``other``). A name no upstream offers
(a model's invention, fault A1) is counted as ``(unknown)``: however many a confused model makes up, they never take
a real tool's label. Gauges (breaker state, upstream up, restarts, idempotency records, state backend errors) cost
nothing per call: a collector reads them when ``/metrics`` is scraped. No ``_created`` series; ``build_info`` and the
``process_*`` series of prometheus_client's ProcessCollector are there.

One style of enumerated label values: lowercase snake_case (``outcome``, ``stage``, ``state``, ``status``), except
``fault_type``, which is the fault catalog's type identifier verbatim (as in observations, the audit log, spans and
the status page, so they join) and appears in no other label.
"""

from __future__ import annotations

import platform
import re
from collections.abc import Iterable, Iterator
from dataclasses import asdict
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from .. import __version__
from ..call.chain import ToolCall
from ..call.events import CallEnd, CallEvents, Sleep

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

    from .view import ProxyView

OTHER = "other"
UNKNOWN = "(unknown)"
"""The one ``tool`` label value (and status row) of every name no upstream offers."""
_FAULT_TYPE = re.compile(r"[A-G][0-9]{1,2}_[a-z0-9_]{1,60}")
_OUTCOMES = frozenset({"ok", "error", "refused", "abandoned"})
_ATTEMPT_OUTCOMES = frozenset({"ok", "error", "cancelled", "internal_error"})
_STAGES = frozenset(
    {"validate", "access", "guard", "provenance", "idempotency", "breaker", "cache", "fallback", "policy", "output"}
)
_BREAKER = {"closed": 0.0, "half_open": 1.0, "open": 2.0}
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _version_of(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "unknown"


class CappedLabels:
    """The first ``limit`` distinct values as themselves, every later one as ``other``."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._seen: set[str] = set()

    def __call__(self, value: str) -> str:
        if value in self._seen:
            return value
        if len(self._seen) >= self.limit:
            return OTHER
        self._seen.add(value)
        return value


def _fault_label(fault_type: str | None) -> str:
    if not fault_type:
        return "none"
    return fault_type if _FAULT_TYPE.fullmatch(fault_type) else OTHER


class MetricsRecorder(CallEvents):
    enabled = True

    def __init__(self, *, max_tools: int = 100, registry: CollectorRegistry | None = None) -> None:
        # a _created series per counter is a quarter of all series and tells nothing here
        disable_created_metrics()  # type: ignore[no-untyped-call]
        self.registry = registry or CollectorRegistry(auto_describe=True)
        self.tool_label = CappedLabels(max_tools)
        self._upstreams = CappedLabels(max(max_tools, 64))
        r = self.registry
        tu = ["upstream", "tool"]
        self.calls = Counter(
            "resilient_mcp_tool_calls",
            "Tool calls by how they ended (fault_type none on success).",
            [*tu, "outcome", "fault_type"],
            registry=r,
        )
        self.latency = Histogram(
            "resilient_mcp_tool_call_duration_seconds",
            "End-to-end latency of tool calls through the proxy.",
            tu,
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.attempt_latency = Histogram(
            "resilient_mcp_upstream_attempt_duration_seconds",
            "Latency of single upstream attempts by outcome (fault_type none unless error).",
            ["upstream", "outcome", "fault_type"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.retries = Counter("resilient_mcp_retries", "Upstream attempts beyond the first.", tu, registry=r)
        self.replays = Counter("resilient_mcp_replays", "Writes answered from the idempotency record.", tu, registry=r)
        self.cache_hits = Counter("resilient_mcp_cache_hits", "Calls answered from the response cache.", tu, registry=r)
        self.caps = Counter("resilient_mcp_output_caps", "Results cut to the output cap.", tu, registry=r)
        self.fallbacks = Counter("resilient_mcp_fallbacks", "Calls answered by a fallback tool.", tu, registry=r)
        self.refusals = Counter(
            "resilient_mcp_refusals",
            "Calls the proxy did not send, by the stage that refused them.",
            [*tu, "stage"],
            registry=r,
        )
        self.backoff = Counter(
            "resilient_mcp_backoff_seconds", "Time spent waiting between attempts.", ["upstream"], registry=r
        )
        build = Gauge(
            "resilient_mcp_build_info", "Always 1: the running version.", ["version", "python", "mcp"], registry=r
        )
        build.labels(__version__, platform.python_version(), _version_of("mcp")).set(1)
        ProcessCollector(registry=r)
        self._children: dict[tuple[str, str], _ToolSeries] = {}
        """The labelled series of each (upstream, tool), looked up once: ``labels()`` costs more than a dict get."""
        self._attempts: dict[tuple[str, str], Any] = {}
        self._cache_limit = 2 * max_tools

    def call_finished(self, call: ToolCall, end: CallEnd) -> None:
        name = call.name if call.known else UNKNOWN
        key = (call.upstream, name)
        children = self._children.get(key)
        if children is None:
            tool = name if not call.known else self.tool_label(name)
            children = _ToolSeries(self, self._upstreams(call.upstream or "-"), tool)
            if len(self._children) < self._cache_limit:  # names past the cap (unknown tools a host made up) stay out
                self._children[key] = children
        outcome = (end.outcome, end.fault_type)
        counter = children.calls.get(outcome)
        if counter is None:
            label = end.outcome if end.outcome in _OUTCOMES else OTHER
            counter = self.calls.labels(children.upstream, children.tool, label, _fault_label(end.fault_type))
            if len(children.calls) < 64:
                children.calls[outcome] = counter
        counter.inc()
        children.latency.observe(end.latency_s)
        for attempt in call.record.attempts:
            series = self._attempts.get((children.upstream, attempt.outcome))
            if series is None:
                # An attempt's own record names a failed attempt by its fault type; here, as in tool_calls, the
                # outcome is one word of a fixed set and the fault type has a label of its own.
                if attempt.fault_type:
                    label = "error"
                else:
                    label = attempt.outcome if attempt.outcome in _ATTEMPT_OUTCOMES else OTHER
                fault = _fault_label(attempt.fault_type)
                series = self.attempt_latency.labels(children.upstream, label, fault)
                if len(self._attempts) < self._cache_limit:
                    self._attempts[(children.upstream, attempt.outcome)] = series
            series.observe(attempt.elapsed_ms / 1000)
        if end.retries:
            children.retries.inc(end.retries)
        if end.replay:
            children.replays.inc()
        if end.cache_hit:
            children.cache_hits.inc()
        if end.capped:
            children.caps.inc()
        if end.fallback:
            children.fallbacks.inc()
        stage = end.refused_by
        if stage is not None:
            self.refusals.labels(children.upstream, children.tool, stage if stage in _STAGES else OTHER).inc()

    def wrap_sleep(self, sleep: Sleep) -> Sleep:
        counter = self.backoff

        async def counted(delay_s: float) -> None:
            await sleep(delay_s)
            counter.labels("all").inc(delay_s)

        return counted

    def watch(self, proxy: ProxyView) -> None:
        """Read the proxy's gauges at scrape time."""
        self.registry.register(ProxyCollector(proxy, self.tool_label))

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _ToolSeries:
    __slots__ = ("cache_hits", "calls", "caps", "fallbacks", "latency", "replays", "retries", "tool", "upstream")

    def __init__(self, metrics: MetricsRecorder, upstream: str, tool: str) -> None:
        self.upstream, self.tool = upstream, tool
        self.calls: dict[tuple[str, str | None], Any] = {}
        self.latency = metrics.latency.labels(upstream, tool)
        self.retries = metrics.retries.labels(upstream, tool)
        self.replays = metrics.replays.labels(upstream, tool)
        self.cache_hits = metrics.cache_hits.labels(upstream, tool)
        self.caps = metrics.caps.labels(upstream, tool)
        self.fallbacks = metrics.fallbacks.labels(upstream, tool)


class ProxyCollector(Collector):
    """Breaker state, upstream up/restarts, idempotency records and state backend errors, read when scraped."""

    def __init__(self, proxy: ProxyView, tool_label: CappedLabels) -> None:
        self._proxy = proxy
        self._tool = tool_label

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        proxy = self._proxy
        up = GaugeMetricFamily(
            "resilient_mcp_upstream_up", "1 when the upstream is connected and ready.", labels=["upstream"]
        )
        state = GaugeMetricFamily(
            "resilient_mcp_upstream_state", "1 for the upstream's current state.", labels=["upstream", "state"]
        )
        restarts = CounterMetricFamily(
            "resilient_mcp_upstream_restarts", "Times a ready upstream connection ended.", labels=["upstream"]
        )
        for name, upstream in proxy.upstreams.items():
            up.add_metric([name], 1.0 if upstream.state == "ready" else 0.0)
            state.add_metric([name, upstream.state], 1.0)
            restarts.add_metric([name], float(upstream.restarts))
        yield up
        yield state
        yield restarts
        breaker = GaugeMetricFamily(
            "resilient_mcp_breaker_state",
            "Circuit state: 0 closed, 1 half-open, 2 open (tool '' = the upstream's).",
            labels=["upstream", "tool"],
        )
        public = proxy.services.public_names
        for upstream_name, tool, circuit_state, _ in proxy.services.board.circuit_states():
            label = "" if tool is None else self._tool(public.get((upstream_name, tool), tool))
            breaker.add_metric([upstream_name, label], _BREAKER.get(circuit_state, 0.0))
        yield breaker
        records = GaugeMetricFamily(
            "resilient_mcp_idempotency_records", "Live idempotency records by status.", labels=["status"]
        )
        errors = CounterMetricFamily("resilient_mcp_state_backend_errors", "Failed state backend operations.")
        store = proxy.services.store
        counts = store.idempotency_counts() if store is not None else {}
        if counts is not None:  # None: a shared backend, whose records no single replica can count
            for status in ("in_flight", "unknown", "completed"):
                records.add_metric([status], float(counts.get(status, 0)))
            yield records
        errors.add_metric([], float(store.backend_errors if store is not None else 0))
        yield errors
        tasks = proxy.services.tasks
        running = GaugeMetricFamily("resilient_mcp_tasks_running", "Durable tasks this process is running.")
        running.add_metric([], float(tasks.running))
        yield running
        ended = CounterMetricFamily(
            "resilient_mcp_tasks",
            "Durable tasks this process created, and how they ended (unknown: found abandoned by a stopped proxy).",
            labels=["event"],
        )
        for event, count in asdict(tasks.counts).items():
            ended.add_metric([event], float(count))
        yield ended
