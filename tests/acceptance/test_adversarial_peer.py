"""mcp-adversarial (PyPI ``mcp-adversarial==0.1.0``) against server-everything directly and through
``resilient-mcp wrap``: its ``generic/`` fixtures (control characters, injection preambles, oversize strings, path
traversal, Unicode format characters) sent to every advertised tool give the same verdicts both ways.

It spawns the server itself over stdio, as a host would, and calls every tool it lists: the proxy must list the same
tools (a host without sampling/elicitation/roots sees what server-everything shows such a client) and answer each
call without hanging on a capability the harness never declared.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import mcp_adversarial
import pytest

from tests.helpers import REPO, VENV_BIN, child_env, node_binary, proxy_argv, server_everything_missing

GENERIC = Path(mcp_adversarial.__file__).parent / "fixtures" / "generic"
HARNESS = VENV_BIN / "mcp-adversarial"
REPORT_TO = ["--timeout", "30", "--report"]

_MISSING = server_everything_missing() or (None if HARNESS.exists() else f"{HARNESS} missing (pip install -e .[dev])")
pytestmark = [pytest.mark.peers, pytest.mark.skipif(_MISSING is not None, reason=_MISSING or "")]


def _verdicts(server: list[str], tmp: Path, name: str) -> dict[str, Any]:
    report = tmp / f"{name}.json"
    work = tmp / name
    work.mkdir()
    done = subprocess.run(
        [str(HARNESS), "run", "--server", shlex.join(server), "--fixtures", str(GENERIC), *REPORT_TO, str(report)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=work,  # a scratch directory: the harness calls every tool, writes included
        env=child_env(tmp / "xdg"),
    )
    assert report.exists(), (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    data = json.loads(report.read_text())
    return {
        "total": data["fixtures_total"],
        "passed": data["fixtures_passed"],
        "results": sorted(
            (r["fixture_id"], r["passed"], tuple(sorted(str(r["tool"]).split(","))), tuple(r["reasons"]))
            for r in data["results"]
        ),
    }


def test_mcp_adversarial_gives_the_same_verdicts_through_the_proxy_as_directly(tmp_path: Path) -> None:
    node = node_binary()
    assert node is not None
    everything = [node, str(REPO / ".tools/npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js")]
    everything.append("stdio")
    wrap = [*proxy_argv("wrap", "--state-dir", str(tmp_path / "state")), "--", *everything]
    # Both runs at once, each with its own server process and scratch directory: most of a run's time is the
    # server's own waits (its long-running tool), which need no CPU.
    with ThreadPoolExecutor(max_workers=2) as pool:
        direct_run = pool.submit(_verdicts, everything, tmp_path, "direct")
        through_run = pool.submit(_verdicts, wrap, tmp_path, "wrap")
        direct, through = direct_run.result(), through_run.result()
    assert direct["total"] == 5 and direct["passed"] == 5, direct
    assert through == direct
