"""Local services behind the corpus servers: a real PostgreSQL, a real redis-server, and a fake HTTP API.

All bind 127.0.0.1 (PostgreSQL and Redis on a free port, in a directory of the workspace) and are stopped by the
context manager that started them. The fake API answers by path: ``/status/CODE`` (with ``Retry-After`` for 429 and
503, a JSON error body in the shape cloud APIs use), ``/slow`` (answers after ``slow_s``), and a small JSON API of
``/items`` (``GET``/``POST``/``PUT``/``DELETE``) with an OpenAPI document at ``/openapi.json`` and a SearXNG-like
``/search``.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlsplit


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_port(port: int, proc: subprocess.Popen[bytes], what: str, limit_s: float = 60.0) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1.0):
                return
        except OSError:
            time.sleep(0.1)  # polling a port a subprocess is opening: no event to wait on
    raise TimeoutError(f"{what} did not listen on 127.0.0.1:{port} within {limit_s} s")


# --- PostgreSQL -----------------------------------------------------------------------------------------------------


def _pg_bin(name: str) -> str:
    for root in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (root / name).exists():
            return str(root / name)
    found = shutil.which(name)
    if found is None:
        raise FileNotFoundError(f"{name}: install PostgreSQL (scripts/install-corpus-servers.sh)")
    return found


PG_SETUP = """
create table users(id serial primary key, email text unique not null, name text, age int check (age >= 0));
create table orders(id serial primary key, user_id int not null references users(id), total numeric(8,2));
create table secrets(id int primary key, value text);
insert into users(email, name, age) values ('a@example.com', 'Ann', 31), ('b@example.com', 'Bo', 40);
insert into orders(user_id, total) values (1, 9.50), (2, 12.00);
create role app login password 'app-secret';
grant select, insert, update, delete on users, orders to app;
grant usage on all sequences in schema public to app;
create role slow login password 'slow-secret';
alter role slow set statement_timeout = '300ms';
grant select on users, orders to slow;
"""


@dataclass
class Postgres:
    port: int
    proc: subprocess.Popen[bytes]
    data: Path

    def url(self, user: str = "app", password: str = "app-secret", db: str = "shop") -> str:
        return f"postgresql://{user}:{password}@127.0.0.1:{self.port}/{db}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(30)


def _as_postgres() -> list[str]:
    # PostgreSQL refuses to run as root: run its programs as the Debian package's user.
    return ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []


@contextmanager
def postgres(root: Path) -> Iterator[Postgres]:
    root.mkdir(parents=True, exist_ok=True)
    data = root / "pg"
    data.mkdir(mode=0o700)
    if os.geteuid() == 0:
        shutil.chown(data, "postgres", "postgres")
    pw = root / "pg.pw"
    pw.write_text("admin-secret\n")
    pw.chmod(0o644)
    subprocess.run(
        [
            *_as_postgres(),
            _pg_bin("initdb"),
            "-D",
            str(data),
            "-U",
            "admin",
            "--pwfile",
            str(pw),
            "-A",
            "scram-sha-256",
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    port = free_port()
    log = (root / "pg.log").open("wb")
    argv = [_pg_bin("postgres"), "-D", str(data), "-p", str(port), "-k", str(data), "-c", "listen_addresses=127.0.0.1"]
    proc = subprocess.Popen([*_as_postgres(), *argv], stdout=log, stderr=log)
    pg = Postgres(port, proc, data)
    try:
        _wait_port(port, proc, "postgres")
        ready = [_pg_bin("pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(port)]
        deadline = time.monotonic() + 60
        while subprocess.run(ready, check=False).returncode != 0:  # listening before it accepts logins
            if time.monotonic() > deadline:
                raise TimeoutError("postgres did not accept connections within 60 s")
            time.sleep(0.1)
        env = {**os.environ, "PGPASSWORD": "admin-secret"}
        psql = [_pg_bin("psql"), "-h", "127.0.0.1", "-p", str(port), "-U", "admin", "-v", "ON_ERROR_STOP=1", "-q"]
        subprocess.run([*psql, "-d", "postgres", "-c", "create database shop"], check=True, env=env)
        subprocess.run([*psql, "-d", "shop", "-c", PG_SETUP], check=True, env=env, stdout=subprocess.DEVNULL)
        yield pg
    finally:
        pg.stop()
        log.close()


# --- Redis ----------------------------------------------------------------------------------------------------------


@dataclass
class Redis:
    port: int
    password: str
    proc: subprocess.Popen[bytes]

    def url(self, password: str | None = None) -> str:
        pw = self.password if password is None else password
        return f"redis://:{pw}@127.0.0.1:{self.port}/0" if pw else f"redis://127.0.0.1:{self.port}/0"

    def cli(self, *args: str) -> str:
        argv = ["redis-cli", "-h", "127.0.0.1", "-p", str(self.port), "--no-auth-warning", "-a", self.password, *args]
        return subprocess.run(argv, check=True, capture_output=True, text=True, timeout=30).stdout

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(30)


@contextmanager
def redis(root: Path, password: str = "cache-secret", replica_of: Redis | None = None) -> Iterator[Redis]:
    port = free_port()
    work = root / f"redis-{port}"
    work.mkdir()
    argv = [
        "redis-server",
        "--bind", "127.0.0.1",
        "--port", str(port),
        "--save", "",
        "--appendonly", "no",
        "--dir", str(work),
        "--requirepass", password,
        "--maxmemory", "8mb",
        "--maxmemory-policy", "noeviction",
        "--busy-reply-threshold", "200",
    ]  # fmt: skip
    if replica_of is not None:
        argv += ["--replicaof", "127.0.0.1", str(replica_of.port), "--masterauth", replica_of.password]
    log = (work / "redis.log").open("wb")
    proc = subprocess.Popen(argv, stdout=log, stderr=log)
    r = Redis(port, password, proc)
    try:
        _wait_port(port, proc, "redis-server")
        yield r
    finally:
        r.stop()
        log.close()


# --- a fake HTTP API ------------------------------------------------------------------------------------------------


@dataclass
class FakeApi:
    port: int = 0
    slow_s: float = 5.0
    items: dict[str, dict[str, Any]] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"


_ERRORS = {
    400: ("INVALID_ARGUMENT", "Request field 'name' is invalid: must be 1-64 characters"),
    401: ("UNAUTHENTICATED", "Request had invalid authentication credentials."),
    403: ("PERMISSION_DENIED", "The caller does not have permission to access this resource."),
    404: ("NOT_FOUND", "Requested entity was not found."),
    409: ("ALREADY_EXISTS", "The resource already exists."),
    422: ("INVALID_ARGUMENT", "Unprocessable entity: 'quantity' must be a positive integer"),
    429: (
        "RESOURCE_EXHAUSTED",
        "Quota exceeded for quota metric 'Requests' and limit 'Requests per minute' of service 'inventory'.",
    ),
    500: ("INTERNAL", "Internal error encountered."),
    502: ("UNAVAILABLE", "Bad gateway: the backend did not answer."),
    503: ("UNAVAILABLE", "The service is currently unavailable."),
    504: ("DEADLINE_EXCEEDED", "The backend did not answer in time."),
}


def openapi_document(base: str) -> dict[str, Any]:
    item = {
        "type": "object",
        "properties": {"id": {"type": "string"}, "name": {"type": "string"}, "quantity": {"type": "integer"}},
    }
    status_param = [{"name": "code", "in": "path", "required": True, "schema": {"type": "integer"}}]
    id_param = [{"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}]
    ok = {"200": {"description": "ok", "content": {"application/json": {"schema": item}}}}
    return {
        "openapi": "3.0.3",
        "info": {"title": "Inventory API", "version": "1.0.0"},
        "servers": [{"url": base}],
        "paths": {
            "/items": {
                "get": {"operationId": "listItems", "summary": "List items", "responses": ok},
                "post": {
                    "operationId": "createItem",
                    "summary": "Create an item",
                    "requestBody": {"required": True, "content": {"application/json": {"schema": item}}},
                    "responses": ok,
                },
            },
            "/items/{id}": {
                "get": {"operationId": "getItem", "summary": "Get one item", "parameters": id_param, "responses": ok},
                "delete": {
                    "operationId": "deleteItem",
                    "summary": "Delete one item",
                    "parameters": id_param,
                    "responses": ok,
                },
            },
            "/status/{code}": {
                "get": {
                    "operationId": "getStatus",
                    "summary": "Report the health of a dependency by its status code",
                    "parameters": status_param,
                    "responses": ok,
                }
            },
            "/slow": {"get": {"operationId": "getSlowReport", "summary": "A slow report", "responses": ok}},
        },
    }


class _ApiHandler(BaseHTTPRequestHandler):
    api: ClassVar[FakeApi]
    protocol_version = "HTTP/1.1"

    def _route(self, method: str) -> None:
        url = urlsplit(self.path)
        parts = [p for p in url.path.split("/") if p]
        self.api.requests.append(f"{method} {self.path}")
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(min(length, 1 << 20)) if length else b""
        auth = self.headers.get("Authorization", "")
        if parts[:1] == ["secure"] and auth != "Bearer good-token":
            self._error(401)
            return
        if parts and parts[0] == "secure":
            parts = parts[1:]
        if url.path == "/openapi.json":
            self._json(200, openapi_document(self.api.base))
        elif parts[:1] == ["status"] and len(parts) == 2 and parts[1] == "4291":  # a spent quota, not a short wait
            self._error(429, quota=True)
        elif parts[:1] == ["status"] and len(parts) == 2 and parts[1].isdigit():
            self._error(int(parts[1]), quota="quota" in url.query)
        elif parts[:1] == ["slow"]:
            time.sleep(self.api.slow_s)  # the fake service is slow on purpose (its own thread)
            self._json(200, {"report": "late"})
        elif parts[:1] == ["search"]:
            self._search(parse_qs(url.query))
        elif parts[:1] == ["items"]:
            self._items(method, parts[1:], body)
        else:
            self._error(404)

    def _items(self, method: str, rest: list[str], body: bytes) -> None:
        items = self.api.items
        if not rest and method == "GET":
            self._json(200, {"items": list(items.values())})
        elif not rest and method == "POST":
            try:
                data = json.loads(body or b"{}")
            except ValueError:
                self._error(400)
                return
            if not isinstance(data, dict) or not isinstance(data.get("name"), str) or not data["name"]:
                self._error(400)
            elif not isinstance(data.get("quantity", 1), int) or data.get("quantity", 1) <= 0:
                self._error(422)
            elif data.get("id") in items:
                self._error(409)
            else:
                item = {"id": str(data.get("id") or len(items) + 1), "name": data["name"]}
                items[item["id"]] = item
                self._json(201, item)
        elif len(rest) == 1 and rest[0] in items:
            item = items.pop(rest[0]) if method == "DELETE" else items[rest[0]]
            self._json(200, item)
        else:
            self._error(404)

    def _search(self, query: dict[str, list[str]]) -> None:
        q = (query.get("q") or [""])[0]
        if q.startswith("!status"):
            self._error(int(q.split()[1]))
        else:
            self._json(200, {"query": q, "results": [], "unresponsive_engines": [["duckduckgo", "timeout"]]})

    def _error(self, code: int, quota: bool = False) -> None:
        status, message = _ERRORS.get(code, ("UNKNOWN", f"HTTP {code}"))
        if quota:  # the day's quota is spent: no short wait helps
            message = "Quota exceeded for quota metric 'Requests' and limit 'Requests per day' of service 'inventory'."
        headers: dict[str, str] = {}
        if code == 429:
            headers["Retry-After"] = "3600" if quota else "2"
        if code == 503:
            headers["Retry-After"] = "5"
        if code == 401:
            headers["WWW-Authenticate"] = 'Bearer realm="inventory"'
        self._json(code, {"error": {"code": code, "status": status, "message": message}}, headers)

    def _json(self, code: int, value: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(value).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._route("GET")

    def do_POST(self) -> None:
        self._route("POST")

    def do_PUT(self) -> None:
        self._route("PUT")

    def do_DELETE(self) -> None:
        self._route("DELETE")

    def log_message(self, format: str, *args: Any) -> None:
        return None


@contextmanager
def fake_api(slow_s: float = 5.0) -> Iterator[FakeApi]:
    api = FakeApi(slow_s=slow_s)
    handler = type("Handler", (_ApiHandler,), {"api": api})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    api.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield api
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


# --- MariaDB (MySQL protocol) ---------------------------------------------------------------------------------------

MYSQL_SETUP = """
create database shop;
create database vault;
use shop;
create table users(id int auto_increment primary key, email varchar(64) unique not null, name varchar(16),
  age int check (age >= 0));
