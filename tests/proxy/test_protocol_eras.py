"""Both protocol eras through the proxy, and capabilities that follow the host.

The upstream is the conformance fixture (tests/fixtures/conformance_server.py) in process; hosts are the mcp 2.3
client in the 2026-07-28 era (``Client(InMemoryTransport(server))``, per-request ``_meta`` envelope) and in the
handshake era (``mode="legacy"``). Each method must answer through the proxy as it does directly.
"""

from __future__ import annotations

import math
from typing import Any

import anyio
import anyio.lowlevel
import mcp_types as types
import pytest
from mcp import Client
from mcp.client._memory import InMemoryTransport
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPError

from resilient_mcp.call.chain import Timers
from resilient_mcp.host.server import build_server
from tests.fixtures.conformance_server import build_server as build_fixture
from tests.harness import observation, proxied, text
from tests.helpers import virtual_time

pytestmark = pytest.mark.anyio

PROMPT = types.PromptReference(name="test_prompt_with_arguments")
TEMPLATE = types.ResourceTemplateReference(uri="test://template/{id}/data")


async def _everything_but_tools(client: Client) -> dict[str, Any]:
    """What a host reads besides tools: resources, templates, prompts, completion (wire form, comparable)."""

    def dump(model: Any) -> Any:
        return model.model_dump(mode="json", by_alias=True, exclude_none=True, exclude={"meta"})

    return {
        "text": dump(await client.read_resource("test://static-text")),
        "binary": dump(await client.read_resource("test://static-binary")),
        "template": dump(await client.read_resource("test://template/123/data")),
        "templates": [
            dump(t)
            for t in (await client.list_resource_templates()).resource_templates
            if t.uri_template.startswith("test://")  # the proxy adds its own (stored outputs)
        ],
        "prompt": dump(await client.get_prompt("test_prompt_with_arguments", {"arg1": "a", "arg2": "b"})),
        "complete_prompt": dump(await client.complete(PROMPT, {"name": "arg1", "value": "pa"})),
        "complete_template": dump(await client.complete(TEMPLATE, {"name": "id", "value": "1"})),
    }


async def test_a_2026_era_host_reads_resources_gets_prompts_and_completes_as_it_does_directly() -> None:
    with anyio.fail_after(30):
        async with Client(InMemoryTransport(build_fixture()), cache=None) as direct:
            assert direct.protocol_version == "2026-07-28"
            expected = await _everything_but_tools(direct)
        async with (
            proxied({"fixture": build_fixture()}) as h,
            Client(InMemoryTransport(build_server(h.proxy)), cache=None) as modern,
        ):
            assert modern.protocol_version == "2026-07-28"
            through = await _everything_but_tools(modern)
    assert through == expected
    assert expected["complete_prompt"]["completion"]["values"] == ["paris", "park", "party"]


async def test_a_handshake_era_host_reads_the_same_through_the_proxy() -> None:
    with anyio.fail_after(30):
        async with Client(build_fixture(), mode="legacy", cache=None) as direct:
            expected = await _everything_but_tools(direct)
        async with proxied({"fixture": build_fixture()}) as h:
            through = await _everything_but_tools(h.client)
    assert through == expected


async def test_a_sampling_request_for_a_host_without_sampling_is_refused_at_once_and_blamed_on_the_host() -> None:
    with anyio.fail_after(20):  # before: the relay waited 60 s and blamed the upstream (C3_attempt_timeout)
        async with proxied({"fixture": build_fixture()}, {"tools": {"test_sampling": {"effect": "read_only"}}}) as h:
            result = await h.client.call_tool("test_sampling", {"prompt": "hi"})
    obs = observation(result)
    assert obs["fault_type"] == "A4_protocol_or_capability_mismatch", obs
    assert obs["details"]["side"] == "host" and obs["details"]["missing_capability"] == {"sampling": {}}
    assert obs["repair_action"] in ("degrade", "ask_user")
    assert "host did not declare the sampling capability" in text(result)
    assert [a["outcome"] for a in obs["attempts"]] != ["timeout"]


