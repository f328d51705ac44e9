"""Issue 10, defect 8 (part): an empty policy file and a corrupt state database.

An empty policy file was a valid policy that set nothing, so an editor that truncates a file before writing it
lifted every deny for a moment (the watcher reloads it). Now an empty (or comments-only) file is refused: at startup
it is a configuration error, on reload the last good policy stays. ``{}`` is still the empty policy, on purpose.
A corrupt state database gave a 60-line traceback; now one line naming the file and what to do, exit code 2.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from resilient_mcp.policy import Policy
from resilient_mcp.policy.files import PolicyWatcher, load_policy
from resilient_mcp.policy.source import SourceError
from resilient_mcp.state import schema as sql
from tests.helpers import child_env, proxy_argv

HOSTILE = Path(__file__).with_name("hostile_upstream.py")
EXIT_S = 60.0
DENY = 'deny: ["delete_*"]\n'


def _denied(policy: Policy, tool: str) -> bool:
    return not policy.is_visible("up", tool, tool)


@pytest.mark.parametrize("text", ["", "\n  \n", "# all rules removed for now\n"], ids=["empty", "blank", "comments"])
def test_an_empty_policy_file_is_refused_not_read_as_a_policy_without_denies(tmp_path: Path, text: str) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(text)
    with pytest.raises(SourceError, match="empty"):
        load_policy([path])
    path.write_text("{}\n")
    load_policy([path])  # the empty policy, written on purpose


def test_a_policy_file_truncated_while_being_rewritten_keeps_its_denies(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(DENY)
    applied = []
    watcher = PolicyWatcher(lambda: [path], applied.append)
    current = load_policy([path])
    assert _denied(current, "delete_all")

    path.write_text("")  # the editor truncates ...
    os.utime(path, ns=(1, 1))
    assert watcher.check_now() is False  # changed: read once it stays the same for one check
    assert watcher.check_now() is False
    assert applied == [] and watcher.rejected == 1

    path.write_text('deny: ["delete_*", "drop_*"]\n')  # ... then writes
    assert watcher.check_now() is False
    assert watcher.check_now() is True
    assert _denied(applied[-1], "delete_all") and _denied(applied[-1], "drop_table")


def test_a_policy_file_written_in_place_in_two_chunks_is_read_only_once_whole(tmp_path: Path) -> None:
    """Issue 20.15: the first chunk parses as a valid policy without the second chunk's deny; it is never applied."""
    path = tmp_path / "policy.yaml"
    path.write_text(DENY)
    applied: list[Policy] = []
    watcher = PolicyWatcher(lambda: [path], applied.append)

    with path.open("w") as out:  # in place: truncated, then written in two chunks with a poll between them
        out.write("observations: {level: L2}\n")
        out.flush()
        assert watcher.check_now() is False
        out.write('deny: ["delete_*", "drop_*"]\n')
        out.flush()
        assert watcher.check_now() is False
    assert watcher.check_now() is True  # unchanged since the last check: read whole
    assert applied and all(_denied(policy, "delete_all") for policy in applied)
    assert _denied(applied[-1], "drop_table")
    assert watcher.check_now() is False and len(applied) == 1


def test_a_corrupt_state_database_is_one_line_naming_the_file_and_exit_code_2(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / "state.sqlite3").write_bytes(b"this is not a database" * 1000)
    done = subprocess.run(
        proxy_argv("wrap", "--state-dir", str(state), "--", sys.executable, str(HOSTILE)),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=EXIT_S,
        env=child_env(),
        check=False,
    )
    lines = [line for line in done.stderr.decode().splitlines() if line.strip()]
    assert done.returncode == 2, done.stderr.decode()[-2000:]
    assert len(lines) == 1, lines
    assert str(state / "state.sqlite3") in lines[0] and "Move that file aside" in lines[0]
    assert "Traceback" not in lines[0]


def test_a_state_database_damaged_in_the_middle_is_the_same_one_line(tmp_path: Path) -> None:
    """Issue 20.15: a valid header and schema, garbage pages in the middle: three tracebacks before (the prune on
    open, the worker's maintenance, the task group), now the one line and exit code 2."""
    state = tmp_path / "state"
    path = state / "state.sqlite3"
    conn, _ = sql.connect(f"file:{path}", path)
    rows = [(f"key{i:06d}", "h" * 64, "t", "completed", "x" * 200, 0.0, float(i)) for i in range(2000)]
    conn.executemany("INSERT INTO idempotency VALUES (?,?,?,?,?,?,?)", rows)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    size = path.stat().st_size
    with path.open("r+b") as db:
        db.seek(size // 2)
        db.write(b"\xde\xad\xbe\xef" * 4096)
    done = subprocess.run(
        proxy_argv("wrap", "--state-dir", str(state), "--", sys.executable, str(HOSTILE)),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=EXIT_S,
        env=child_env(),
        check=False,
    )
    lines = [line for line in done.stderr.decode().splitlines() if line.strip() and '"upstream"' not in line]
    assert done.returncode == 2, done.stderr.decode()[-2000:]
    assert len(lines) == 1, lines
    assert "malformed" in lines[0] and str(path) in lines[0] and "Move that file aside" in lines[0]
