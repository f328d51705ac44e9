"""The wider corpus (issue 19): third-party MCP servers of many kinds, each provoked in its realistic failures.

Installed by ``scripts/install-corpus-servers.sh`` (pinned, under ``.tools/corpus/``). Databases, caches and APIs
run locally (``services.py``): a real PostgreSQL and redis-server on 127.0.0.1, a fake cloud-style HTTP API.
Labels follow LABELS.md ("Conventions for the wider corpus"), from the situation provoked, never from the rules.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import subprocess
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from resilient_mcp.policy.config import RemoteUpstream, StdioUpstream

from . import labels as L
from .labels import Gold
from .services import Postgres, Redis, fake_api, free_port, postgres, redis
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
            out.append(Case(tool, args, situation, gold, **kw))

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
    """A wrong password. The server lists its resources (tables) while it is started: the proxy keeps its tools usable
    when that list fails, and the calls meet the error."""

    name = "postgres-ref-badauth"

    def url(self, pg: Postgres) -> str:
        return pg.url("app", "wrong-password")

    def cases(self, ws: Workspace) -> list[Case]:
        return [
            Case("query", {"sql": sql}, "password_authentication_failed", bad_credentials())
            for sql in ("select 1", "select * from users")
        ]


class PostgresRefNoDb(PostgresRef):
    name = "postgres-ref-nodb"

    def url(self, pg: Postgres) -> str:
        return pg.url(db="shop_archive")

    def cases(self, ws: Workspace) -> list[Case]:
        return [
            Case("query", {"sql": sql}, "database_does_not_exist", setup_broken())
            for sql in ("select 1", "select * from users")
        ]


class PostgresRefDown(PostgresRef):
    """The database stops while the server runs: every query meets a refused connection."""

    name = "postgres-ref-down"

    def cases(self, ws: Workspace) -> list[Case]:
        lost = L.custom("C2_connection_lost_after_send", True, "maybe_executed", "backoff_retry", "sql")

        def stop(ws: Workspace) -> None:
            ws.extra["pg"].stop()

        return [
            # The server's pool error is unhandled: the MCP server process exits with the database (text reviewed).
            Case("query", {"sql": "select * from users"}, "database_down_server_exits", lost, before=stop),
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


class RedisRefReplica(RedisRef):
    name = "redis-ref-replica"
    server = "redis-ref"

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        with redis(ws.root) as primary, redis(ws.root, replica_of=primary) as replica:
            yield node("@modelcontextprotocol/server-redis", "dist/index.js", replica.url())

    def cases(self, ws: Workspace) -> list[Case]:
        return [
            Case("set", {"key": "k", "value": "v"}, "write_to_replica", read_only_mode("key")),
            Case("delete", {"key": "greeting"}, "write_to_replica", read_only_mode("key")),
        ]


class RedisRefBusy(RedisRef):
    name = "redis-ref-busy"
    server = "redis-ref"

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        async with super().started(ws) as config:
            try:
                yield config
            finally:
                _end_busy_script(ws)

    def cases(self, ws: Workspace) -> list[Case]:
        busy = service_down("key", proven_refused=True)
        return [
            Case("get", {"key": "queue:jobs"}, "busy_script", busy, before=_start_busy_script),
            Case("set", {"key": "k", "value": "v"}, "busy_script", busy),
        ]


def _start_busy_script(ws: Workspace) -> None:
    """Another client runs a script that never yields: Redis answers every other command BUSY."""
    r: Redis = ws.extra["redis"]
    argv = ["redis-cli", "-p", str(r.port), "-a", r.password, "--no-auth-warning"]
    ws.extra["busy"] = subprocess.Popen(
        [*argv, "eval", "while true do end", "0"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # BUSY is answered once the script ran past busy-reply-threshold
        ping = subprocess.run([*argv, "ping"], capture_output=True, text=True, timeout=30)
        if "BUSY" in ping.stdout + ping.stderr:
            return
        time.sleep(0.1)


def _end_busy_script(ws: Workspace) -> None:
    busy: subprocess.Popen[bytes] | None = ws.extra.pop("busy", None)
    if busy is not None:
        with contextlib.suppress(subprocess.CalledProcessError):
            ws.extra["redis"].cli("script", "kill")  # the script never yields: only SCRIPT KILL ends it
        busy.wait(30)


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
            url = r.url(self.password)
            yield _stdio(py_bin("redis-py", "redis-mcp-server"), "--url", url)

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


class RedisPyReplica(RedisPy):
    """Pointed at a read-only replica: every write meets ``READONLY``."""

    name = "redis-py-replica"
    server = "redis-py"

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        with redis(ws.root) as primary, redis(ws.root, replica_of=primary) as replica:
            yield _stdio(py_bin("redis-py", "redis-mcp-server"), "--url", replica.url())

    def cases(self, ws: Workspace) -> list[Case]:
        return [
            Case("set", {"key": "k", "value": "v"}, "write_to_replica", read_only_mode("key")),
            Case("hset", {"name": "h", "key": "a", "value": "b"}, "write_to_replica", read_only_mode("name")),
            Case("delete", {"key": "greeting"}, "write_to_replica", read_only_mode("key")),
        ]


class RedisPyBusy(RedisPy):
    """Another client runs a long script: Redis answers every other command ``BUSY`` until it ends."""

    name = "redis-py-busy"
    server = "redis-py"

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        async with super().started(ws) as config:
            try:
                yield config
            finally:
                _end_busy_script(ws)

    def cases(self, ws: Workspace) -> list[Case]:
        busy = service_down("key", proven_refused=True)
        return [
            Case("get", {"key": "greeting"}, "busy_script", busy, before=_start_busy_script),
            Case("set", {"key": "k", "value": "v"}, "busy_script", busy),
            Case("hgetall", {"name": "user:1"}, "busy_script", busy),
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
            out.append(Case("shell_execute", {"command": c, "directory": fs}, "command_failed", ran_read))
        out.append(
            Case(
                "shell_execute",
                {"command": ["mkdir", "docs"], "directory": fs},
                "command_failed_write",
                L.custom("B4_semantic_argument_rejection", False, "maybe_executed", "verify_state", "command"),
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
                L.not_found("filename", "list_available_documents"),
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
    RedisRefReplica(),
    RedisRefBusy(),
    RedisPy(),
    RedisPyBadAuth(),
    RedisPyDown(),
    RedisPyReplica(),
    RedisPyBusy(),
    DuckDb(),
    DuckDbReadOnly(),
    Shell(),
    Word(),
]


# --- a second web fetcher (npm) ----------------------------------------------------------------------------------


class FetchServer(Source):
    """``mcp-fetch-server``: refuses private and loopback addresses by design (no switch), so offline its realistic
    failures are that refusal, blocked protocols, names that do not resolve, a site out of reach, bad input. (It
    declares ``resources`` and answers ``resources/list`` with -32601: the proxy starts it since issue 19, item 4.)"""

    name = "fetch-server"
    package = "mcp-fetch-server@1.1.2"
    kind = "web"
    language = "node"
    effects: dict[str, str] = {}

    def effect(self, tool: str) -> str:
        return "read_only"

    def config(self, ws: Workspace) -> StdioUpstream:
        return node("mcp-fetch-server", "dist/index.js")

    def cases(self, ws: Workspace) -> list[Case]:
        private = L.forbidden("url", why="the server refuses private and loopback addresses by design")
        out = [
            Case(tool, {"url": url}, "private_address_refused", private)
            for tool, url in (
                ("fetch_html", "http://127.0.0.1:8080/"),
                ("fetch_markdown", "http://localhost:3000/docs"),
                ("fetch_json", "http://10.0.0.5/api/status"),
                ("fetch_txt", "http://192.168.1.1/"),
                ("fetch_readable", "http://[::1]:8000/page"),
            )
        ]
        protocol = L.sandbox("url", why="the server fetches only http and https URLs")
        out += [
            Case("fetch_txt", {"url": url}, "protocol_refused", protocol)
            for url in ("file:///etc/passwd", "ftp://files.example.com/a.txt", "data:text/plain,hello")
        ]
        out += [
            Case("fetch_html", {"url": url}, "host_does_not_exist", L.not_found("url"), timeout_s=40)
            for url in ("http://no-such-host.invalid/", "https://docs.example.invalid/api")
        ]
        out += [
            Case(tool, {"url": url}, "invalid_url", L.bad_value("url"))
            for tool, url in (("fetch_html", "not a url"), ("fetch_json", "example.com/page"))
        ]
        out.append(
            Case(
                "fetch_youtube_transcript",
                {"url": "https://www.youtube.com/watch?v=dQw4w9WgXcQ"},
                # It fetches the page before running yt-dlp: offline, the site is unreachable (text reviewed).
                "site_unreachable",
                L.remote_transient("url"),
                timeout_s=40,
            )
        )
        out.append(Case("fetch_html", {}, "missing_url", L.missing_arg("url")))
        out.append(
            Case(
                "fetch_markdown",
                {"url": "https://a.example.invalid/", "max_length": "lots"},
                "max_length_wrong_type",
                L.schema("max_length"),
            )
        )
        out.append(
            Case("fetch_pdf", {"url": "https://example.org/a.pdf"}, "unknown_tool", L.unknown_tool("fetch_html"))
        )
        return out


# --- DBHub (npm) against PostgreSQL --------------------------------------------------------------------------------


class DbHub(Source):
    name = "dbhub"
    package = "@bytebase/dbhub@1.4.0"
    kind = "database"
    language = "node"
    effects = {"execute_sql": "write_unsafe", "search_objects": "read_only"}

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        with postgres(ws.root / self.name) as pg:
            ws.extra["pg"] = pg
            yield node("@bytebase/dbhub", "dist/index.js", "--transport", "stdio", "--dsn", self.dsn(pg))

    def dsn(self, pg: Postgres) -> str:
        return pg.url() + "?sslmode=disable"

    def cases(self, ws: Workspace) -> list[Case]:
        out = [Case("execute_sql", {"sql": sql}, sit, gold) for sql, sit, gold in pg_read_cases("sql")]
        out += [Case("execute_sql", {"sql": sql}, sit, gold) for sql, sit, gold in pg_write_cases("sql")]
        out.append(Case("search_objects", {"object_type": "tables"}, "bad_enum", L.schema("object_type")))
        out.append(Case("execute_sql", {}, "missing_sql", L.missing_arg("sql")))
        return out


class DbHubBadAuth(DbHub):
    name = "dbhub-badauth"
    server = "dbhub"
    startup = ("startup_password_authentication_failed", bad_credentials())

    def dsn(self, pg: Postgres) -> str:
        return pg.url("app", "wrong-password") + "?sslmode=disable"


class DbHubDown(DbHub):
    name = "dbhub-down"
    server = "dbhub"

    def cases(self, ws: Workspace) -> list[Case]:
        def stop(ws: Workspace) -> None:
            ws.extra["pg"].stop()

        return [
            Case("execute_sql", {"sql": "select * from users"}, "database_down", service_down("sql"), before=stop),
            Case(
                "execute_sql",
                {"sql": "update users set name = 'Z' where id = 2"},
                "database_down",
                service_down("sql", write=True),
            ),
        ]


# --- spreadsheets: an npm (Go) server and a Python server ---------------------------------------------------------


def _make_xlsx(path: Path) -> None:
    script = (
        "import openpyxl, sys; wb = openpyxl.Workbook(); ws = wb.active; ws.title = 'Sales';"
        " ws.append(['region', 'q1', 'q2']); ws.append(['north', 10, 12]); ws.append(['south', 7, 9]);"
        " wb.create_sheet('Notes'); wb.save(sys.argv[1])"
    )
    subprocess.run([str(py_bin("excel-py", "python")), "-c", script, str(path)], check=True)


class ExcelNpm(Source):
    name = "excel-npm"
    package = "@negokaz/excel-mcp-server@0.12.0"
    kind = "office"
    language = "node (Go binary)"
    effects: dict[str, str] = {}

    def effect(self, tool: str) -> str:
        return (
            "read_only"
            if tool in ("excel_describe_sheets", "excel_read_sheet", "excel_screen_capture")
            else "write_unsafe"
        )

    def config(self, ws: Workspace) -> StdioUpstream:
        xl = ws.root / "excel-npm"
        xl.mkdir(exist_ok=True)
        _make_xlsx(xl / "sales.xlsx")
        (xl / "broken.xlsx").write_bytes(b"PK\x03\x04 not a workbook")
        (xl / "data.csv").write_text("a,b\n1,2\n")
        ws.extra["xl_npm"] = xl
        return node("@negokaz/excel-mcp-server", "dist/launcher.js", env={"EXCEL_MCP_PAGING_CELLS_LIMIT": "4000"})

    def cases(self, ws: Workspace) -> list[Case]:
        xl = ws.root / "excel-npm"
        book = str(xl / "sales.xlsx")
        missing = L.not_found("fileAbsolutePath")
        out = [
            Case("excel_describe_sheets", {"fileAbsolutePath": str(xl / "report.xlsx")}, "workbook_missing", missing),
            Case(
                "excel_read_sheet",
                {"fileAbsolutePath": str(xl / "q3/sales.xlsx"), "sheetName": "Sales"},
                "workbook_missing",
                missing,
            ),
            Case(
                "excel_read_sheet",
                {"fileAbsolutePath": book, "sheetName": "Revenue"},
                "sheet_missing",
                L.bad_value("sheetName", "excel_describe_sheets"),
            ),
            Case(
                "excel_read_sheet",
                {"fileAbsolutePath": book, "sheetName": "sales "},
                "sheet_missing",
                L.bad_value("sheetName", "excel_describe_sheets"),
            ),
            Case(
                "excel_read_sheet",
                {"fileAbsolutePath": book, "sheetName": "Sales", "range": "A1:ZZZZ"},
                "bad_range",
                L.bad_value("range"),
            ),
            Case(
                "excel_read_sheet",
                {"fileAbsolutePath": book, "sheetName": "Sales", "range": "B3:A1:C"},
                "bad_range",
                L.bad_value("range"),
            ),
            Case(
                "excel_describe_sheets",
                {"fileAbsolutePath": str(xl / "broken.xlsx")},
                "workbook_corrupt",
                setup_broken("fileAbsolutePath", why="the file is not a valid workbook"),
            ),
            Case(
                "excel_describe_sheets",
                {"fileAbsolutePath": str(xl / "data.csv")},
                "not_a_workbook",
                L.bad_value("fileAbsolutePath"),
            ),
            Case(
                "excel_describe_sheets",
                {"fileAbsolutePath": "sales.xlsx"},
                "relative_path",
                L.bad_value("fileAbsolutePath"),
            ),
            Case(
                "excel_write_to_sheet",
                {
                    "fileAbsolutePath": book,
                    "sheetName": "Sales",
                    "newSheet": False,
                    "range": "A1:B1",
                    "values": [["x"]],
                },
                "values_shape_mismatch",
                L.bad_value("values"),
            ),
            Case("excel_read_sheet", {"fileAbsolutePath": book}, "missing_sheet_name", L.missing_arg("sheetName")),
        ]
        return out


class ExcelPy(Source):
    name = "excel-py"
    package = "excel-mcp-server==2.2.2"
    kind = "office"
    language = "python"
    effects: dict[str, str] = {}

    def effect(self, tool: str) -> str:
        return "read_only" if tool.startswith(("read_", "get_", "validate_", "list_")) else "write_unsafe"

    def config(self, ws: Workspace) -> StdioUpstream:
        xl = ws.root / "excel-py"
        xl.mkdir(exist_ok=True)
        _make_xlsx(xl / "sales.xlsx")
        (xl / "broken.xlsx").write_bytes(b"PK\x03\x04 not a workbook")
        cfg = _stdio(py_bin("excel-py", "excel-mcp-server"), "stdio", env={"EXCEL_FILES_PATH": str(xl)})
        return cfg.model_copy(update={"cwd": str(xl)})

    def cases(self, ws: Workspace) -> list[Case]:
        xl = ws.root / "excel-py"
        book = str(xl / "sales.xlsx")
        lookup = L.bad_value("sheet", "describe_workbook")
        missing = L.not_found("path", "list_workbooks")
        return [
            Case("describe_workbook", {"path": str(xl / "report.xlsx")}, "workbook_missing", missing),
            Case("read_range", {"path": "q3/sales.xlsx", "sheet": "Sales"}, "workbook_missing", missing),
            Case("read_range", {"path": book, "sheet": "Revenue"}, "sheet_missing", lookup),
            Case("describe_sheet", {"path": book, "sheet": "sales "}, "sheet_missing", lookup),
            Case(
                "write_range", {"path": book, "sheet": "Forecast", "at": "A1", "rows": [["a"]]}, "sheet_missing", lookup
            ),
            Case("delete_sheet", {"path": book, "sheet": "Budget"}, "sheet_missing", lookup),
            Case("read_range", {"path": book, "sheet": "Sales", "range": "A0:B2"}, "bad_range", L.bad_value("range")),
            Case("read_range", {"path": book, "sheet": "Sales", "range": "1A:ZZ"}, "bad_range", L.bad_value("range")),
            Case(
                "write_range",
                {"path": book, "sheet": "Sales", "at": "AAAAA1", "rows": [["x"]]},
                "bad_cell",
                L.bad_value("at"),
            ),
            Case(
                "create_sheet",
                {"path": book, "new_name": "Notes"},
                "sheet_exists",
                L.conflict("new_name", "describe_workbook"),
            ),
            Case(
                "rename_sheet",
                {"path": book, "sheet": "Sales", "new_name": "Notes"},
                "sheet_exists",
                L.conflict("new_name", "describe_workbook"),
            ),
            Case(
                "create_sheet", {"path": book, "new_name": "Q1/Q2 [draft]"}, "bad_sheet_name", L.bad_value("new_name")
            ),
            Case("create_workbook", {"path": book}, "workbook_exists", L.conflict("path", "describe_workbook")),
            Case(
                "describe_workbook",
                {"path": str(xl / "broken.xlsx")},
                "workbook_corrupt",
                setup_broken("path", why="the file is not a valid workbook"),
            ),
            Case(
                "describe_workbook",
                {"path": "/etc/hosts.xlsx"},
                "outside_workbook_dir",
                L.sandbox("path", "list_workbooks"),
            ),
            Case("read_range", {"path": book}, "missing_sheet", L.missing_arg("sheet")),
            Case("read_range", {"path": book, "sheet": "Sales", "mode": "raw"}, "bad_enum", L.schema("mode")),
        ]


# --- git: a second git server (npm) --------------------------------------------------------------------------------


class GitCyan(Source):
    name = "git-cyan"
    package = "@cyanheads/git-mcp-server@2.15.3"
    kind = "vcs"
    language = "node"
    effects: dict[str, str] = {}

    def effect(self, tool: str) -> str:
        reads = ("git_status", "git_log", "git_diff", "git_show", "git_blame", "git_reflog", "git_branch", "git_tag")
        return "read_only" if tool in reads else "write_unsafe"

    def config(self, ws: Workspace) -> StdioUpstream:
        env = {"GIT_BASE_DIR": str(ws.root), "MCP_LOG_LEVEL": "error", "LOG_LEVEL": "error", "HOME": str(ws.root)}
        who = {"GIT_AUTHOR_NAME": "corpus", "GIT_AUTHOR_EMAIL": "corpus@example.invalid"}
        env |= who | {"GIT_COMMITTER_NAME": "corpus", "GIT_COMMITTER_EMAIL": "corpus@example.invalid"}
        return node("@cyanheads/git-mcp-server", "dist/index.js", env=env)

    def cases(self, ws: Workspace) -> list[Case]:
        repo = str(ws.repo)
        out: list[Case] = []
        for ref in ("develop", "v1.0", "HEAD~5", "deadbeef"):
            out.append(
                Case(
                    "git_show", {"path": repo, "object": ref}, "show_unknown_revision", L.bad_value("object", "git_log")
                )
            )
        for ref in ("develop", "release/2.0"):
            out.append(
                Case(
                    "git_checkout",
                    {"path": repo, "target": ref},
                    "checkout_unknown_branch",
                    L.bad_value("target", "git_branch"),
                )
            )
        out.append(
            Case(
                "git_branch",
                {"path": repo, "mode": "create", "branchName": "feature-x"},
                "branch_exists",
                L.conflict("git_branch"),
            )
        )
        out.append(
            Case(
                "git_commit",
                {"path": repo, "message": "nothing staged"},
                "commit_nothing_staged",
                L.conflict("git_status", "git_add"),
            )
        )
        out.append(
            Case(
                "git_add",
                {"path": repo, "paths": ["missing.txt"]},
                "add_unknown_path",
                L.bad_value("paths", "git_status"),
            )
        )
        for path in ("/etc", "/tmp/not-a-repo-xyz"):  # outside GIT_BASE_DIR
            out.append(Case("git_status", {"path": path}, "outside_base_dir", L.sandbox("path")))
        out.append(Case("git_status", {"path": str(ws.fs)}, "not_a_repository", L.bad_value("path")))
        out.append(Case("git_push", {"path": repo}, "no_remote", L.bad_value("path", "git_remote")))
        out.append(
            Case("git_pull", {"path": repo, "remote": "origin"}, "no_remote", L.bad_value("remote", "git_remote"))
        )
        out.append(
            Case(
                "git_clone",
                {"url": "https://github.invalid/acme/app.git", "path": str(ws.root / "clone")},
                "clone_unreachable_host",
                L.not_found("url"),
                timeout_s=60,
            )
        )
        out.append(Case("git_log", {"path": repo, "maxCount": "ten"}, "max_count_wrong_type", L.schema("maxCount")))
        out.append(Case("git_clear_working_dir", {"confirm": "no"}, "bad_enum", L.schema("confirm")))
        return out


SOURCES += [
    FetchServer(),
    DbHub(),
    DbHubBadAuth(),
    DbHubDown(),
    ExcelNpm(),
    ExcelPy(),
    GitCyan(),
]


# --- cloud-style APIs behind a local fake: two OpenAPI-to-MCP servers ------------------------------------------------


def api_cases(tools: dict[str, str], write: bool = True) -> list[Case]:
    """The fake API's failures through an OpenAPI server whose tool names are ``tools`` (operationId -> name)."""
    status, get, create, delete = tools["getStatus"], tools["getItem"], tools["createItem"], tools["deleteItem"]
    quota = L.custom(
        "F3_quota_exhausted", False, "rejected", "ask_user", why="the API's quota is spent (Retry-After: an hour)"
    )
    out = [
        Case(get, {"id": "sku-404"}, "http_404", L.not_found("id", tools["listItems"])),
        Case(delete, {"id": "sku-gone"}, "http_404", L.not_found("id", tools["listItems"])),
        Case(status, {"code": 400}, "http_400", L.bad_value("code")),
        Case(status, {"code": 401}, "http_401", bad_credentials()),
        Case(status, {"code": 403}, "http_403", L.forbidden()),
        Case(status, {"code": 409}, "http_409", L.conflict()),
        Case(status, {"code": 422}, "http_422", L.bad_value("code")),
        Case(status, {"code": 429}, "http_429", L.custom("D2_rate_limited", True, "rejected", "backoff_retry")),
        Case(status, {"code": 4291}, "http_429_quota", quota),
        Case(status, {"code": 500}, "http_500", L.remote_transient()),
        Case(status, {"code": 502}, "http_502", L.remote_transient()),
        Case(status, {"code": 503}, "http_503", service_down(proven_refused=True)),
        Case(status, {"code": 504}, "http_504", L.remote_transient()),
        # Neither server has a timeout of its own: the proxy's attempt timer fires (text reviewed).
        Case(
            tools["getSlowReport"],
            {},
            "api_slow",
            L.custom("C3_attempt_timeout", True, "maybe_executed", "backoff_retry"),
            timeout_s=12,
        ),
    ]
    if write:
        out += [
            Case(create, {"name": ""}, "http_400_validation", L.bad_value("name")),
            Case(create, {"name": "bolt", "quantity": -2}, "http_422_validation", L.bad_value("quantity")),
            Case(create, {"id": "sku-1", "name": "bolt"}, "http_409_exists", duplicate("id", tools["getItem"])),
        ]
    return out


