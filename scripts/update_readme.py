"""Regenerate what docs/reference.md and policies/schema.json derive from the models. Run after changing a model."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from resilient_mcp.policy.files import write_policy_schema  # noqa: E402
from resilient_mcp.policy.reference import config_reference, policy_reference  # noqa: E402

BLOCKS = {"policy-reference": policy_reference, "config-reference": config_reference}
REFERENCE = ROOT / "docs" / "reference.md"
"""The document holding the generated blocks (the README links to it)."""


def render(document: str) -> str:
    for name, build in BLOCKS.items():
        pattern = re.compile(rf"(<!-- BEGIN {name}[^>]*-->\n)(.*?)(<!-- END {name} -->)", re.S)
        if not pattern.search(document):
            raise SystemExit(f"{REFERENCE.relative_to(ROOT)} has no '<!-- BEGIN {name} -->' block")
        document = pattern.sub(lambda m, b=build: m.group(1) + "\n" + b() + "\n\n" + m.group(3), document)
    return document


def main() -> None:
    REFERENCE.write_text(render(REFERENCE.read_text(encoding="utf-8")), encoding="utf-8")
    write_policy_schema(ROOT / "policies" / "schema.json")


if __name__ == "__main__":
    main()
