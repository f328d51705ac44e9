"""Issue 20 ("no backtracking regex on untrusted input, anywhere"): every ``re`` use in the package is accounted for.

Each call ``re.compile / match / fullmatch / search / sub / subn / split / findall / finditer`` in ``resilient_mcp/``
is found by an AST scan. A pattern written in the code (a literal, or a module-level constant, or a compiled pattern
the module keeps) is checked by ``regexploit``'s static analyser (nested or adjacent overlapping unbounded
quantifiers: polynomial or exponential backtracking); a pattern that is not known until run time must be on the
reviewed list below, with why it is safe or whose it is. A new call site, a new pattern the analyser flags, or a
stale list entry fails the test. Patterns the analyser cannot read (possessive quantifiers, which never backtrack)
are on a reviewed list too and get a property test with adversarial strings, costed as a CPU-time ratio to a benign
input of the same length.
"""

from __future__ import annotations

import ast
import functools
import importlib
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from regexploit.ast.sre import SreOpParser
from regexploit.redos import find

import resilient_mcp.text as textcut
from resilient_mcp.stages import output as result_stages
from tests.security.cpu import cpu_cost

PACKAGE = Path(__file__).resolve().parents[2] / "resilient_mcp"
FUNCTIONS = {"compile", "match", "fullmatch", "search", "sub", "subn", "split", "findall", "finditer"}

DYNAMIC: dict[tuple[str, str], str] = {
    ("chaos/plan.py", "v"): "compiles the chaos plan's own regex to validate it (never matched here)",
    ("chaos/plan.py", "self.regex"): "the operator's chaos plan (a test harness, off in production) on an argument",
    ("stages/output.py", "pattern"): "literal tables compiled at import: checked below as module patterns",
    ("ops/secrets.py", "'|'.join(map(re.escape, values))"): "an alternation of escaped literals: no quantifier",
    ("policy/__init__.py", "pattern"): "compiles the policy's own pattern to validate it (never matched here)",
    ("policy/__init__.py", "fnmatch.translate(pattern)"): "compiles a policy glob to validate it (never matched here)",
    ("stages/invariants.py", "check.pattern"): (
        "the operator's result_invariants pattern (policy, not an outside party's) on a result field"
    ),
    ("stages/validate.py", "pattern"): (
        "an upstream schema's patternProperties, only to word a refusal, on a host key cut to KEY_CHARS first"
    ),
}
"""Call sites whose pattern is only known at run time: (path under resilient_mcp/, the pattern argument) -> why."""

UNREADABLE: dict[str, str] = {
    textcut._TOKEN.pattern: "possessive quantifiers (*+, ++): no backtracking; property-tested below",
}
"""Patterns regexploit cannot parse, reviewed by hand, each with a property test in this module."""


@functools.cache
def _sources() -> tuple[tuple[str, ast.Module], ...]:
    return tuple(
        (path.relative_to(PACKAGE).as_posix(), ast.parse(path.read_text(encoding="utf-8")))
        for path in sorted(PACKAGE.rglob("*.py"))
    )


def _module(rel: str) -> object:
    name = "resilient_mcp." + rel.removesuffix(".py").replace("/", ".")
    return importlib.import_module(name.removesuffix(".__init__"))


