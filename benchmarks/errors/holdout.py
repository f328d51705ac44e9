"""The fresh hold-out (issue 19): servers that are not among the corpus's 30 and were collected after the rules.

    python -m benchmarks.errors.collect --holdout          # writes holdout.jsonl (+ holdout_success_shaped.jsonl)

Kinds the corpus lacks or is thin on: a MySQL-protocol database (MariaDB from Debian) through a Node and a Python
server, a cloud-style API server (the reference GitLab server pointed at a fake GitLab API on 127.0.0.1), a
search/index server (Elastic's server pointed at a fake Elasticsearch), a message queue server (RabbitMQ's management
API faked, its AMQP port closed) and a browser automation server (Playwright with Debian's chromium). Every label
was written from the situation provoked, the server's own words and LABELS.md, before the rules were run on these
records; the records and labels were committed ("frozen before measuring") before any rule was changed after reading
them. ``accuracy.py`` scores them as the "fresh hold-out" row.
"""

from __future__ import annotations

import json
import ssl
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import parse_qs, unquote, urlsplit

from resilient_mcp.policy.config import RemoteUpstream, StdioUpstream

from . import labels as L
from .labels import Gold
from .servers import (
    bad_credentials,
    cancelled_at_limit,
    duplicate,
    no_privilege,
    node,
    py_bin,
    read_only_mode,
    service_down,
    sql_error,
)
from .services import MariaDb, free_port, mariadb
from .situations import Case, Source, Workspace, _stdio

# --- a small fake HTTP service: a route function answers (status, JSON body, headers) ------------------------------
# The route gets the raw (still percent-encoded) path; a ``str`` body is sent as HTML.

Route = Callable[[str, str, dict[str, list[str]], dict[str, str], bytes], "tuple[int, Any, dict[str, str]]"]


@dataclass
class Fake:
    route: Route
    port: int = 0
    requests: list[str] = field(default_factory=list)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"


class _Handler(BaseHTTPRequestHandler):
    fake: ClassVar[Fake]
    protocol_version = "HTTP/1.1"

    def _serve(self, method: str) -> None:
        url = urlsplit(self.path)
        self.fake.requests.append(f"{method} {self.path}")
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(min(length, 1 << 20)) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        status, value, extra = self.fake.route(method, url.path, parse_qs(url.query), headers, body)
        html = isinstance(value, str)
        data = value.encode() if html else json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/html; charset=utf-8" if html else "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in extra.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._serve("GET")

    def do_HEAD(self) -> None:
        self._serve("HEAD")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def do_PATCH(self) -> None:
        self._serve("PATCH")

    def log_message(self, format: str, *args: Any) -> None:
        return None


@contextmanager
def fake_service(route: Route, tls: tuple[Path, Path] | None = None) -> Iterator[Fake]:
    """``route`` served on 127.0.0.1 (over TLS with ``tls``: a certificate and its key) in a thread."""
    fake = Fake(route)
    handler = type("Handler", (_Handler,), {"fake": fake})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    if tls is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*tls)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    fake.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _closed_port() -> int:
    return free_port()  # nothing listens there: connection refused


# --- GitLab (reference server, npm) in front of a fake GitLab API ---------------------------------------------------

_GITLAB_STATUS = {"acme/missing": 404, "acme/private": 403, "acme/flaky": 500, "acme/limited": 429}
_GITLAB_BODY = {
    400: {"message": "Invalid reference name: no-such-ref"},
    401: {"message": "401 Unauthorized"},
    403: {"message": "403 Forbidden"},
    404: {"message": "404 Project Not Found"},
    409: {"message": ["Another open merge request already exists for this source branch: !7"]},
    429: {"message": "Retry later"},
    500: {"message": "500 Internal Server Error"},
    502: {"message": "502 Bad Gateway"},
    503: {"message": "503 Service Unavailable"},
}