class OpenApiNpm(Source):
    name = "openapi-npm"
    package = "@ivotoby/openapi-mcp-server@1.16.1"
    kind = "api"
    language = "node"
    tools = {
        "listItems": "lst-items",
        "createItem": "crt-item",
        "getItem": "get-item",
        "deleteItem": "del-item",
        "getStatus": "get-status",
        "getSlowReport": "get-slow-report",
    }
    token = ""

    @property
    def effects(self) -> dict[str, str]:  # type: ignore[override]
        t = self.tools
        reads = (t["listItems"], t["getItem"], t["getStatus"], t["getSlowReport"])
        return {name: "read_only" if name in reads else "write_unsafe" for name in t.values()}

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        with fake_api(slow_s=30) as api:
            api.items["sku-1"] = {"id": "sku-1", "name": "washer"}
            yield self.server_config(api.base, api.base + ("/secure" if self.token else ""))

    def server_config(self, base: str, api_base: str) -> StdioUpstream:
        env = {"API_BASE_URL": api_base, "OPENAPI_SPEC_PATH": base + "/openapi.json"}
        if self.token:
            env["API_HEADERS"] = f"Authorization:Bearer {self.token}"
        return node("@ivotoby/openapi-mcp-server", "bin/mcp-server.js", env=env)

    def cases(self, ws: Workspace) -> list[Case]:
        return api_cases(self.tools)


