"""The wider corpus (issue 19): third-party MCP servers of many kinds, each provoked in its realistic failures.

Installed by ``scripts/install-corpus-servers.sh`` (pinned, under ``.tools/corpus/``). Databases, caches and APIs
run locally (``services.py``): a real PostgreSQL and redis-server on 127.0.0.1, a fake cloud-style HTTP API.
Labels follow LABELS.md ("Conventions for the wider corpus"), from the situation provoked, never from the rules.
"""

from __future__ import annotations

import sqlite3
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from resilient_mcp.policy.config import RemoteUpstream, StdioUpstream

from . import labels as L
from .labels import Gold
from .services import Postgres, Redis, postgres, redis
from .situations import REPO, Case, Source, Workspace, _stdio

CORPUS_TOOLS = REPO / ".tools/corpus"
NPM_MODULES = CORPUS_TOOLS / "npm/node_modules"


def py_bin(venv: str, exe: str) -> Path:
    return CORPUS_TOOLS / "py" / venv / "bin" / exe


def node(package: str, entry: str, *args: str, env: dict[str, str] | None = None) -> StdioUpstream:
    return _stdio("node", str(NPM_MODULES / package / entry), *args, env=env)


# --- labels shared by the kinds -------------------------------------------------------------------------------------


def read_only_mode(*names: str) -> Gold:
    return L.forbidden(*names, why="the server or the service is read-only by configuration: only the admin changes it")


def no_privilege(*names: str) -> Gold:
    return L.forbidden(*names, why="the account lacks the privilege: only the admin can grant it")


def bad_credentials(*names: str) -> Gold:
    return L.custom(
        "F1_unauthenticated", False, "rejected", "ask_user", *names, why="the configured credentials are refused"
    )


def service_down(*names: str, write: bool = False, proven_refused: bool = False) -> Gold:
    safety = "rejected" if proven_refused else "maybe_executed"
    action = "verify_state" if write and not proven_refused else "backoff_retry"
    return L.custom(
        "D1_transient_execution_error",
        True,
        safety,
        action,
        *names,
        why="the service behind the tool is down or busy for now",
    )


def duplicate(*names: str) -> Gold:
    return L.conflict(*names, why="a row with this key already exists: re-read, then decide")


def setup_broken(*names: str, why: str = "the server is configured for something that does not exist") -> Gold:
    return L.server_broken(*names, why=why)


def cancelled_at_limit(*names: str) -> Gold:
    return L.custom(
        "D4_permanent_execution_error",
        False,
        "executed_failed",
        "fix_parameter",
        *names,
        why="the service cancelled it at its own time limit: the same call meets the same limit",
    )


def sql_error(*names: str) -> Gold:
    return L.bad_value("sql" if not names else names[0], *names[1:], why="the database rejected the statement")


# --- reference SQLite server (success-shaped failures) --------------------------------------------------------------


def _shop_db(path: Path) -> None:
    con = sqlite3.connect(path)
    con.executescript(
        "create table if not exists users(id integer primary key, email text unique not null, name text,"
        " age integer check (age >= 0));"
        "create table if not exists orders(id integer primary key,"
        " user_id integer not null references users(id), total real);"
        "insert or ignore into users(id, email, name, age) values (1, 'a@example.com', 'Ann', 31),"
        " (2, 'b@example.com', 'Bo', 40);"
    )
    con.commit()
    con.close()


