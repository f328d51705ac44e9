"""What a user gets with no policy at all: retries that cannot duplicate a write, a local server's ``readOnlyHint``
used, a remote server's not, and the proxy saying which tool is treated how and why (``check``, status, log).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from resilient_mcp.faults import EffectClass
from resilient_mcp.faults.error_results import FAULT_META_KEY
from resilient_mcp.policy import Policy, PolicyFile
from resilient_mcp.policy.config import ProxyConfig
from tests.fixtures.scripted import ScriptedUpstream, ok_text
from tests.harness import proxied
from tests.helpers import REPO, child_env, proxy_argv, write_yaml

pytestmark = pytest.mark.anyio

LEDGER = REPO / "tests" / "fixtures" / "ledger_server.py"
READ = types.ToolAnnotations(read_only_hint=True)
ATTEMPTS = "io.github.resilient-mcp/attempts"
FAST = {"defaults": {"retry": {"backoff_base_ms": 1, "backoff_cap_ms": 5}}}


def _policy(data: dict[str, Any] | None = None, local: tuple[str, ...] = ("fs",)) -> Policy:
    return Policy(PolicyFile.model_validate(data or {})).mark_local(local)


# --- resolution ----------------------------------------------------------------------------------------------------


def test_a_local_servers_read_only_hint_makes_the_tool_read_only_and_nothing_else_is_believed() -> None:
    policy = _policy()
    read = policy.resolve("fs", "read_file", "read_file", READ)
    assert read.effect is EffectClass.READ_ONLY
    assert not read.trusted_upstream  # its claims that a failed write did not run are still not believed
    assert "readOnlyHint of a local stdio server" in policy.effect_source("fs", read, READ)
    # the other hints would loosen what a write may do: not used without trust_annotations: true
    idempotent = types.ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True)
    assert policy.resolve("fs", "put", "put", idempotent).effect is EffectClass.WRITE_UNSAFE
    assert policy.resolve("fs", "write", "write", None).effect is EffectClass.WRITE_UNSAFE


def test_a_remote_servers_hint_and_an_explicit_false_are_not_used_and_a_policy_effect_wins() -> None:
    remote = _policy(local=())
    rule = remote.resolve("web", "search", "search", READ)
    assert rule.effect is EffectClass.WRITE_UNSAFE
    assert "remote server" in remote.effect_source("web", rule, READ)
    off = _policy({"upstreams": {"fs": {"trust_annotations": False}}})
    assert off.resolve("fs", "read_file", "read_file", READ).effect is EffectClass.WRITE_UNSAFE
    named = _policy({"upstreams": {"fs": {"tools": {"read_file": {"effect": "destructive"}}}}})
    assert named.resolve("fs", "read_file", "read_file", READ).effect is EffectClass.DESTRUCTIVE
    trusted = _policy({"upstreams": {"web": {"trust_annotations": True}}}, local=())
    assert trusted.resolve("web", "search", "search", READ).effect is EffectClass.READ_ONLY


def test_only_command_upstreams_count_as_local() -> None:
    config = ProxyConfig.model_validate(
        {"upstreams": {"fs": {"command": "fs-server"}, "web": {"url": "http://127.0.0.1:9/mcp"}}}
    )
    assert config.local_upstreams() == ["fs"]


# --- through the proxy ---------------------------------------------------------------------------------------------


def _upstream() -> ScriptedUpstream:
    up = ScriptedUpstream()
    up.tool("lookup", lambda args: ok_text("found"), annotations=READ)
    up.tool("record", lambda args: ok_text("recorded"))
    return up


def _faults(fault: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    rule: dict[str, Any] = {"match": {"nth_call": 1}, "fault": fault, "params": params or {}}
    return {"rules": [{**rule, "match": {"tool": tool, "nth_call": 1}} for tool in ("lookup", "record")]}


async def test_with_no_policy_a_hinted_read_is_retried_after_a_maybe_executed_fault_and_a_write_is_not() -> None:
    up = _upstream()
    faults = _faults("C4_gateway_5xx", {"status": 503, "forward": True})
    with anyio.fail_after(30):
        async with proxied({"fs": up.server()}, FAST, config={"faults": faults}) as h:
            lookup = await h.client.call_tool("lookup", {})
            record = await h.client.call_tool("record", {"n": 1})
    assert not lookup.is_error
    assert [a["outcome"] for a in lookup.meta[ATTEMPTS]] == ["C4_gateway_5xx", "ok"]
    assert record.is_error and record.meta[FAULT_META_KEY]["repair_action"] == "verify_state"
    assert [name for name, _ in up.calls].count("record") == 1  # forwarded once, never re-sent


async def test_with_no_policy_a_call_that_was_never_sent_is_retried_for_every_tool() -> None:
    up = _upstream()
    with anyio.fail_after(30):
        async with proxied({"fs": up.server()}, FAST, config={"faults": _faults("C1_connect_failure")}) as h:
            record = await h.client.call_tool("record", {"n": 1})
    assert not record.is_error
    assert [a["outcome"] for a in record.meta[ATTEMPTS]] == ["C1_connect_failure", "ok"]
    assert [name for name, _ in up.calls].count("record") == 1


async def test_the_status_data_says_how_each_tool_is_treated_and_why() -> None:
    with anyio.fail_after(30):
        async with proxied({"fs": _upstream().server()}) as h:
            rows = {row["tool"]: row for row in h.proxy.pipeline.services.treatment}
    assert rows["lookup"]["effect"] == "read_only" and rows["lookup"]["retried_on"] == "transient faults"
    assert "readOnlyHint" in rows["lookup"]["effect_from"]
    assert rows["record"]["effect"] == "write_unsafe"
    assert rows["record"]["retried_on"].startswith("only faults where the call provably did not run")


# --- check --connect, as a user runs it --------------------------------------------------------------------------


def _check(tmp_path: Path, policy: dict[str, Any] | None = None) -> tuple[dict[str, Any], str]:
    ledger = {"command": sys.executable, "args": [str(LEDGER), "--ledger", str(tmp_path / "l")]}
    config = write_yaml(tmp_path / "proxy.yaml", {"upstreams": {"ledger": ledger}, "state_dir": str(tmp_path / "s")})
    argv = proxy_argv("check", "--config", str(config), "--connect")
    if policy is not None:
        argv += ["--policy", str(write_yaml(tmp_path / "policy.yaml", policy))]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=child_env(), cwd=REPO, check=False)
    assert done.returncode == 0, done.stderr
    return {t["name"]: t for t in json.loads(done.stdout)["ledger"]["tools"]}, done.stderr


def test_check_connect_says_a_local_servers_read_only_hint_is_used_and_how_to_turn_it_off(tmp_path: Path) -> None:
    tools, stderr = _check(tmp_path)
    assert tools["read_ledger"]["effect"] == "read_only"
    assert tools["read_ledger"]["effect_from"].startswith("readOnlyHint of a local stdio server")
    assert "trust_annotations: false" in tools["read_ledger"]["effect_from"]
    assert tools["read_ledger"]["retried_on"] == "transient faults"
    assert tools["append"]["effect"] == "write_unsafe"
    assert tools["append"]["retried_on"].startswith("only faults where the call provably did not run")
    assert '"tool_treatment"' in stderr or "tool_treatment" in stderr  # the start-up log says it too
    off, _ = _check(tmp_path, {"upstreams": {"ledger": {"trust_annotations": False}}})
    assert off["read_ledger"]["effect"] == "write_unsafe"


def _ledger_config(tmp_path: Path, **more: Any) -> Path:
    ledger = {"command": sys.executable, "args": [str(LEDGER), "--ledger", str(tmp_path / "l")], **more}
    return write_yaml(tmp_path / "proxy.yaml", {"upstreams": {"ledger": ledger}, "state_dir": str(tmp_path / "s")})


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        proxy_argv(*argv), capture_output=True, text=True, timeout=60, env=child_env(), cwd=REPO, check=False
    )


def test_explain_connect_says_an_unknown_tool_is_unknown_with_close_names_and_prints_no_policy(tmp_path: Path) -> None:
    config = _ledger_config(tmp_path)
    done = _run("explain", "--config", str(config), "--connect", "apend")
    assert done.returncode == 1 and done.stdout == ""
    assert "unknown tool 'apend': no upstream offers it; close names: append" in done.stderr
    known = _run("explain", "--config", str(config), "--connect", "read_ledger")
    assert known.returncode == 0, known.stderr
    report = json.loads(known.stdout)
    assert report["rule"]["effect"] == "read_only" and "readOnlyHint" in report["effect_from"]


def test_check_connect_warns_on_tool_names_model_apis_refuse(tmp_path: Path) -> None:
    done = _run("check", "--config", str(_ledger_config(tmp_path, prefix="acme.marketplace." + "x" * 45)), "--connect")
    assert done.returncode == 0, done.stderr
    warned = [line for line in done.stderr.splitlines() if line.startswith("warning: tool ")]
    assert len(warned) == 4  # append, reject, read_ledger, ping
    assert all("the character(s) '.'" in line and "(at most 64)" in line for line in warned)
    assert "^[a-zA-Z0-9_-]{1,64}$" in warned[0] and "prefix" in warned[0]
    (tmp_path / "plain").mkdir()
    plain = _run("check", "--config", str(_ledger_config(tmp_path / "plain")), "--connect")
    assert "warning: tool" not in plain.stderr