class OpenApiNpmBadToken(OpenApiNpm):
    name = "openapi-npm-badtoken"
    server = "openapi-npm"
    token = "expired-token"

    def cases(self, ws: Workspace) -> list[Case]:
        t = self.tools
        return [
            Case(t["listItems"], {}, "api_token_refused", bad_credentials()),
            Case(t["getItem"], {"id": "sku-1"}, "api_token_refused", bad_credentials()),
            Case(t["createItem"], {"name": "nut"}, "api_token_refused", bad_credentials()),
        ]


class OpenApiPy(OpenApiNpm):
    name = "openapi-py"
    server = ""
    package = "mcp-openapi-proxy==0.4.0"
    language = "python"
    tools = {
        "listItems": "get_items",
        "createItem": "post_items",
        "getItem": "get_items_by_id",
        "deleteItem": "delete_items_by_id",
        "getStatus": "get_status_by_code",
        "getSlowReport": "get_slow",
    }

    def server_config(self, base: str, api_base: str) -> StdioUpstream:
        env = {"OPENAPI_SPEC_URL": base + "/openapi.json", "SERVER_URL_OVERRIDE": api_base}
        if self.token:
            env |= {"API_KEY": self.token, "API_AUTH_TYPE": "Bearer"}
        return _stdio(py_bin("openapi-py", "mcp-openapi-proxy"), env=env)