class SqliteRef(Source):
    name = "sqlite-ref"
    package = "mcp-server-sqlite==2025.4.25"
    kind = "database"
    language = "python"
    effects = {
        "read_query": "read_only",
        "list_tables": "read_only",
        "describe_table": "read_only",
        "write_query": "write_unsafe",
        "create_table": "write_idempotent",
        "append_insight": "write_unsafe",
    }

    def config(self, ws: Workspace) -> StdioUpstream:
        db = ws.root / "sqlite-ref.db"
        _shop_db(db)
        ws.extra["sqlite_ref_db"] = db
        return _stdio(py_bin("sqlite-ref", "mcp-server-sqlite"), "--db-path", str(db))

    def cases(self, ws: Workspace) -> list[Case]:
        out: list[Case] = []

        def shaped(tool: str, args: dict[str, Any], situation: str, gold: Gold, **kw: Any) -> None:
            out.append(Case(tool, args, situation, gold, success_shaped=True, **kw))

        for table in ("customers", "user", "order_items"):
            shaped(
                "read_query", {"query": f"select * from {table}"}, "no_such_table", sql_error("query", "list_tables")
            )
        for col in ("username", "created_at"):
            shaped("read_query", {"query": f"select {col} from users"}, "no_such_column", sql_error("query"))
        for sql in ("selec * from users", "select * from users where"):
            shaped("read_query", {"query": sql}, "syntax_error", sql_error("query"))
        shaped(
            "write_query",
            {"query": "insert into users(id, email, name) values (3, 'a@example.com', 'Al')"},
            "unique_violation",
            duplicate("query", "read_query"),
        )
        shaped(
            "write_query",
            {"query": "insert into users(name) values ('Nobody')"},
            "not_null_violation",
            sql_error("query"),
        )
        shaped(
            "write_query",
            {"query": "update users set age = -1 where id = 1"},
            "check_violation",
            sql_error("query"),
        )
        shaped(
            "create_table",
            {"query": "create table users(id integer primary key)"},
            "table_exists",
            L.conflict("query", "list_tables"),
        )

        def lock(ws: Workspace) -> None:
            _hold_sqlite_lock(ws, ws.extra["sqlite_ref_db"])

        def unlock(ws: Workspace) -> None:
            _release_sqlite_lock(ws)

        shaped(
            "write_query",
            {"query": "update users set name = 'Ann B' where id = 1"},
            "database_locked",
            service_down("query", write=True, proven_refused=True),
            before=lock,
            timeout_s=30,
        )
        shaped(
            "read_query",
            {"query": "select * from users"},
            "database_locked_read",
            service_down("query", proven_refused=True),
            timeout_s=30,
        )
        out.append(Case("read_query", {}, "missing_query", L.missing_arg("query"), before=unlock))
        out.append(Case("read_query", {"query": 42}, "query_wrong_type", L.schema("query")))
        return out


