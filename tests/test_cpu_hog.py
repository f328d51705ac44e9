"""``scripts/with-cpu-hog.sh`` (the second CI run's load): busy processes while the command runs, none after."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tests.helpers import pid_running

HOG = Path(__file__).resolve().parent.parent / "scripts" / "with-cpu-hog.sh"


def _hogs(stderr: str) -> list[int]:
    found = re.search(r"with-cpu-hog: \d+ busy process\(es\): ([\d ]+)", stderr)
    assert found, stderr
    return [int(p) for p in found.group(1).split()]


def test_the_hog_busies_n_processes_during_the_command_and_stops_them_after(tmp_path: Path) -> None:
    seen = tmp_path / "seen"
    # The command records which hog pids are alive while it runs.
    cmd = f"ps -eo pid= > {seen}"
    done = subprocess.run(["bash", str(HOG), "-n", "2", "sh", "-c", cmd], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    hogs = _hogs(done.stderr)
    running_then = {int(p) for p in seen.read_text().split()}
    assert len(hogs) == 2 and set(hogs) <= running_then, "both hogs ran while the command did"
    assert not [p for p in hogs if pid_running(p)], "every hog is stopped when the command ends"


def test_the_hog_returns_the_commands_exit_status_and_stops_its_processes_on_failure() -> None:
    done = subprocess.run(
        ["bash", str(HOG), "-n", "1", "sh", "-c", "exit 7"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 7
    assert not [p for p in _hogs(done.stderr) if pid_running(p)]
