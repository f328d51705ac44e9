"""The held-out scenario set in other domains (``benchmarks/agentbench/heldout_domains.py``) is well formed.

Its scenarios run on the chaos server's files, calendar and tickets surfaces, cover the fault categories they were
written for, and are solvable: the oracle (the scenario's own recipe) succeeds on one scenario per domain and fault
type directly (M0), and every control succeeds for every held-out policy directly and through the proxy. What the
agent policies know about a domain comes from the scenario (``Domain``, ``Step.verify``), which the last tests check
on the reader and on the verification of a write.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest

from benchmarks.agentbench.__main__ import HELDOUT_POLICIES
from benchmarks.agentbench.check import effect_shown, truth
from benchmarks.agentbench.heldout import every, heldout, same_domain
from benchmarks.agentbench.heldout_domains import FILE_TARGETS, FILES, other_domains
from benchmarks.agentbench.reader import read_text
from benchmarks.agentbench.runner import Job, run_jobs
from benchmarks.agentbench.scenarios import generate

PREFIX = {"files": "files", "calendar": "cal", "tickets": "tix"}
WANTED = {"A1", "B1", "B2", "C1", "C2", "C3", "C4", "C5", "D1", "D2", "D4", "D5", "E2", "E3", "E5", "F1", "F2", "F4"}


def test_the_other_domains_cover_the_main_sets_fault_categories_with_unique_ids() -> None:
    scenarios = other_domains()
    ids = [s.id for s in every()]
    assert len(ids) == len(set(ids)) and len(heldout()) == len(scenarios) + len(same_domain())
    assert not {s.id for s in generate()} & {s.id for s in heldout()}
    by_domain: dict[str, set[str]] = defaultdict(set)
    for s in scenarios:
        assert s.heldout and s.id.startswith(f"H-{PREFIX[s.domain.name]}-")
        by_domain[s.domain.name].add(s.fault[:2])
    assert set(by_domain) == {"files", "calendar", "tickets"}
    assert set().union(*by_domain.values()) >= WANTED | {"no"}
    assert all(len(faults) >= 15 for faults in by_domain.values())
    assert {len(s.steps) for s in scenarios} == {2, 4, 5}  # task lengths of their own (the main set: 3)


def test_every_held_out_fact_and_write_has_ground_truth_in_its_domain() -> None:
    for s in other_domains():
        ledger = s.ledger()
        assert ledger.records and not ledger.orders
        fact = s.target_step.fact
        if fact is not None:
            assert truth(fact, ledger) is not None, s.id
        if s.target_step.cls != "read_only":
            assert s.target_step.verify is not None, s.id


@pytest.fixture(scope="module")
def oracle_m0() -> list[dict[str, Any]]:
    first: dict[tuple[str, str], str] = {}
    for s in other_domains():
        first.setdefault((s.domain.name, s.fault), s.id)
    return run_jobs([Job(i, "oracle", "M0", 7) for i in first.values()], workers=1, concurrency=16)


def test_the_oracle_solves_the_held_out_scenarios_directly(oracle_m0: list[dict[str, Any]]) -> None:
    assert not [e for e in oracle_m0 if "error" in e]
    failed = {e["scenario"] for e in oracle_m0 if not e["score"]["success"]}
    # a direct SDK client raises on a broken outputSchema and hands the agent no text to degrade to (as in the main set)
    assert all("-E2-" in f for f in failed), failed
    assert len(oracle_m0) >= 55


def test_every_control_succeeds_for_every_held_out_policy_directly_and_through_the_proxy() -> None:
    controls = [s.id for s in other_domains() if s.fault == "none"]
    jobs = [Job(c, p, m, 7) for c in controls for p in HELDOUT_POLICIES for m in ("M0", "M3")]
    episodes = run_jobs(jobs, workers=1, concurrency=16)
    assert len(episodes) == len(jobs) and all(e["score"]["success"] for e in episodes)
    assert all(e["score"]["duplicates"] == 0 and e["score"]["unintended_writes"] == 0 for e in episodes)


def test_the_reader_takes_the_domains_alternatives_and_context_from_the_scenario() -> None:
    common: dict[str, Any] = dict(write=False, tries=0, fixes=0, tools=["stat", "list_dir", "read_file"], verify=None)
    gone = read_text("no such file or directory: /notes/todo.txt", tool="stat", args={"path": "/x"}, **common)
    ours = read_text(
        "no such file or directory: /notes/todo.txt",
        tool="stat",
        args={"path": "/x"},
        context=FILES.context,
        alternatives=FILES.alternatives,
        **common,
    )
    assert gone.kind == "skip"  # the order shop's alternatives are not in this tool list
    assert (ours.kind, ours.tool, ours.args) == ("call", "list_dir", {"dir": "/"})
    text = "Input validation error: 'line' is a required property"
    fixed = read_text(
        text,
        tool="append_line",
        args={"path": "/notes/todo.txt"},
        write=True,
        tries=0,
        fixes=0,
        tools=["append_line"],
        verify=None,
        context=FILES.context,
        alternatives=FILES.alternatives,
    )
    assert fixed.kind == "call" and fixed.args == {"path": "/notes/todo.txt", "line": FILES.context["line"]}


def test_a_verifying_read_shows_a_write_by_the_fields_the_scenario_names() -> None:
    append = FILE_TARGETS["append"]
    lines = {"path": "/notes/todo.txt", "lines": ["- renew the domain", FILES.context["line"]]}
    assert effect_shown(append.shows, True, lines, "")
    assert not effect_shown(append.shows, True, {**lines, "lines": ["- renew the domain"]}, "")
    assert not effect_shown(append.shows, False, None, "no such file")
    delete = FILE_TARGETS["delete"]
    assert delete.shows is None and effect_shown(None, False, None, "no such file or directory: /tmp/old.log")
    assert not effect_shown(None, True, {"path": "/tmp/old.log", "size": 8}, "")