def _hold_sqlite_lock(ws: Workspace, db: Path) -> None:
    """An exclusive lock on the database from another process, as a second writer holds it."""
    script = (
        "import sqlite3, sys; c = sqlite3.connect(sys.argv[1], isolation_level=None);"
        " c.execute('begin exclusive'); print('locked', flush=True); sys.stdin.read()"
    )
    proc = subprocess.Popen(
        ["python3", "-c", script, str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    proc.stdout.readline()
    ws.extra["lock_proc"] = proc


def _release_sqlite_lock(ws: Workspace) -> None:
    proc: subprocess.Popen[str] | None = ws.extra.pop("lock_proc", None)
    if proc is not None:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(10)


# --- PostgreSQL: the reference server (read-only transactions) ------------------------------------------------------


class PostgresRef(Source):
    """``@modelcontextprotocol/server-postgres``: one ``query`` tool that runs in a READ ONLY transaction."""

    name = "postgres-ref"
    server = "postgres-ref"
    package = "@modelcontextprotocol/server-postgres@0.6.2"
    kind = "database"
    language = "node"
    effects = {"query": "read_only"}
    variant = "app"

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        with postgres(ws.root / self.name) as pg:
            ws.extra["pg"] = pg
            yield node("@modelcontextprotocol/server-postgres", "dist/index.js", self.url(pg))

    def url(self, pg: Postgres) -> str:
        return pg.url()

    def cases(self, ws: Workspace) -> list[Case]:
        return [Case("query", {"sql": sql}, situation, gold) for sql, situation, gold in pg_read_cases("sql")]


def pg_read_cases(arg: str) -> list[tuple[str, str, Gold]]:
    """Statements that fail in PostgreSQL itself, by SQLSTATE, for any server that passes SQL through."""
    lookup = sql_error(arg)
    out: list[tuple[str, str, Gold]] = []
    for table in ("customers", "order_items", "users2"):
        out.append((f"select * from {table}", "undefined_table", lookup))
    for col in ("username", "created_at"):
        out.append((f"select {col} from users", "undefined_column", lookup))
    for sql in ("selec * from users", "select * from users where", "select count(* from orders"):
        out.append((sql, "syntax_error", lookup))
    out.append(("select 'abc'::int", "invalid_text_representation", lookup))
    out.append(("select 1 / (count(*) - count(*)) from users", "division_by_zero", lookup))
    out.append(("select id from users join orders on true", "ambiguous_column", lookup))
    out.append(("select lower(42, 1)", "undefined_function", lookup))
    out.append(("select * from secrets", "insufficient_privilege", no_privilege(arg)))
    return out


def pg_write_cases(arg: str) -> list[tuple[str, str, Gold]]:
    return [
        ("insert into users(email, name) values ('a@example.com', 'Al')", "unique_violation", duplicate(arg)),
        ("insert into users(name) values ('Nobody')", "not_null_violation", sql_error(arg)),
        ("update users set age = -3 where id = 1", "check_violation", sql_error(arg)),
        ("insert into orders(user_id, total) values (999, 1)", "foreign_key_violation", sql_error(arg)),
        ("insert into orders(user_id, total) values (1, 1234567.891)", "numeric_value_out_of_range", sql_error(arg)),
    ]


def pg_readonly_cases(arg: str) -> list[tuple[str, str, Gold]]:
    return [
        ("insert into users(email) values ('c@example.com')", "read_only_transaction", read_only_mode(arg)),
        ("update users set name = 'X' where id = 1", "read_only_transaction", read_only_mode(arg)),
        ("delete from orders", "read_only_transaction", read_only_mode(arg)),
        ("create table t(x int)", "read_only_transaction", read_only_mode(arg)),
    ]


class PostgresRefWrites(PostgresRef):
    name = "postgres-ref-writes"

    def cases(self, ws: Workspace) -> list[Case]:
        return [Case("query", {"sql": sql}, situation, gold) for sql, situation, gold in pg_readonly_cases("sql")]


class PostgresRefSlow(PostgresRef):
    """Connected as a role whose statement_timeout is 300 ms."""

    name = "postgres-ref-slow"

    def url(self, pg: Postgres) -> str:
        return pg.url("slow", "slow-secret")

    def cases(self, ws: Workspace) -> list[Case]:
        return [
            Case("query", {"sql": sql}, "statement_timeout", cancelled_at_limit("sql"))
            for sql in ("select pg_sleep(3)", "select count(*) from generate_series(1, 300000000)")
        ]


class PostgresRefBadAuth(PostgresRef):
    """A wrong password: the server lists its resources (tables) while the proxy starts it, and fails there."""

    name = "postgres-ref-badauth"
    startup = ("startup_password_authentication_failed", bad_credentials())

    def url(self, pg: Postgres) -> str:
        return pg.url("app", "wrong-password")


class PostgresRefNoDb(PostgresRef):
    name = "postgres-ref-nodb"
    startup = ("startup_database_does_not_exist", setup_broken())

    def url(self, pg: Postgres) -> str:
        return pg.url(db="shop_archive")


class PostgresRefDown(PostgresRef):
    """The database stops while the server runs: every query meets a refused connection."""

    name = "postgres-ref-down"

    def cases(self, ws: Workspace) -> list[Case]:
        def stop(ws: Workspace) -> None:
            ws.extra["pg"].stop()

        return [
            Case("query", {"sql": "select * from users"}, "database_down", service_down("sql"), before=stop),
            Case("query", {"sql": "select count(*) from orders"}, "database_down", service_down("sql")),
        ]


# --- Redis: the reference server and Redis's own server -------------------------------------------------------------


def _fill_memory(r: Redis) -> None:
    r.cli("eval", "for i=1,200000 do redis.call('set','fill:'..i,string.rep('x',200)) end", "0")


class RedisRef(Source):
    name = "redis-ref"
    package = "@modelcontextprotocol/server-redis@2025.4.25"
    kind = "cache"
    language = "node"
    effects = {"get": "read_only", "list": "read_only", "set": "write_idempotent", "delete": "write_idempotent"}

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        with redis(ws.root) as r:
            r.cli("rpush", "queue:jobs", "a", "b")
            r.cli("hset", "user:1", "name", "Ann")
            r.cli("sadd", "tags", "x")
            ws.extra["redis"] = r
            yield node("@modelcontextprotocol/server-redis", "dist/index.js", r.url())

    def cases(self, ws: Workspace) -> list[Case]:
        wrongtype = L.bad_value("key", why="the key holds another type than this command reads")
        out = [Case("get", {"key": key}, "wrongtype", wrongtype) for key in ("queue:jobs", "user:1", "tags")]
        out.append(
            Case("set", {"key": "k", "value": "v", "expireSeconds": -5}, "invalid_expire", L.bad_value("expireSeconds"))
        )
        out.append(
            Case(
                "set",
                {"key": "k", "value": "v", "expireSeconds": 1.5},
                "expire_not_integer",
                L.bad_value("expireSeconds"),
            )
        )
        out.append(Case("get", {}, "missing_key", L.missing_arg("key")))
        out.append(Case("set", {"key": "k", "value": 5}, "value_wrong_type", L.schema("value")))
        oom = L.custom(
            "F3_quota_exhausted", False, "rejected", "ask_user", why="the cache is full (maxmemory, noeviction)"
        )
        out.append(
            Case(
                "set", {"key": "big", "value": "x" * 100}, "oom", oom, before=lambda ws: _fill_memory(ws.extra["redis"])
            )
        )
        out.append(Case("set", {"key": "new:1", "value": "v"}, "oom", oom))
        out.append(Case("call_redis", {"cmd": "PING"}, "unknown_tool", L.unknown_tool("get", "set")))
        return out


class RedisPy(Source):
    """Redis's own ``redis-mcp-server`` (Python), configured by environment."""

    name = "redis-py"
    package = "redis-mcp-server==0.5.1"
    kind = "cache"
    language = "python"
    password: str | None = None
    effects: dict[str, str] = {}

    def effect(self, tool: str) -> str:
        reads = ("get", "hget", "hgetall", "lrange", "llen", "smembers", "scan", "type", "info", "dbsize", "json_get")
        return "read_only" if tool.startswith(reads) or tool in reads else "write_idempotent"

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        with redis(ws.root) as r:
            r.cli("rpush", "queue:jobs", "a", "b")
            r.cli("set", "greeting", "hello")
            r.cli("hset", "user:1", "name", "Ann")
            ws.extra["redis"] = r
            env = {"REDIS_HOST": "127.0.0.1", "REDIS_PORT": str(r.port), "REDIS_PWD": self.password or r.password}
            yield _stdio(py_bin("redis-py", "redis-mcp-server"), env=env)

    def cases(self, ws: Workspace) -> list[Case]:
        wrongtype = L.bad_value("key", why="the key holds another type than this command reads")
        out = [
            Case("hget", {"name": "greeting", "key": "name"}, "wrongtype", wrongtype),
            Case("lrange", {"name": "user:1", "start": 0, "stop": -1}, "wrongtype", wrongtype),
            Case("hset", {"name": "queue:jobs", "key": "a", "value": "b"}, "wrongtype", wrongtype),
            Case("get", {}, "missing_key", L.missing_arg("key")),
            Case("lrange", {"name": "queue:jobs", "start": "first", "stop": -1}, "bad_index_type", L.schema("start")),
        ]
        oom = L.custom(
            "F3_quota_exhausted", False, "rejected", "ask_user", why="the cache is full (maxmemory, noeviction)"
        )
        out.append(
            Case("set", {"key": "big", "value": "x"}, "oom", oom, before=lambda ws: _fill_memory(ws.extra["redis"]))
        )
        out.append(Case("hset", {"name": "h2", "key": "a", "value": "b"}, "oom", oom))
        out.append(Case("no_such_command", {}, "unknown_tool", L.unknown_tool("get")))
        return out


class RedisPyBadAuth(RedisPy):
    name = "redis-py-badauth"
    server = "redis-py"
    password = "wrong-password"

    def cases(self, ws: Workspace) -> list[Case]:
        return [
            Case("get", {"key": "greeting"}, "wrong_password", bad_credentials()),
            Case("set", {"key": "k", "value": "v"}, "wrong_password", bad_credentials()),
            Case("dbsize", {}, "wrong_password", bad_credentials()),
        ]


class RedisPyDown(RedisPy):
    name = "redis-py-down"
    server = "redis-py"

    def cases(self, ws: Workspace) -> list[Case]:
        def stop(ws: Workspace) -> None:
            ws.extra["redis"].stop()

        return [
            Case("get", {"key": "greeting"}, "redis_down", service_down("key"), before=stop),
            Case("set", {"key": "k", "value": "v"}, "redis_down", service_down("key", write=True)),
        ]


# --- DuckDB ---------------------------------------------------------------------------------------------------------


def _duck_db(path: Path) -> None:
    script = (
        "import duckdb, sys; c = duckdb.connect(sys.argv[1]);"
        ' c.execute("create table users(id integer primary key, email varchar unique not null, name varchar)");'
        " c.execute(\"insert into users values (1, 'a@example.com', 'Ann'), (2, 'b@example.com', 'Bo')\");"
        " c.close()"
    )
    subprocess.run([str(py_bin("duckdb", "python")), "-c", script, str(path)], check=True)


class DuckDb(Source):
    name = "duckdb"
    package = "mcp-server-duckdb==1.1.0"
    kind = "database"
    language = "python"
    effects = {"query": "write_unsafe"}
    readonly = False

    def config(self, ws: Workspace) -> StdioUpstream:
        db = ws.root / f"{self.name}.duckdb"
        _duck_db(db)
        ws.extra[f"{self.name}_db"] = db
        flags = ["--readonly"] if self.readonly else []
        return _stdio(py_bin("duckdb", "mcp-server-duckdb"), "--db-path", str(db), *flags)

    def cases(self, ws: Workspace) -> list[Case]:
        q = "query"
        out = [
            Case("query", {q: "select * from customers"}, "undefined_table", sql_error(q)),
            Case("query", {q: "select * from orderz"}, "undefined_table", sql_error(q)),
            Case("query", {q: "select username from users"}, "undefined_column", sql_error(q)),
            Case("query", {q: "selec * from users"}, "syntax_error", sql_error(q)),
            Case("query", {q: "select * from users where"}, "syntax_error", sql_error(q)),
            Case("query", {q: "select 'abc'::integer"}, "conversion_error", sql_error(q)),
            Case("query", {q: "select no_such_fn(1)"}, "undefined_function", sql_error(q)),
            Case("query", {q: "insert into users values (3, 'a@example.com', 'Al')"}, "unique_violation", duplicate(q)),
            Case(
                "query",
                {q: "insert into users values (1, 'c@example.com', 'Cy')"},
                "primary_key_violation",
                duplicate(q),
            ),
            Case("query", {q: "insert into users(id, name) values (4, 'Nobody')"}, "not_null_violation", sql_error(q)),
            Case("query", {q: "select * from read_csv('/nonexistent/data.csv')"}, "file_not_found", L.not_found(q)),
            Case("query", {}, "missing_query", L.missing_arg(q)),
        ]
        return out


class DuckDbReadOnly(DuckDb):
    name = "duckdb-readonly"
    server = "duckdb"
    readonly = True

    def cases(self, ws: Workspace) -> list[Case]:
        return [
            Case("query", {"query": sql}, "read_only_mode", read_only_mode("query"))
            for sql in (
                "insert into users values (5, 'e@example.com', 'Ed')",
                "drop table users",
                "create table t(x int)",
            )
        ]


# --- a shell server -------------------------------------------------------------------------------------------------


class Shell(Source):
    name = "shell"
    package = "mcp-shell-server==1.1.14"
    kind = "shell"
    language = "python"
    effects = {"shell_execute": "write_unsafe"}

    def config(self, ws: Workspace) -> StdioUpstream:
        env = {"ALLOW_COMMANDS": "ls,cat,echo,grep,wc,head,sleep,mkdir,cp"}
        return _stdio(py_bin("shell", "mcp-shell-server"), env=env)

    def cases(self, ws: Workspace) -> list[Case]:
        fs = str(ws.fs)
        refused = L.sandbox("command", why="the server allows only its configured commands: use one of them")
        out = [
            Case("shell_execute", {"command": c, "directory": fs}, "command_not_allowed", refused)
            for c in (
                ["rm", "-rf", "docs"],
                ["python3", "-c", "print(1)"],
                ["curl", "http://127.0.0.1/"],
                ["bash", "-c", "ls"],
            )
        ]
        out.append(
            Case(
                "shell_execute", {"command": ["ls", ";", "rm", "x"], "directory": fs}, "shell_operator_refused", refused
            )
        )
        ran = L.bad_value("command", why="the command ran and failed: change the command or its arguments")
        ran_read = L.custom(
            "B4_semantic_argument_rejection",
            False,
            "executed_failed",
            "fix_parameter",
            "command",
            why="a read-only command ran and failed: change its arguments",
        )
        for c in (
            ["cat", "missing.txt"],
            ["ls", "nope"],
            ["grep", "-r", "zzz", "nope"],
            ["head", "-n", "x", "docs/notes.txt"],
        ):
            out.append(
                Case("shell_execute", {"command": c, "directory": fs}, "command_failed", ran_read, success_shaped=True)
            )
        out.append(
            Case(
                "shell_execute",
                {"command": ["mkdir", "docs"], "directory": fs},
                "command_failed_write",
                L.custom("B4_semantic_argument_rejection", False, "maybe_executed", "verify_state", "command"),
                success_shaped=True,
            )
        )
        del ran
        out.append(
            Case(
                "shell_execute",
                {"command": ["ls"], "directory": "/nonexistent/dir"},
                "directory_missing",
                L.not_found("directory"),
            )
        )
        out.append(
            Case(
                "shell_execute",
                {"command": ["sleep", "5"], "directory": fs, "timeout": 1},
                "command_timeout",
                L.custom(
                    "D4_permanent_execution_error",
                    False,
                    "maybe_executed",
                    "verify_state",
                    "timeout",
                    why="the server killed the command at its time limit",
                ),
            )
        )
        out.append(Case("shell_execute", {"command": [], "directory": fs}, "empty_command", L.bad_value("command")))
        out.append(Case("shell_execute", {"directory": fs}, "missing_command", L.missing_arg("command")))
        out.append(
            Case("shell_execute", {"command": "ls -la", "directory": fs}, "command_not_array", L.schema("command"))
        )
        return out


# --- Word documents -------------------------------------------------------------------------------------------------


class Word(Source):
    name = "word"
    package = "office-word-mcp-server==1.1.11"
    kind = "office"
    language = "python"
    effects: dict[str, str] = {}

    def effect(self, tool: str) -> str:
        return "read_only" if tool.startswith(("get_", "list_", "find_")) else "write_unsafe"

    def config(self, ws: Workspace) -> StdioUpstream:
        docs = ws.root / "word"
        docs.mkdir(exist_ok=True)
        (docs / "broken.docx").write_bytes(b"PK\x03\x04 this is not really a zip archive")
        (docs / "notes.txt").write_text("plain text, not a document\n")
        ws.extra["word_dir"] = docs
        cfg = _stdio(py_bin("word", "word_mcp_server"))
        return cfg.model_copy(update={"cwd": str(docs)})

    def cases(self, ws: Workspace) -> list[Case]:
        d = ws.extra.get("word_dir", ws.root / "word")
        lookup = ("list_available_documents",)
        out = [
            Case("get_document_text", {"filename": str(d / "report.docx")}, "document_missing", L.not_found(*lookup)),
            Case(
                "get_document_info", {"filename": str(d / "q3/summary.docx")}, "document_missing", L.not_found(*lookup)
            ),
            Case(
                "add_paragraph",
                {"filename": str(d / "absent.docx"), "text": "x"},
                "document_missing",
                L.not_found(*lookup),
            ),
            Case(
                "get_document_text",
                {"filename": str(d / "broken.docx")},
                "document_corrupt",
                setup_broken("filename", why="the file is not a valid Word document"),
            ),
            Case(
                "get_document_outline",
                {"filename": str(d / "notes.txt")},
                "not_a_document",
                L.bad_value("filename", "list_available_documents"),
            ),
        ]
        made = str(d / "made.docx")
        out.append(
            Case(
                "delete_paragraph",
                {"filename": made, "paragraph_index": 99},
                "paragraph_index_out_of_range",
                L.bad_value("paragraph_index", "get_document_text"),
                before=lambda ws: _make_docx(ws, made),
            )
        )
        out.append(
            Case(
                "format_table",
                {"filename": made, "table_index": 3},
                "table_index_out_of_range",
                L.bad_value("table_index"),
            )
        )
        out.append(
            Case(
                "add_heading",
                {"filename": made, "text": "T", "level": 42},
                "heading_level_out_of_range",
                L.bad_value("level"),
            )
        )
        out.append(
            Case("unprotect_document", {"filename": made, "password": "guess"}, "not_protected", L.conflict("filename"))
        )
        out.append(Case("get_document_text", {}, "missing_filename", L.missing_arg("filename")))
        out.append(Case("add_table", {"filename": made, "rows": "two", "cols": 2}, "rows_wrong_type", L.schema("rows")))
        return out


def _make_docx(ws: Workspace, path: str) -> None:
    script = "import docx, sys; d = docx.Document(); d.add_paragraph('hello'); d.save(sys.argv[1])"
    subprocess.run([str(py_bin("word", "python")), "-c", script, path], check=True)


SOURCES: list[Source] = [
    SqliteRef(),
    PostgresRef(),
    PostgresRefWrites(),
    PostgresRefSlow(),
    PostgresRefBadAuth(),
    PostgresRefNoDb(),
    PostgresRefDown(),
    RedisRef(),
    RedisPy(),
    RedisPyBadAuth(),
    RedisPyDown(),
    DuckDb(),
    DuckDbReadOnly(),
    Shell(),
    Word(),
]
