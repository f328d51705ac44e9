"""Documentation stays in step with the code: generated documents with what they are generated from, and every
module, file and CLI verb a document or a docstring names with what exists."""

from __future__ import annotations

import ast
import functools
import io
import json
import os
import re
import tokenize
from pathlib import Path

import mcp

from resilient_mcp.cli import COMMANDS
from resilient_mcp.policy.files import policy_schema
from scripts.architecture_report import collect_arrows, document, load_modules
from scripts.update_readme import REFERENCE, render

ROOT = Path(__file__).resolve().parents[1]
SITE = Path(mcp.__file__).resolve().parents[1]
"""Where the installed libraries are: a document may name a file of the MCP SDK (``mcp/client/client.py``)."""

DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "benchmarks").glob("*.md"))]
"""What a reader reads as the current state (CHANGELOG.md and docs/architecture-history.md are history: they name
modules as they were)."""
HISTORY = {ROOT / "docs" / "architecture-history.md"}
SOURCES = sorted(
    p
    for folder in ("resilient_mcp", "scripts", "benchmarks", "tests")
    for p in (ROOT / folder).rglob("*.py")
    if not any(part.startswith(".") for part in p.relative_to(ROOT).parts)  # benchmarks/.venv-fastmcp and the like
)

MODULE = re.compile(r"\bresilient_mcp(?:\.[A-Za-z_]\w*)+")
PY_PATH = re.compile(r"(?<![\w./-])(?:[\w-]+/)+[\w-]+\.py\b")
VERB = re.compile(r"`+resilient-mcp ([a-z][a-z-]*)\b")
NOT_VERBS = {"attempt", "backoff"}
"""Span names (``resilient-mcp attempt N``, ``resilient-mcp backoff``: docs/operations.md, Traces), not commands."""


def test_the_reference_tables_match_the_models() -> None:
    text = REFERENCE.read_text(encoding="utf-8")
    assert render(text) == text, "docs/reference.md is stale: run python scripts/update_readme.py"


def test_the_architecture_document_matches_the_code() -> None:
    committed = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert document(ROOT) == committed, (
        "docs/architecture.md is stale: run python scripts/architecture_report.py --write docs/architecture.md"
    )


def _prose(path: Path) -> str:
    """The docstrings and comments of a Python file: what it says in words (string values are data, not names). A
    docstring is a string that is a statement of its own (module, class, function and attribute docstrings)."""
    texts: list[str] = []
    tokens = list(tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline))
    statement_start = True
    for i, tok in enumerate(tokens):
        docstring = tok.type == tokenize.STRING and statement_start and tokens[i + 1].type == tokenize.NEWLINE
        if docstring or tok.type == tokenize.COMMENT:
            texts.append(tok.string)
        if tok.type not in (tokenize.COMMENT, tokenize.NL):
            statement_start = tok.type in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING)
    return "\n".join(texts)


@functools.cache
def _texts() -> tuple[tuple[Path, str], ...]:
    docs = [(p, p.read_text(encoding="utf-8")) for p in DOCUMENTS if p not in HISTORY]
    return (*docs, *((p, _prose(p)) for p in SOURCES))


def _module_exists(dotted: str) -> bool:
    """A module or package of the checkout, or a name defined at the top of one (``resilient_mcp.<module>.<NAME>``)."""
    parts = dotted.split(".")
    for n in range(len(parts), 0, -1):
        base = ROOT.joinpath(*parts[:n])
        for path in (base.with_suffix(".py"), base / "__init__.py"):
            if path.is_file():
                if n == len(parts):
                    return True
                tree = ast.parse(path.read_text(encoding="utf-8"))
                names = {
                    getattr(node, "name", None) or getattr(getattr(node, "target", None), "id", None)
                    for node in tree.body
                } | {
                    t.id
                    for node in tree.body
                    if isinstance(node, ast.Assign)
                    for t in node.targets
                    if isinstance(t, ast.Name)
                }
                return parts[n] in names
    return False


