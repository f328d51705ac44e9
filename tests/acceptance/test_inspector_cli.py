"""A real client: MCP Inspector v2's CLI (``@modelcontextprotocol/inspector@2.12.0``, Node 22) in both protocol
eras against the conformance fixture directly and through ``resilient-mcp wrap`` (stdio and streamable HTTP) and
``resilient-mcp serve --http``: tools/list, tools/call, resources, templates, prompts answer as they do directly.

Installed by ``scripts/install-peers.sh``; the tests skip with the reason when it is not. The Inspector keeps state
under ``$HOME/.mcp-inspector``: each Inspector run gets a ``HOME`` of its own.

The Inspector asks one thing per run, so a case is six runs: they run a few at a time (each a process of its own;
over stdio each starts its own proxy, with its own state directory), and an HTTP proxy is started once per module
for both eras.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.conformance.run_suite import node22_path
from tests.helpers import (
    REPO,
    STARTUP_S,
    child_env,
    free_port,
    http_get_status,
    proxy_argv,
    running,
    wait_until,
    write_yaml,
)

INSPECTOR = REPO / ".tools/inspector/node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js"
FIXTURE_ARGV = [sys.executable, str(Path(__file__).parents[1] / "fixtures" / "conformance_server.py"), "--stdio"]

PROMPT_ARGS = ["--prompt-args", "arg1=a", "arg2=b"]
CALLS: list[tuple[str, list[str]]] = [
    ("tools", ["--method", "tools/list"]),
    ("call", ["--method", "tools/call", "--tool-name", "test_simple_text"]),
    ("resources", ["--method", "resources/list"]),
    ("read", ["--method", "resources/read", "--uri", "test://static-text"]),
    ("prompts", ["--method", "prompts/list"]),
    ("prompt", ["--method", "prompts/get", "--prompt-name", "test_prompt_with_arguments", *PROMPT_ARGS]),
]
"""What is asked, each in one Inspector run (``--format json -q``)."""

PROXY_ADDITIONS = ("read_stored_output", "resilient-mcp://")
"""What resilient-mcp lists of its own (pages of capped outputs): left out when comparing with the fixture."""


def _missing() -> str | None:
    if not node22_path().exists():
        return f"Node 22 not installed at {node22_path()} (scripts/install-peers.sh)"
    if not INSPECTOR.exists():
        return f"MCP Inspector not installed at {INSPECTOR} (scripts/install-peers.sh)"
    return None


pytestmark = [pytest.mark.peers, pytest.mark.skipif(_missing() is not None, reason=_missing() or "")]


def _comparable(value: Any) -> Any:
    """``value`` without the per-connection ``_meta`` envelope (who answered) and the proxy's own additions."""
    if isinstance(value, dict):
        return {key: _comparable(item) for key, item in value.items() if key != "_meta"}
    if isinstance(value, list):
        return [_comparable(item) for item in value if not _proxy_addition(item)]
    return value


def _proxy_addition(item: Any) -> bool:
    if not isinstance(item, dict):
        return False
    names = [str(item.get(key) or "") for key in ("name", "uri", "uriTemplate")]
    return any(name.startswith(prefix) for name in names for prefix in PROXY_ADDITIONS)


Target = Callable[[Path], list[str]]
"""What the Inspector is pointed at, given a scratch directory of the run's own: a command (stdio) or a URL."""

AT_ONCE = 3
"""Inspector runs at the same time (each a Node process, over stdio also a server or a proxy and its server)."""


def _inspect(target: Target, era: str, scratch: Path, args: list[str]) -> Any:
    home = scratch / "home"
    home.mkdir(parents=True)
    argv = [str(node22_path()), str(INSPECTOR), "--cli", *args, "--format", "json", "-q", "--protocol-era", era]
    argv += ["--connect-timeout", str(int(STARTUP_S * 1000))]  # its default, 15 s, is short for a loaded machine
    server = target(scratch)
    argv += ["--", *server] if not server[0].startswith("http") else [server[0]]
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=120, env=child_env(scratch / "xdg", HOME=str(home)), cwd=REPO
    )
    assert done.returncode == 0, (argv, done.stdout[-2000:], done.stderr[-2000:])
    return json.loads(done.stdout)["result"]