async def test_a_host_with_sampling_gets_the_upstream_sampling_request_relayed() -> None:
    asked: list[str] = []

    async def sample(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        content = params.messages[0].content
        asked.append(content.text if isinstance(content, types.TextContent) else "?")
        return types.CreateMessageResult(role="assistant", content=types.TextContent(text="Paris"), model="m")

    with anyio.fail_after(20):
        async with proxied({"fixture": build_fixture()}, client_kwargs={"sampling_callback": sample}) as h:
            result = await h.client.call_tool("test_sampling", {"prompt": "Capital of France?"})
    assert not result.is_error, result.content
    assert text(result) == "LLM response: Paris"
    assert asked == ["Capital of France?"]


async def test_a_2026_host_without_sampling_gets_the_spec_error_minus_32021_not_a_timeout() -> None:
    with anyio.fail_after(20):
        async with (
            proxied({"fixture": build_fixture()}) as h,
            Client(InMemoryTransport(build_server(h.proxy)), cache=None) as modern,
        ):
            with pytest.raises(MCPError) as raised:
                await modern.call_tool("test_missing_capability", {})
    assert raised.value.code == -32021
    assert isinstance(raised.value.data, dict)
    assert raised.value.data["requiredCapabilities"] == {"sampling": {}}


def _capability_gated_server(seen: list[frozenset[str]]) -> Server[Any]:
    """A server that, like server-everything, lists ``summarize`` only to clients that declared sampling."""

    async def list_tools(ctx: ServerRequestContext[Any, Any], params: Any) -> types.ListToolsResult:
        caps = ctx.session.client_capabilities
        declared = frozenset(n for n in ("sampling", "elicitation", "roots") if caps and getattr(caps, n) is not None)
        seen.append(declared)
        tools = [types.Tool(name="echo", input_schema={"type": "object"})]
        if "sampling" in declared:
            tools.append(types.Tool(name="summarize", input_schema={"type": "object"}))
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: ServerRequestContext[Any, Any], params: Any) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(text="ok")])

    return Server("gated", on_list_tools=list_tools, on_call_tool=call_tool)


async def _no_sampling(context: Any, params: types.CreateMessageRequestParams) -> types.ErrorData:
    return types.ErrorData(code=-1, message="unused")


@pytest.mark.parametrize(("host_samples", "listed"), [(False, ["echo"]), (True, ["echo", "summarize"])])
async def test_a_single_stdio_host_sees_the_tools_its_own_capabilities_unlock(
    host_samples: bool, listed: list[str]
) -> None:
    seen: list[frozenset[str]] = []
    kwargs = {"sampling_callback": _no_sampling} if host_samples else {}
    with anyio.fail_after(30):
        async with proxied({"gated": _capability_gated_server(seen)}, client_kwargs=kwargs) as h:
            h.proxy.single_host = True
            names = sorted(t.name for t in (await h.client.list_tools()).tools)
            upstream = h.proxy.upstreams["gated"]
            assert upstream.declared == (frozenset({"sampling"}) if host_samples else frozenset())
    assert names == listed
    assert seen[-1] == upstream.declared


async def test_several_hosts_keep_every_capability_declared_upstream_and_each_request_is_checked() -> None:
    seen: list[frozenset[str]] = []
    with anyio.fail_after(30):
        async with proxied({"gated": _capability_gated_server(seen)}) as h:
            names = sorted(t.name for t in (await h.client.list_tools()).tools)
            declared = h.proxy.upstreams["gated"].declared
    assert declared == frozenset({"sampling", "elicitation", "roots"})
    assert names == ["echo", "summarize"]


# --- 2026-07-28 hosts in front of a handshake-era upstream: input-required bridging ------------------------------


async def _paris(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    return types.CreateMessageResult(role="assistant", content=types.TextContent(text="Paris"), model="m")


async def _alice(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"name": "Alice", "color": "blue", "context": "tests"})


async def _roots(context: Any) -> types.ListRootsResult:
    return types.ListRootsResult(roots=[types.Root(uri="file:///work", name="work")])


HOST_CALLBACKS: dict[str, Any] = {
    "sampling_callback": _paris,
    "elicitation_callback": _alice,
    "list_roots_callback": _roots,
}


async def _interactive(client: Client) -> dict[str, str]:
    """What a 2026-07-28 host with sampling, elicitation and roots gets from the upstream's interactive tools."""
    out: dict[str, str] = {}
    for tool in ("elicitation", "sampling", "list_roots", "multiple_inputs", "multi_round", "request_state"):
        out[tool] = text(await client.call_tool(f"test_input_required_result_{tool}", {}))
    prompt = await client.get_prompt("test_input_required_result_prompt", {})
    out["prompt"] = str(
        prompt.messages[0].content.text if isinstance(prompt.messages[0].content, types.TextContent) else ""
    )
    return out


LEGACY = {"upstreams": {"fixture": {"command": "in-memory", "protocol": "legacy"}}}
"""The upstream spoken to in the handshake era only (``protocol: legacy``)."""


