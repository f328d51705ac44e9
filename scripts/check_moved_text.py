"""Every paragraph of a document at an older commit survives somewhere in the current documents: a check for moves.

    python scripts/check_moved_text.py REV [PATH]     # PATH defaults to README.md

A paragraph is a block between blank lines; table rows and the lines of code blocks count one by one. Text is
compared with whitespace collapsed, link targets and heading marks dropped (a moved paragraph's relative links and
heading level change). What is missing is printed with its line number at REV; the exit code is 1 when something
is. The current documents are the README, CHANGELOG.md, docs/*.md and benchmarks/*.md of the working tree.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def normal(text: str) -> str:
    """Whitespace collapsed, ``](target)`` reduced to ``]``, headings without their ``#`` marks: the words of a text,
    not its layout, links or heading levels."""
    text = "\n".join(line.lstrip("#") if line.startswith("#") else line for line in text.splitlines())
    out: list[str] = []
    i = 0
    while i < len(text):
        if text.startswith("](", i):
            end = text.find(")", i)
            if end > 0:
                out.append("]")
                i = end + 1
                continue
        out.append(text[i])
        i += 1
    return " ".join("".join(out).split())


def units(text: str) -> list[tuple[int, str]]:
    """(line number, text) of every paragraph, table row and code line."""
    found: list[tuple[int, str]] = []
    block: list[str] = []
    start = 0
    fenced = False

    def flush() -> None:
        if block:
            found.append((start, "\n".join(block)))
            block.clear()

    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            flush()
            fenced = not fenced
            continue
        if fenced or line.startswith("|"):
            flush()
            if line.strip():
                found.append((n, line))
            continue
        if not line.strip():
            flush()
            continue
        if not block:
            start = n
        block.append(line)
    flush()
    return found


def current_documents(root: Path) -> str:
    paths = [root / "README.md", root / "CHANGELOG.md", *sorted((root / "docs").glob("*.md"))]
    paths += sorted((root / "benchmarks").glob("*.md"))
    return "\n".join(normal(p.read_text(encoding="utf-8")) for p in paths if p.exists())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("rev", help="the commit the document is read at")
    parser.add_argument("path", nargs="?", default="README.md")
    args = parser.parse_args(argv)
    old = subprocess.run(
        ["git", "show", f"{args.rev}:{args.path}"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    now = current_documents(ROOT)
    missing = [(n, unit) for n, unit in units(old) if normal(unit) not in now]
    for n, unit in missing:
        print(f"{args.path}:{n} at {args.rev}: not found\n    " + unit.replace("\n", "\n    "))
    total = len(units(old))
    print(f"{total - len(missing)} of {total} paragraphs, table rows and code lines found", file=sys.stderr)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