class OpenApiPyBadToken(OpenApiPy):
    name = "openapi-py-badtoken"
    server = "openapi-py"
    token = "expired-token"

    cases = OpenApiNpmBadToken.cases


# --- search: SearXNG's MCP server against a fake instance -----------------------------------------------------------


class Searxng(Source):
    name = "searxng"
    package = "mcp-searxng@2.4.0"
    kind = "search"
    language = "node"
    effects: dict[str, str] = {}
    down = False
    strict = False

    def effect(self, tool: str) -> str:
        return "read_only"

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        with fake_api(slow_s=30) as api:
            base = f"http://127.0.0.1:{free_port()}" if self.down else api.base
            ws.extra["api"] = api
            env = {"SEARXNG_URL": base} | ({} if self.strict else {"MCP_HTTP_ALLOW_PRIVATE_URLS": "true"})
            yield node("mcp-searxng", "dist/cli.js", env=env)

    def cases(self, ws: Workspace) -> list[Case]:
        api = ws.extra["api"].base
        search = "searxng_web_search"
        out = [
            Case(
                search,
                {"query": "!status 429"},
                "search_429",
                L.custom("D2_rate_limited", True, "rejected", "backoff_retry"),
            ),
            Case(search, {"query": "!status 403"}, "search_403", L.forbidden()),
            Case(search, {"query": "!status 500"}, "search_500", L.remote_transient()),
            Case(search, {"query": "!status 502"}, "search_502", L.remote_transient()),
            Case(search, {"query": "!status 503"}, "search_503", service_down(proven_refused=True)),
            Case(search, {"query": "!status 401"}, "search_401", bad_credentials()),
            Case("web_url_read", {"url": api + "/status/404"}, "page_404", L.not_found("url")),
            Case("web_url_read", {"url": api + "/status/500"}, "page_500", L.remote_transient("url")),
            Case("web_url_read", {"url": api + "/status/403"}, "page_403", L.forbidden("url")),
            Case("web_url_read", {"url": "not a url"}, "invalid_url", L.bad_value("url")),
            Case(search, {"query": "x", "time_range": "decade"}, "bad_enum", L.schema("time_range")),
            Case(search, {}, "missing_query", L.missing_arg("query")),
        ]
        return out


