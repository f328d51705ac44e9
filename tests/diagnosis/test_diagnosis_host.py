"""Diagnosis through a real MCP host path: ``resilient-mcp wrap`` as a subprocess in front of PyPI
``mcp-server-git``, an mcp 2.3 ``Client`` with a sampling callback as the host, over stdio and streamable HTTP.

The upstream's error for a branch created from a base that does not exist is free text the rules do not recognise
("No item found with id develop": no standard code, no known wording), so the proxy asks the host's own model (MCP
``sampling/createMessage``) and the host's answer becomes the observation's type, action and suggestion, marked as
model-written. A host that did not declare sampling is never asked: the rules' observation comes back, with the
reason. (An error the rules do recognise, even by a generic word, is never sent to a model:
tests/diagnosis/test_diagnosis.py.)
"""

from __future__ import annotations

import json
import subprocess
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
    REPO,
    VENV_BIN,
    child_env,
    free_port,
    proxy_argv,
    running,
    wait_healthy,
    write_yaml,
)

MCP_SERVER_GIT = VENV_BIN / "mcp-server-git"
pytestmark = [
    pytest.mark.anyio,
    pytest.mark.peers,
    pytest.mark.skipif(
        not MCP_SERVER_GIT.exists(), reason=f"mcp-server-git==2026.10.19 is not installed ({MCP_SERVER_GIT} missing)"
    ),
]

CALL_S = 60.0
VERDICT = {
    "fault_type": "B4_semantic_argument_rejection",
    "is_transient": False,
    "repair_action": "fix_parameter",
    "suggestion": "Pass an existing branch as base_branch (git_branch lists them).",
}
# Creating a branch twice has no extra effect (the second call fails): write_idempotent, so the repair the model
# advises is not overridden by verify_state.
POLICY = {
    "diagnosis": {"enabled": True, "provider": "sampling", "timeout_s": 30},
    "tools": {"git_create_branch": {"effect": "write_idempotent"}},
}


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


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    who = ["-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run(["git", "-C", str(repo), *who, "commit", "-q", "--allow-empty", "-m", "init"], check=True)
    return repo


def _wrap_argv(tmp_path: Path, policy: Path, *extra: str) -> list[str]:
    repo = _repo(tmp_path)
    return proxy_argv("wrap", "--policy", str(policy), *extra, "--", str(MCP_SERVER_GIT), "--repository", str(repo))


@asynccontextmanager
async def stdio_host(tmp_path: Path, host: Host | None) -> AsyncIterator[Client]:
    policy = write_yaml(tmp_path / "policy.yaml", POLICY)
    argv = _wrap_argv(tmp_path, policy)
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
    with running(_wrap_argv(tmp_path, policy, "--http", f"127.0.0.1:{port}"), stderr) as process:
        base = f"http://127.0.0.1:{port}"
        wait_healthy(base, process, stderr, CALL_S)
        yield f"{base}/mcp"


async def _unknown_base(client: Client, tmp_path: Path) -> dict[str, Any]:
    """Create a branch from a base that does not exist."""
    args = {"repo_path": str(tmp_path / "repo"), "branch_name": "feature-x", "base_branch": "develop"}
    with anyio.fail_after(CALL_S):
        result = await client.call_tool("git_create_branch", args)
    assert result.is_error
    assert result.structured_content is not None
    return result.structured_content


def _assert_diagnosed(obs: dict[str, Any], host: Host) -> None:
    assert obs["fault_type"] == "B4_semantic_argument_rejection"
    assert obs["repair_action"] == "fix_parameter"
    assert "«Pass an existing branch as base_branch" in obs["suggestion"]  # quoted as the model's, untrusted
    assert obs["details"]["diagnosis"]["status"] == "applied"
    assert obs["details"]["diagnosis"]["suggestion_by"] == "model"
    (asked,) = host.requests
    prompt = asked.messages[0].content
    assert isinstance(prompt, types.TextContent)
    assert "<untrusted_error_text>" in prompt.text
    assert "develop" not in prompt.text  # the argument's value, echoed in the error text, is not sent
    assert "No item found with id [argument base_branch]" in prompt.text
    assert asked.system_prompt is not None and "never follow" in asked.system_prompt


async def test_over_stdio_the_hosts_own_model_diagnoses_an_untyped_upstream_error(tmp_path: Path) -> None:
    host = Host()
    async with stdio_host(tmp_path, host) as client:
        obs = await _unknown_base(client, tmp_path)
        _assert_diagnosed(obs, host)
        again = await _unknown_base(client, tmp_path)  # the same error signature: answered from the cache
    assert again["details"]["diagnosis"]["cached"] is True
    assert len(host.requests) == 1


async def test_over_streamable_http_the_hosts_own_model_diagnoses_an_untyped_upstream_error(tmp_path: Path) -> None:
    host = Host()
    with http_proxy(tmp_path) as url:
        client = Client(streamable_http_client(url), mode="legacy", cache=None, sampling_callback=host.sample)
        async with client:
            obs = await _unknown_base(client, tmp_path)
    _assert_diagnosed(obs, host)


async def test_a_host_without_sampling_gets_the_rules_observation_with_the_reason(tmp_path: Path) -> None:
    async with stdio_host(tmp_path, None) as client:
        obs = await _unknown_base(client, tmp_path)
    assert obs["details"]["diagnosis"] == {
        "provider": "sampling",
        "signature": obs["details"]["diagnosis"]["signature"],
        "status": "fallback",
        "reason": "unavailable",
    }
    assert "suggestion_by" not in obs["details"]["diagnosis"]
