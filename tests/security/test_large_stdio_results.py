"""Issue 10, defect 3: large results from a stdio upstream.

The SDK's reader rebuilt its buffer for every chunk (50 MB and more never arrived; the call became a
``C3_attempt_timeout`` / ``maybe_executed``). Now the reader is linear and a message over the upstream's
``max_message_bytes`` is not read into memory: its call gets an ``E4_oversized_result`` observation at once, the
upstream stays usable, and the reader's memory stays bounded. (Speed is measured by
``benchmarks/stdio_large_results.py``, not here.)
"""

from __future__ import annotations

import json
import random
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from resilient_mcp.host.server import build_server
from resilient_mcp.policy import Policy, PolicyFile
from resilient_mcp.policy.config import ProxyConfig
from resilient_mcp.proxy.pipeline import Pipeline
from resilient_mcp.proxy.proxy import Proxy
from resilient_mcp.text.jsonlines import EDGE as _EDGE
from resilient_mcp.text.jsonlines import read_lines
from tests.harness import observation, text

pytestmark = pytest.mark.anyio

HOSTILE = Path(__file__).with_name("hostile_upstream.py")
LIMIT = 2_000_000
CALL_S = 60.0


@asynccontextmanager
async def client_of_hostile(max_message_bytes: int | None = LIMIT) -> AsyncIterator[Client]:
    """An in-process proxy in front of the hostile upstream as a real stdio subprocess."""
    upstream: dict[str, Any] = {"command": sys.executable, "args": [str(HOSTILE)]}
    if max_message_bytes is not None:
        upstream["max_message_bytes"] = max_message_bytes
    config = ProxyConfig.model_validate({"upstreams": {"h": upstream}, "state_dir": ":memory:"})
    proxy = Proxy(config, Policy(PolicyFile.model_validate({})), Pipeline)
    async with (
        proxy.running(startup_timeout_s=30),
        Client(build_server(proxy), mode="legacy", cache=None) as client,
    ):
        yield client


@pytest.mark.parametrize("id_last", [False, True], ids=["id-first", "id-last"])
async def test_a_result_over_max_message_bytes_is_an_oversized_observation_and_the_upstream_stays_usable(
    id_last: bool,
) -> None:
    async with client_of_hostile() as client:
        with anyio.fail_after(CALL_S * 2):
            result = await client.call_tool("big", {"bytes": LIMIT + 500_000, "id_last": id_last})
            obs = observation(result)
            assert obs["fault_type"] == "E4_oversized_result", obs
            assert obs["details"]["original_size_bytes"] > LIMIT
            assert obs["details"]["max_message_bytes"] == LIMIT
            assert obs["retry_safety"] != "maybe_executed"

            after = await client.call_tool("echo", {"text": "still here"})
            assert not after.is_error and text(after) == "still here"


async def test_a_result_under_the_limit_arrives_whole() -> None:
    async with client_of_hostile(max_message_bytes=None) as client:
        with anyio.fail_after(CALL_S * 2):
            result = await client.call_tool("big", {"bytes": 3_000_000})
        assert not result.is_error, result
        # the output stage caps what the model sees and stores the rest: the upstream's text arrived whole
        truncated = (result.meta or {})["io.github.resilient-mcp/truncated"]
        assert truncated["original_bytes"] == 3_000_000


async def test_the_line_reader_splits_any_chunking_exactly_and_keeps_only_the_edges_of_an_oversized_line() -> None:
    rng = random.Random(7)
    small = [json.dumps({"jsonrpc": "2.0", "id": i, "result": {"n": "y" * rng.randrange(0, 3000)}}) for i in range(50)]
    huge = '{"jsonrpc": "2.0", "id": 99, "result": {"t": "' + "z" * 200_000 + '"}}'
    stream = ("\n".join([*small[:25], huge, *small[25:]]) + "\n").encode()
    cuts = sorted(rng.sample(range(1, len(stream)), 400))
    chunks = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
    feed = iter(chunks)

    async def receive() -> bytes:
        try:
            return next(feed)
        except StopIteration:
            raise anyio.EndOfStream from None

    lines: list[bytes] = []
    oversized: list[tuple[int, int | str | None, int]] = []

    async def on_line(line: bytes) -> None:
        lines.append(line)

    async def on_oversized(big: Any) -> None:
        oversized.append((big.size, big.message_id(), len(big.head) + len(big.tail)))

    await read_lines(receive, 100_000, on_line, on_oversized)
    assert [line.decode() for line in lines] == small
    assert oversized == [(len(huge), 99, 2 * _EDGE)]


async def test_an_oversized_message_that_answers_no_request_in_flight_is_dropped_not_misdelivered() -> None:
    from resilient_mcp.upstream.stdio import _InFlight

    in_flight = _InFlight()
    in_flight.sent(types.JSONRPCRequest(jsonrpc="2.0", id=1, method="tools/call"))
    in_flight.sent(types.JSONRPCRequest(jsonrpc="2.0", id=2, method="tools/call"))
    assert in_flight.match(7) is None  # an id we never sent (a server->client request): not answered
    assert in_flight.match(None) is None  # two in flight and no id: ambiguous, not guessed
    assert in_flight.match(2) == 2
    in_flight.answered(types.JSONRPCResponse(jsonrpc="2.0", id=1, result={}))
    assert in_flight.match(None) == 2  # the only one left
