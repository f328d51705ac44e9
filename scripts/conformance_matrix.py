"""The official MCP conformance suite, both lines, against the fixture directly and through resilient-mcp.

One command produces the matrix (suite line x direct / wrap / url) and writes it as ``docs/conformance.md``::

    python scripts/conformance_matrix.py [--write docs/conformance.md] [--keep DIR]

Columns:

* ``direct``: the fixture (``tests/fixtures/conformance_server.py``) over streamable HTTP;
* ``wrap``: ``resilient-mcp wrap --http ... -- python fixture --stdio`` (the fixture as a stdio upstream, defaults);
* ``url``: ``resilient-mcp serve --http ...`` with a ``url:`` upstream pointing at a second fixture over streamable
  HTTP.

A suite line's ``direct`` column runs while its two proxied columns run one after the other, each column against
processes of its own: most of a direct run is the suite waiting out scenarios the fixture does not serve (the tasks
extension), which needs no CPU, while the proxied runs keep the machine to themselves (some checks allow a stream
600 ms).

Rows: ``@modelcontextprotocol/conformance`` 0.1.16 (``--suite active``) and the 0.2.0 alpha line with
``--requirements 2026-07-28`` and with ``--suite all``. Needs Node 22 and both suites (``scripts/install-peers.sh``).

Exit status: 0 when every scenario that passes directly also passes through the proxy, apart from the gaps listed
in ``PROXY_GAPS`` (each with its reason); 1 otherwise (the report is written either way); 2 when it cannot run.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.conformance.run_suite import SuiteError, SuiteRun, missing_tools, run_suite, suite_version  # noqa: E402

FIXTURE = ROOT / "tests" / "fixtures" / "conformance_server.py"
TASKS_POLICY = ROOT / "tests" / "conformance" / "tasks-policy.yaml"
"""Which of the fixture's tools the proxy serves as durable tasks (the tasks scenarios' task-supporting tools)."""
COLUMNS = ("direct", "wrap", "url")


@dataclass(frozen=True)
class SuiteLine:
    title: str
    line: str
    suite: str = "active"
    requirements: str | None = None

    def args(self) -> str:
        return f"--requirements {self.requirements}" if self.requirements else f"--suite {self.suite}"

    def args_slug(self) -> str:
        return self.requirements or self.suite


RUNS = (
    SuiteLine("stable", "stable", suite="active"),
    SuiteLine("alpha, 2026-07-28 requirements", "alpha", requirements="2026-07-28"),
    SuiteLine("alpha, all scenarios", "alpha", suite="all"),
)

FIXTURE_GAPS: dict[str, str] = {
    "tasks-": "the tasks extension (SEP-2663) is not implemented by the fixture: mcp 2.3's low-level server has no "
    "task store, so `tools/call` never returns `CreateTaskResult` and `tasks/*` are unknown methods",
}
"""Scenario name prefixes the fixture itself does not pass, and why."""

PROXY_GAPS: dict[str, str] = {}
"""Scenarios (or name prefixes) that pass directly but not through the proxy, and why (the proxy's known gaps)."""


def _gap(name: str, gaps: dict[str, str]) -> str | None:
    return next((reason for prefix, reason in gaps.items() if name.startswith(prefix)), None)


@dataclass
class Matrix:
    versions: dict[str, str]
    runs: dict[tuple[str, str], SuiteRun] = field(default_factory=dict)
    """(suite line title, column) -> run"""

    def regressions(self) -> dict[str, list[str]]:
        """Per suite line: scenarios that pass directly and fail through the proxy, not explained by PROXY_GAPS."""
        out: dict[str, list[str]] = {}
        for run in RUNS:
            direct = self.runs[(run.title, "direct")]
            for column in COLUMNS[1:]:
                proxied = self.runs[(run.title, column)]
                for name in direct.passed:
                    result = proxied.results.get(name)
                    if (result is None or not result.passed) and _gap(name, PROXY_GAPS) is None:
                        out.setdefault(run.title, []).append(f"{name} ({column})")
        return out


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:
            return bool(response.status < 500)
    except urllib.error.HTTPError as exc:
        return exc.code < 500
    except OSError:
        return False


@contextmanager
def _process(argv: Sequence[str], probe: str, log: Path, timeout: float = 60) -> Iterator[None]:
    """Start ``argv``, wait until ``probe`` answers over HTTP, stop the process (by its pid) on exit."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    with log.open("wb") as err:
        process = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, env=env)
    try:
        deadline = time.monotonic() + timeout
        while not _ready(probe):
            if process.poll() is not None or time.monotonic() > deadline:
                tail = log.read_text(errors="replace")[-3000:]
                raise SuiteError(f"{argv[0]} did not come up (exit {process.poll()}):\n{tail}")
            time.sleep(0.1)
        yield
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=15)


def _column(run: SuiteLine, url: str, out: Path) -> SuiteRun:
    return run_suite(url, suite=run.suite, requirements=run.requirements, line=run.line, output_dir=out, timeout=300)


def run_matrix(work: Path) -> Matrix:
    for line in {run.line for run in RUNS}:
        reason = missing_tools(line)
        if reason is not None:
            raise SuiteError(reason)
    matrix = Matrix(versions={line: suite_version(line) for line in ("stable", "alpha")})
    python = sys.executable
    direct_port, wrap_port, url_port, behind_port = _free_port(), _free_port(), _free_port(), _free_port()
    direct_url = f"http://127.0.0.1:{direct_port}/mcp"
    behind_url = f"http://127.0.0.1:{behind_port}/mcp"  # the url column's upstream: not shared with `direct`
    config = work / "url.yaml"
    config.write_text(
        f"upstreams:\n  fixture:\n    url: {behind_url}\nstate_dir: {work / 'state-url'}\npolicies: [{TASKS_POLICY}]\n",
        encoding="utf-8",
    )
    proxy = [python, "-m", "resilient_mcp.cli", "--log-format", "json"]
    wrap = [
        *proxy,
        "wrap",
        "--http",
        f"127.0.0.1:{wrap_port}",
        "--state-dir",
        str(work / "state-wrap"),
        "--policy",
        str(TASKS_POLICY),
        "--",
    ]
    targets = {
        "direct": direct_url,
        "wrap": f"http://127.0.0.1:{wrap_port}/mcp",
        "url": f"http://127.0.0.1:{url_port}/mcp",
    }
    with (
        _process([python, str(FIXTURE), "--http", f"127.0.0.1:{direct_port}"], direct_url, work / "direct.err"),
        _process([python, str(FIXTURE), "--http", f"127.0.0.1:{behind_port}"], behind_url, work / "behind.err"),
        _process([*wrap, python, str(FIXTURE), "--stdio"], f"http://127.0.0.1:{wrap_port}/healthz", work / "wrap.err"),
        _process(
            [*proxy, "serve", "--config", str(config), "--http", f"127.0.0.1:{url_port}"],
            f"http://127.0.0.1:{url_port}/healthz",
            work / "url.err",
        ),
        ThreadPoolExecutor(max_workers=1) as pool,
    ):
        for run in RUNS:
            direct = pool.submit(_column, run, targets["direct"], work / f"{run.line}-{run.args_slug()}-direct")
            for name in COLUMNS[1:]:
                matrix.runs[(run.title, name)] = _column(
                    run, targets[name], work / f"{run.line}-{run.args_slug()}-{name}"
                )
            matrix.runs[(run.title, "direct")] = direct.result()
    return matrix


def _mark(run: SuiteRun, name: str) -> str:
    result = run.results.get(name)
    return "-" if result is None else ("pass" if result.passed else "**FAIL**")


def render(matrix: Matrix) -> str:
    stable, alpha = matrix.versions["stable"], matrix.versions["alpha"]
    lines = [
        "# Conformance matrix",
        "",
        "Generated by `python scripts/conformance_matrix.py --write docs/conformance.md`; do not edit by hand.",
        "",
        f"The official suite `@modelcontextprotocol/conformance` {stable} (stable) and {alpha} (alpha), server "
        "mode, against `tests/fixtures/conformance_server.py`: `direct` (the fixture over streamable HTTP), `wrap` "
        "(`resilient-mcp wrap --http` with the fixture as a stdio upstream) and `url` (`resilient-mcp serve --http` "
        "with a `url:` upstream in front of a second fixture over streamable HTTP). Each scenario's verdict is read "
        "from its `checks.json` (a scenario passes when it has checks and none failed).",
        "",
        "| suite | arguments | direct | wrap | url |",
        "|---|---|---|---|---|",
    ]
    for run in RUNS:
        version = alpha if run.line == "alpha" else stable
        cells = []
        for column in COLUMNS:
            result = matrix.runs[(run.title, column)]
            cells.append(f"{len(result.passed)}/{len(result.results)}")
        lines.append(f"| {version} | `{run.args()}` | " + " | ".join(cells) + " |")
    lines += ["", "## Scenarios the fixture itself does not pass", ""]
    direct_failures = sorted({name for run in RUNS for name in matrix.runs[(run.title, "direct")].failed})
    for name in direct_failures:
        lines.append(f"- `{name}`: {_gap(name, FIXTURE_GAPS) or 'not analysed'}")
    if not direct_failures:
        lines.append("None.")
    served = sorted(
        {
            name
            for run in RUNS
            for name in matrix.runs[(run.title, "direct")].failed
            if all((r := matrix.runs[(run.title, c)].results.get(name)) and r.passed for c in COLUMNS[1:])
        }
    )
    if served:
        lines += ["", "## Scenarios the proxy passes where the fixture does not", ""]
        lines.append(
            f"{', '.join(f'`{n}`' for n in served)}: the proxy serves the tasks extension itself, for every tool "
            f"(`{TASKS_POLICY.relative_to(ROOT)}` marks the scenarios' task-supporting tools; see docs/tasks.md)."
        )
    lines += ["", "## Scenarios that pass directly but not through the proxy", ""]
    gaps = sorted(
        {
            name
            for run in RUNS
            for column in COLUMNS[1:]
            for name in matrix.runs[(run.title, "direct")].passed
            if not (r := matrix.runs[(run.title, column)].results.get(name)) or not r.passed
        }
    )
    for prefix, reason in PROXY_GAPS.items():
        names = [name for name in gaps if name.startswith(prefix)]
        if names:
            lines.append(f"- {', '.join(f'`{n}`' for n in names)}: {reason}.")
    unexplained = [name for name in gaps if _gap(name, PROXY_GAPS) is None]
    lines.extend(f"- `{name}`: regression, not explained" for name in unexplained)
    if not gaps:
        lines.append("None.")
    lines += [
        "",
        "Both proxies run with their defaults (`wrap` without `--protocol`, a `url:` upstream without "
        "`protocol:`: `auto`, see docs/usage.md): a handshake-era host (0.1.16, the alpha suite's handshake "
        "scenarios) is served over the proxy's handshake connection, a 2026-07-28 host over a connection in that "
        "era (for `wrap --http`, a second process of the fixture), so each meets the fixture as it would directly: "
        "the fixture's own `inputRequests` keys reach a 2026-07-28 host unchanged. Both proxies run with "
        f"`{TASKS_POLICY.relative_to(ROOT)}`.",
    ]
    for run in RUNS:
        version = alpha if run.line == "alpha" else stable
        lines += ["", f"## {version} `{run.args()}`", "", "| scenario | direct | wrap | url |", "|---|---|---|---|"]
        names = sorted({name for column in COLUMNS for name in matrix.runs[(run.title, column)].results})
        for name in names:
            cells = " | ".join(_mark(matrix.runs[(run.title, column)], name) for column in COLUMNS)
            lines.append(f"| `{name}` | {cells} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--write", type=Path, metavar="FILE", help="write the report here (default: stdout)")
    parser.add_argument("--keep", type=Path, metavar="DIR", help="keep logs and checks.json files in DIR")
    args = parser.parse_args(argv)
    work = args.keep or Path(tempfile.mkdtemp(prefix="conformance-matrix-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        matrix = run_matrix(work)
    except SuiteError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    report = render(matrix)
    if args.write:
        args.write.parent.mkdir(parents=True, exist_ok=True)
        args.write.write_text(report, encoding="utf-8")
    else:
        sys.stdout.write(report)
    regressions = matrix.regressions()
    for title, names in regressions.items():
        print(f"{title}: passes directly, fails through the proxy: {', '.join(names)}", file=sys.stderr)
    return 1 if regressions else 0


if __name__ == "__main__":
    sys.exit(main())