async def test_a_2026_host_answers_what_a_handshake_era_upstream_asks_as_it_would_directly() -> None:
    with anyio.fail_after(60):
        async with Client(InMemoryTransport(build_fixture()), cache=None, **HOST_CALLBACKS) as direct:
            expected = await _interactive(direct)
        async with (
            proxied({"fixture": build_fixture()}, {"defaults": {"effect": "read_only"}}, config=LEGACY) as h,
            Client(InMemoryTransport(build_server(h.proxy)), cache=None, **HOST_CALLBACKS) as modern,
        ):
            through = await _interactive(modern)
            # A tool that asks the old way, during the call: a 2026 host cannot be asked directly, through the
            # proxy it is (the upstream speaks the handshake era to the proxy).
            old_style = text(await modern.call_tool("test_sampling", {"prompt": "Capital of France?"}))
    assert expected["sampling"] == "The model answered: Paris"
    assert through == expected
    assert old_style == "LLM response: Paris"


async def test_the_bridge_asks_the_2026_host_with_an_input_required_result_and_refuses_an_altered_state() -> None:
    with anyio.fail_after(30):
        async with (
            proxied({"fixture": build_fixture()}) as h,
            Client(InMemoryTransport(build_server(h.proxy)), cache=None, **HOST_CALLBACKS) as modern,
        ):
            first = await modern.session.call_tool("test_input_required_result_sampling", {}, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult)
            assert first.request_state and first.input_requests
            [(key, asked)] = first.input_requests.items()
            assert isinstance(asked, types.CreateMessageRequest)
            with pytest.raises(MCPError) as raised:
                await modern.session.call_tool(
                    "test_input_required_result_sampling",
                    {},
                    input_responses={key: await _paris(None, asked.params)},
                    request_state=first.request_state + "-TAMPERED",
                    allow_input_required=True,
                )
            assert raised.value.code == types.INVALID_PARAMS
            done = await modern.session.call_tool(
                "test_input_required_result_sampling",
                {},
                input_responses={key: await _paris(None, asked.params)},
                request_state=first.request_state,
                allow_input_required=True,
            )
    assert isinstance(done, types.CallToolResult) and text(done) == "The model answered: Paris"


# --- protocol: auto: a 2026-07-28 host meets a 2026-07-28 upstream ------------------------------------------------


async def _first_round(client: Client, tool: str) -> types.InputRequiredResult:
    first = await client.session.call_tool(tool, {}, allow_input_required=True)
    assert isinstance(first, types.InputRequiredResult), first
    return first


async def test_a_2026_host_meets_a_2026_upstream_with_its_own_input_request_keys_as_it_would_directly() -> None:
    with anyio.fail_after(60):
        async with Client(InMemoryTransport(build_fixture()), cache=None, **HOST_CALLBACKS) as direct:
            direct_first = await _first_round(direct, "test_input_required_result_elicitation")
            expected = await _interactive(direct)
            expected_old_style = await direct.call_tool("test_sampling", {"prompt": "Capital of France?"})
        async with (
            proxied({"fixture": build_fixture()}, {"defaults": {"effect": "read_only"}}, protocol="auto") as h,
            Client(InMemoryTransport(build_server(h.proxy)), cache=None, **HOST_CALLBACKS) as modern,
        ):
            assert text(await h.client.call_tool("test_simple_text", {}))  # a handshake-era host first
            upstream = h.proxy.upstreams["fixture"]
            assert upstream.twin is None  # handshake-era hosts never open the 2026-07-28 connection
            first = await _first_round(modern, "test_input_required_result_elicitation")
            through = await _interactive(modern)
            old_style = await modern.call_tool("test_sampling", {"prompt": "Capital of France?"})
            twin = upstream.twin
            assert twin is not None and twin.modern and twin.catalog.protocol_version == "2026-07-28"
    # The upstream's own key (the proxy's requestState, which it checks, stands in for the upstream's).
    assert sorted(first.input_requests or {}) == sorted(direct_first.input_requests or {}) == ["user_name"]
    assert first.input_requests == direct_first.input_requests
    assert through == expected
    # A tool asking the handshake way cannot reach a 2026-07-28 host directly; through the proxy it fails alike.
    assert old_style.is_error and expected_old_style.is_error


