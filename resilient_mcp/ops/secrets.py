"""The configured secrets (upstream header and env values, URL credentials, listener tokens) and a scrubber that
takes them out of anything the status page shows. Traces and metrics never receive free text in the first place."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from ..policy.config import ProxyConfig, RemoteUpstream, StdioUpstream

MASK = "***"
_MIN = 4
"""Values shorter than this are not treated as secrets (``1``, ``on``: masking them would mangle every text)."""


def configured_secrets(config: ProxyConfig) -> list[str]:
    """Every value of the configuration that may be a credential, longest first."""
    found: set[str] = set(config.listen.auth_tokens)
    if config.metrics.token:
        found.add(config.metrics.token)
    for up in config.upstreams.values():
        if isinstance(up, StdioUpstream):
            found.update(up.env.values())
        elif isinstance(up, RemoteUpstream):
            for value in up.headers.values():
                found.add(value)
                scheme, _, rest = value.partition(" ")
                if rest and scheme.isalpha():  # "Bearer abc": abc alone is the secret too
                    found.add(rest.strip())
            parts = urlsplit(up.url)
            found.update(p for p in (parts.username, parts.password) if p)
            found.update(v for _, v in parse_qsl(parts.query))
    return sorted((s for s in found if len(s) >= _MIN), key=len, reverse=True)


class Scrubber:
    def __init__(self, secrets: Iterable[str]) -> None:
        values = [s for s in secrets if len(s) >= _MIN]
        self._pattern = re.compile("|".join(map(re.escape, values))) if values else None

    def text(self, value: str) -> str:
        return self._pattern.sub(MASK, value) if self._pattern is not None else value

    def data(self, value: Any) -> Any:
        """A JSON-like value with every string scrubbed."""
        if self._pattern is None:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(str(k)): self.data(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.data(v) for v in value]
        return value
