"""Generated documentation stays in step with the models it is generated from."""

from __future__ import annotations

import json
from pathlib import Path

from resilient_mcp.policy.files import policy_schema
from scripts.update_readme import render

ROOT = Path(__file__).resolve().parents[1]


def test_readme_reference_tables_match_the_models() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert render(readme) == readme, "README.md is stale: run python scripts/update_readme.py"


def test_committed_policy_schema_matches_the_models() -> None:
    committed = json.loads((ROOT / "policies" / "schema.json").read_text(encoding="utf-8"))
    assert committed == policy_schema(), "policies/schema.json is stale: run python scripts/update_readme.py"


def test_shipped_policy_files_are_valid() -> None:
    from resilient_mcp.policy.files import load_policy

    for path in sorted((ROOT / "policies").glob("*.yaml")):
        load_policy([path])  # raises SourceError naming file, line and key


def test_shipped_examples_are_valid() -> None:
    from resilient_mcp.chaos.inject import check_proxy_plan
    from resilient_mcp.chaos.plan import load_plan
    from resilient_mcp.policy.config import load_config

    configs = [*sorted((ROOT / "examples").glob("*.yaml")), ROOT / "examples" / "claude_desktop_config.json"]
    for path in configs:
        if path.name == "faults.yaml":
            assert check_proxy_plan(load_plan(path)) == []
            continue
        config = load_config(path, environ={"INNER_TOKEN": "t" * 16, "SEARCH_TOKEN": "t" * 16})
        assert config.upstreams, path
        for policy in config.policy_paths():
            assert policy.exists(), f"{path} names a missing policy file {policy}"