def gitlab_route(method: str, path: str, query: dict[str, list[str]], headers: dict[str, str], body: bytes) -> Any:
    def err(code: int) -> tuple[int, Any, dict[str, str]]:
        extra = {"Retry-After": "30"} if code in (429, 503) else {}
        return code, _GITLAB_BODY.get(code, {"message": f"{code}"}), extra

    if headers.get("authorization") != "Bearer glpat-good":
        return err(401)
    parts = [unquote(p) for p in path.split("/")[3:]]  # /api/v4/<rest>, a project's path encoded in one part
    if parts[:1] == ["projects"] and len(parts) == 1:
        term = (query.get("search") or [""])[0]
        if term.startswith("!") and term[1:].isdigit():
            return err(int(term[1:]))
        return 200, [], {}
    project = parts[1] if len(parts) > 1 else ""
    if project in _GITLAB_STATUS:
        return err(_GITLAB_STATUS[project])
    rest = parts[2:]
    if rest[:2] == ["repository", "files"]:
        return err(404) if method == "GET" else err(400)
    if rest[:2] == ["repository", "branches"]:
        return err(400)
    if rest[:1] == ["merge_requests"]:
        return err(409)
    return err(404)


class GitLab(Source):
    name = "gitlab"
    package = "@modelcontextprotocol/server-gitlab@2025.4.25"
    kind = "api"
    language = "node"
    effects = {"get_file_contents": "read_only", "search_repositories": "read_only"}
    token = "glpat-good"

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        with fake_service(gitlab_route) as fake:
            yield self.server_config(fake.base + "/api/v4")

    def server_config(self, api: str) -> StdioUpstream:
        env = {"GITLAB_API_URL": api, "GITLAB_PERSONAL_ACCESS_TOKEN": self.token}
        return node("@modelcontextprotocol/server-gitlab", "dist/index.js", env=env)

    def cases(self, ws: Workspace) -> list[Case]:
        read = "get_file_contents"
        issue = {"project_id": "acme/app", "title": "Crash on start"}
        lookup = L.not_found("project_id", "search_repositories")
        return [
            Case(read, {"project_id": "acme/missing", "file_path": "README.md"}, "project_missing", lookup),
            Case("create_issue", {**issue, "project_id": "acme/missing"}, "project_missing", lookup),
            Case(read, {"project_id": "acme/app", "file_path": "docs/x.md"}, "file_missing", L.not_found("file_path")),
            Case(read, {"project_id": "acme/private", "file_path": "README.md"}, "http_403", L.forbidden("project_id")),
            Case("create_issue", {**issue, "project_id": "acme/private"}, "http_403", L.forbidden("project_id")),
            Case(
                "create_branch",
                {"project_id": "acme/app", "branch": "fix/crash", "ref": "no-such-ref"},
                "unknown_ref",
                L.bad_value("ref"),
            ),
            Case(
                "create_merge_request",
                {"project_id": "acme/app", "title": "Fix", "source_branch": "fix/crash", "target_branch": "main"},
                "merge_request_exists",
                L.conflict("source_branch"),
            ),
            Case(
                "search_repositories",
                {"search": "!429"},
                "http_429",
                L.custom("D2_rate_limited", True, "rejected", "backoff_retry"),
            ),
            Case(
                "create_issue",
                {**issue, "project_id": "acme/limited"},
                "http_429",
                L.custom("D2_rate_limited", True, "rejected", "backoff_retry"),
            ),
            Case("search_repositories", {"search": "!500"}, "http_500", L.remote_transient()),
            Case("search_repositories", {"search": "!502"}, "http_502", L.remote_transient()),
            Case("search_repositories", {"search": "!503"}, "http_503", service_down(proven_refused=True)),
            Case("create_issue", {**issue, "project_id": "acme/flaky"}, "http_500", service_down(write=True)),
            Case("create_issue", {"project_id": "acme/app"}, "missing_title", L.missing_arg("title")),
            Case(read, {"project_id": "acme/app"}, "missing_file_path", L.missing_arg("file_path")),
            Case("search_repositories", {"search": "x", "per_page": "9"}, "per_page_wrong_type", L.schema("per_page")),
            Case("delete_repository", {"project_id": "acme/app"}, "unknown_tool", L.unknown_tool()),
        ]


