"""The files one successful ``tools/call`` enters (``scripts/architecture_report.py``'s traced call, both lanes).

A success enters only the floors that do work on every call: not the upstream's exception seam (``upstream/errors``:
entered when an attempt raises), not the text helpers (``text/__init__``: entered when a result is cut), not the
SDK adapters on the stdio raw lane (no SDK request context per call), not the upstream's stdio reader from the host's
side (the host reads its own lines through the ``text/jsonlines`` leaf), and not ``host/server`` on the raw lane.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from scripts.architecture_report import trace_call

ROOT = Path(__file__).resolve().parents[1]

NEVER_ON_SUCCESS = {"upstream/errors.py", "text/__init__.py", "upstream/stdio.py"}
"""Entered only when something fails, is cut, or (``upstream/stdio.py``) on the upstream's own side."""
MAX_FILES = {"stdio": 17, "sdk": 16}
"""The ceiling of files entered per lane (main before this measure: 22 and 18)."""


@pytest.mark.parametrize("lane", ["stdio", "sdk"])
def test_a_successful_call_enters_only_the_floors_that_work_on_it(lane: str) -> None:
    files = set(trace_call(ROOT, lane))
    assert not files & NEVER_ON_SUCCESS, sorted(files & NEVER_ON_SUCCESS)
    assert len(files) <= MAX_FILES[lane], sorted(files)
    if lane == "stdio":  # the raw lane builds no SDK request context and does not pass through the SDK's server
        assert not files & {"adapters/sdk.py", "host/server.py"}, sorted(files)
