"""The configuration of operations: ``metrics:``, ``status:`` and ``tracing:`` in the proxy's config file."""

from __future__ import annotations

import ipaddress
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


def _loopback_host_port(value: str) -> str:
    host, sep, port = value.rpartition(":")
    host = host.strip("[]")
    if not sep or not port.isdigit() or not (0 <= int(port) <= 65535):
        raise ValueError(f"{value!r} is not HOST:PORT (for example 127.0.0.1:9464)")
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise ValueError(f"metrics.listen must be a loopback address (127.0.0.1:PORT or [::1]:PORT), not {host!r}")
    return value


class MetricsConfig(_Strict):
    enabled: bool = True
    """Serve Prometheus metrics at /metrics on the HTTP listener."""
    public: bool = False
    """Let /metrics through without the listener's bearer token (for a scraper that cannot send one)."""
    listen: str | None = None
    """A loopback HOST:PORT on which /metrics and /status are served, for stdio mode (no HTTP listener)."""
    token: str | None = None
    """The bearer token `metrics.listen` requires (at least 8 characters, `${VAR}` allowed). Without it any local
    user can read that port, so the status page there shows no failure's observation (arguments, error texts)."""
    max_tools: int = Field(100, ge=1, le=10_000)
    """Distinct tool names used as metric labels; calls of later names are counted as tool="other"."""

    @field_validator("listen")
    @classmethod
    def _listen(cls, v: str | None) -> str | None:
        return None if v is None else _loopback_host_port(v)


class StatusConfig(_Strict):
    enabled: bool = True
    """Serve the live status page at /status (and /status.json) wherever /metrics is served."""


class TracingConfig(_Strict):
    enabled: bool | Literal["auto"] = "auto"
    """OpenTelemetry traces (needs the [otel] extra). auto: on when OTEL_EXPORTER_OTLP_ENDPOINT or
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set. The exporter is configured by the standard OTEL_* variables."""