class GitLabBadToken(GitLab):
    name = "gitlab-badtoken"
    server = "gitlab"
    token = "glpat-expired"

    def cases(self, ws: Workspace) -> list[Case]:
        return [
            Case("get_file_contents", {"project_id": "acme/app", "file_path": "README.md"}, "token_refused",
                 bad_credentials()),
            Case("create_issue", {"project_id": "acme/app", "title": "Crash"}, "token_refused", bad_credentials()),
        ]  # fmt: skip


class GitLabDown(GitLab):
    name = "gitlab-down"
    server = "gitlab"

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        yield self.server_config(f"http://127.0.0.1:{_closed_port()}/api/v4")

    def cases(self, ws: Workspace) -> list[Case]:
        return [
            Case("get_file_contents", {"project_id": "acme/app", "file_path": "README.md"}, "api_unreachable",
                 service_down("project_id")),
            Case("create_issue", {"project_id": "acme/app", "title": "Crash"}, "api_unreachable",
                 service_down(write=True)),
        ]  # fmt: skip


HOLDOUT_SOURCES: list[Source] = [GitLab(), GitLabBadToken(), GitLabDown()]


# --- MySQL protocol: MariaDB through a Node server and a Python server -----------------------------------------------


def mysql_read_cases(arg: str) -> list[tuple[str, str, Gold]]:
    return [
        ("selec * from users", "syntax_error", sql_error(arg)),
        ("select * from customers", "unknown_table", sql_error(arg)),
        ("select username from users", "unknown_column", sql_error(arg)),
        ("select id from users join orders on orders.user_id = users.id", "ambiguous_column", sql_error(arg)),
        ("select nosuchfn(1)", "unknown_function", sql_error(arg)),
        ("select * from vault.secrets", "no_privilege", no_privilege(arg)),
    ]


def mysql_write_cases(arg: str) -> list[tuple[str, str, Gold]]:
    return [
        ("insert into users(email, name, age) values ('a@example.com', 'Al', 20)", "duplicate_key", duplicate(arg)),
        ("insert into users(email, name, age) values (null, 'Al', 20)", "not_null_violation", sql_error(arg)),
        ("insert into orders(user_id, total) values (999, 1.00)", "foreign_key_violation", sql_error(arg)),
        ("insert into users(email, name, age) values ('c@example.com', 'Cy', -1)", "check_violation", sql_error(arg)),
        (
            "insert into users(email, name, age) values ('d@example.com', 'Maximilian-Alexander', 9)",
            "value_too_long",
            sql_error(arg),
        ),
        ("delete from vault.secrets", "no_privilege", no_privilege(arg)),
    ]


_HEAVY = "select count(*) from information_schema.columns a, information_schema.columns b, information_schema.columns c"