create table orders(id int auto_increment primary key, user_id int not null, total decimal(8,2),
  foreign key (user_id) references users(id));
create table vault.secrets(id int primary key, value text);
insert into users(email, name, age) values ('a@example.com', 'Ann', 31), ('b@example.com', 'Bo', 40);
insert into orders(user_id, total) values (1, 9.50), (2, 12.00);
create user 'app'@'127.0.0.1' identified by 'app-secret';
grant select, insert, update, delete, create, drop, execute on shop.* to 'app'@'127.0.0.1';
create user 'slow'@'127.0.0.1' identified by 'slow-secret';
grant select on shop.* to 'slow'@'127.0.0.1';
alter user 'slow'@'127.0.0.1' with max_queries_per_hour 3;
create user 'timed'@'127.0.0.1' identified by 'timed-secret' with max_statement_time 0.2;
grant select on shop.* to 'timed'@'127.0.0.1';
"""


@dataclass
class MariaDb:
    port: int
    proc: subprocess.Popen[bytes]
    data: Path

    def admin(self, sql: str) -> None:
        argv = ["mariadb", "--no-defaults", "-h", "127.0.0.1", "-P", str(self.port), "-u", "root", "-e", sql]
        done = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=30)
        if done.returncode != 0:
            raise RuntimeError(f"mariadb: {done.stderr.strip()}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(60)


@contextmanager
def mariadb(root: Path) -> Iterator[MariaDb]:
    """A scratch MariaDB (Debian's ``mariadb-server``) on a free port of 127.0.0.1: database ``shop``, users ``app``
    (reads and writes ``shop``, no grant on ``vault.secrets``), ``slow`` (3 queries an hour: MySQL's per-account
    quota), ``timed`` (MariaDB's per-account ``max_statement_time`` of 0.2 s)."""
    root.mkdir(parents=True, exist_ok=True)
    work = root / f"mariadb-{free_port()}"
    work.mkdir()
    user = ["--user=mysql"] if os.geteuid() == 0 else []
    if os.geteuid() == 0:
        shutil.chown(work, "mysql", "mysql")
    data = work / "data"
    subprocess.run(
        ["mariadb-install-db", "--no-defaults", f"--datadir={data}", *user, "--skip-test-db",
         "--auth-root-authentication-method=normal"],
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120,
    )  # fmt: skip
    port = free_port()
    log = (work / "mariadb.log").open("wb")
    argv = [
        "mariadbd", "--no-defaults", f"--datadir={data}", f"--port={port}", "--bind-address=127.0.0.1",
        f"--socket={work / 'sock'}", "--skip-log-bin", "--innodb-buffer-pool-size=16M", *user,
    ]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=log, stderr=log)
    db = MariaDb(port, proc, data)
    try:
        _wait_port(port, proc, "mariadbd")
        db.admin(MYSQL_SETUP)
        yield db
    finally:
        db.stop()
        log.close()
