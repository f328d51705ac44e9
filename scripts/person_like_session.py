"""Hours of a person's use of one MCP server through ``resilient-mcp wrap``, compressed, with the defaults.

Two "windows" (two proxy processes with one client name and one state directory) in front of the reference
filesystem server edit files the way a person does: save, change, change back, save the same text again, two windows
saving the same text, rename, make directories, read; every few rounds a window is closed and reopened (a restart).
After every write the file on disk is compared with what was meant. Prints one JSON summary line: calls, writes,
lost intended writes (the disk differs from the last write the person made), refusals by the proxy, replays.

    python scripts/person_like_session.py [--rounds 12] [--edits 40]

Needs node and ``scripts/install-peers.sh`` (server-filesystem). Exits 1 when a write was lost or refused.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

REPO = Path(__file__).resolve().parent.parent
FILESYSTEM = REPO / ".tools/npm/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
REPLAY_META = "io.github.resilient-mcp/replay"


class Tally:
    def __init__(self) -> None:
        self.calls = self.writes = self.lost = self.refused = self.replays = self.restarts = 0
        self.problems: list[str] = []

    def result(self, what: str, result: types.CallToolResult) -> None:
        self.calls += 1
        if REPLAY_META in (result.meta or {}):
            self.replays += 1
        if result.is_error:
            self.refused += 1
            text = " ".join(c.text for c in result.content if isinstance(c, types.TextContent))
            self.problems.append(f"{what}: {text[:200]}")


def window(root: Path, state: Path, log: Any) -> Client:
    node = shutil.which("node") or "node"
    argv = [sys.executable, "-m", "resilient_mcp.cli", "wrap", "--state-dir", str(state), "--", node, str(FILESYSTEM)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    params = StdioServerParameters(command=argv[0], args=[*argv[1:], str(root)], env=env, cwd=REPO)
    info = types.Implementation(name="claude-ai", version="1.0")
    return Client(stdio_client(params, errlog=log), mode="legacy", cache=None, client_info=info)


def _read(path: Path) -> str | None:
    return path.read_text(encoding="utf-8") if path.exists() else None


async def write(client: Client, tally: Tally, path: Path, content: str) -> None:
    result = await client.call_tool("write_file", {"path": str(path), "content": content})
    tally.result(f"write {path.name}={content!r}", result)
    tally.writes += 1
    on_disk = await anyio.to_thread.run_sync(_read, path)
    if on_disk != content:
        tally.lost += 1
        tally.problems.append(f"lost: {path.name} meant {content!r}, disk has {on_disk!r}")


async def session(rounds: int, edits: int, seed: int) -> Tally:
    rng = random.Random(seed)
    tally = Tally()
    with tempfile.TemporaryDirectory(prefix="person-like-") as tmp:
        base = Path(tmp)
        root, state = base / "files", base / "state"
        root.mkdir()
        with (base / "a.stderr").open("w") as log_a, (base / "b.stderr").open("w") as log_b:
            async with AsyncExitStack() as outer:
                b = await outer.enter_async_context(window(root, state, log_b))
                for r in range(rounds):
                    async with window(root, state, log_a) as a:  # window A is reopened every round: a restart
                        tally.restarts += r > 0
                        notes, todo = root / "notes.txt", root / "todo.md"
                        for i in range(edits):
                            kind = rng.choice(["flip", "same", "both", "todo", "read", "rename", "mkdir"])
                            if kind == "flip":  # change and change back
                                await write(a, tally, notes, "v1")
                                await write(a, tally, notes, "v2")
                                await write(a, tally, notes, "v1")
                            elif kind == "same":  # save twice without a change, quickly
                                await write(a, tally, notes, f"draft {r}")
                                await write(a, tally, notes, f"draft {r}")
                            elif kind == "both":  # the two windows save the same text, then one changes it
                                await write(a, tally, todo, "- [ ] ship")
                                await write(b, tally, todo, "- [ ] ship")
                                await write(b, tally, todo, "- [x] ship")
                            elif kind == "todo":
                                await write(b, tally, todo, f"- [ ] item {i}")
                            elif kind == "read":
                                tally.result("read", await a.call_tool("read_text_file", {"path": str(notes)}))
                            elif kind == "rename":
                                await write(a, tally, root / "tmp.txt", "scratch")
                                moved = await a.call_tool(
                                    "move_file", {"source": str(root / "tmp.txt"), "destination": str(root / "old.txt")}
                                )
                                tally.result("move", moved)
                                (root / "old.txt").unlink(missing_ok=True)
                                await write(a, tally, root / "tmp.txt", "scratch")  # the same file again
                            else:
                                made = await a.call_tool("create_directory", {"path": str(root / "dir")})
                                tally.result("mkdir", made)
    return tally


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--edits", type=int, default=40)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    started = time.monotonic()
    tally = anyio.run(session, args.rounds, args.edits, args.seed)
    summary = {
        "rounds": args.rounds,
        "calls": tally.calls,
        "writes": tally.writes,
        "restarts": tally.restarts,
        "lost_intended_writes": tally.lost,
        "refused_by_proxy": tally.refused,
        "replays": tally.replays,
        "seconds": round(time.monotonic() - started, 1),
        "problems": tally.problems[:10],
    }
    sys.stdout.write(json.dumps(summary) + "\n")
    return 1 if tally.lost or tally.refused else 0


if __name__ == "__main__":
    raise SystemExit(main())
