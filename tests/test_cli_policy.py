"""Acceptance: the policy commands of the CLI, run as subprocesses (``python -m resilient_mcp.cli``).

``check`` rejects a bad policy file with one clear problem naming the file, the line and the key, and exits 2;
``explain`` prints one tool's resolved rule (defaults < upstream < tool globs) as JSON; ``audit`` lists the calls a
proxy recorded in its state directory.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.fixtures.scripted import ScriptedUpstream, error_text, ok_text
from tests.harness import proxied
from tests.helpers import child_env, proxy_argv, write_yaml

pytestmark = pytest.mark.anyio

LIMIT_S = 60


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(proxy_argv(*args), capture_output=True, text=True, env=child_env(), timeout=LIMIT_S)


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# --- check ----------------------------------------------------------------------------------------------------------

# (id, file text, line, key path as printed, words of the reason)
BAD_POLICIES: list[tuple[str, str, int, str, str]] = [
    ("unknown-key", "defaults:\n  effect: read_only\n  retyr: {max_attempts: 2}\n", 3, "defaults.retyr", "unknown key"),
    ("bad-glob", "version: 1\ndeny:\n  - 'delete_[*'\n", 3, "deny[0]", "unbalanced '['"),
    (
        "bad-glob-in-tool-rules",
        "upstreams:\n  fs:\n    tools:\n      'write_[x': {effect: read_only}\n",
        4,
        "upstreams.fs.tools.write_[x",
        "unbalanced '['",
    ),
    ("wrong-type", "defaults:\n  timeouts:\n    attempt_s: soon\n", 3, "defaults.timeouts.attempt_s", "valid number"),
    ("out-of-bounds", "session:\n  loop_threshold: 1\n", 2, "session.loop_threshold", "greater than or equal to 2"),
    ("bad-enum", "defaults: {effect: readonly}\n", 1, "defaults.effect", "read_only"),
]


@pytest.mark.parametrize(
    ("body", "line", "key", "reason"), [row[1:] for row in BAD_POLICIES], ids=[row[0] for row in BAD_POLICIES]
)
def test_check_rejects_a_bad_policy_file_with_one_problem_naming_file_line_and_key(
    tmp_path: Path, body: str, line: int, key: str, reason: str
) -> None:
    policy = write(tmp_path / "policy.yaml", body)
    done = cli("check", "--policy", str(policy))
    assert done.returncode == 2, done
    problems = [ln.strip() for ln in done.stderr.splitlines() if ln.startswith("  ")]
    assert len(problems) == 1, done.stderr
    assert problems[0].startswith(f"{policy}:{line}: {key}: "), problems[0]
    assert reason in problems[0]
    assert "1 problem" in done.stderr and done.stdout == ""


def test_check_rejects_invalid_yaml_naming_the_file_and_the_line(tmp_path: Path) -> None:
    policy = write(tmp_path / "policy.yaml", "defaults:\n\teffect: read_only\n")
    done = cli("check", "--policy", str(policy))
    assert done.returncode == 2, done
    problems = [ln.strip() for ln in done.stderr.splitlines() if ln.startswith("  ")]
    assert len(problems) == 1 and problems[0].startswith(f"{policy}:2: not valid YAML/JSON"), done.stderr


def test_check_lists_every_problem_of_every_file_and_accepts_a_good_one(tmp_path: Path) -> None:
    good = write(tmp_path / "good.yaml", "defaults: {effect: read_only}\n")
    bad = write(tmp_path / "bad.yaml", "defualts: {}\nsession: {max_tool_calls: 0}\n")
    assert cli("check", "--policy", str(good)).returncode == 0
    done = cli("check", "--policy", str(good), "--policy", str(bad))
    assert done.returncode == 2
    assert f"{bad}:1: defualts: unknown key" in done.stderr
    assert f"{bad}:2: session.max_tool_calls: " in done.stderr
    assert str(good) + ":" not in done.stderr


# --- explain --------------------------------------------------------------------------------------------------------

LAYERED = """\
defaults:
  timeouts: {attempt_s: 30}
  retry: {max_attempts: 4}