def _answers(target: Target, era: str, tmp: Path) -> dict[str, Any]:
    """Every call of ``CALLS``, each in its own Inspector run and scratch directory, ``AT_ONCE`` at a time."""
    with ThreadPoolExecutor(max_workers=AT_ONCE) as pool:
        runs = {name: pool.submit(_inspect, target, era, tmp / f"{era}-{name}", args) for name, args in CALLS}
        return {name: _comparable(run.result()) for name, run in runs.items()}


def _direct(scratch: Path) -> list[str]:
    return FIXTURE_ARGV


def _wrap_stdio(scratch: Path) -> list[str]:
    return [*proxy_argv("wrap", "--state-dir", str(scratch / "state")), "--", *FIXTURE_ARGV]


@contextmanager
def _http_proxy(kind: str, tmp: Path) -> Iterator[Target]:
    """A proxy over streamable HTTP (``wrap-http`` or ``serve-http``) in front of the fixture, until exit."""
    state, port = tmp / "state", free_port()
    if kind == "wrap-http":
        argv = [*proxy_argv("wrap", "--state-dir", str(state), "--http", f"127.0.0.1:{port}"), "--", *FIXTURE_ARGV]
    else:
        config = write_yaml(
            tmp / "proxy.yaml",
            {"upstreams": {"fixture": {"command": FIXTURE_ARGV[0], "args": FIXTURE_ARGV[1:]}}, "state_dir": str(state)},
        )
        argv = proxy_argv("serve", "--config", str(config), "--http", f"127.0.0.1:{port}")
    with running(argv, tmp / "proxy.err", env=child_env(tmp / "xdg")):
        wait_until(lambda: http_get_status(f"http://127.0.0.1:{port}/healthz") == 200, STARTUP_S, "proxy /healthz")
        yield lambda scratch: [f"http://127.0.0.1:{port}/mcp"]


@pytest.fixture(scope="module", params=["wrap-stdio", "wrap-http", "serve-http"])
def proxied(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """The proxy the Inspector goes through: over stdio a new one per run; over HTTP one for the module's cases."""
    if request.param == "wrap-stdio":
        yield _wrap_stdio
    else:
        with _http_proxy(request.param, tmp_path_factory.mktemp(request.param)) as target:
            yield target


_DIRECT: dict[str, dict[str, Any]] = {}
"""The fixture's own answers per era, asked once per test session (they do not depend on the proxy)."""


@pytest.mark.parametrize("era", ["legacy", "auto"])
def test_the_inspector_cli_gets_through_the_proxy_what_it_gets_directly(
    proxied: Target, era: str, tmp_path: Path
) -> None:
    if era not in _DIRECT:
        _DIRECT[era] = _answers(_direct, era, tmp_path / "direct")
    expected = _DIRECT[era]
    through = _answers(proxied, era, tmp_path / "proxied")
    tools = {tool["name"] for tool in expected["tools"]["tools"]}
    assert {"test_simple_text", "test_image_content", "test_input_required_result_sampling"} <= tools
    assert {r["uri"] for r in expected["resources"]["resources"]} >= {"test://static-text"}
    assert expected["read"]["contents"][0]["text"]
    assert expected["call"]["content"] == [{"type": "text", "text": "This is a simple text response for testing."}]
    assert expected["prompt"]["messages"], expected["prompt"]
    if era == "auto":
        # The proxy serves durable tasks for every tool and declares the tasks extension (a server without it does
        # not): the Inspector then shows the result's `resultType`, which every 2026-07-28 result carries, and it
        # must say the call is complete (no task for a call this short).
        assert through["call"].pop("resultType", "complete") == "complete", through["call"]
    assert through == expected
