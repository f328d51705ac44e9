"""The conformance matrix (both suite lines x direct / wrap / url) is reproducible and the committed report is current.

Runs ``scripts/conformance_matrix.py`` end to end: the fixture over HTTP, ``resilient-mcp wrap --http`` with the
fixture as a stdio upstream, and ``resilient-mcp serve --http`` with a ``url:`` upstream, under the 0.1.16 suite and
the 0.2.0 alpha (``--requirements 2026-07-28`` and ``--suite all``). Every scenario that passes directly must pass
through the proxy, apart from the gaps the script lists with their reason; ``docs/conformance.md`` must show the
numbers this run produced.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from scripts.conformance_matrix import COLUMNS, PROXY_GAPS, RUNS, render, run_matrix
from tests.conformance.run_suite import missing_tools

REPORT = Path(__file__).resolve().parents[2] / "docs" / "conformance.md"


def _summary(report: str) -> list[str]:
    return [line for line in report.splitlines() if line.startswith("| 0.")]


@pytest.mark.conformance
def test_every_scenario_that_passes_directly_passes_through_wrap_and_url_upstreams(tmp_path: Path) -> None:
    for line in ("stable", "alpha"):
        reason = missing_tools(line)
        if reason is not None:
            pytest.skip(f"conformance suite unavailable: {reason}")
    matrix = run_matrix(tmp_path)

    assert not matrix.regressions(), matrix.regressions()
    for run in RUNS:
        direct = matrix.runs[(run.title, "direct")]
        assert direct.results, f"{run.title}: no scenario ran directly"
        for column in COLUMNS[1:]:
            proxied = matrix.runs[(run.title, column)]
            assert set(proxied.results) == set(direct.results), (run.title, column)
    stateless = matrix.runs[("alpha, 2026-07-28 requirements", "wrap")].results["server-stateless"]
    assert stateless.passed, stateless.failure_messages()  # includes sep-2575-server-rejects-undeclared-capability
    assert not PROXY_GAPS, "every scenario that passes directly passes through the proxy"
    for column in COLUMNS[1:]:
        bridged = matrix.runs[("alpha, 2026-07-28 requirements", column)].results
        irr = {name: result.passed for name, result in bridged.items() if name.startswith("input-required-result-")}
        assert len(irr) >= 14 and all(irr.values()), (column, irr)
    for run in RUNS[1:]:  # the alpha line: the tasks extension, which the fixture lacks, is served by the proxy
        direct = matrix.runs[(run.title, "direct")].results
        tasks = sorted(name for name in direct if name.startswith("tasks-") and name != "tasks-status-notifications")
        assert tasks and not any(direct[name].passed for name in tasks), (run.title, "the fixture has no tasks")
        for column in COLUMNS[1:]:
            proxied = matrix.runs[(run.title, column)].results
            assert all(proxied[name].passed for name in tasks), (run.title, column, proxied)
    assert _summary(REPORT.read_text(encoding="utf-8")) == _summary(render(matrix)), (
        "docs/conformance.md is stale: run python scripts/conformance_matrix.py --write docs/conformance.md"
    )
