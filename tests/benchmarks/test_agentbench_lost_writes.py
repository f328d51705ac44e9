"""The agent-outcome benchmark counts lost intended writes: a write the agent asked for and was told succeeded that
never reached the ledger (next to duplicate side effects, in the JSON and Markdown report)."""

from __future__ import annotations

from benchmarks.agentbench.check import lost_writes
from benchmarks.agentbench.metrics import summarize
from benchmarks.agentbench.scenarios import generate
from benchmarks.agentbench.spec import Scenario
from resilient_mcp.chaos.ledger import Ledger


def create_scenario() -> Scenario:
    return next(s for s in generate() if s.target_step.tool == "create_order" and not s.expected_commits)


def test_a_write_the_agent_was_told_succeeded_that_never_committed_is_lost() -> None:
    s = create_scenario()
    args = dict(s.target_step.args)
    assert lost_writes(s, Ledger(), [("create_order", args, False), ("create_order", args, True)]) == 1


def test_a_write_the_agent_saw_fail_is_not_lost() -> None:
    s = create_scenario()
    assert lost_writes(s, Ledger(), [("create_order", dict(s.target_step.args), False)]) == 0


def test_a_committed_write_or_one_the_agent_never_asked_for_is_not_lost() -> None:
    s = create_scenario()
    args = dict(s.target_step.args)
    ledger = Ledger()
    ledger.commits[f"create_order:{args['client_ref']}"] = 1
    assert lost_writes(s, ledger, [("create_order", args, True)]) == 0
    assert lost_writes(s, Ledger(), [("get_stock", {"sku": "pear"}, True)]) == 0
    assert lost_writes(s, Ledger(), [("create_order", '{"client_ref": "R1"}', True)]) == 0  # not an object


def test_a_write_the_scenario_says_must_not_happen_is_never_counted_lost() -> None:
    s = next(s for s in generate() if any(n == 0 for n in s.expected_commits.values()))
    op = next(op for op, n in s.expected_commits.items() if n == 0)
    tool, _, key = op.partition(":")
    field = "client_ref" if tool == "create_order" else "order_id"
    assert lost_writes(s, Ledger(), [(tool, {field: key}, True)]) == 0


def test_the_report_sums_lost_writes_per_group() -> None:
    zero = {
        k: 0
        for k in (
            "useless_retries",
            "useless_retries_sent",
            "unsafe_retries",
            "unsafe_retries_sent",
            "duplicates",
            "unintended_writes",
            "unapproved_destructive",
            "proxy_retries",
            "proxy_useless_attempts",
            "agent_calls",
            "upstream_attempts",
        )
    }
    rows = [
        {
            **zero,
            "lost_writes": n,
            "success": True,
            "valid_recovery": None,
            "mode": "M3",
            "fired": False,
            "surfaces": False,
            "recoverable": True,
            "false_abort": False,
            "loop_failure": False,
            "error_bytes": [],
            "sim_time_s": 0.0,
        }
        for n in (1, 0, 2)
    ]
    assert summarize(rows)["lost_writes"] == 3
