"""What the proxy says about real servers that cannot start: one ``resilient-mcp check --connect`` per case.

    python benchmarks/startup_failures.py [--code DIR]

Each case is a real server (the npm reference servers in ``.tools``, the PyPI servers of the dev extra) started in a
way that fails the way people's configs do: a command that is not installed, a missing or wrong argument, a
directory or repository that does not exist, a database on a path it cannot write, a server that exits at once or
prints a banner on stdout, a database server whose password is wrong. Printed per case: the upstream's state and
what ``check`` reports (fault type, what happened, the server's words). Cases whose server is not installed are
skipped. ``--code DIR`` runs the ``resilient_mcp`` package found in DIR instead (before/after). Writes
``benchmarks/out/startup_failures.json``. Every process is started by ``check`` and stopped by it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from shutil import which
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
OUT = HERE / "out"
PY = sys.executable
VENV_BIN = Path(PY).parent
NPM = REPO / ".tools/npm/node_modules/@modelcontextprotocol"
FETCH = REPO / ".tools/fetch/node_modules/mcp-fetch-server/dist/index.js"
FAILING = REPO / "tests/fixtures/failing_start.py"


def cases(tmp: Path) -> dict[str, dict[str, Any]]:
    node = which("node") or "node"
    blocked = tmp / "a-file"  # a path below a file cannot be created, even by root
    blocked.write_text("", encoding="utf-8")
    not_repo = tmp / "not-a-repo"
    not_repo.mkdir()
    found: dict[str, dict[str, Any]] = {
        "command not found": {"command": "mcp-server-postgres-not-installed", "args": ["postgres://db/app"]},
        "node script missing": {"command": node, "args": [str(tmp / "dist/index.js")]},
        "python module missing": {"command": PY, "args": ["-m", "mcp_server_not_installed"]},
        "exits at once": {"command": PY, "args": ["-c", "import sys; sys.exit(3)"]},
        "banner on stdout, then exits": {"command": "echo", "args": ["Welcome to the orders server v1.2"]},
        "wrong password (stderr)": {
            "command": PY,
            "args": [str(FAILING), "--starts", str(tmp / "starts"), "auth-stderr"],
        },
        "wrong API key (initialize error)": {
            "command": PY,
            "args": [str(FAILING), "--starts", str(tmp / "starts"), "auth-initialize"],
        },
    }
    if (NPM / "server-filesystem/dist/index.js").exists():
        filesystem = str(NPM / "server-filesystem/dist/index.js")
        found["filesystem: no directory given"] = {"command": node, "args": [filesystem]}
        found["filesystem: directory does not exist"] = {"command": node, "args": [filesystem, str(tmp / "nope")]}
    if (VENV_BIN / "mcp-server-git").exists():
        git = str(VENV_BIN / "mcp-server-git")
        found["git: not a repository"] = {"command": git, "args": ["--repository", str(not_repo)]}
        found["git: unknown option"] = {"command": git, "args": ["--repo-path", str(not_repo)]}
    if (VENV_BIN / "mcp-server-time").exists():
        found["time: unknown time zone"] = {
            "command": str(VENV_BIN / "mcp-server-time"),
            "args": ["--local-timezone", "Mars/Olympus_Mons"],
        }
    if (VENV_BIN / "database-mcp-sqlite").exists():
        sqlite = str(VENV_BIN / "database-mcp-sqlite")
        found["sqlite: no database given"] = {"command": sqlite, "args": []}
        unwritable = ["--dsn", str(blocked / "app.db")]
        found["sqlite: database on an unwritable path"] = {"command": sqlite, "args": unwritable}
    if FETCH.exists():
        found["fetch server: runs (declares resources it does not list)"] = {"command": node, "args": [str(FETCH)]}
    for spec in found.values():
        spec["connect_timeout_s"] = 15
    return found


def run_case(name: str, spec: dict[str, Any], tmp: Path, code: Path) -> dict[str, Any]:
    config = tmp / "config.json"
    config.write_text(json.dumps({"mcpServers": {"server": spec}}), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(code), "XDG_STATE_HOME": str(tmp / "state")}
    done = subprocess.run(
        [PY, "-m", "resilient_mcp.cli", "check", "--connect", "--config", str(config)],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(tmp),
        timeout=120,
    )
    row: dict[str, Any] = {"case": name, "exit": done.returncode}
    try:
        report = json.loads(done.stdout)["server"]
    except (ValueError, KeyError):
        row["stderr_tail"] = done.stderr[-600:]
        return row
    row |= {"state": report["state"], "error": report["error"], "tools": len(report["tools"])}
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--code", metavar="DIR", default=str(REPO), help="where the resilient_mcp package is")
    args = parser.parse_args()
    OUT.mkdir(exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="startup-failures-") as tmp_dir:
        tmp = Path(tmp_dir)
        for name, spec in cases(tmp).items():
            row = run_case(name, spec, tmp, Path(args.code).resolve())
            rows.append(row)
            print(f"- {name}: exit {row['exit']}, state {row.get('state')}, tools {row.get('tools')}")
            print(f"    {row.get('error') or row.get('stderr_tail')}")
    (OUT / "startup_failures.json").write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
