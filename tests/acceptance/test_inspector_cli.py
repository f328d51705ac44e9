"""A real client: MCP Inspector v2's CLI (``@modelcontextprotocol/inspector@2.12.0``, Node 22) in both protocol
eras against the conformance fixture directly and through ``resilient-mcp wrap`` (stdio and streamable HTTP) and
``resilient-mcp serve --http``: tools/list, tools/call, resources, templates, prompts answer as they do directly.

Installed by ``scripts/install-peers.sh``; the tests skip with the reason when it is not. The Inspector keeps state
under ``$HOME/.mcp-inspector``: each test points ``HOME`` at its own scratch directory.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
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


def _inspect(target: list[str], era: str, home: Path, args: list[str]) -> Any:
    argv = [str(node22_path()), str(INSPECTOR), "--cli", *args, "--format", "json", "-q", "--protocol-era", era]
    argv += ["--connect-timeout", str(int(STARTUP_S * 1000))]  # its default, 15 s, is short for a loaded machine
    argv += ["--", *target] if not target[0].startswith("http") else [target[0]]
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=120, env=child_env(home / "xdg", HOME=str(home)), cwd=REPO
    )
    assert done.returncode == 0, (argv, done.stdout[-2000:], done.stderr[-2000:])
    return json.loads(done.stdout)["result"]


def _answers(target: list[str], era: str, home: Path) -> dict[str, Any]:
    return {name: _comparable(_inspect(target, era, home, args)) for name, args in CALLS}


@contextmanager
def _target(kind: str, tmp: Path) -> Iterator[list[str]]:
    """The command (stdio) or URL (HTTP) the Inspector is pointed at."""
    state = tmp / "state"
    if kind == "direct":
        yield FIXTURE_ARGV
    elif kind == "wrap-stdio":
        yield [*proxy_argv("wrap", "--state-dir", str(state)), "--", *FIXTURE_ARGV]
    else:
        port = free_port()
        if kind == "wrap-http":
            argv = [*proxy_argv("wrap", "--state-dir", str(state), "--http", f"127.0.0.1:{port}"), "--", *FIXTURE_ARGV]
        else:
            config = write_yaml(
                tmp / "proxy.yaml",
                {
                    "upstreams": {"fixture": {"command": FIXTURE_ARGV[0], "args": FIXTURE_ARGV[1:]}},
                    "state_dir": str(state),
                },
            )
            argv = proxy_argv("serve", "--config", str(config), "--http", f"127.0.0.1:{port}")
        with running(argv, tmp / "proxy.err", env=child_env(tmp / "xdg")):
            wait_until(lambda: http_get_status(f"http://127.0.0.1:{port}/healthz") == 200, 60, "proxy /healthz")
            yield [f"http://127.0.0.1:{port}/mcp"]


_DIRECT: dict[str, dict[str, Any]] = {}
"""The fixture's own answers per era, asked once per test session (they do not depend on the proxy)."""


@pytest.mark.parametrize("era", ["legacy", "auto"])
@pytest.mark.parametrize("kind", ["wrap-stdio", "wrap-http", "serve-http"])
def test_the_inspector_cli_gets_through_the_proxy_what_it_gets_directly(kind: str, era: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    if era not in _DIRECT:
        with _target("direct", tmp_path / "direct") as direct:
            _DIRECT[era] = _answers(direct, era, home)
    expected = _DIRECT[era]
    (tmp_path / "proxied").mkdir()
    with _target(kind, tmp_path / "proxied") as proxied:
        through = _answers(proxied, era, home)
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