class MysqlNpm(Source):
    """``@benborla29/mcp-server-mysql``: read-only unless ``ALLOW_*_OPERATION`` is set; errors are ``isError``."""

    name = "mysql-npm"
    package = "@benborla29/mcp-server-mysql@2.0.9"
    kind = "database"
    language = "node"
    effects = {"mysql_query": "write_unsafe"}
    user, password, database, writes = "app", "app-secret", "shop", False

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        with mariadb(ws.root / self.name) as db:
            ws.extra["mariadb"] = db
            yield self.server_config(db.port)

    def server_config(self, port: int) -> StdioUpstream:
        env = {
            "MYSQL_HOST": "127.0.0.1",
            "MYSQL_PORT": str(port),
            "MYSQL_USER": self.user,
            "MYSQL_PASS": self.password,
            "MYSQL_DB": self.database,
        }
        if self.writes:
            env |= {f"ALLOW_{op}_OPERATION": "true" for op in ("INSERT", "UPDATE", "DELETE")}
        return node("@benborla29/mcp-server-mysql", "dist/index.js", env=env)

    def cases(self, ws: Workspace) -> list[Case]:
        reads = [case for case in mysql_read_cases("sql") if case[1] != "syntax_error"]
        out = [Case("mysql_query", {"sql": sql}, sit, gold) for sql, sit, gold in reads]
        # This server parses every statement itself (node-sql-parser) before it sends it: "Parsing failed".
        parsed = L.custom(
            "B4_semantic_argument_rejection",
            False,
            "rejected",
            "fix_parameter",
            "sql",
            why="the server's own SQL parser rejected the statement",
        )
        out += [
            Case("mysql_query", {"sql": "selec * from users"}, "syntax_error", parsed),
            Case("mysql_query", {"sql": "insert into users(email) values ('e@example.com')"}, "write_refused",
                 read_only_mode("sql")),
            Case("mysql_query", {"sql": "delete from orders where id = 1"}, "write_refused", read_only_mode("sql")),
            Case("mysql_query", {}, "missing_sql", L.missing_arg("sql")),
            Case("mysql_query", {"sql": 42}, "sql_wrong_type", L.schema("sql")),
        ]  # fmt: skip
        return out


class MysqlNpmWrites(MysqlNpm):
    name = "mysql-npm-writes"
    server = "mysql-npm"
    writes = True

    def cases(self, ws: Workspace) -> list[Case]:
        return [Case("mysql_query", {"sql": sql}, sit, gold) for sql, sit, gold in mysql_write_cases("sql")]


class MysqlNpmQuota(MysqlNpm):
    """The account ``slow`` may run 3 queries an hour (MySQL's per-account resource limit)."""

    name = "mysql-npm-quota"
    server = "mysql-npm"
    user, password = "slow", "slow-secret"

    def cases(self, ws: Workspace) -> list[Case]:
        quota = L.custom(
            "F3_quota_exhausted", False, "rejected", "ask_user", why="the account's hourly query quota is spent"
        )
        # The server's own queries at connect spend the quota: every call meets it (texts reviewed).
        return [Case("mysql_query", {"sql": "select * from users"}, "query_quota", quota) for _ in range(2)]


class MysqlNpmTimed(MysqlNpm):
    """The account ``timed`` has MariaDB's ``MAX_STATEMENT_TIME`` of 0.2 s: a heavy join is cut off."""

    name = "mysql-npm-timed"
    server = "mysql-npm"
    user, password = "timed", "timed-secret"

    def cases(self, ws: Workspace) -> list[Case]:
        return [Case("mysql_query", {"sql": _HEAVY}, "statement_time_limit", cancelled_at_limit("sql"))]


class MysqlNpmBadAuth(MysqlNpm):
    """The server checks its connection at start and exits (reviewed): a start-up failure."""

    name = "mysql-npm-badauth"
    server = "mysql-npm"
    password = "wrong-password"
    startup = ("startup_wrong_password", bad_credentials())


class MysqlNpmNoDb(MysqlNpm):
    name = "mysql-npm-nodb"
    server = "mysql-npm"
    database = "shop_archive"
    startup = ("startup_unknown_database", L.server_broken(why="the database the server is configured for is missing"))


class MysqlNpmDown(MysqlNpm):
    name = "mysql-npm-down"
    server = "mysql-npm"

    def cases(self, ws: Workspace) -> list[Case]:
        def stop(ws: Workspace) -> None:
            db: MariaDb = ws.extra["mariadb"]
            db.stop()

        return [
            Case(
                "mysql_query",
                {"sql": "select * from users"},
                "database_down",
                service_down("sql", write=True),
                before=stop,
            ),
            Case("mysql_query", {"sql": "select * from orders"}, "database_down", service_down("sql", write=True)),
        ]


