"""Call identity and failure counts: the fingerprint of a call and consecutive-failure counters.

The fingerprint of a call is ``(upstream, tool, canonical JSON of the arguments)`` hashed with SHA-256
(``docs/fault-catalog.md`` §4, guards): two calls are "identical" exactly when their fingerprints are equal. Canonical
JSON sorts keys, uses compact separators and keeps non-ASCII text as is, so the same arguments always give the same
bytes whatever order the host sent them in.

``FailureStats`` keeps the consecutive-failure counts an observation reports (``consecutive_failures``): per call
fingerprint (within one host session), per tool and per upstream. A success resets the counts it touches. It is an
in-memory object shared by the observe stage of one proxy; it never grows without bound.
"""

from __future__ import annotations

import hashlib
import hmac
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..text import canonical_json

if TYPE_CHECKING:
    from .chain import ToolCall


def call_arguments_json(call: ToolCall) -> str:
    """The canonical JSON of ``call.arguments`` (``None`` as ``{}``), computed once per call and arguments object."""
    memo = call.record.canonical_args
    args = call.arguments
    if memo is not None and memo[0] is args:
        return memo[1]
    text = canonical_json(args or {})
    call.record.canonical_args = (args, text)
    return text


def call_arguments_hash(call: ToolCall, key: bytes) -> str:
    """HMAC-SHA-256 (hex), keyed with ``key``, of the canonical JSON of ``call.arguments`` (``None`` like ``{}``).

    Keyed, because an unkeyed hash of small arguments is reversed by guessing (``{"pin": "4821"}`` in 17 ms): the
    audit keeps this, with the state directory's per-installation secret (``StateStore.arguments_hash``)."""
    return hmac.new(key, call_arguments_json(call).encode(), hashlib.sha256).hexdigest()


def _identity_json(call: ToolCall) -> bytes:
    """The canonical JSON of ``[upstream, upstream tool, arguments]``: what makes two calls identical."""
    head = canonical_json([call.upstream, call.upstream_tool or call.name])  # '["up","tool"]'
    return f"{head[:-1]},{call_arguments_json(call)}]".encode()


def fingerprint(call: ToolCall) -> str:
    """SHA-256 (hex) of ``[upstream, upstream tool, arguments]``; equal for identical calls, whatever the key order.

    For in-memory maps only: what is written to disk uses ``keyed_fingerprint``."""
    return hashlib.sha256(_identity_json(call)).hexdigest()


def keyed_fingerprint(call: ToolCall, key: bytes) -> str:
    """HMAC-SHA-256 (hex), keyed with ``key``, of what ``fingerprint`` hashes: equal for identical calls, and not
    reversible by guessing small arguments without the per-installation secret (idempotency records keep it)."""
    return hmac.new(key, _identity_json(call), hashlib.sha256).hexdigest()


@dataclass(frozen=True, slots=True)
class Consecutive:
    """Consecutive failures, as ``consecutive_failures`` in an observation."""

    this_call: int = 0
    this_tool: int = 0
    this_server: int = 0

    def as_dict(self) -> dict[str, int]:
        return {"this_call": self.this_call, "this_tool": self.this_tool, "this_server": self.this_server}


class FailureStats:
    """Consecutive failures per call fingerprint (per session), per tool and per upstream; reset by a success.

    ``this_server`` counts only faults that say something about the upstream's health (the observe stage passes
    ``Fault.counts_against_upstream``): the model's own argument mistakes or a proxy refusal do not make a server
    look down. Fingerprint entries are kept for the ``max_calls`` most recently failing calls.
    """

    def __init__(self, max_calls: int = 10_000) -> None:
        self._max_calls = max_calls
        self._calls: OrderedDict[tuple[str, str], int] = OrderedDict()
        self._tools: OrderedDict[tuple[str, str], int] = OrderedDict()
        """Bounded like ``_calls``: a host can send any number of distinct (unknown) tool names."""
        self._servers: dict[str, int] = {}

    @staticmethod
    def _keys(call: ToolCall) -> tuple[tuple[str, str], tuple[str, str]]:
        return (call.session_id, fingerprint(call)), (call.upstream, call.upstream_tool or call.name)

    def record_failure(self, call: ToolCall, *, upstream_health: bool) -> Consecutive:
        """Count one failed call; ``upstream_health``: the fault says the upstream is unwell (counts for the server).

        Returns the counts including this failure."""
        call_key, tool_key = self._keys(call)
        n_call = self._calls.pop(call_key, 0) + 1
        self._calls[call_key] = n_call
        while len(self._calls) > self._max_calls:
            self._calls.popitem(last=False)
        n_tool = self._tools.pop(tool_key, 0) + 1
        self._tools[tool_key] = n_tool
        while len(self._tools) > self._max_calls:
            self._tools.popitem(last=False)
        n_server = self._servers.get(call.upstream, 0)
        if upstream_health:
            n_server = self._servers[call.upstream] = n_server + 1
        return Consecutive(n_call, n_tool, n_server)

    def record_success(self, call: ToolCall) -> None:
        """Reset the counts of this call, its tool and its upstream (cheap when nothing failed)."""
        if self._calls:
            self._calls.pop((call.session_id, fingerprint(call)), None)
        if self._tools:
            self._tools.pop((call.upstream, call.upstream_tool or call.name), None)
        if self._servers:
            self._servers.pop(call.upstream, None)

    def current(self, call: ToolCall) -> Consecutive:
        """The counts for ``call`` without recording anything."""
        call_key, tool_key = self._keys(call)
        return Consecutive(
            self._calls.get(call_key, 0), self._tools.get(tool_key, 0), self._servers.get(call.upstream, 0)
        )