class SearxngStrict(Searxng):
    """Without MCP_HTTP_ALLOW_PRIVATE_URLS: reading a private address is refused by the server's policy."""

    name = "searxng-strict"
    server = "searxng"
    strict = True

    def cases(self, ws: Workspace) -> list[Case]:
        api = ws.extra["api"].base
        why = "the server refuses private addresses unless its admin allows them"
        return [
            Case("web_url_read", {"url": api + page}, "private_url_refused", L.forbidden("url", why=why))
            for page in ("/status/200", "/items")
        ]


class SearxngDown(Searxng):
    name = "searxng-down"
    server = "searxng"
    down = True

    def cases(self, ws: Workspace) -> list[Case]:
        return [
            Case("searxng_web_search", {"query": q}, "instance_unreachable", L.remote_transient())
            for q in ("mcp proxy", "redis wrongtype")
        ]


# --- a job queue: BullMQ's MCP server on the local Redis --------------------------------------------------------------


class BullMq(Source):
    name = "bullmq"
    package = "@adamhancock/bullmq-mcp@1.0.7"
    kind = "queue"
    language = "node"
    effects: dict[str, str] = {}

    def effect(self, tool: str) -> str:
        reads = (
            "stats",
            "get_jobs",
            "get_job",
            "get_job_logs",
            "list_queues",
            "list_connections",
            "query_dead_letter_queue",
        )
        return "read_only" if tool in reads else "write_unsafe"

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        with redis(ws.root) as r:
            ws.extra["redis"] = r
            yield node("@adamhancock/bullmq-mcp", "dist/index.js", env={"REDIS_URL": r.url()})

    def cases(self, ws: Workspace) -> list[Case]:
        r: Redis = ws.extra["redis"]
        missing = L.not_found("jobId", "get_jobs")
        out = [
            Case("connect", {"id": "local", "url": r.url()}, "setup", L.schema(), setup=True),
            Case("get_job", {"queue": "emails", "jobId": "42"}, "job_missing", missing),
            Case("remove_job", {"queue": "emails", "jobId": "999"}, "job_missing", missing),
            Case("retry_job", {"queue": "emails", "jobId": "77"}, "job_missing", missing),
            Case("get_job_logs", {"queue": "reports", "jobId": "5"}, "job_missing", missing),
            Case("add_job_log", {"queue": "reports", "jobId": "5", "message": "x"}, "job_missing", missing),
            Case("switch_connection", {"id": "staging"}, "connection_missing", L.bad_value("id", "list_connections")),
            Case(
                "connect",
                {"id": "prod", "url": r.url("wrong-password")},
                "connect_wrong_password",
                bad_credentials("password"),
            ),
            Case(
                "connect",
                {"id": "other", "url": f"redis://127.0.0.1:{free_port()}"},
                "connect_refused",
                service_down("url"),
                timeout_s=30,
            ),
            Case("stats", {"queue": 7}, "queue_wrong_type", L.schema("queue")),
        ]
        return out