class MysqlPy(MysqlNpm):
    """``mysql-mcp-server`` (Python, mcp 1.x): answers every error as a successful result (success-shaped)."""

    name = "mysql-py"
    package = "mysql-mcp-server==0.4.4"
    language = "python"
    effects = {"execute_sql": "write_unsafe", "get_schema_info": "read_only", "get_table_sample": "read_only"}

    def server_config(self, port: int) -> StdioUpstream:
        env = {
            "MYSQL_HOST": "127.0.0.1",
            "MYSQL_PORT": str(port),
            "MYSQL_USER": self.user,
            "MYSQL_PASSWORD": self.password,
            "MYSQL_DATABASE": self.database,
        }
        return _stdio(py_bin("mysql-py", "mysql_mcp_server"), env=env)

    def cases(self, ws: Workspace) -> list[Case]:
        out = [Case("execute_sql", {"query": q}, sit, gold) for q, sit, gold in mysql_read_cases("query")]
        out += [Case("execute_sql", {"query": q}, sit, gold) for q, sit, gold in mysql_write_cases("query")]
        out += [
            Case("get_table_sample", {"table_name": "customers"}, "unknown_table", sql_error("table_name")),
            Case("execute_sql", {"query": "select 1; select 2"}, "two_statements",
                 L.custom("B4_semantic_argument_rejection", False, "rejected", "fix_parameter", "query")),
            Case("drop_database", {"name": "shop"}, "unknown_tool", L.unknown_tool()),
        ]  # fmt: skip
        return out


class MysqlPyTimed(MysqlPy):
    name = "mysql-py-timed"
    server = "mysql-py"
    user, password = "timed", "timed-secret"

    def cases(self, ws: Workspace) -> list[Case]:
        return [Case("execute_sql", {"query": _HEAVY}, "statement_time_limit", cancelled_at_limit("query"))]


class MysqlPyBadAuth(MysqlPy):
    name = "mysql-py-badauth"
    server = "mysql-py"
    password = "wrong-password"

    def cases(self, ws: Workspace) -> list[Case]:
        return [Case("execute_sql", {"query": "select * from users"}, "wrong_password", bad_credentials("query"))]


class MysqlPyDown(MysqlPy):
    name = "mysql-py-down"
    server = "mysql-py"

    def cases(self, ws: Workspace) -> list[Case]:
        def stop(ws: Workspace) -> None:
            db: MariaDb = ws.extra["mariadb"]
            db.stop()

        down = service_down("query", write=True)
        return [Case("execute_sql", {"query": "select * from users"}, "database_down", down, before=stop)]


HOLDOUT_SOURCES += [
    MysqlNpm(),
    MysqlNpmWrites(),
    MysqlNpmQuota(),
    MysqlNpmTimed(),
    MysqlNpmBadAuth(),
    MysqlNpmNoDb(),
    MysqlNpmDown(),
    MysqlPy(),
    MysqlPyTimed(),
    MysqlPyBadAuth(),
    MysqlPyDown(),
]


# --- a browser automation server: Playwright's, driving Debian's chromium ------------------------------------------

_PAGE = "<html><body><h1>Orders</h1><button onclick='1'>Refresh</button><input aria-label='Search'></body></html>"


def page_route(method: str, path: str, query: dict[str, list[str]], headers: dict[str, str], body: bytes) -> Any:
    if path == "/slow":
        import time

        time.sleep(8)  # slower than the server's navigation timeout (this handler's own thread)
    return 200, _PAGE, {}