async def _answer_as_alice(
    client: Client, tool: str, asked: types.InputRequiredResult
) -> types.CallToolResult | types.InputRequiredResult:
    """The host's next round of ``tool``: the one elicitation of ``asked`` answered as Alice, with its state."""
    [(key, request)] = (asked.input_requests or {}).items()
    assert isinstance(request, types.ElicitRequest)
    return await client.session.call_tool(
        tool,
        {},
        input_responses={key: await _alice(None, request.params)},
        request_state=asked.request_state,
        allow_input_required=True,
    )


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_a_host_that_calls_again_instead_of_answering_starts_over_and_the_identical_write_is_sent(
    protocol: str,
) -> None:
    """The default write safety (every tool is write_unsafe) must not refuse the host's new identical call: the
    abandoned round ended with an answer (its questions were answered with an error), not an unknown outcome."""
    config = {"upstreams": {"fixture": {"command": "in-memory", "protocol": protocol}}}
    with anyio.fail_after(60):
        async with (
            proxied({"fixture": build_fixture()}, config=config) as h,
            Client(InMemoryTransport(build_server(h.proxy)), cache=None, **HOST_CALLBACKS) as modern,
        ):
            await _first_round(modern, "test_input_required_result_elicitation")
            again = await _first_round(modern, "test_input_required_result_elicitation")
            done = await _answer_as_alice(modern, "test_input_required_result_elicitation", again)
    assert isinstance(done, types.CallToolResult) and not done.is_error, done
    assert text(done) == "Hello, Alice!"


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
@virtual_time
async def test_the_call_timeouts_stand_still_while_the_upstream_waits_for_the_host(protocol: str) -> None:
    """Time a host takes to answer (a person filling in an elicitation) is not upstream time: the attempt and total
    timeouts of the call are suspended while its question is parked, so it can never end as an upstream timeout
    whose outcome is unknown. On virtual time the host thinks for three times the call's total timeout."""
    config = {"upstreams": {"fixture": {"command": "in-memory", "protocol": protocol}}}
    policy = {"defaults": {"timeouts": {"attempt_s": 5, "total_s": 10}}}
    with anyio.fail_after(60):
        async with (
            proxied({"fixture": build_fixture()}, policy, config=config) as h,
            Client(InMemoryTransport(build_server(h.proxy)), cache=None, **HOST_CALLBACKS) as modern,
        ):
            first = await _first_round(modern, "test_input_required_result_elicitation")
            await anyio.sleep(30)  # the person at the host takes 30 s over the form
            done = await _answer_as_alice(modern, "test_input_required_result_elicitation", first)
    assert isinstance(done, types.CallToolResult) and not done.is_error, done
    assert text(done) == "Hello, Alice!"


async def test_timers_resume_with_the_time_they_had_left() -> None:
    timers = Timers()
    with anyio.CancelScope(deadline=anyio.current_time() + 100) as scope, timers.timing(scope):
        before = scope.deadline
        started = anyio.current_time()
        with timers.paused():
            assert scope.deadline == math.inf
            with timers.paused():  # nested: still one pause
                assert scope.deadline == math.inf
            assert scope.deadline == math.inf
            await anyio.lowlevel.checkpoint()
        ended = anyio.current_time()
        resumed = scope.deadline
    assert before <= resumed <= before + (ended - started)  # pushed back by exactly the pause


# --- the host's envelope reaches a 2026-07-28 upstream explicitly, per request --------------------------------------


def _envelope_recorder(seen: list[tuple[frozenset[str], dict[str, Any]]]) -> Server[Any]:
    """A server that records, for each tools/call, the capabilities its client declared in that request's envelope
    and the request's ``_meta``."""

    async def list_tools(ctx: ServerRequestContext[Any, Any], params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[types.Tool(name="echo", input_schema={"type": "object"})])

    async def call_tool(ctx: ServerRequestContext[Any, Any], params: Any) -> types.CallToolResult:
        caps = ctx.session.client_capabilities
        declared = frozenset(n for n in ("sampling", "elicitation", "roots") if caps and getattr(caps, n) is not None)
        seen.append((declared, dict(ctx.meta or {})))
        return types.CallToolResult(content=[types.TextContent(text="ok")])

    return Server("recorder", on_list_tools=list_tools, on_call_tool=call_tool)


async def test_a_2026_upstream_hears_each_2026_hosts_own_capabilities_and_never_the_private_key() -> None:
    seen: list[tuple[frozenset[str], dict[str, Any]]] = []
    with anyio.fail_after(60):
        async with proxied({"rec": _envelope_recorder(seen)}, protocol="auto") as h:
            async with Client(InMemoryTransport(build_server(h.proxy)), cache=None, **HOST_CALLBACKS) as able:
                assert text(await able.call_tool("echo", {"n": 1})) == "ok"
            async with Client(InMemoryTransport(build_server(h.proxy)), cache=None) as bare:
                assert text(await bare.call_tool("echo", {"n": 2})) == "ok"
    assert [declared for declared, _ in seen] == [frozenset({"sampling", "elicitation", "roots"}), frozenset()]
    assert all(not any(k.startswith("io.github.resilient-mcp/") for k in meta) for _, meta in seen), seen
