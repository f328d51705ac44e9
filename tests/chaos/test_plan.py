"""Fault plans: strict parsing with file/line/key errors, fault names and aliases, matching, and determinism."""

from __future__ import annotations

from pathlib import Path

import pytest

from resilient_mcp.chaos.inject import injector_for
from resilient_mcp.chaos.params import PARAMS, HangParams, MalformedParams
from resilient_mcp.chaos.plan import FaultPlan, Planner, load_plan
from resilient_mcp.faults import CATALOG
from resilient_mcp.policy.config import ProxyConfig, load_config
from resilient_mcp.policy.source import SourceError


def _plan(*rules: dict[str, object], seed: int = 0) -> FaultPlan:
    return FaultPlan.model_validate({"seed": seed, "rules": list(rules)})


def test_a_bad_parameter_is_reported_with_file_line_and_key(tmp_path: Path) -> None:
    path = tmp_path / "plan.yaml"
    path.write_text(
        "seed: 1\nrules:\n  - match: {tool: create_order}\n    fault: timeout\n    params:\n      hang_secs: 5\n"
    )
    with pytest.raises(SourceError) as err:
        load_plan(path)
    assert f"{path}:6: rules[0].params.hang_secs: unknown key" in str(err.value)


def test_a_connect_failure_takes_no_parameters_it_would_not_honour(tmp_path: Path) -> None:
    path = tmp_path / "plan.yaml"
    path.write_text("rules:\n  - fault: connect_failure\n    params:\n      mode: refuse\n")
    with pytest.raises(SourceError) as err:
        load_plan(path)
    assert f"{path}:4: rules[0].params.mode: unknown key" in str(err.value)
    assert _plan({"fault": "connect_failure"}).rules[0].fault == "C1_connect_failure"


def test_an_unknown_fault_name_lists_what_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    path.write_text('{"rules": [{"fault": "explode"}]}')
    with pytest.raises(SourceError) as err:
        load_plan(path)
    text = str(err.value)
    assert f"{path}:1: rules[0].fault" in text and "unknown fault 'explode'" in text and "C3_attempt_timeout" in text


def test_a_wrong_match_key_and_a_bad_regex_are_errors() -> None:
    with pytest.raises(ValueError, match="nth_kall"):
        _plan({"match": {"nth_kall": 1}, "fault": "C3"})
    with pytest.raises(ValueError, match="invalid regex"):
        _plan({"match": {"args": {"x": {"regex": "("}}}, "fault": "C3"})
    with pytest.raises(ValueError, match="after_hang needs hang_ms"):
        _plan({"fault": "C3", "params": {"commit": "after_hang"}})


def test_every_catalog_fault_type_has_parameters_and_can_be_named_three_ways() -> None:
    assert set(PARAMS) == {cls.fault_type for cls in CATALOG} and len(PARAMS) == 27
    for cls in CATALOG:
        short, _, name = cls.fault_type.partition("_")
        for spelling in (cls.fault_type, short, name.upper()):
            assert _plan({"fault": spelling}).rules[0].fault == cls.fault_type


def test_an_alias_brings_its_default_parameters_which_the_rule_can_override() -> None:
    plan = _plan({"fault": "stdout_pollution"}, {"fault": "stdout_pollution", "params": {"variant": "truncated"}})
    first, second = (r.parsed for r in plan.rules)
    assert isinstance(first, MalformedParams) and first.variant == "log_line"
    assert isinstance(second, MalformedParams) and second.variant == "truncated"
    assert plan.rules[0].fault == "E1_malformed_response"


def test_nth_call_counts_each_tool_separately_and_every_counts_multiples() -> None:
    planner = Planner(
        _plan({"match": {"tool": "a", "nth_call": 2}, "fault": "C3"}, {"match": {"every": 3}, "fault": "D1"})
    )
    seen = []
    for tool in ["a", "b", "a", "b", "a", "b"]:
        decision = planner.decide(tool, {})
        seen.append((tool, decision.fault[:2] if decision else None))
    assert seen == [("a", None), ("b", None), ("a", "C3"), ("b", None), ("a", None), ("b", "D1")]


def test_argument_predicates_select_calls() -> None:
    planner = Planner(
        _plan({"match": {"args": {"ref": {"regex": "-flaky$"}, "qty": {"gt": 2}, "sku": "apple"}}, "fault": "D1"})
    )
    assert planner.decide("t", {"ref": "R1-flaky", "qty": 3, "sku": "apple"}) is not None
    assert planner.decide("t", {"ref": "R1-flaky", "qty": 2, "sku": "apple"}) is None
    assert planner.decide("t", {"ref": "R1", "qty": 3, "sku": "apple"}) is None
    assert planner.decide("t", {"ref": "R1-flaky", "qty": 3, "sku": "pear"}) is None
    assert planner.decide("t", {"ref": "R1-flaky", "sku": "apple"}) is None  # a missing number is not > 2


def test_times_limits_how_often_a_rule_fires_and_the_first_matching_rule_wins() -> None:
    planner = Planner(_plan({"fault": "D1", "times": 2}, {"fault": "D4"}))
    faults = [d.fault[:2] for _ in range(4) if (d := planner.decide("t", {})) is not None]
    assert faults == ["D1", "D1", "D4", "D4"]


def _draws(seed: int) -> list[bool]:
    planner = Planner(_plan({"match": {"probability": 0.5}, "fault": "D2"}, seed=seed))
    return [planner.decide("t", {"i": i}) is not None for i in range(60)]


def test_a_seeded_plan_faults_the_same_calls_every_run() -> None:
    assert _draws(7) == _draws(7)
    assert _draws(7) != _draws(8)
    assert 10 < sum(_draws(7)) < 50


def test_decisions_carry_the_checked_parameters_and_are_recorded() -> None:
    planner = Planner(
        _plan({"match": {"tool": "create_order"}, "fault": "C3", "params": {"commit": "before_hang", "hang_ms": 60000}})
    )
    decision = planner.decide("create_order", {"client_ref": "R1"})
    assert decision is not None and isinstance(decision.params, HangParams)
    assert decision.params.hang_ms == 60000 and decision.params.commit == "before_hang"
    assert planner.history == [decision]


def test_the_proxy_config_takes_a_plan_file_or_inline_rules_but_not_both(tmp_path: Path) -> None:
    assert ProxyConfig.model_validate({"faults": {"plan": "p.yaml"}}).faults is not None
    inline = ProxyConfig.model_validate({"faults": {"seed": 3, "rules": [{"fault": "rate_limit"}]}})
    injector = injector_for(inline)
    assert injector is not None and injector.planner.plan.seed == 3
    assert injector.planner.plan.rules[0].fault == "D2_rate_limited"
    with pytest.raises(ValueError, match="either plan"):
        ProxyConfig.model_validate({"faults": {"plan": "p.yaml", "rules": []}})
    path = tmp_path / "proxy.yaml"
    path.write_text("upstreams:\n  t: {command: x}\nfaults:\n  rules:\n    - fault: C3\n      params: {hang: 1}\n")
    with pytest.raises(SourceError) as err:
        injector_for(load_config(path))  # where the proxy is built (and where the CLI loads the config)
    assert f"{path}:6: faults.rules[0].params.hang: unknown key" in str(err.value)