class BullMqDown(BullMq):
    name = "bullmq-down"
    server = "bullmq"

    def cases(self, ws: Workspace) -> list[Case]:
        def stop(ws: Workspace) -> None:
            ws.extra["redis"].stop()

        r: Redis = ws.extra["redis"]
        hang_read = L.custom("C3_attempt_timeout", True, "maybe_executed", "backoff_retry", "queue")
        hang_write = L.custom("C3_attempt_timeout", True, "maybe_executed", "verify_state", "queue")
        return [
            Case("connect", {"id": "local", "url": r.url()}, "setup", L.schema(), setup=True),
            # The server waits on its Redis client forever: the proxy's attempt timer fires (text reviewed).
            Case("stats", {"queue": "emails"}, "redis_down_server_hangs", hang_read, before=stop, timeout_s=30),
            Case(
                "add_job",
                {"queue": "emails", "name": "send", "data": {"to": "a@example.com"}},
                "redis_down_server_hangs",
                hang_write,
                timeout_s=30,
            ),
        ]


# --- a text editor with hash-checked edits --------------------------------------------------------------------------


class TextEditor(Source):
    name = "text-editor"
    package = "mcp-text-editor==1.2.2"
    kind = "editor"
    language = "python"
    effects = {
        "get_text_file_contents": "read_only",
        "create_text_file": "write_unsafe",
        "patch_text_file_contents": "write_unsafe",
        "append_text_file_contents": "write_unsafe",
        "delete_text_file_contents": "write_unsafe",
        "insert_text_file_contents": "write_unsafe",
    }

    def config(self, ws: Workspace) -> StdioUpstream:
        return _stdio(py_bin("text-editor", "mcp-text-editor"))

    def cases(self, ws: Workspace) -> list[Case]:
        notes = str(ws.fs / "docs" / "notes.txt")
        stale = "0" * 64
        reread = L.conflict("file_hash", "get_text_file_contents", why="the file changed since it was read")
        out = [
            Case(
                "get_text_file_contents",
                {"files": [{"file_path": str(ws.fs / "docs" / "missing.md"), "ranges": [{"start": 1}]}]},
                "file_missing",
                L.not_found("file_path"),
            ),
            Case(
                "patch_text_file_contents",
                {
                    "file_path": notes,
                    "file_hash": stale,
                    "patches": [{"start": 1, "end": 1, "contents": "A\n", "range_hash": stale}],
                },
                "stale_hash",
                reread,
            ),
            Case(
                "append_text_file_contents",
                {"file_path": notes, "contents": "z\n", "file_hash": stale},
                "stale_hash",
                reread,
            ),
            Case(
                "delete_text_file_contents",
                {"file_path": notes, "file_hash": stale, "ranges": [{"start": 1, "end": 1, "range_hash": stale}]},
                "stale_hash",
                reread,
            ),
            Case(
                "insert_text_file_contents",
                {"file_path": notes, "file_hash": stale, "contents": "x\n", "after": 1},
                "stale_hash",
                reread,
            ),
            Case(
                "create_text_file",
                {"file_path": notes, "contents": "new\n"},
                "file_exists",
                L.conflict("file_path", "get_text_file_contents"),
            ),
            Case(
                "get_text_file_contents",
                {"files": [{"file_path": "docs/notes.txt", "ranges": [{"start": 1}]}]},
                "relative_path",
                L.bad_value("file_path"),
            ),
            Case(
                "insert_text_file_contents",
                {"file_path": notes, "file_hash": stale, "contents": "x\n", "before": 1, "after": 1},
                "before_and_after",
                L.bad_value("before", "after"),
            ),
            Case("get_text_file_contents", {}, "missing_files", L.missing_arg("files")),
            Case(
                "create_text_file",
                {"file_path": str(ws.fs / "new.txt"), "contents": 5},
                "contents_wrong_type",
                L.schema("contents"),
            ),
        ]
        return out


