"""``tests/`` mirrors the package (README, Development): a folder per package of ``resilient_mcp/`` holding the tests
of its modules, and beside them only the folders that are apart on purpose."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"

APART = {
    "acceptance": "end-to-end tests of the whole proxy",
    "security": "hostile input",
    "conformance": "the official conformance suite",
    "benchmarks": "the benchmarks' own tests",
    "fixtures": "fixture servers, no tests",
}
"""Folders of ``tests/`` that are not a package's (the README names each)."""


def _packages() -> list[str]:
    return sorted(p.parent.name for p in (ROOT / "resilient_mcp").glob("*/__init__.py"))


def test_every_package_has_a_tests_folder_with_tests() -> None:
    missing = [pkg for pkg in _packages() if not any((TESTS / pkg).glob("test_*.py"))]
    assert not missing, (
        "packages without tests/<package>/test_*.py (move the tests of its modules there, git mv): "
        + ", ".join(missing)
    )


def test_every_tests_folder_is_a_package_or_apart_on_purpose() -> None:
    folders = sorted(p.name for p in TESTS.iterdir() if p.is_dir() and not p.name.startswith(("_", ".")))
    stray = [name for name in folders if name not in _packages() and name not in APART]
    assert not stray, "tests/ folders named after no package (renamed or removed?): " + ", ".join(stray)


def test_the_readme_names_the_folders_apart() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert all(f"`tests/{name}/`" in readme for name in APART)
