"""A real client, the mcp 2.3 ``Client`` in ``auto`` (2026-07-28) and ``legacy`` (handshake) modes, against
``resilient-mcp wrap`` (stdio and streamable HTTP) and ``resilient-mcp serve --http``, with the conformance fixture as
the real stdio upstream process: everything a host uses answers as it does with the fixture directly.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters

from tests.helpers import STARTUP_S, child_env, free_port, http_get_status, proxy_argv, running, wait_until, write_yaml

pytestmark = pytest.mark.anyio

FIXTURE = Path(__file__).parents[1] / "fixtures" / "conformance_server.py"
FIXTURE_ARGV = [sys.executable, str(FIXTURE), "--stdio"]


async def _paris(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    return types.CreateMessageResult(role="assistant", content=types.TextContent(text="Paris"), model="m")


async def _alice(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"name": "Alice"})


async def _roots(context: Any) -> types.ListRootsResult:
    return types.ListRootsResult(roots=[types.Root(uri="file:///work", name="work")])


def _text(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def _session(client: Client, logs: list[Any]) -> dict[str, Any]:
    """Every host-facing feature once; the answers in a comparable form."""

    def dump(model: Any) -> Any:
        return model.model_dump(mode="json", by_alias=True, exclude_none=True, exclude={"meta"})

    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    out: dict[str, Any] = {"era": client.protocol_version}
    names = {tool.name for tool in (await client.list_tools()).tools}
    out["has_tools"] = {"test_simple_text", "test_input_required_result_sampling"} <= names
    out["text"] = _text(await client.call_tool("test_simple_text", {}))
    out["progress_result"] = _text(await client.call_tool("test_tool_with_progress", {}, progress_callback=on_progress))
    out["progress"] = progress
    out["logging"] = _text(await client.call_tool("test_tool_with_logging", {}))
    out["resource"] = dump(await client.read_resource("test://static-text"))
    out["templates"] = sorted(
        t.uri_template
        for t in (await client.list_resource_templates()).resource_templates
        if "test://" in t.uri_template
    )
    out["template"] = dump(await client.read_resource("test://template/7/data"))
    if client.protocol_version != "2026-07-28":  # resources/subscribe is a handshake-era method
        await client.subscribe_resource("test://watched-resource")
        await client.unsubscribe_resource("test://watched-resource")
    out["prompt"] = dump(await client.get_prompt("test_prompt_with_arguments", {"arg1": "a", "arg2": "b"}))
    ref = types.PromptReference(name="test_prompt_with_arguments")
    out["completion"] = (await client.complete(ref, {"name": "arg1", "value": "pa"})).completion.values
    out["sampling"] = _text(await client.call_tool("test_input_required_result_sampling", {}))
    out["elicitation"] = _text(await client.call_tool("test_input_required_result_elicitation", {}))
    out["roots"] = _text(await client.call_tool("test_input_required_result_list_roots", {}))
    out["logs"] = [entry for entry in logs if isinstance(entry, str)]
    return out


@asynccontextmanager
async def _connect(target: str, mode: str, tmp: Path, logs: list[Any]) -> AsyncIterator[Client]:
    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params.data)

    kwargs: dict[str, Any] = {
        "mode": mode,
        "cache": None,
        "sampling_callback": _paris,
        "elicitation_callback": _alice,
        "list_roots_callback": _roots,
        "logging_callback": on_log,
        "log_level": "debug",
    }
    await anyio.Path(tmp).mkdir(parents=True, exist_ok=True)
    env = child_env(tmp / "xdg")
    wrap = proxy_argv("wrap", "--state-dir", str(tmp / "state"))
    if target == "direct":
        async with Client(
            StdioServerParameters(command=FIXTURE_ARGV[0], args=FIXTURE_ARGV[1:], env=env), **kwargs
        ) as c:
            yield c
    elif target == "wrap-stdio":
        argv = [*wrap, "--", *FIXTURE_ARGV]
        async with Client(StdioServerParameters(command=argv[0], args=argv[1:], env=env), **kwargs) as c:
            yield c
    else:
        port = free_port()
        if target == "wrap-http":
            argv = [*wrap[:-2], "--state-dir", str(tmp / "state"), "--http", f"127.0.0.1:{port}", "--", *FIXTURE_ARGV]
        else:
            config = write_yaml(
                tmp / "proxy.yaml",
                {
                    "upstreams": {"fixture": {"command": FIXTURE_ARGV[0], "args": FIXTURE_ARGV[1:]}},
                    "state_dir": str(tmp / "state"),
                },
            )
            argv = proxy_argv("serve", "--config", str(config), "--http", f"127.0.0.1:{port}")
        with running(argv, tmp / "proxy.err", env=env):
            wait_until(lambda: http_get_status(f"http://127.0.0.1:{port}/healthz") == 200, STARTUP_S, "proxy /healthz")
            async with Client(f"http://127.0.0.1:{port}/mcp", **kwargs) as c:
                yield c


@pytest.mark.parametrize("mode", ["auto", "legacy"])
@pytest.mark.parametrize("target", ["wrap-stdio", "wrap-http", "serve-http"])
async def test_the_mcp_client_gets_through_the_proxy_what_it_gets_directly(
    target: str, mode: str, tmp_path: Path
) -> None:
    direct_logs: list[Any] = []
    proxied_logs: list[Any] = []
    with anyio.fail_after(120):
        async with _connect("direct", mode, tmp_path / "direct", direct_logs) as client:
            expected = await _session(client, direct_logs)
        async with _connect(target, mode, tmp_path / "proxied", proxied_logs) as client:
            through = await _session(client, proxied_logs)
    assert expected["era"] == ("2026-07-28" if mode == "auto" else "2025-11-25")
    assert expected["sampling"] == "The model answered: Paris" and expected["progress"] == [0, 50, 100]
    assert expected["logs"] == ["Tool execution started", "Tool processing data", "Tool execution completed"]
    assert through == expected


async def test_a_host_without_capabilities_gets_an_immediate_clear_answer_from_a_sampling_tool(tmp_path: Path) -> None:
    argv = [*proxy_argv("wrap", "--state-dir", str(tmp_path / "state")), "--", *FIXTURE_ARGV]
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=child_env(tmp_path / "xdg"))
    with anyio.fail_after(30):  # before: a relayed sampling request waited 60 s and blamed the upstream
        async with Client(params, mode="legacy", cache=None) as client:
            result = await client.call_tool("test_sampling", {"prompt": "hi"})
    assert result.is_error
    assert "does not support sampling" in _text(result)