class Playwright(Source):
    name = "playwright"
    package = "@playwright/mcp@0.0.83"
    kind = "browser"
    language = "node"
    effects = {
        "browser_navigate": "read_only",
        "browser_snapshot": "read_only",
        "browser_take_screenshot": "read_only",
        "browser_tabs": "read_only",
    }

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        with fake_service(page_route) as site, fake_service(page_route) as blocked:
            ws.extra["site"], ws.extra["blocked_site"] = site.base, blocked.base
            out = ws.root / "playwright-out"
            yield node(
                "@playwright/mcp", "cli.js", "--headless", "--isolated", "--no-sandbox", "--browser", "chromium",
                "--executable-path", "/usr/bin/chromium", "--timeout-navigation", "3000", "--timeout-action", "2000",
                "--blocked-origins", blocked.base, "--output-dir", str(out),
                env={"HOME": str(ws.root), "PLAYWRIGHT_BROWSERS_PATH": str(ws.root / "no-browsers")},
            )  # fmt: skip

    def cases(self, ws: Workspace) -> list[Case]:
        site, nav = ws.extra["site"], "browser_navigate"
        stale = L.conflict(
            "target", "browser_snapshot", why="the element is not in the current snapshot: re-read the page"
        )
        return [
            Case(nav, {"url": site + "/orders"}, "setup", L.schema(), setup=True),  # not recorded
            Case("browser_click", {"element": "Archive button", "target": "e999"}, "stale_ref", stale),
            Case("browser_type", {"element": "Name field", "target": "e998", "text": "Ann"}, "stale_ref", stale),
            Case("browser_click", {"element": "Refresh button"}, "missing_target", L.missing_arg("target")),
            Case("browser_evaluate", {"function": "() => undefinedThing.length"}, "script_error",
                 L.bad_value("function", why="the page script the call passed threw an error")),
            Case("browser_tabs", {"action": "select", "index": 7}, "tab_missing", L.bad_value("index")),
            Case("browser_file_upload", {"paths": ["/tmp/x.txt"]}, "no_file_chooser",
                 L.conflict(why="no file chooser is open: the page is not in the state the call assumes")),
            Case(nav, {"url": f"http://127.0.0.1:{_closed_port()}/"}, "site_refused", L.remote_transient("url")),
            Case(nav, {"url": "http://shop.invalid/"}, "host_does_not_exist", L.not_found("url")),
            # "htp//broken" was provoked as a malformed URL; the server read it as the host "htp" (text reviewed).
            Case(nav, {"url": "htp//broken"}, "host_does_not_exist", L.not_found("url")),
            Case(nav, {"url": ws.extra["blocked_site"] + "/"}, "origin_blocked", L.forbidden("url")),
            Case(nav, {"url": site + "/slow"}, "navigation_timeout",
                 L.custom("D1_transient_execution_error", True, "maybe_executed", "backoff_retry", "url",
                          why="the page answered slower than the server's navigation timeout")),
            Case(nav, {"url": 42}, "url_wrong_type", L.schema("url")),
            Case("browser_open_devtools", {}, "unknown_tool", L.unknown_tool()),
        ]  # fmt: skip


HOLDOUT_SOURCES += [Playwright()]


# --- a search/index server: Elastic's, in front of a fake Elasticsearch ---------------------------------------------


def _es_error(status: int, kind: str, reason: str, **more: Any) -> tuple[int, Any, dict[str, str]]:
    cause = {"type": kind, "reason": reason, **more}
    headers = {"X-Elastic-Product": "Elasticsearch"}
    if status == 401:
        headers["WWW-Authenticate"] = 'ApiKey, Basic realm="security"'
    return status, {"error": {"root_cause": [cause], **cause}, "status": status}, headers


_ES_MAPPING = {"properties": {"customer": {"type": "keyword"}, "total": {"type": "double"}, "note": {"type": "text"}}}