upstreams:
  fs:
    defaults:
      timeouts: {total_s: 90}
    tools:
      "write_*": {effect: write_idempotent, retry: {max_attempts: 2}}
tools:
  "write_file": {require_approval: true}
deny: ["delete_*"]
"""


def explain(tmp_path: Path, tool: str) -> dict[str, Any]:
    policy = write(tmp_path / "policy.yaml", LAYERED)
    config = write_yaml(tmp_path / "config.yaml", {"upstreams": {"fs": {"command": "true"}}})
    done = cli("explain", "--config", str(config), "--policy", str(policy), tool)
    assert done.returncode == 0, done
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def test_explain_prints_the_rule_merged_field_by_field_from_defaults_upstream_and_tool_globs(tmp_path: Path) -> None:
    report = explain(tmp_path, "write_file")
    assert (report["tool"], report["upstream"], report["visible"]) == ("write_file", "fs", True)
    rule = report["rule"]
    assert rule["effect"] == "write_idempotent"  # upstream tool glob
    assert rule["require_approval"] is True  # top-level tool glob
    assert rule["timeouts"] == {"attempt_s": 30.0, "total_s": 90.0, "progress_extends": True}  # defaults + upstream
    assert rule["retry"]["max_attempts"] == 2  # the glob wins over the defaults ...
    assert rule["retry"]["backoff_base_ms"] == 100  # ... field by field: the rest stays the built-in default
    assert report["idempotency_on"] is False


def test_explain_of_an_unmatched_tool_shows_the_defaults_and_of_a_denied_tool_that_it_is_hidden(
    tmp_path: Path,
) -> None:
    plain = explain(tmp_path, "read_file")["rule"]
    assert (plain["effect"], plain["require_approval"], plain["retry"]["max_attempts"]) == ("write_unsafe", False, 4)
    assert plain["timeouts"]["total_s"] == 90.0
    assert explain(tmp_path, "delete_tree")["visible"] is False


# --- audit ----------------------------------------------------------------------------------------------------------


async def test_audit_lists_the_calls_a_proxy_recorded_newest_first_without_argument_values(tmp_path: Path) -> None:
    state = tmp_path / "state"
    up = ScriptedUpstream()
    up.tool("search", lambda args: ok_text("2 hits"))
    up.tool("get_order", lambda args: error_text("order 9 not found", {"type": "not_found"}))
    up.tool("create", schema={"type": "object", "required": ["name"]})
    with anyio.fail_after(LIMIT_S):
        async with proxied({"shop": up.server()}, config={"state_dir": str(state)}) as h:
            await h.client.call_tool("search", {"query": "secret-words"})
            await h.client.call_tool("get_order", {"id": 9})
            await h.client.call_tool("create", {})
        done = await anyio.run_process(proxy_argv("audit", "--state-dir", str(state)), check=False, env=child_env())
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.decode().splitlines()]
    assert [(r["tool"], r["outcome"], r["fault_type"]) for r in rows] == [
        ("create", "refused", "B1_missing_required_argument"),
        ("get_order", "error", "D4_permanent_execution_error"),
        ("search", "ok", None),
    ]
    assert rows[2]["argument_keys"] == ["query"] and "secret-words" not in done.stdout.decode()
    assert {r["upstream"] for r in rows} == {"shop"}
    assert [r["decided_by"] for r in rows] == ["validate", None, None]
    assert [r["attempts"] for r in rows] == [0, 1, 1]


def test_audit_of_an_empty_state_directory_says_so(tmp_path: Path) -> None:
    done = cli("audit", "--state-dir", str(tmp_path))
    assert done.returncode == 0 and done.stdout == ""
    assert "no audit records" in done.stderr
