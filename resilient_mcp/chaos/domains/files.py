"""The files surface: a small file store of every effect class (``--domain files``).

==================  ==================  ==========================================================
tool                effect              notes
==================  ==================  ==========================================================
read_file           read_only           the content as text; with size, version and lines structured
list_dir            read_only           every file under a directory ("/": all), paginated
stat                read_only           has an outputSchema (E2, E5: ``size`` has ``minimum: 0``)
search_files        read_only           files whose content contains ``text``
write_file          write_idempotent    the same content twice = one effect; optional ``version``
                                        precondition (a stale one: D5 aborted)
append_line         write_unsafe        each call appends the line again (committed per path)
move_file           write_unsafe        an existing ``dest``: already_exists (D5)
delete_file         destructive
==================  ==================  ==========================================================

Records live in ``ledger.records["files"]`` keyed by absolute path; commits are counted per path ("append_line:/a").
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types

from ..ledger import Ledger
from ..tools import (
    DESTRUCTIVE,
    NONEMPTY,
    READ,
    WRITE_IDEMPOTENT,
    WRITE_UNSAFE,
    ToolError,
    object_schema,
    ok,
    paged,
    stale,
)

COLLECTION = "files"
NOW = "2026-12-01T10:00:00Z"
PATH = {"type": "string", "pattern": "^/[^\\s]*$", "minLength": 2}
STAT_OUTPUT = object_schema(
    {"path": {"type": "string"}, "size": {"type": "integer", "minimum": 0}, "modified_at": {"type": "string"}},
    ["path", "size", "modified_at"],
)
OP_KEYS = {"write_file": "path", "append_line": "path", "move_file": "src", "delete_file": "path"}
SEED: dict[str, str] = {
    "/notes/todo.txt": "- renew the domain\n- book the venue\n",
    "/notes/meeting.txt": "Agenda: budget, the deadline for the audit\n",
    "/docs/readme.md": "# Handbook\nThe deadline for expense reports is the 5th.\n",
    "/inbox/scan-7.pdf": "%PDF-1.4 scan 7\n",
    "/tmp/old.log": "rotated\n",
}


def record(path: str, content: str, version: int = 1, modified_at: str = "2026-11-30T12:00:00Z") -> dict[str, Any]:
    return {"path": path, "content": content, "version": version, "modified_at": modified_at}


def seed(ledger: Ledger) -> None:
    ledger.records[COLLECTION] = {p: record(p, c) for p, c in SEED.items()}


def tools() -> list[types.Tool]:
    return [*_read_tools(), *_write_tools()]


def _read_tools() -> list[types.Tool]:
    return [
        types.Tool(
            name="read_file",
            description="Read a file (absolute path). Returns its content.",
            input_schema=object_schema({"path": PATH}, ["path"]),
            annotations=READ,
        ),
        types.Tool(
            name="list_dir",
            description="Every file under a directory, recursively ('/' for all), a page at a time.",
            input_schema=object_schema(
                {
                    "dir": {**PATH, "minLength": 1},
                    "cursor": {"type": "string"},
                    "page_size": {"type": "integer", "minimum": 1, "maximum": 100},
                },
                ["dir"],
            ),
            annotations=READ,
        ),
        types.Tool(
            name="stat",
            description="Size and modification time of one file.",
            input_schema=object_schema({"path": PATH}, ["path"]),
            output_schema=STAT_OUTPUT,
            annotations=READ,
        ),
        types.Tool(
            name="search_files",
            description="Files whose content contains `text` (case-insensitive), with the matching lines.",
            input_schema=object_schema({"text": NONEMPTY}, ["text"]),
            annotations=READ,
        ),
    ]


def _write_tools() -> list[types.Tool]:
    return [
        types.Tool(
            name="write_file",
            description="Create or replace a file. Writing the same content again changes nothing. Pass `version` "
            "to write only if the file is still at that version.",
            input_schema=object_schema(
                {"path": PATH, "content": {"type": "string"}, "version": {"type": "integer", "minimum": 1}},
                ["path", "content"],
            ),
            annotations=WRITE_IDEMPOTENT,
        ),
        types.Tool(
            name="append_line",
            description="Append one line to an existing file. Not idempotent: each call appends it again.",
            input_schema=object_schema({"path": PATH, "line": {"type": "string"}}, ["path", "line"]),
            annotations=WRITE_UNSAFE,
        ),
        types.Tool(
            name="move_file",
            description="Move (rename) a file. Fails if `dest` exists.",
            input_schema=object_schema({"src": PATH, "dest": PATH}, ["src", "dest"]),
            annotations=WRITE_UNSAFE,
        ),
        types.Tool(
            name="delete_file",
            description="Delete a file for good.",
            input_schema=object_schema({"path": PATH}, ["path"]),
            annotations=DESTRUCTIVE,
        ),
    ]


def files(ledger: Ledger) -> dict[str, dict[str, Any]]:
    return ledger.collection(COLLECTION)


def size(content: str) -> int:
    return len(content.encode("utf-8"))


def matches(ledger: Ledger, text: str) -> list[dict[str, Any]]:
    """Files whose content contains ``text`` (case-insensitive), with their matching lines, by path."""
    q = text.lower()
    out = []
    for path in sorted(files(ledger)):
        hit = [line for line in files(ledger)[path]["content"].splitlines() if q in line.lower()]
        if hit:
            out.append({"path": path, "lines": hit})
    return out


def under(ledger: Ledger, directory: str) -> list[str]:
    prefix = "/" if directory == "/" else directory.rstrip("/") + "/"
    return sorted(p for p in files(ledger) if p.startswith(prefix))


def _file(ledger: Ledger, path: Any, field: str = "path") -> dict[str, Any]:
    found = files(ledger).get(str(path))
    if found is None:
        raise ToolError("not_found", f"no such file or directory: {path}", field=field)
    return found


def _stat(f: dict[str, Any]) -> dict[str, Any]:
    return {"path": f["path"], "size": size(f["content"]), "modified_at": f["modified_at"]}


def execute(name: str, args: dict[str, Any], ledger: Ledger) -> types.CallToolResult:
    """Run one files tool (its effect happens here). Raises ``ToolError`` for business failures."""
    if name == "read_file":
        f = _file(ledger, args["path"])
        body = {**_stat(f), "version": f["version"], "content": f["content"], "lines": f["content"].splitlines()}
        return ok(f["content"], body)
    if name == "stat":
        st = _stat(_file(ledger, args["path"]))
        return ok(json.dumps(st), st)
    if name == "list_dir":
        paths = under(ledger, str(args["dir"]))
        if not paths:
            raise ToolError("not_found", f"no such file or directory: {args['dir']}", field="dir")
        return paged([_stat(files(ledger)[p]) for p in paths], args, "entries", dir=args["dir"])
    if name == "search_files":
        found = matches(ledger, str(args["text"]))
        return ok(json.dumps({"matches": found}), {"matches": found})
    return _write(name, args, ledger)


def _write(name: str, args: dict[str, Any], ledger: Ledger) -> types.CallToolResult:
    store = files(ledger)
    if name == "write_file":
        path, content, current = str(args["path"]), str(args["content"]), store.get(str(args["path"]))
        if current is not None and current["content"] == content:
            return ok(f"{path} unchanged (same content)", _stat(current))
        if current is not None and "version" in args and int(args["version"]) != current["version"]:
            raise stale("file", args["version"], current["version"])
        version = 1 if current is None else current["version"] + 1
        store[path] = record(path, content, version, NOW)
        ledger.commit(name, path, args)
        return ok(f"wrote {path} ({size(content)} bytes, version {version})", _stat(store[path]))
    if name == "append_line":
        f = _file(ledger, args["path"])
        f.update(content=f["content"] + str(args["line"]) + "\n", version=f["version"] + 1, modified_at=NOW)
        ledger.commit(name, f["path"], args)
        return ok(f"appended 1 line to {f['path']}", _stat(f))
    if name == "move_file":
        f = _file(ledger, args["src"], "src")
        dest = str(args["dest"])
        if dest in store:
            raise ToolError("already_exists", f"{dest} already exists", field="dest", existing_path=dest)
        del store[f["path"]]
        store[dest] = {**f, "path": dest, "modified_at": NOW}
        ledger.commit(name, str(args["src"]), args)
        return ok(f"moved {args['src']} to {dest}", _stat(store[dest]))
    if name == "delete_file":
        f = _file(ledger, args["path"])
        del store[f["path"]]
        ledger.commit(name, f["path"], args)
        return ok(f"deleted {f['path']}", {"path": f["path"], "deleted": True})
    raise ToolError("not_found", f"unknown tool {name}")
