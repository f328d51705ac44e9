"""The ``diagnosis:`` policy block."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class DiagnosisRule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    enabled: bool = False
    """Ask a model to diagnose failures the rules leave untyped (an error text no rule recognises). Off by default:
    each diagnosis costs a model call."""
    provider: Literal["sampling", "openai"] = "sampling"
    """sampling: the host's own model through MCP sampling (only when the host declared sampling; the host may show
    the request to the user); openai: any OpenAI-compatible chat-completions endpoint (`url`, `model`)."""
    model: str | None = None
    """Model name (required for openai; a preference hint for sampling)."""
    url: str | None = Field(None, pattern=r"^https?://")
    """Base URL of the OpenAI-compatible endpoint, e.g. http://127.0.0.1:8080/v1 (required for openai)."""
    api_key_env: str | None = Field(None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    """Name of the environment variable holding the endpoint's API key (sent as a Bearer token); none: no key."""
    timeout_s: float = Field(10.0, gt=0, le=120)
    """Longest wait for a verdict; past it the rules' observation is returned unchanged."""
    max_per_minute: int = Field(10, ge=0, le=10_000)
    """Model calls allowed per minute over all sessions (cache hits are free); past it the rules' observation is
    returned unchanged."""
    send_argument_values: bool = False
    """Show the model the call's argument values (cut, secret-looking keys and URL credentials still masked). Off by
    default: the model sees the arguments' keys and the shape of their values only, and an argument value the error
    text echoes back is replaced by its key's name."""
    cache_ttl_s: float = Field(3600.0, ge=0)
    """How long a verdict is reused for the same error signature (the same principal, upstream, tool and normalised
    error text); 0: no cache."""

    @model_validator(mode="after")
    def _openai_needs_endpoint(self) -> DiagnosisRule:
        if self.provider == "openai" and (self.url is None or self.model is None):
            raise ValueError("diagnosis.provider openai needs `url` (the endpoint's base URL) and `model`")
        return self