def _constant(node: ast.expr, module: object) -> str | bytes | None:
    """The value of a pattern argument written in the code: literals, ``+`` of them, module-level names."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str | bytes):
        return node.value
    if isinstance(node, ast.Name):
        value = getattr(module, node.id, None)
        return value if isinstance(value, str | bytes) else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _constant(node.left, module), _constant(node.right, module)
        if isinstance(left, str) and isinstance(right, str):
            return left + right
        if isinstance(left, bytes) and isinstance(right, bytes):
            return left + right
    return None


@functools.cache
def _call_sites() -> tuple[tuple[str, int, str, str | bytes | None], ...]:
    """``(path, line, pattern source, pattern value or None)`` of every ``re.<function>(pattern, ...)`` call."""
    return tuple(_scan_calls())


def _scan_calls() -> Iterator[tuple[str, int, str, str | bytes | None]]:
    for rel, tree in _sources():
        module = None
        for node in ast.walk(tree):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "re"
                and node.func.attr in FUNCTIONS
            ):
                continue
            module = module or _module(rel)
            arg = node.args[0] if node.args else next(k.value for k in node.keywords if k.arg == "pattern")
            yield rel, node.lineno, ast.unparse(arg), _constant(arg, module)


def _compiled(value: object, depth: int = 0) -> Iterator[re.Pattern[str] | re.Pattern[bytes]]:
    if isinstance(value, re.Pattern):
        yield value
    elif depth < 3 and isinstance(value, list | tuple | set | frozenset):
        for item in value:
            yield from _compiled(item, depth + 1)
    elif depth < 3 and isinstance(value, dict):
        for item in value.values():
            yield from _compiled(item, depth + 1)


def _patterns() -> dict[str, str]:
    """Every pattern written in the package (call-site literals and compiled module-level patterns) -> where."""
    found: dict[str, str] = {}
    for rel, line, _, value in _call_sites():
        if value is not None:
            text = value.decode("latin-1") if isinstance(value, bytes) else value
            found.setdefault(text, f"{rel}:{line}")
    for rel, _ in _sources():
        module = _module(rel)
        for name, value in vars(module).items():
            for pattern in _compiled(value):
                raw = pattern.pattern
                found.setdefault(raw.decode("latin-1") if isinstance(raw, bytes) else raw, f"{rel}: {name}")
    return found


def _backtracks(pattern: str) -> list[str]:
    """What regexploit finds in ``pattern`` (one entry per ReDoS candidate), IGNORECASE as the package compiles."""
    return [str(redos) for redos in find(SreOpParser().parse_sre(pattern, re.IGNORECASE))]


def test_the_package_uses_re_only_as_re_dot_something() -> None:
    """``from re import search`` or ``import re as r`` would hide a call from the scan."""
    for rel, tree in _sources():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module in ("re", "regex", "sre_compile"):
                pytest.fail(f"{rel}:{node.lineno}: 'from {node.module} import ...': use re.<function>")
            if isinstance(node, ast.Import):
                for alias in node.names:
                    assert alias.name != "regex", f"{rel}:{node.lineno}: the regex module is not scanned"
                    assert not (alias.name == "re" and alias.asname), f"{rel}:{node.lineno}: import re as ..."


def test_every_pattern_known_only_at_run_time_is_reviewed() -> None:
    dynamic = {(rel, source) for rel, _, source, value in _call_sites() if value is None}
    unreviewed = sorted(dynamic - DYNAMIC.keys())
    assert not unreviewed, f"re calls with a run-time pattern not reviewed in DYNAMIC: {unreviewed}"
    stale = sorted(DYNAMIC.keys() - dynamic)
    assert not stale, f"DYNAMIC entries with no such call site any more: {stale}"


def test_no_pattern_in_the_package_can_backtrack_polynomially() -> None:
    patterns = _patterns()
    assert len(patterns) >= 20  # the scan sees the package's patterns (33 when written), tables compiled at import too
    assert {p.pattern for _, p in result_stages._PATTERNS} <= set(patterns)
    flagged: dict[str, list[str]] = {}
    unreadable: list[str] = []
    for pattern, where in patterns.items():
        if pattern in UNREADABLE:
            continue
        try:
            found = _backtracks(pattern)
        except Exception as exc:  # a construct the analyser does not know
            unreadable.append(f"{where}: {pattern!r} ({type(exc).__name__}: {exc})")
            continue
        if found:
            flagged[f"{where}: {pattern!r}"] = found
    assert not flagged, f"patterns that can backtrack: {flagged}"
    assert not unreadable, f"patterns the analyser cannot read (review them into UNREADABLE): {unreadable}"
    assert set(UNREADABLE) <= set(patterns), "UNREADABLE lists a pattern the package no longer has"


@pytest.mark.parametrize(
    "pattern",
    [
        r"(.+?)/(.+?)/(.+?)/raw",  # the template matcher's regex for repo://{owner}/{repo}/{path}/raw
        r"^\s*```(?:json)?\s*(.*?)\s*```\s*$",  # the verdict parser's fenced-JSON regex
    ],
    ids=["old-template", "old-verdict"],
)
def test_the_analyser_flags_the_patterns_this_issue_replaced(pattern: str) -> None:
    assert _backtracks(pattern)


@pytest.mark.parametrize(
    "hostile",
    [
        "[" + '"\\' * 8_000,  # quotes and backslashes: every quote opens a string that never closes
        '["' + "\\a" * 8_000,  # one string of escapes, cut short
        '{"k": "' + "a" * 16_000,  # one long string, cut short
        "[" * 60 + "-1" + "." * 16_000,  # a number that goes on and on
        "[" + "1," * 8_000,  # many tokens, never closed
    ],
    ids=["quote-backslash", "escapes-unclosed", "string-unclosed", "number-dots", "many-tokens"],
)
def test_the_json_token_pattern_is_linear_as_the_cutter_uses_it(hostile: str) -> None:
    """``textcut._TOKEN`` (possessive) on adversarial upstream text, as ``json_prefix`` runs it (it stops at the first
    string the head cuts short), costs what a benign JSON head of the same length costs. Run to the end of the text,
    the pattern would be quadratic on the first case: ``json_prefix`` must keep stopping there."""
    benign = ("[" + '"a",' * len(hostile))[: len(hostile)]
    assert textcut.json_prefix(benign) is not None
    benign_s = cpu_cost(lambda: textcut.json_prefix(benign), repeat=5)
    hostile_s = cpu_cost(lambda: textcut.json_prefix(hostile), repeat=5, stop_above=10 * benign_s)
    assert hostile_s <= 10 * benign_s, f"hostile {hostile_s:.6f} s vs benign {benign_s:.6f} s (CPU)"