def es_route(method: str, path: str, query: dict[str, list[str]], headers: dict[str, str], body: bytes) -> Any:
    ok = {"X-Elastic-Product": "Elasticsearch"}
    if headers.get("authorization") != "ApiKey good-key":
        return _es_error(401, "security_exception", "unable to authenticate with provided credentials and anonymous "
                         "access is not allowed for this request")  # fmt: skip
    parts = [unquote(p) for p in path.split("/") if p]
    index = parts[0] if parts and not parts[0].startswith("_") else ""
    if parts[:1] == ["_cat"]:
        return _es_error(503, "master_not_discovered_exception", None)
    if index in ("orders", "audit") and parts[1:] == ["_mapping"]:
        return 200, {index: {"mappings": _ES_MAPPING}}, ok
    if index == "audit":
        return _es_error(403, "security_exception", "action [indices:data/read/search] is unauthorized for API key "
                         "id [mcp-reader] of user [mcp] on indices [audit], this action is granted by the index "
                         "privileges [read,all]")  # fmt: skip
    if index == "orders" and parts[1:] == ["_search"]:
        request = json.loads(body or b"{}")
        clause = next(iter((request.get("query") or {}).keys()), "")
        if clause == "mach":
            return _es_error(400, "parsing_exception", "unknown query [mach] did you mean [match]?", line=1, col=19)
        if clause == "range":
            return _es_error(
                429,
                "es_rejected_execution_exception",
                "rejected execution of TimedRunnable on EsThreadPoolExecutor[name = node-1/search, queue capacity = "
                "1000, active threads = 13, queued tasks = 1000, completed tasks = 8123]",
            )
        return 200, {"hits": {"total": {"value": 0}, "hits": []}}, ok
    if index:
        return _es_error(404, "index_not_found_exception", f"no such index [{index}]", index=index)
    return 200, {}, ok


class Elasticsearch(Source):
    """``@elastic/mcp-server-elasticsearch``: answers errors as successful results (``Error: ...``, success-shaped);
    its argument checks (zod) are ``isError``."""

    name = "elasticsearch"
    package = "@elastic/mcp-server-elasticsearch@0.3.1"
    kind = "search"
    language = "node"
    effects: dict[str, str] = {}
    key = "good-key"

    def effect(self, tool: str) -> str:
        return "read_only"

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        with fake_service(es_route) as es:
            yield self.server_config(es.base)

    def server_config(self, url: str) -> StdioUpstream:
        env = {"ES_URL": url, "ES_API_KEY": self.key, "OTEL_SDK_DISABLED": "true"}
        return node("@elastic/mcp-server-elasticsearch", "dist/index.js", env=env)

    def cases(self, ws: Workspace) -> list[Case]:
        match = {"query": {"match": {"note": "late"}}}
        return [
            Case("get_mappings", {"index": "order"}, "index_missing", L.not_found("index", "list_indices")),
            Case("search", {"index": "logs-2026", "queryBody": match}, "index_missing",
                 L.not_found("index", "list_indices")),
            Case("search", {"index": "orders", "queryBody": {"query": {"mach": {"note": "late"}}}}, "query_dsl_error",
                 L.bad_value("queryBody")),
            Case("search", {"index": "audit", "queryBody": match}, "index_forbidden", no_privilege("index")),
            Case("search", {"index": "orders", "queryBody": {"query": {"range": {"total": {"gt": 5}}}}},
                 "search_queue_full", L.custom("D2_rate_limited", True, "rejected", "backoff_retry")),
            Case("list_indices", {"indexPattern": "*"}, "cluster_unavailable", L.remote_transient()),
            Case("search", {"index": "", "queryBody": match}, "empty_index", L.schema("index")),
            Case("search", {"index": "orders"}, "missing_query_body", L.missing_arg("queryBody")),
            Case("get_mappings", {"index": ["orders"]}, "index_wrong_type", L.schema("index")),
            Case("delete_index", {"index": "orders"}, "unknown_tool", L.unknown_tool()),
        ]  # fmt: skip


class ElasticsearchBadKey(Elasticsearch):
    name = "elasticsearch-badkey"
    server = "elasticsearch"
    key = "revoked-key"

    def cases(self, ws: Workspace) -> list[Case]:
        return [Case("get_mappings", {"index": "orders"}, "api_key_refused", bad_credentials())]


class ElasticsearchDown(Elasticsearch):
    name = "elasticsearch-down"
    server = "elasticsearch"

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        yield self.server_config(f"http://127.0.0.1:{_closed_port()}")

    def cases(self, ws: Workspace) -> list[Case]:
        return [Case("get_mappings", {"index": "orders"}, "cluster_down", service_down("index"))]