# --- a desktop agent server: files, search, processes (npm) ---------------------------------------------------------


class DesktopCommander(Source):
    name = "desktop-commander"
    package = "@wonderwhy-er/desktop-commander@0.2.52"
    kind = "shell"
    language = "node"
    effects: dict[str, str] = {}

    def effect(self, tool: str) -> str:
        reads = (
            "read_file",
            "read_multiple_files",
            "list_directory",
            "get_file_info",
            "get_config",
            "list_sessions",
            "list_processes",
            "read_process_output",
            "start_search",
            "get_more_search_results",
            "list_searches",
        )
        return "read_only" if tool in reads else "write_unsafe"

    def config(self, ws: Workspace) -> StdioUpstream:
        home = ws.root / "dc-home"
        (home / ".claude-server-commander").mkdir(parents=True, exist_ok=True)
        config = {
            "blockedCommands": ["sudo", "mkfs", "shutdown", "rm"],
            "defaultShell": "bash",
            "allowedDirectories": [str(ws.fs)],
            "telemetryEnabled": False,
            "fileReadLineLimit": 1000,
            "fileWriteLineLimit": 50,
        }
        (home / ".claude-server-commander" / "config.json").write_text(json.dumps(config))
        return node("@wonderwhy-er/desktop-commander", "dist/index.js", env={"HOME": str(home)})

    def cases(self, ws: Workspace) -> list[Case]:
        fs = ws.fs
        lookup = ("list_directory", "start_search")
        outside = L.sandbox("path", why="outside the server's allowed directories")
        out = [
            Case("read_file", {"path": str(fs / "docs" / "missing.md")}, "read_missing_file", L.not_found(*lookup)),
            Case("get_file_info", {"path": str(fs / "src" / "main.py")}, "info_missing_file", L.not_found(*lookup)),
            Case("list_directory", {"path": str(fs / "build")}, "list_missing_dir", L.not_found(*lookup)),
            Case(
                "move_file",
                {"source": str(fs / "nope.txt"), "destination": str(fs / "b.txt")},
                "move_missing_source",
                L.not_found(*lookup),
            ),
            Case("read_file", {"path": "/etc/hostname"}, "read_outside_allowed", outside),
            Case("write_file", {"path": "/tmp/dc-outside.txt", "content": "x"}, "write_outside_allowed", outside),
            Case("list_directory", {"path": "/root"}, "list_outside_allowed", outside),
            Case(
                "edit_block",
                {"file_path": str(fs / "docs" / "notes.txt"), "old_string": "delta", "new_string": "DELTA"},
                "edit_no_match",
                L.conflict("old_string", "read_file"),
            ),
            Case(
                "edit_block",
                {
                    "file_path": str(fs / "docs" / "notes.txt"),
                    "old_string": "a",
                    "new_string": "A",
                    "expected_replacements": 1,
                },
                "edit_count_mismatch",
                L.conflict("expected_replacements", "read_file"),
            ),
            Case("start_process", {"command": "sudo ls", "timeout_ms": 2000}, "command_blocked", L.sandbox("command")),
            Case(
                "start_process",
                {"command": "rm -rf /tmp/x", "timeout_ms": 2000},
                "command_blocked",
                L.sandbox("command"),
            ),
            Case("read_process_output", {"pid": 999999}, "process_missing", L.bad_value("pid", "list_sessions")),
            Case("kill_process", {"pid": 999999}, "process_missing", L.bad_value("pid", "list_processes")),
            Case(
                "interact_with_process",
                {"pid": 999999, "input": "ls"},
                "process_missing",
                L.bad_value("pid", "list_sessions"),
            ),
            Case(
                "get_more_search_results",
                {"sessionId": "nope"},
                "search_session_missing",
                L.bad_value("sessionId", "list_searches"),
            ),
            Case(
                "set_config_value",
                {"key": "noSuchSetting", "value": 1},
                "unknown_config_key",
                L.bad_value("key", "get_config"),
            ),
            Case("read_file", {}, "missing_path", L.missing_arg("path")),
            Case("start_process", {"command": "ls"}, "missing_timeout", L.missing_arg("timeout_ms")),
        ]
        return out


# --- a second Python git server and a Python SQL server ---------------------------------------------------------------


class GitMcpPy(Source):
    name = "git-mcp-py"
    package = "git-mcp==0.3.2"
    kind = "vcs"
    language = "python"
    effects = {
        "get_last_git_tag": "read_only",
        "list_commits_since_last_tag": "read_only",
        "list_repositories": "read_only",
        "refresh_repository": "write_idempotent",
        "create_git_tag": "write_unsafe",
        "push_git_tag": "write_unsafe",
    }

    def config(self, ws: Workspace) -> StdioUpstream:
        return _stdio(py_bin("git-mcp", "git-mcp"), env={"GIT_REPOS_PATH": str(ws.root), "HOME": str(ws.root)})

    def cases(self, ws: Workspace) -> list[Case]:
        name = ws.repo.name
        missing = L.not_found("repo_name", "list_repositories")
        return [
            Case("get_last_git_tag", {"repo_name": "billing"}, "repo_missing", missing),
            Case("list_commits_since_last_tag", {"repo_name": "infra"}, "repo_missing", missing),
            Case("create_git_tag", {"repo_name": "web-app", "tag_name": "v1"}, "repo_missing", missing),
            Case(
                "create_git_tag",
                {"repo_name": name, "tag_name": "bad tag.."},
                "invalid_tag_name",
                L.bad_value("tag_name"),
            ),
            Case("push_git_tag", {"repo_name": name, "tag_name": "v9"}, "push_no_remote", L.bad_value("repo_name")),
            Case("get_last_git_tag", {}, "missing_repo_name", L.missing_arg("repo_name")),
        ]


