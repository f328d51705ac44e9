"""Diagnosis through a real MCP host path: ``resilient-mcp wrap`` as a subprocess in front of PyPI
``mcp-server-time``, an mcp 2.3 ``Client`` with a sampling callback as the host, over stdio and streamable HTTP.

The upstream's error for an unknown timezone is free text ("Invalid timezone: ..."): the rules read it by text only,
so the proxy asks the host's own model (MCP ``sampling/createMessage``) and the host's answer becomes the
observation's type, action and suggestion, marked as model-written. A host that did not declare sampling is never
asked: the rules' observation comes back, with the reason.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.session import ClientRequestContext
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.helpers import (
    MCP_SERVER_TIME,
    REPO,
    child_env,
    free_port,
    proxy_argv,
    running,
    server_time_missing,
    wait_healthy,
    write_yaml,
)

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.peers,
    pytest.mark.skipif(server_time_missing() is not None, reason=str(server_time_missing())),
]

CALL_S = 60.0
VERDICT = {
    "fault_type": "B4_semantic_argument_rejection",
    "is_transient": False,
    "repair_action": "fix_parameter",
    "suggestion": "Pass an IANA timezone name such as Europe/Paris as timezone.",
}
POLICY = {"diagnosis": {"enabled": True, "provider": "sampling", "timeout_s": 30}}


class Host:
    """The host's model: answers every sampling request with ``VERDICT`` and keeps what it was asked."""

    def __init__(self) -> None:
        self.requests: list[types.CreateMessageRequestParams] = []

    async def sample(
        self, context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.ErrorData:
        self.requests.append(params)
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(text=json.dumps(VERDICT)), model="host-model"
        )


def _wrap_argv(policy: Path, *extra: str) -> list[str]:
    return proxy_argv("wrap", "--policy", str(policy), *extra, "--", str(MCP_SERVER_TIME), "--local-timezone", "UTC")


@asynccontextmanager
async def stdio_host(tmp_path: Path, host: Host | None) -> AsyncIterator[Client]:
    policy = write_yaml(tmp_path / "policy.yaml", POLICY)
    argv = _wrap_argv(policy)
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=child_env(tmp_path / "state"), cwd=REPO)
    with (tmp_path / "proxy.stderr").open("w") as errlog:
        client = Client(
            stdio_client(params, errlog=errlog),
            mode="legacy",
            cache=None,
            sampling_callback=host.sample if host else None,
        )
        async with client:
            yield client


@contextmanager
def http_proxy(tmp_path: Path) -> Iterator[str]:
    policy = write_yaml(tmp_path / "policy.yaml", POLICY)
    port = free_port()
    stderr = tmp_path / "proxy.stderr"
    with running(_wrap_argv(policy, "--http", f"127.0.0.1:{port}"), stderr) as process:
        base = f"http://127.0.0.1:{port}"
        wait_healthy(base, process, stderr, CALL_S)
        yield f"{base}/mcp"


async def _bad_timezone(client: Client) -> dict[str, Any]:
    with anyio.fail_after(CALL_S):
        result = await client.call_tool("get_current_time", {"timezone": "Mars/Olympus"})
    assert result.is_error
    assert result.structured_content is not None
    return result.structured_content


def _assert_diagnosed(obs: dict[str, Any], host: Host) -> None:
    assert obs["fault_type"] == "B4_semantic_argument_rejection"
    assert obs["repair_action"] == "fix_parameter"
    assert "«Pass an IANA timezone name" in obs["suggestion"]  # quoted as the model's, untrusted
    assert obs["details"]["diagnosis"]["status"] == "applied"
    assert obs["details"]["diagnosis"]["suggestion_by"] == "model"
    (asked,) = host.requests
    prompt = asked.messages[0].content
    assert isinstance(prompt, types.TextContent)
    assert "<untrusted_error_text>" in prompt.text
    assert "Mars/Olympus" not in prompt.text  # the argument's value, echoed in the error text, is not sent
    assert "Invalid timezone" in prompt.text and "[argument timezone]" in prompt.text
    assert asked.system_prompt is not None and "never follow" in asked.system_prompt


async def test_over_stdio_the_hosts_own_model_diagnoses_an_untyped_upstream_error(tmp_path: Path) -> None:
    host = Host()
    async with stdio_host(tmp_path, host) as client:
        obs = await _bad_timezone(client)
        _assert_diagnosed(obs, host)
        again = await _bad_timezone(client)  # the same error signature: answered from the cache
    assert again["details"]["diagnosis"]["cached"] is True
    assert len(host.requests) == 1


async def test_over_streamable_http_the_hosts_own_model_diagnoses_an_untyped_upstream_error(tmp_path: Path) -> None:
    host = Host()
    with http_proxy(tmp_path) as url:
        client = Client(streamable_http_client(url), mode="legacy", cache=None, sampling_callback=host.sample)
        async with client:
            obs = await _bad_timezone(client)
    _assert_diagnosed(obs, host)


async def test_a_host_without_sampling_gets_the_rules_observation_with_the_reason(tmp_path: Path) -> None:
    async with stdio_host(tmp_path, None) as client:
        obs = await _bad_timezone(client)
    assert obs["details"]["diagnosis"] == {
        "provider": "sampling",
        "signature": obs["details"]["diagnosis"]["signature"],
        "status": "fallback",
        "reason": "unavailable",
    }
    assert "suggestion_by" not in obs["details"]["diagnosis"]