HOLDOUT_SOURCES += [Elasticsearch(), ElasticsearchBadKey(), ElasticsearchDown()]


# --- a message queue server: RabbitMQ's (Python), its management API faked, its AMQP port closed -------------------


def rabbit_route(method: str, path: str, query: dict[str, list[str]], headers: dict[str, str], body: bytes) -> Any:
    import base64

    if headers.get("authorization") != "Basic " + base64.b64encode(b"mcp:mq-secret").decode():
        return 401, {"error": "not_authorized", "reason": "Login failed"}, {}
    parts = [unquote(p) for p in path.split("/") if p]  # api, queues, vhost, name
    if parts[1:] == ["queues"]:
        return 503, {"error": "service_unavailable", "reason": "node rabbit@mq1 is not running"}, {}
    if parts[1:2] == ["queues"] and parts[2:3] == ["/"] and parts[3:4] == ["orders"]:
        return 200, {"name": "orders", "messages": 3, "vhost": "/"}, {}
    if parts[1:2] == ["queues"] and parts[2:3] == ["staging"]:
        return 403, {"error": "not_authorised", "reason": "Access refused."}, {}
    return 404, {"error": "Object Not Found", "reason": "Not Found"}, {}


class RabbitMq(Source):
    """``mcp-server-rabbitmq`` (FastMCP): broker failures come back as successful results ("Failed to ...",
    success-shaped); its name checks raise (``isError``)."""

    name = "rabbitmq"
    package = "mcp-server-rabbitmq==2.2.0"
    kind = "queue"
    language = "python"
    effects = {"list_queues": "read_only", "list_exchanges": "read_only", "get_queue_info": "read_only",
               "get_exchange_info": "read_only"}  # fmt: skip
    password = "mq-secret"

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        with fake_service(rabbit_route) as api:
            yield self.server_config(api.port)

    def server_config(self, api_port: int) -> StdioUpstream:
        args = ["--rabbitmq-host", "127.0.0.1", "--port", str(_closed_port()), "--username", "mcp",
                "--password", self.password, "--api-port", str(api_port)]  # fmt: skip
        return _stdio(py_bin("rabbitmq-py", "mcp-server-rabbitmq"), *args)

    def cases(self, ws: Workspace) -> list[Case]:
        lookup = L.not_found("queue", "list_queues")
        broker_down = service_down("queue", write=True)
        return [
            Case("get_queue_info", {"queue": "invoices"}, "queue_missing", lookup),
            Case("delete_queue", {"queue": "invoices"}, "queue_missing", lookup),
            Case("purge_queue", {"queue": "invoices"}, "queue_missing", lookup),
            Case("get_queue_info", {"queue": "orders", "vhost": "staging"}, "vhost_forbidden", no_privilege("vhost")),
            Case("list_queues", {}, "management_unavailable", L.remote_transient()),
            Case("enqueue", {"queue": "orders", "message": "hello"}, "broker_down", broker_down),
            Case("fanout", {"exchange": "events", "message": "hello"}, "broker_down", broker_down),
            Case("enqueue", {"queue": "orders/eu", "message": "hello"}, "bad_queue_name", L.bad_value("queue")),
            Case("enqueue", {"queue": " ", "message": "hello"}, "empty_queue_name", L.bad_value("queue")),
            Case("enqueue", {"queue": "orders"}, "missing_message", L.missing_arg("message")),
            Case("get_queue_info", {"queue": ["orders"]}, "queue_wrong_type", L.schema("queue")),
        ]


class RabbitMqBadAuth(RabbitMq):
    name = "rabbitmq-badauth"
    server = "rabbitmq"
    password = "wrong-secret"

    def cases(self, ws: Workspace) -> list[Case]:
        return [Case("get_queue_info", {"queue": "orders"}, "login_failed", bad_credentials())]


HOLDOUT_SOURCES += [RabbitMq(), RabbitMqBadAuth()]