class Alchemy(Source):
    """``mcp-alchemy`` (SQLAlchemy) against PostgreSQL."""

    name = "alchemy"
    package = "mcp-alchemy==2026.10.15.202659"
    kind = "database"
    language = "python"
    effects = {
        "all_table_names": "read_only",
        "filter_table_names": "read_only",
        "schema_definitions": "read_only",
        "execute_query": "write_unsafe",
    }
    password = "app-secret"

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        with postgres(ws.root / self.name) as pg:
            ws.extra["pg"] = pg
            url = pg.url("app", self.password).replace("postgresql://", "postgresql+psycopg2://")
            yield _stdio(py_bin("alchemy", "mcp-alchemy"), env={"DB_URL": url})

    def cases(self, ws: Workspace) -> list[Case]:
        q = "query"
        out = [Case("execute_query", {q: sql}, sit, gold) for sql, sit, gold in pg_read_cases(q)]
        out += [Case("execute_query", {q: sql}, sit, gold) for sql, sit, gold in pg_write_cases(q)]
        out.append(
            Case(
                "schema_definitions",
                {"table_names": ["invoices"]},
                "describe_missing_table",
                sql_error("table_names", "all_table_names"),
            )
        )
        out.append(Case("execute_query", {}, "missing_query", L.missing_arg(q)))
        return out


class AlchemyBadAuth(Alchemy):
    """It connects while starting: a wrong password ends the process (the proxy sees the connection close)."""

    name = "alchemy-badauth"
    server = "alchemy"
    password = "wrong-password"
    startup = ("startup_password_authentication_failed", bad_credentials())


class McpSqlite(Source):
    name = "mcp-sqlite"
    package = "mcp-sqlite==0.3.2"
    kind = "database"
    language = "python"
    effects = {"sqlite_get_catalog": "read_only", "sqlite_execute": "write_unsafe"}

    def config(self, ws: Workspace) -> StdioUpstream:
        db = ws.root / "mcp-sqlite.db"
        _shop_db(db)
        return _stdio(py_bin("mcp-sqlite", "mcp-sqlite"), str(db))

    def cases(self, ws: Workspace) -> list[Case]:
        sql = "sql"
        return [
            Case(
                "sqlite_execute",
                {sql: "select * from customers"},
                "no_such_table",
                sql_error(sql, "sqlite_get_catalog"),
            ),
            Case(
                "sqlite_execute",
                {sql: "select username from users"},
                "no_such_column",
                sql_error(sql, "sqlite_get_catalog"),
            ),
            Case("sqlite_execute", {sql: "selec * from users"}, "syntax_error", sql_error(sql)),
            # The server opens the database read-only unless told otherwise (text reviewed).
            Case(
                "sqlite_execute",
                {sql: "insert into users(id, email) values (9, 'a@example.com')"},
                "write_in_read_only_mode",
                read_only_mode(sql),
            ),
            Case("sqlite_execute", {sql: "delete from orders"}, "write_in_read_only_mode", read_only_mode(sql)),
            Case("sqlite_execute", {sql: "update users set age = 5"}, "write_in_read_only_mode", read_only_mode(sql)),
            Case("sqlite_execute", {sql: "select 1; select 2"}, "two_statements", sql_error(sql)),
            Case("sqlite_execute", {}, "missing_sql", L.missing_arg(sql)),
        ]


SOURCES += [
    OpenApiNpm(),
    OpenApiNpmBadToken(),
    OpenApiPy(),
    OpenApiPyBadToken(),
    Searxng(),
    SearxngStrict(),
    SearxngDown(),
    BullMq(),
    BullMqDown(),
    TextEditor(),
    DesktopCommander(),
    GitMcpPy(),
    Alchemy(),
    AlchemyBadAuth(),
    McpSqlite(),
]


# --- start-up failures of more servers (one record each: the error the proxy's seam caught while starting it) --------


class RedisRefBadAuth(RedisRef):
    name = "redis-ref-badauth"
    server = "redis-ref"
    startup = ("startup_wrong_password", bad_credentials())

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        with redis(ws.root) as r:
            yield node("@modelcontextprotocol/server-redis", "dist/index.js", r.url("wrong-password"))


class RedisRefDownAtStart(RedisRef):
    name = "redis-ref-down-at-start"
    server = "redis-ref"
    startup = ("startup_redis_down", service_down(proven_refused=True))

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        yield node("@modelcontextprotocol/server-redis", "dist/index.js", f"redis://127.0.0.1:{free_port()}/0")


class DbHubNoDb(DbHub):
    name = "dbhub-nodb"
    server = "dbhub"
    startup = ("startup_database_does_not_exist", setup_broken())

    def dsn(self, pg: Postgres) -> str:
        return pg.url(db="shop_archive") + "?sslmode=disable"


class OpenApiNpmSpecDown(OpenApiNpm):
    """The OpenAPI document's host does not answer while the server starts."""

    name = "openapi-npm-spec-down"
    server = "openapi-npm"
    startup = ("startup_spec_unreachable", service_down(proven_refused=True))

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        base = f"http://127.0.0.1:{free_port()}"
        yield self.server_config(base, base)


class ExcelPyBadArgs(ExcelPy):
    name = "excel-py-bad-args"
    server = "excel-py"
    startup = ("startup_unknown_transport_argument", setup_broken(why="the server's command line is wrong"))

    def config(self, ws: Workspace) -> StdioUpstream:
        return _stdio(py_bin("excel-py", "excel-mcp-server"), "--transport", "pipes")


class ShellNoCommands(Shell):
    """Started without ALLOW_COMMANDS: it starts, and every command is refused until the admin sets the list."""

    name = "shell-no-commands"
    server = "shell"

    def config(self, ws: Workspace) -> StdioUpstream:
        return _stdio(py_bin("shell", "mcp-shell-server"))

    def cases(self, ws: Workspace) -> list[Case]:
        why = "the server allows no command at all until its admin configures some"
        return [
            Case(
                "shell_execute", {"command": c, "directory": str(ws.fs)}, "no_commands_configured", L.forbidden(why=why)
            )
            for c in (["ls"], ["echo", "hi"])
        ]


SOURCES += [
    RedisRefBadAuth(),
    RedisRefDownAtStart(),
    DbHubNoDb(),
    OpenApiNpmSpecDown(),
    ExcelPyBadArgs(),
    ShellNoCommands(),
]