def _checkout_files() -> list[str]:
    """Every file of the checkout as ``/`` + its path (hidden folders and installed peers left out)."""
    found: list[str] = []
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in ("node_modules", "__pycache__")]
        rel = Path(folder).relative_to(ROOT).as_posix()
        found += [f"/{rel}/{name}" if rel != "." else f"/{name}" for name in files]
    return found


def _path_exists(path: str, near: Path, files: list[str]) -> bool:
    """A file named relative to the checkout, the package, the naming file's folder or the installed libraries, or
    by the end of its path (``upstream/__init__.py``)."""
    bases = (ROOT, ROOT / "resilient_mcp", near.parent, SITE)
    return any((base / path).is_file() for base in bases) or any(f.endswith("/" + path) for f in files)


def test_every_module_and_file_a_document_or_docstring_names_exists() -> None:
    missing: list[str] = []
    files = _checkout_files()
    for path, text in _texts():
        for dotted in sorted(set(MODULE.findall(text))):
            if not _module_exists(dotted.rstrip(".")):
                missing.append(f"{path.relative_to(ROOT)}: {dotted}")
        for named in sorted(set(PY_PATH.findall(text))):
            if not _path_exists(named, path, files):
                missing.append(f"{path.relative_to(ROOT)}: {named}")
    assert not missing, "named but not found (renamed or removed? fix the text):\n" + "\n".join(missing)


def test_every_cli_verb_a_document_or_docstring_names_exists() -> None:
    unknown = [
        f"{path.relative_to(ROOT)}: resilient-mcp {verb}"
        for path, text in _texts()
        for verb in sorted(set(VERB.findall(text)))
        if verb not in COMMANDS and verb not in NOT_VERBS
    ]
    assert not unknown, "no such command (see resilient_mcp/cli.py COMMANDS):\n" + "\n".join(unknown)


def test_the_readme_is_what_a_user_reads_first() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) < 500, "README.md is 500 lines or more: move detail into docs/"
    assert "## Contents" in readme


def test_the_readmes_package_table_lists_every_package_lowest_floor_first() -> None:
    """README, Development: every package of ``resilient_mcp/`` in its table, each importing (at module level, in a
    function or for typing) only packages listed before it."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    listed = re.findall(r"^\| `(\w+)/` \|", readme.split("**The packages**", 1)[-1], re.M)
    packages = sorted(p.parent.name for p in (ROOT / "resilient_mcp").glob("*/__init__.py"))
    assert sorted(listed) == packages, f"README's package table: {listed}, the packages: {packages}"
    modules = load_modules(ROOT)
    collect_arrows(modules)

    def package(name: str) -> str | None:
        parts = name.split(".")
        return parts[1] if len(parts) > 1 and parts[1] in packages else None

    upward = sorted(
        f"{src} -> {dst} ({mod.name} imports {target})"
        for mod in modules.values()
        for arrows in mod.arrows.values()
        for target in arrows
        if (src := package(mod.name)) and (dst := package(target)) and listed.index(dst) > listed.index(src)
    )
    assert not upward, "a package imports one listed after it in README's package table:\n" + "\n".join(upward)


def test_every_link_between_documents_lands() -> None:
    """Relative links of the README and docs/ name a file that exists, and an anchor a heading of it makes."""
    broken: list[str] = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "benchmarks" / "RESULTS.md"]:
        for target in re.findall(r"\]\(([^)\s]+)\)", path.read_text(encoding="utf-8")):
            if "://" in target or target.startswith("mailto:"):
                continue
            file, _, anchor = target.partition("#")
            linked = (path.parent / file).resolve() if file else path
            if not linked.exists():
                broken.append(f"{path.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and linked.suffix == ".md":
                headings = re.findall(r"^#+ (.+)$", linked.read_text(encoding="utf-8"), re.M)
                if anchor not in {_anchor(h) for h in headings}:
                    broken.append(f"{path.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, "links that land nowhere:\n" + "\n".join(broken)


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    kept = "".join(c for c in heading.lower().replace("`", "") if c.isalnum() or c in " -_")
    return kept.replace(" ", "-")


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
