"""The files one successful ``tools/call`` enters (``scripts/architecture_report.py``'s traced call, both lanes).

A success enters only the floors that do work on every call: not the upstream's exception seam (``upstream/errors``:
entered when an attempt raises), not the text helpers (``text/__init__``: entered when a result is cut), not the
SDK adapters on the stdio raw lane (no SDK request context per call), not the upstream's stdio reader from the host's
side (the host reads its own lines through the ``text/jsonlines`` leaf), not ``host/server`` on the raw lane, and not
the state store's queries (``state/schema``: the worker thread's; the claim a write waits for is one statement the
store runs itself). Issue 24's bar is 15 files on both lanes; a read_only tool (no idempotency stage) enters fewer.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from scripts.architecture_report import trace_call

ROOT = Path(__file__).resolve().parents[1]

NEVER_ON_SUCCESS = {"upstream/errors.py", "text/__init__.py", "upstream/stdio.py", "state/schema.py"}
"""Entered only when something fails, is cut, on the upstream's own side (``upstream/stdio.py``) or in the state
store's worker thread (``state/schema.py``)."""
MAX_FILES = {"stdio": 15, "sdk": 14, "stdio-read": 14, "sdk-read": 13}
"""The ceiling of files entered per lane (main before ``lean``: 22 and 18; before ``floor15``: 18 and 17)."""


@pytest.mark.parametrize("lane", sorted(MAX_FILES))
def test_a_successful_call_enters_only_the_floors_that_work_on_it(lane: str) -> None:
    files = set(trace_call(ROOT, lane))
    assert not files & NEVER_ON_SUCCESS, sorted(files & NEVER_ON_SUCCESS)
    assert len(files) <= MAX_FILES[lane], sorted(files)
    if lane.startswith("stdio"):  # the raw lane builds no SDK request context and does not pass through the server
        assert not files & {"adapters/sdk.py", "host/server.py"}, sorted(files)
    if lane.endswith("-read"):  # a read_only tool has no idempotency stage
        assert "stages/idempotency.py" not in files, sorted(files)
