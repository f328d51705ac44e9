"""The official MCP conformance suite, run against the proxy's HTTP listener with the conformance fixture behind it.

Every active scenario that passes against the fixture directly (see test_fixture.py here) must pass through the
proxy: logging, progress, sampling, elicitation, subscriptions and completion are forwarded, and DNS-rebinding
protection is the proxy's own. Verdicts come from each scenario's checks.json, not from the suite's exit code.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.conformance.run_suite import missing_tools, run_suite
from tests.helpers import (
    STARTUP_S,
    child_env,
    free_port,
    http_get_status,
    proxy_argv,
    running,
    stderr_tail,
    wait_until,
    write_yaml,
)

FIXTURE = Path(__file__).parents[1] / "fixtures" / "conformance_server.py"


@pytest.mark.conformance
def test_every_active_scenario_passes_through_the_proxy(tmp_path: Path) -> None:
    reason = missing_tools()
    if reason is not None:
        pytest.skip(f"conformance suite unavailable: {reason}")
    config = write_yaml(
        tmp_path / "proxy.yaml",
        {
            "upstreams": {"fixture": {"command": sys.executable, "args": [str(FIXTURE), "--stdio"]}},
            "state_dir": str(tmp_path / "state"),
        },
    )
    port = free_port()
    err = tmp_path / "proxy.err"
    argv = proxy_argv("--log-format", "json", "serve", "--config", str(config), "--http", f"127.0.0.1:{port}")
    with running(argv, err, env=child_env()) as proxy:
        wait_until(lambda: http_get_status(f"http://127.0.0.1:{port}/healthz") == 200, STARTUP_S, "proxy /healthz")
        run = run_suite(f"http://127.0.0.1:{port}/mcp", suite="active", output_dir=tmp_path / "results", timeout=120)
        assert proxy.poll() is None, f"the proxy died during the suite:\n{stderr_tail(err)}"

    assert len(run.results) == 30, run.summary()
    failures = "\n".join(f"{name}: {'; '.join(messages)}" for name, messages in run.failed.items())
    assert not run.failed, f"{len(run.failed)} scenario(s) failed through the proxy:\n{failures}\n\n{run.summary()}"
