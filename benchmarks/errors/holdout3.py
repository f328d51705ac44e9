"""A third fresh hold-out (issue 19): servers of kinds neither the corpus nor the first two hold-outs cover.

    python -m benchmarks.errors.holdout3          # writes holdout3.jsonl (+ holdout3_success_shaped.jsonl)

It measures the rules on servers no rule was written from: a Prometheus server (Python) in front of a fake
Prometheus HTTP API, Grafana's own server (a Go binary shipped in a PyPI wheel) in front of a fake Grafana HTTP API,
an Obsidian notes server (Python) in front of a fake Obsidian Local REST API over TLS, a code runner (Node) that runs
snippets with the machine's interpreters, a read-only CouchDB server (Python) in front of a fake CouchDB, and an SSH
server (Node) on Debian's OpenSSH daemon. Every label was written from the situation provoked, the server's own words
and LABELS.md before any rule was run on these records; records and labels were committed ("frozen before measuring")
before the rules were run on them.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import anyio

from resilient_mcp.policy.config import RemoteUpstream, StdioUpstream

from . import labels as L
from .holdout import _closed_port, fake_service
from .holdout2 import self_signed, tls_fake_service
from .servers import NPM_MODULES, bad_credentials, no_privilege, py_bin, service_down
from .situations import Case, Source, Workspace, _env, _stdio

HERE = Path(__file__).resolve().parent

Reply = tuple[int, Any, dict[str, str]]


def _rate_limited(*names: str) -> L.Gold:
    return L.custom("D2_rate_limited", True, "rejected", "backoff_retry", *names,
                    why="the service asks to slow down for a short while")  # fmt: skip


def _slow(*names: str, write: bool = False) -> L.Gold:
    action = "verify_state" if write else "backoff_retry"
    why = "the service answered slower than the server's own timeout: it may have run"
    return L.custom("D1_transient_execution_error", True, "maybe_executed", action, *names, why=why)


# --- Prometheus: prometheus-mcp-server (Python) in front of a fake Prometheus HTTP API -------------------------------


def _prom_error(status: int, error_type: str, error: str, headers: dict[str, str] | None = None) -> Reply:
    # Prometheus's documented error envelope (GET /api/v1/query: 400 bad_data, 422 execution, 503 timeout).
    return status, {"status": "error", "errorType": error_type, "error": error}, headers or {}


def prometheus_route(method: str, path: str, query: dict[str, list[str]], headers: dict[str, str], body: bytes) -> Any:
    if headers.get("authorization") != "Bearer prom-good":
        return 401, "Unauthorized\n", {"WWW-Authenticate": 'Bearer realm="prometheus"'}  # the reverse proxy's
    endpoint = path.removeprefix("/api/v1/")
    q = (query.get("query") or [""])[0]
    if endpoint in ("query", "query_range"):
        if q.count("(") != q.count(")"):
            return _prom_error(400, "bad_data", f'invalid parameter "query": 1:{len(q) + 1}: parse error: unclosed '
                               "left parenthesis")  # fmt: skip
        if q.startswith("count_over_time({__name__=~"):
            return _prom_error(422, "execution", "query processing would load too many samples into memory in "
                               "query execution")  # fmt: skip
        if q.startswith("quantile_over_time"):
            return _prom_error(503, "timeout", "query timed out in expression evaluation")
        if q.startswith("sum by (tenant)"):
            return _prom_error(429, "unavailable", "the query was rejected because the tenant exceeded its limit of "
                               "concurrent queries", {"Retry-After": "2"})  # fmt: skip
        if q.startswith("topk"):
            return 502, "<html><body><h1>502 Bad Gateway</h1></body></html>", {}
        if q.startswith("histogram_quantile(0.99, sum(rate(slow"):
            time.sleep(3.5)  # the server's PROMETHEUS_REQUEST_TIMEOUT is 2 s
            return 200, {"status": "success", "data": {"resultType": "vector", "result": []}}, {}
        if q.startswith("absent"):
            return 500, {"status": "error", "errorType": "internal", "error": "expanding series: unexpected EOF"}, {}
        if endpoint == "query_range":
            step = (query.get("step") or [""])[0]
            start, end = (query.get("start") or [""])[0], (query.get("end") or [""])[0]
            if step in ("0", "0s", "-1"):
                return _prom_error(400, "bad_data", 'invalid parameter "step": zero or negative query resolution '
                                   "step widths are not accepted. Try a positive integer")  # fmt: skip
            if start > end:
                return _prom_error(400, "bad_data", 'invalid parameter "end": end timestamp must not be before '
                                   "start time")  # fmt: skip
            if step == "1s":
                return _prom_error(400, "bad_data", "exceeded maximum resolution of 11,000 points per timeseries. Try "
                                   "decreasing the query resolution (?step=XX)")  # fmt: skip
        if "time" in query and not query["time"][0][:1].isdigit():
            t = query["time"][0]
            return _prom_error(400, "bad_data", f'invalid parameter "time": cannot parse "{t}" to a valid timestamp')
        return 200, {"status": "success", "data": {"resultType": "vector", "result": []}}, {}
    if endpoint == "targets":
        return 200, {"status": "success", "data": {"activeTargets": [], "droppedTargets": []}}, {}
    if endpoint in ("label/__name__/values", "metadata", "status/buildinfo"):
        return 200, {"status": "success", "data": [] if endpoint != "metadata" else {}}, {}
    return 404, "404 page not found\n", {}


class Prometheus(Source):
    name = "prometheus"
    package = "prometheus-mcp-server==1.6.2"
    kind = "monitoring"
    language = "python"
    effects = {"execute_query": "read_only", "execute_range_query": "read_only", "list_metrics": "read_only",
               "get_metric_metadata": "read_only", "get_targets": "read_only", "health_check": "read_only"}  # fmt: skip
    token = "prom-good"

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        with fake_service(prometheus_route) as api:
            yield self.server_config(f"http://127.0.0.1:{api.port}")

    def server_config(self, url: str) -> StdioUpstream:
        env = {"PROMETHEUS_URL": url, "PROMETHEUS_TOKEN": self.token, "PROMETHEUS_REQUEST_TIMEOUT": "2", "HOME": "/tmp"}
        return _stdio(py_bin("prometheus-py", "prometheus-mcp-server"), env=env)

    def cases(self, ws: Workspace) -> list[Case]:
        q, r = "execute_query", "execute_range_query"
        rng = {"start": "2026-12-01T00:00:00Z", "end": "2026-12-01T06:00:00Z", "step": "60s"}
        return [
            Case(q, {"query": "rate(http_requests_total[5m]"}, "parse_error", L.bad_value("query")),
            Case(q, {"query": "up", "time": "yesterday"}, "bad_time", L.bad_value("time")),
            Case(q, {"query": 'count_over_time({__name__=~".+"}[30d])'}, "too_many_samples",
                 L.custom("D4_permanent_execution_error", False, "executed_failed", "fix_parameter", "query",
                          why="the query exceeds the server's sample limit: the same query meets the same limit")),
            Case(q, {"query": "quantile_over_time(0.99, http_request_duration_seconds[90d])"}, "query_timeout",
                 L.custom("D4_permanent_execution_error", False, "executed_failed", "fix_parameter", "query",
                          why="Prometheus cancelled the query at its own time limit: narrow it")),
            Case(q, {"query": "sum by (tenant) (rate(http_requests_total[5m]))"}, "tenant_concurrency_limit",
                 _rate_limited("query")),
            Case(q, {"query": "topk(5, rate(http_requests_total[5m]))"}, "gateway_502", service_down("query")),
            Case(q, {"query": "absent(up{job=\"api\"})"}, "internal_error", service_down("query")),
            Case(q, {"query": "histogram_quantile(0.99, sum(rate(slow_seconds_bucket[5m])) by (le))"}, "slow_query",
                 _slow("query")),
            Case(r, {"query": "up", **rng, "step": "0"}, "zero_step", L.bad_value("step")),
            Case(r, {"query": "up", **rng, "start": "2026-12-02T00:00:00Z"}, "end_before_start",
                 L.bad_value("start", "end")),
            Case(r, {"query": "up", **rng, "step": "1s"}, "too_many_points", L.bad_value("step")),
            Case(r, {"query": "up", "start": "2026-12-01T00:00:00Z"}, "missing_end_and_step",
                 L.missing_arg("end", "step")),
            Case("get_targets", {"state": "healthy"}, "bad_target_state", L.bad_value("state")),
            Case(q, {}, "missing_query", L.missing_arg("query")),
            Case(q, {"query": ["up"]}, "query_wrong_type", L.schema("query")),
            Case("get_alerts", {}, "unknown_tool", L.unknown_tool()),
        ]  # fmt: skip


class PrometheusBadToken(Prometheus):
    name = "prometheus-badtoken"
    server = "prometheus"
    token = "prom-expired"

    def cases(self, ws: Workspace) -> list[Case]:
        return [Case("execute_query", {"query": "up"}, "token_refused", bad_credentials())]


class PrometheusDown(Prometheus):
    name = "prometheus-down"
    server = "prometheus"

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        yield self.server_config(f"http://127.0.0.1:{_closed_port()}")

    def cases(self, ws: Workspace) -> list[Case]:
        return [
            Case("execute_query", {"query": "up"}, "prometheus_down", service_down()),
            Case("list_metrics", {}, "prometheus_down", service_down()),
        ]


HOLDOUT3_SOURCES: list[Source] = [Prometheus(), PrometheusBadToken(), PrometheusDown()]


# --- Obsidian: mcp-obsidian (Python) in front of a fake Obsidian Local REST API (HTTPS, self-signed) -----------------

_NOTE = "# Plan\n\n## Goals\n\nShip it.\n\n## Week 1\n\n### Notes\n\na\n\n## Week 2\n\n### Notes\n\nb\n"


def _obs_error(status: int, code: int, message: str) -> Reply:
    # The Local REST API plugin's error body: {"errorCode": <status * 100 + n>, "message": ...}.
    return status, {"errorCode": code, "message": message}, {}


def obsidian_route(method: str, path: str, query: dict[str, list[str]], headers: dict[str, str], body: bytes) -> Any:
    if headers.get("authorization") != "Bearer obs-good":
        return _obs_error(401, 40101, "Authorization required.  Find your API Key in the 'Local REST API' section "
                          "of your Obsidian settings.")  # fmt: skip
    parts = [unquote(p) for p in path.split("/") if p]
    if parts[:1] == ["vault"]:
        rel = "/".join(parts[1:])
        if rel in ("", "Projects"):
            return 200, {"files": ["Projects/plan.md", "Daily/2026-12-01.md"] if not rel else ["plan.md"]}, {}
        if rel == "Projects/plan.md":
            if method == "GET":
                return 200, _NOTE, {}
            if method == "PATCH":
                target = unquote(headers.get("target", ""))
                if target in ("Week 1::Notes", "Week 2::Notes", "Goals"):
                    return 200, "", {}
                return _obs_error(400, 40080, "The patch you provided could not be applied to the target content. "
                                  "invalid-target")  # fmt: skip
            return 204, "", {}
        if rel == "Projects/log.md":  # the vault's disk is full: the plugin's write throws
            return _obs_error(500, 50000, "Error: ENOSPC: no space left on device, write")
        if rel == "Projects/slow.md":
            time.sleep(7.0)  # the server's read timeout is 6 s
            return 204, "", {}
        return _obs_error(404, 40400, "Not Found")
    if parts[:2] == ["search", "simple"]:
        return 200, [], {}
    if parts[:1] == ["search"]:
        sent = json.loads(body or b"{}")
        if "glob" in sent and not isinstance(sent["glob"], list):
            return _obs_error(400, 40070, "The query you provided could not be processed.")
        return 200, [], {}
    if parts[:1] == ["periodic"]:
        period = parts[1] if len(parts) > 1 else ""
        if period == "quarterly":
            return _obs_error(400, 40060, "Periodic note for the specified period is not enabled.")
        if period == "weekly":
            return _obs_error(404, 40460, "Periodic note does not exist for the specified period.")
        return 200, "- [ ] standup\n", {}
    return _obs_error(404, 40400, "Not Found")


class Obsidian(Source):
    name = "obsidian"
    package = "mcp-obsidian==0.2.3"
    kind = "notes"
    language = "python"
    effects = {"obsidian_list_files_in_dir": "read_only", "obsidian_list_files_in_vault": "read_only",
               "obsidian_get_file_contents": "read_only", "obsidian_simple_search": "read_only",
               "obsidian_complex_search": "read_only", "obsidian_get_periodic_note": "read_only",
               "obsidian_get_recent_periodic_notes": "read_only", "obsidian_get_recent_changes": "read_only",
               "obsidian_batch_get_file_contents": "read_only", "obsidian_get_frontmatter": "read_only",
               "obsidian_search_by_tag": "read_only", "obsidian_put_content": "write_idempotent"}  # fmt: skip
    key = "obs-good"

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        cert, key = self_signed(ws.root)
        with tls_fake_service(obsidian_route, cert, key) as api:
            yield self.server_config(api.port)

    def server_config(self, port: int) -> StdioUpstream:
        env = {"OBSIDIAN_API_KEY": self.key, "OBSIDIAN_HOST": "127.0.0.1", "OBSIDIAN_PORT": str(port), "HOME": "/tmp"}
        return _stdio(py_bin("obsidian-py", "mcp-obsidian"), env=env)

    def cases(self, ws: Workspace) -> list[Case]:
        get, patch = "obsidian_get_file_contents", "obsidian_patch_content"
        edit = {"filepath": "Projects/plan.md", "operation": "append", "target_type": "heading", "content": "- c\n"}
        return [
            Case(get, {"filepath": "Projects/roadmap.md"}, "note_missing",
                 L.not_found("filepath", "obsidian_list_files_in_dir")),
            Case("obsidian_list_files_in_dir", {"dirpath": "Archive"}, "folder_missing",
                 L.not_found("dirpath", "obsidian_list_files_in_vault")),
            Case("obsidian_batch_get_file_contents", {"filepaths": ["Projects/plan.md", "Projects/old.md"]},
                 "one_of_batch_missing", L.not_found("filepaths", "obsidian_list_files_in_dir")),
            Case(patch, {**edit, "target": "Week 3"}, "heading_missing",
                 L.conflict("target", get, why="the note has no such heading: re-read it, then decide")),
            Case(patch, {**edit, "target": "Notes"}, "heading_ambiguous", L.bad_value("target")),
            Case(patch, {**edit, "target": "Goals", "operation": "merge"}, "operation_not_in_enum",
                 L.schema("operation")),
            Case("obsidian_complex_search", {"query": {"glob": "*.md"}}, "bad_jsonlogic", L.bad_value("query")),
            Case("obsidian_get_periodic_note", {"period": "quarterly"}, "period_not_enabled",
                 L.server_broken("period", why="the vault has no periodic notes for this period: its owner decides")),
            Case("obsidian_get_periodic_note", {"period": "weekly"}, "periodic_note_missing",
                 L.not_found("period", "obsidian_get_recent_periodic_notes")),
            Case("obsidian_get_periodic_note", {"period": "daily", "type": "raw"}, "type_not_in_enum",
                 L.schema("type")),
            Case("obsidian_get_recent_periodic_notes", {"period": "daily", "limit": 0}, "limit_below_minimum",
                 L.schema("limit")),
            Case("obsidian_delete_file", {"filepath": "Projects/plan.md", "confirm": False}, "delete_not_confirmed",
                 L.custom("B4_semantic_argument_rejection", False, "rejected", "fix_parameter", "confirm",
                          why="the server's own check: deleting needs confirm=true")),
            Case("obsidian_append_content", {"filepath": "Projects/log.md", "content": "- done\n"}, "disk_full",
                 L.custom("F3_quota_exhausted", False, "maybe_executed", "ask_user", why="the vault's disk is full: "
                          "no retry passes until someone frees space")),
            Case("obsidian_append_content", {"filepath": "Projects/slow.md", "content": "- x\n"}, "vault_slow",
                 _slow(write=True)),
            Case(get, {}, "missing_filepath", L.missing_arg("filepath")),
            Case("obsidian_rename_file", {"filepath": "Projects/plan.md"}, "unknown_tool", L.unknown_tool()),
        ]  # fmt: skip


class ObsidianBadKey(Obsidian):
    name = "obsidian-badkey"
    server = "obsidian"
    key = "obs-old"

    def cases(self, ws: Workspace) -> list[Case]:
        return [
            Case("obsidian_get_file_contents", {"filepath": "Projects/plan.md"}, "key_refused", bad_credentials()),
            Case("obsidian_list_files_in_vault", {}, "key_refused", bad_credentials()),
        ]


class ObsidianClosed(Obsidian):
    """Obsidian is not running: nothing listens on the plugin's port."""

    name = "obsidian-closed"
    server = "obsidian"

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        yield self.server_config(_closed_port())

    def cases(self, ws: Workspace) -> list[Case]:
        return [
            Case("obsidian_simple_search", {"query": "standup"}, "obsidian_not_running", service_down()),
            Case("obsidian_put_content", {"filepath": "Inbox.md", "content": "x"}, "obsidian_not_running",
                 service_down(write=True)),
        ]  # fmt: skip


HOLDOUT3_SOURCES += [Obsidian(), ObsidianBadKey(), ObsidianClosed()]


# --- Code runner: mcp-server-code-runner (Node) running snippets with the machine's interpreters ---------------------


class CodeRunner(Source):
    name = "code-runner"
    package = "mcp-server-code-runner@0.1.8"
    kind = "code runner"
    language = "node"
    effects = {}  # run-code runs anything: write_unsafe

    def config(self, ws: Workspace) -> StdioUpstream:
        # Its executor for Python is `python -u`: Debian has only python3, so a directory with `python` goes first.
        bin_dir = ws.root / "code-runner-bin"
        bin_dir.mkdir(exist_ok=True)
        if not (bin_dir / "python").exists():
            (bin_dir / "python").symlink_to("/usr/bin/python3")
        entry = NPM_MODULES / "mcp-server-code-runner/dist/cli.js"
        env = {"TMPDIR": str(ws.root), "HOME": str(ws.root), "PATH": f"{bin_dir}:{_env()['PATH']}"}
        return _stdio("node", str(entry), env=env)

    def cases(self, ws: Workspace) -> list[Case]:
        run = "run-code"
        ran = L.custom(
            "B4_semantic_argument_rejection",
            False,
            "maybe_executed",
            "verify_state",
            "code",
            why="the snippet ran and failed part way: it may have changed things; fix the code",
        )
        refused = L.bad_value("code", why="the interpreter refused the snippet before running it: fix the code")
        return [
            Case(run, {"languageId": "python", "code": "print(totl)\n"}, "python_name_error", ran),
            Case(run, {"languageId": "python", "code": "def f(:\n    pass\n"}, "python_syntax_error", refused),
            Case(run, {"languageId": "javascript", "code": "const x = ;\n"}, "node_syntax_error", refused),
            Case(run, {"languageId": "javascript", "code": "null.length\n"}, "node_type_error", ran),
            Case(run, {"languageId": "python", "code": "import yaml_nonexistent_pkg\n"}, "python_module_missing",
                 refused),
            Case(run, {"languageId": "python", "code": "open('/nonexistent/data.csv').read()\n"},
                 "python_file_missing", ran),
            Case(run, {"languageId": "python", "code": "rows = []\nprint(sum(rows) / len(rows))\n"},
                 "python_zero_division", ran),
            Case(run, {"languageId": "python", "code": f"import socket\nsocket.create_connection(('127.0.0.1', "
                                                       f"{_closed_port()}))\n"}, "python_connection_refused",
                 L.custom("D1_transient_execution_error", True, "maybe_executed", "verify_state", "code",
                          why="the service the snippet talks to refused the connection: it may come back")),
            Case(run, {"languageId": "python", "code": "import sys\nsys.exit(3)\n"}, "python_exit_status", ran),
            Case(run, {"languageId": "ruby", "code": "puts 1\n"}, "interpreter_missing",
                 L.bad_value("languageId", why="no interpreter for this language on the machine: pick another")),
            Case(run, {"languageId": "python", "code": ""}, "empty_code", L.bad_value("code")),
            Case(run, {"languageId": "cobol", "code": "DISPLAY 'HI'."}, "language_not_in_enum", L.schema("languageId")),
            Case(run, {"languageId": "python"}, "missing_code", L.missing_arg("code")),
            Case(run, {"languageId": "python", "code": "import time\ntime.sleep(30)\n"}, "snippet_hangs",
                 L.custom("C3_attempt_timeout", True, "maybe_executed", "verify_state", "code"), timeout_s=4.0),
            Case("run_code", {"languageId": "python", "code": "print(1)"}, "unknown_tool", L.unknown_tool("run-code")),
        ]  # fmt: skip


HOLDOUT3_SOURCES += [CodeRunner()]


# --- CouchDB: couchdb-mcp-server (Python, read-only) in front of a fake CouchDB -------------------------------------


def _couch(status: int, error: str, reason: str) -> Reply:
    return status, {"error": error, "reason": reason}, {}  # CouchDB's documented error body


def couchdb_route(method: str, path: str, query: dict[str, list[str]], headers: dict[str, str], body: bytes) -> Any:
    import base64

    if headers.get("authorization") != "Basic " + base64.b64encode(b"reader:couch-good").decode():
        return _couch(401, "unauthorized", "Name or password is incorrect.")
    parts = [unquote(p) for p in path.split("/") if p]
    if not parts:
        return 200, {"couchdb": "Welcome", "version": "3.4.2", "vendor": {"name": "The Apache Software Foundation"}}, {}
    if parts == ["_all_dbs"]:
        return 200, ["orders", "customers", "audit", "gone"], {}
    db, rest = parts[0], parts[1:]
    if db == "gone":
        return _couch(404, "not_found", "Database does not exist.")
    if db == "audit":
        return _couch(403, "forbidden", "You are not allowed to access this db.")
    if db == "busy":
        return _couch(503, "service_unavailable", "Service unavailable")
    if not rest:
        return 200, {"db_name": db, "doc_count": 2, "doc_del_count": 0, "update_seq": "2-g1", "sizes": {}}, {}
    if rest == ["_find"] or rest == ["_explain"]:
        sent = json.loads(body or b"{}")
        if "sort" in sent:
            return _couch(400, "no_usable_index", "No index exists for this sort, try indexing by the sort fields.")
        if any(k.startswith("$") and k not in ("$and", "$or") for k in sent.get("selector", {})):
            op = next(k for k in sent["selector"] if k.startswith("$"))
            return _couch(400, "invalid_operator", f"Invalid operator: {op}")
        if sent.get("use_index"):
            return _couch(400, "bad_request", "_design/idx-none specified by `use_index` could not be found or it "
                          "cannot satisfy the query")  # fmt: skip
        return 200, {"docs": [], "bookmark": "nil"}, {}
    if rest == ["_index"]:
        return 200, {"total_rows": 1, "indexes": [{"ddoc": None, "name": "_all_docs", "type": "special"}]}, {}
    if rest == ["_all_docs"]:
        return 200, {"total_rows": 0, "offset": 0, "rows": []}, {}
    if rest == ["order-9"]:
        return _couch(404, "not_found", "deleted")
    if rest == ["order-1"]:
        return 200, {"_id": "order-1", "_rev": "1-a", "total": 12.5}, {}
    return _couch(404, "not_found", "missing")


class CouchDb(Source):
    name = "couchdb"
    package = "couchdb-mcp-server==0.1.0"
    kind = "document database"
    language = "python"
    effects = {"get_server_status": "read_only", "list_databases": "read_only", "get_database_info": "read_only",
               "get_document": "read_only", "list_documents": "read_only", "query_documents": "read_only",
               "list_indexes": "read_only", "explain_query": "read_only",
               "inspect_database_structure": "read_only"}  # fmt: skip
    password = "couch-good"

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        with fake_service(couchdb_route) as api:
            yield self.server_config(f"http://127.0.0.1:{api.port}")

    def server_config(self, url: str) -> StdioUpstream:
        env = {
            "COUCHDB_MCP_COUCHDB_URL": url,
            "COUCHDB_MCP_COUCHDB_USERNAME": "reader",
            "COUCHDB_MCP_COUCHDB_PASSWORD": self.password,
            "COUCHDB_MCP_ALLOWED_DATABASES": "orders,customers,gone,audit,busy",
            "COUCHDB_MCP_HTTP_TIMEOUT_SECONDS": "2",
            "HOME": "/tmp",
        }
        return _stdio(py_bin("couchdb-py", "couchdb-mcp-server"), env=env)

    def cases(self, ws: Workspace) -> list[Case]:
        doc, find = "get_document", "query_documents"
        return [
            Case(doc, {"database_name": "orders", "document_id": "order-404"}, "document_missing",
                 L.not_found("document_id", "list_documents")),
            Case(doc, {"database_name": "orders", "document_id": "order-9"}, "document_deleted",
                 L.not_found("document_id", "list_documents")),
            Case("get_database_info", {"database_name": "gone"}, "database_missing",
                 L.not_found("database_name", "list_databases")),
            Case("get_database_info", {"database_name": "billing"}, "database_not_allowed",
                 L.sandbox("database_name", "list_databases")),
            Case(doc, {"database_name": "orders", "document_id": "_design/reports"}, "design_doc_refused",
                 L.sandbox("document_id")),
            Case("get_database_info", {"database_name": "audit"}, "couch_forbidden", no_privilege("database_name")),
            Case("get_database_info", {"database_name": "busy"}, "couch_unavailable", service_down()),
            Case(find, {"database_name": "orders", "selector": {"$regexp": "x"}}, "invalid_operator",
                 L.bad_value("selector")),
            Case(find, {"database_name": "orders", "selector": {"total": {"$gt": 10}}, "sort": [{"total": "desc"}]},
                 "no_usable_index", L.bad_value("sort")),
            Case(find, {"database_name": "orders", "selector": {}}, "empty_selector", L.bad_value("selector")),
            Case("list_documents", {"database_name": "orders", "limit": 0}, "zero_limit", L.bad_value("limit")),
            Case("explain_query", {"database_name": "orders", "selector": {"total": 1}, "use_index": "idx-none"},
                 "index_missing", L.not_found("use_index", "list_indexes")),
            Case(doc, {"database_name": "orders"}, "missing_document_id", L.missing_arg("document_id")),
            Case(find, {"database_name": "orders", "selector": "total > 10"}, "selector_wrong_type",
                 L.schema("selector")),
        ]  # fmt: skip


class CouchDbBadPassword(CouchDb):
    name = "couchdb-badpassword"
    server = "couchdb"
    password = "couch-old"

    def cases(self, ws: Workspace) -> list[Case]:
        return [Case("list_databases", {}, "password_refused", bad_credentials())]


class CouchDbDown(CouchDb):
    name = "couchdb-down"
    server = "couchdb"

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        yield self.server_config(f"http://127.0.0.1:{_closed_port()}")

    def cases(self, ws: Workspace) -> list[Case]:
        return [Case("get_document", {"database_name": "orders", "document_id": "order-1"}, "couchdb_down",
                     service_down())]  # fmt: skip


HOLDOUT3_SOURCES += [CouchDb(), CouchDbBadPassword(), CouchDbDown()]


# --- Grafana: mcp-grafana (Grafana's Go server, shipped in a PyPI wheel) in front of a fake Grafana HTTP API ----------

_DENIED = {
    "accessErrorId": "ACE4129380125",
    "message": "You'll need additional permissions to perform this action. Permissions needed: {}",
    "title": "Access denied",
}


def _denied(action: str) -> Reply:
    return 403, {**_DENIED, "message": _DENIED["message"].format(action)}, {}


def _gmsg(code: int, message: str, **extra: str) -> Reply:
    return code, {"message": message, **extra}, {}


def grafana_route(method: str, path: str, query: dict[str, list[str]], headers: dict[str, str], body: bytes) -> Any:
    if headers.get("authorization") != "Bearer glsa_good":
        return 401, {"extra": None, "message": "Invalid API key", "messageId": "api-key.invalid", "statusCode": 401,
                     "traceID": ""}, {}  # fmt: skip
    parts = [unquote(p) for p in path.split("/") if p]
    sent: dict[str, Any] = json.loads(body) if body[:1] == b"{" else {}
    if parts == ["api", "frontend", "settings"]:
        return 200, {"buildInfo": {"version": "11.3.0", "edition": "Open Source"}}, {}
    if parts[:3] == ["api", "dashboards", "uid"]:
        uid = parts[3] if len(parts) > 3 else ""
        if not uid:
            return _gmsg(404, "Not found")
        if uid == "ops-main":
            return 200, {"dashboard": {"uid": uid, "title": "Ops", "version": 7, "panels": []},
                         "meta": {"folderUid": "ops", "version": 7}}, {}  # fmt: skip
        if uid == "finance":
            return _denied("dashboards:read")
        if uid == "edge":
            return 502, "<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1>" \
                "</center><hr><center>nginx</center></body></html>", {}  # fmt: skip
        return _gmsg(404, "Dashboard not found", status="not-found")
    if parts == ["api", "search"]:
        if (query.get("query") or [""])[0] == "latency":
            return 429, "Too Many Requests\n", {"Retry-After": "2"}
        return 200, [], {}
    if parts == ["api", "dashboards", "db"]:
        dash = sent.get("dashboard") or {}
        title = dash.get("title", "")
        if not title:
            return _gmsg(400, "Dashboard title cannot be empty", status="empty-name")
        if sent.get("folderUid") == "nope":
            return _gmsg(400, "folder not found")
        if title == "Ops" and dash.get("uid") == "ops-main":
            return _gmsg(412, "The dashboard has been changed by someone else", status="version-mismatch")
        if title == "Node Exporter":
            return _gmsg(412, "A dashboard with the same name in the folder already exists", status="name-exists")
        if title == "Kubernetes / Pods":
            return _gmsg(400, "Cannot save provisioned dashboard", status="provisioned-dashboard")
        return 200, {"id": 12, "uid": "new1", "status": "success", "version": 1, "url": "/d/new1/x"}, {}
    if parts == ["api", "folders"]:
        title = sent.get("title", "")
        if title == "Finance":
            return _denied("folders:create")
        return _gmsg(409, "a folder or dashboard in the general folder with the same name already exists")
    if parts[:3] == ["api", "datasources", "uid"]:
        uid = parts[3]
        if uid in ("prom", "loki"):
            kind = "prometheus" if uid == "prom" else "loki"
            return (
                200,
                {"id": 3, "uid": uid, "name": uid, "type": kind, "url": "http://127.0.0.1:1", "access": "proxy"},
                {},
            )
        if len(parts) == 4:
            return _gmsg(404, "Data source not found")
        return 200, {"status": "success", "data": {"resultType": "vector", "result": []}}, {}
    if parts[:4] == ["api", "datasources", "proxy", "uid"]:
        q = (query.get("query") or [""])[0]
        if "|=" in q and not q.startswith("{"):
            return 400, "parse error at line 1, col 1: syntax error: unexpected IDENTIFIER\n", {}
        return 502, {"message": "Bad Gateway", "traceID": ""}, {}  # Grafana's proxy: the Loki behind it refused
    if parts == ["api", "datasources"]:
        return _denied("datasources:read")
    if parts == ["api", "annotations"] and method == "POST":
        return _gmsg(500, "Failed to save annotation", traceID="")
    if parts[:2] == ["api", "annotations"] and method == "DELETE":
        return _gmsg(404, "Annotation not found", traceID="")
    if parts == ["api", "user"]:
        return 200, {"id": 1, "login": "mcp", "email": "mcp@example.com", "orgId": 1}, {}
    return _gmsg(404, "Not found")


class Grafana(Source):
    name = "grafana"
    package = "mcp-grafana==2.1.1"
    kind = "dashboards"
    language = "go"
    effects = {"get_dashboard_by_uid": "read_only", "get_dashboard_summary": "read_only",
               "search_dashboards": "read_only", "get_datasource": "read_only", "list_datasources": "read_only",
               "query_prometheus": "read_only", "query_loki_logs": "read_only", "user_info": "read_only",
               "list_prometheus_metric_names": "read_only"}  # fmt: skip
    token = "glsa_good"

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        with fake_service(grafana_route) as api:
            yield self.server_config(f"http://127.0.0.1:{api.port}")

    def server_config(self, url: str) -> StdioUpstream:
        env = {"GRAFANA_URL": url, "GRAFANA_SERVICE_ACCOUNT_TOKEN": self.token, "HOME": "/tmp"}
        return _stdio(py_bin("grafana-py", "mcp-grafana"), env=env)

    def cases(self, ws: Workspace) -> list[Case]:
        get, save = "get_dashboard_by_uid", "update_dashboard"
        lookup = L.not_found("uid", "search_dashboards")
        prom = {"datasourceUid": "prom", "startTime": "now-1h", "endTime": "now", "queryType": "instant"}
        return [
            Case(get, {"uid": "ops-mian"}, "dashboard_missing", lookup),
            Case("get_dashboard_summary", {"uid": "ops-old"}, "dashboard_missing", lookup),
            Case(get, {"uid": "finance"}, "dashboard_forbidden", no_privilege("uid")),
            Case(get, {"uid": "edge"}, "gateway_502", service_down("uid")),
            Case("search_dashboards", {"query": "latency"}, "rate_limited", _rate_limited()),
            Case(save, {"dashboard": {"uid": "ops-main", "title": "Ops", "version": 6}, "folderUid": "ops"},
                 "version_mismatch", L.conflict("dashboard", get)),
            Case(save, {"dashboard": {"title": "Node Exporter"}, "folderUid": "ops"}, "title_exists",
                 L.conflict("dashboard")),
            Case(save, {"dashboard": {"title": ""}, "folderUid": "ops"}, "empty_title", L.bad_value("dashboard")),
            Case(save, {"dashboard": {"title": "Latency"}, "folderUid": "nope"}, "folder_missing",
                 L.not_found("folderUid", "search_folders")),
            Case(save, {"dashboard": {"title": "Kubernetes / Pods", "uid": "k8s-pods"}, "folderUid": "ops"},
                 "provisioned_dashboard", L.forbidden("dashboard", why="a provisioned dashboard is read-only by "
                                                      "configuration: only its owner changes it")),
            Case("create_folder", {"title": "Ops"}, "folder_exists", L.conflict("title", "search_folders")),
            Case("create_folder", {"title": "Finance"}, "folder_forbidden", no_privilege("title")),
            Case("get_datasource", {"uid": "prometheus-old"}, "datasource_missing",
                 L.not_found("uid", "list_datasources")),
            Case("query_prometheus", {"datasourceUid": "prom", "expr": "up", "startTime": "now-1h",
                                      "queryType": "range", "stepSeconds": 60}, "missing_end_time",
                 L.missing_arg("endTime")),
            Case("query_prometheus", {**prom, "datasourceUid": "thanos", "expr": "up"}, "datasource_missing",
                 L.not_found("datasourceUid", "list_datasources")),
            Case("query_loki_logs", {"datasourceUid": "loki", "logql": 'app |= "error"'}, "logql_parse_error",
                 L.bad_value("logql")),
            Case("query_loki_logs", {"datasourceUid": "loki", "logql": '{app="api"}'}, "loki_unreachable",
                 service_down("datasourceUid")),
            Case("create_annotation", {"text": "deploy 1.4", "dashboardUid": "ops-main"}, "annotation_save_failed",
                 service_down(write=True)),
            Case("delete_annotation", {"id": 4242}, "annotation_missing", L.not_found("id", "get_annotations")),
            Case(get, {}, "missing_uid", L.missing_arg("uid")),
            Case("delete_annotation", {"id": "last"}, "id_wrong_type", L.schema("id")),
            Case("get_dashboard_json", {"uid": "ops-main"}, "unknown_tool", L.unknown_tool()),
        ]  # fmt: skip


class GrafanaBadToken(Grafana):
    name = "grafana-badtoken"
    server = "grafana"
    token = "glsa_revoked"

    def cases(self, ws: Workspace) -> list[Case]:
        return [
            Case("user_info", {}, "token_refused", bad_credentials()),
            Case("search_dashboards", {"query": "ops"}, "token_refused", bad_credentials()),
        ]


class GrafanaDown(Grafana):
    name = "grafana-down"
    server = "grafana"

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        yield self.server_config(f"http://127.0.0.1:{_closed_port()}")

    def cases(self, ws: Workspace) -> list[Case]:
        return [
            Case("get_dashboard_by_uid", {"uid": "ops-main"}, "grafana_down", service_down()),
            Case("create_folder", {"title": "Ops"}, "grafana_down", service_down(write=True)),
        ]


HOLDOUT3_SOURCES += [Grafana(), GrafanaBadToken(), GrafanaDown()]


# --- SSH: ssh-mcp (Node, policy-gated) on Debian's OpenSSH daemon ---------------------------------------------------


@contextmanager
def sshd(root: Path) -> Iterator[int]:
    """Debian's sshd on 127.0.0.1, key login only, its own host key and authorized keys (the client's key)."""
    import subprocess

    from .services import _wait_port, free_port

    d = root / "sshd"
    d.mkdir(parents=True, exist_ok=True)
    for name in ("host_key", "client_key", "other_key"):
        if not (d / name).exists():
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / name)], check=True,
                           timeout=60)  # fmt: skip
    (d / "authorized_keys").write_text((d / "client_key.pub").read_text())
    (d / "authorized_keys").chmod(0o600)
    port = free_port()
    (d / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {d / 'host_key'}\nPidFile {d / 'sshd.pid'}\n"
        f"AuthorizedKeysFile {d / 'authorized_keys'}\nPermitRootLogin prohibit-password\nPasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nSubsystem sftp internal-sftp\n"
        "MaxStartups 50\nLogLevel ERROR\n"
    )
    Path("/run/sshd").mkdir(exist_ok=True)  # the privilege-separation directory sshd insists on
    proc = subprocess.Popen(["/usr/sbin/sshd", "-D", "-e", "-f", str(d / "sshd_config")], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        _wait_port(port, proc, "sshd")
        yield port
    finally:
        proc.terminate()
        proc.wait(10)


def _ssh_config(root: Path, port: int) -> Path:
    d = root / "sshd"
    xdg = root / "ssh-mcp-xdg"
    (xdg / "ssh-mcp").mkdir(parents=True, exist_ok=True)
    xdg.chmod(0o700)
    (xdg / "ssh-mcp").chmod(0o700)
    key, other = d / "client_key", d / "other_key"
    profile = 'host = "127.0.0.1"\nuser = "root"\nauth = "key"\n'
    config = (
        '[defaults]\ndefaultProfile = "dev"\napprovalMode = "deny"\ncommandTimeoutMs = 3000\n\n'
        f'[[profiles]]\nname = "dev"\n{profile}port = {port}\nkeyRef = "{key}"\ngroup = "dev"\nrole = "admin"\n'
        'approvalPolicy = "deny"\n\n'
        f'[[profiles]]\nname = "viewer"\n{profile}port = {port}\nkeyRef = "{key}"\ngroup = "dev"\nrole = "viewer"\n'
        "readOnly = true\n\n"
        f'[[profiles]]\nname = "prod"\n{profile}port = {port}\nkeyRef = "{key}"\ngroup = "prod"\nrole = "admin"\n\n'
        f'[[profiles]]\nname = "metered"\n{profile}port = {port}\nkeyRef = "{key}"\ngroup = "dev"\nrole = "admin"\n'
        "commandQuotaPerDay = 1\n\n"
        f'[[profiles]]\nname = "rotated"\n{profile}port = {port}\nkeyRef = "{other}"\ngroup = "dev"\nrole = "admin"\n\n'
        f'[[profiles]]\nname = "asking"\n{profile}port = {port}\nkeyRef = "{key}"\ngroup = "dev"\nrole = "admin"\n'
        'approvalPolicy = "ask-destructive"\n\n'
        f'[[profiles]]\nname = "pinned"\n{profile}port = {port}\nkeyRef = "{key}"\ngroup = "dev"\nrole = "admin"\n'
        'trustedHostKey = "SHA256:n4bQgYhMfWWaL+qgxVrQFaO/TxsrC4Is0V1sFbDwCgg"\n\n'
        f'[[profiles]]\nname = "offline"\n{profile}port = {_closed_port()}\nkeyRef = "{key}"\ngroup = "dev"\n'
        'role = "admin"\n'
    )
    (xdg / "ssh-mcp" / "config.toml").write_text(config)
    (xdg / "ssh-mcp" / "config.toml").chmod(0o600)
    return xdg


class Ssh(Source):
    name = "ssh"
    package = "ssh-mcp@2.11.0"
    kind = "remote shell"
    language = "node"
    effects = {"list-connections": "read_only", "list-sessions": "read_only", "read-command": "read_only",
               "sftp-download": "read_only", "sftp-list": "read_only", "read-session-output": "read_only"}  # fmt: skip

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        with sshd(ws.root) as port:
            xdg = _ssh_config(ws.root, port)
            entry = NPM_MODULES / "ssh-mcp/build/index.js"
            yield _stdio("node", str(entry), env={"XDG_CONFIG_HOME": str(xdg), "HOME": str(ws.root)})

    def cases(self, ws: Workspace) -> list[Case]:
        run, read = "run-command", "read-command"
        policy = L.forbidden("command", why="the server's policy for this profile refuses it: only the user changes it")
        offline = {"profile": "offline"}
        return [
            Case(read, {"command": "cat /etc/app/settings.ini"}, "command_failed_file_missing",
                 L.bad_value("command", why="the command ran on the host and exited non-zero")),
            Case(run, {"command": "test -f /srv/app/.env"}, "command_exit_status",
                 L.bad_value("command", why="the command ran on the host and exited non-zero")),
            Case(read, {"command": "chmod 600 /tmp/x"}, "not_read_only",
                 L.custom("F2_permission_denied_or_approval_required", False, "rejected", "switch_tool", "run-command",
                          why="the read-only tool's allow-list refuses a write: the write tool may run it")),
            Case(run, {"command": "rm -rf /tmp/build"}, "destructive_denied", policy),
            Case(run, {"command": "touch /tmp/deployed", "profile": "viewer"}, "read_only_profile", policy),
            Case(run, {"command": "systemctl restart nginx"}, "host_without_systemd",
                 L.bad_value("command", why="the command ran on the host and exited non-zero: no systemd there")),
            Case("privileged-command", {"command": "systemctl restart nginx", "profile": "prod"},
                 "privileged_on_prod_denied", policy),
            Case(run, {"command": "rm -rf /tmp/build", "profile": "asking"}, "approval_unavailable",
                 L.forbidden("command", why="the command needs a person's approval and none could be asked")),
            Case(run, {"command": "mkfs.ext4 /dev/sdb1"}, "never_allowed",
                 L.sandbox("command", why="a built-in never-allowed rule: no setting allows it; do something else")),
            Case(run, {"command": "uptime", "profile": "metered"}, "spend_quota", L.unknown_tool(), setup=True),
            Case(run, {"command": "uptime", "profile": "metered"}, "daily_quota_spent",
                 L.custom("F3_quota_exhausted", False, "rejected", "ask_user", why="the profile's daily command "
                          "quota is spent until tomorrow")),
            Case(run, {"command": "sleep 10"}, "command_timeout",
                 L.custom("D4_permanent_execution_error", False, "maybe_executed", "verify_state", "command",
                          why="the server cut the command at its own time limit: the same command meets it again")),
            Case(read, {"command": "uptime", "profile": "rotated"}, "key_refused", bad_credentials()),
            Case(read, {"command": "uptime", **offline}, "host_refuses_connection", service_down()),
            Case("sftp-list", {"remotePath": "/var/log", **offline}, "host_refuses_connection", service_down()),
            Case(read, {"command": "uptime", "profile": "pinned"}, "host_key_mismatch",
                 L.server_broken(why="the host's key is not the pinned one: only the user can tell whether it "
                                 "changed legitimately")),
            Case("sftp-download", {"remotePath": "/srv/app/config.yml"}, "remote_file_missing",
                 L.not_found("remotePath", "sftp-list")),
            Case("sftp-list", {"remotePath": "/srv/releases"}, "remote_dir_missing",
                 L.not_found("remotePath", "sftp-list")),
            Case(read, {"command": "uptime", "profile": "staging"}, "profile_missing",
                 L.bad_value("profile", "list-connections")),
            Case("signal-process", {"pid": 999999, "signal": "TERM"}, "process_missing", L.bad_value("pid")),
            Case("close-session", {"name": "deploy-tail"}, "session_missing", L.bad_value("name", "list-sessions")),
            Case("signal-process", {"pid": 0}, "pid_below_minimum", L.schema("pid")),
            Case(read, {}, "missing_command", L.missing_arg("command")),
            Case("exec-command", {"command": "uptime"}, "unknown_tool", L.unknown_tool()),
        ]  # fmt: skip


HOLDOUT3_SOURCES += [Ssh()]


def main() -> int:
    from .collect import main_async

    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    only = set(sys.argv[1].split(",")) if len(sys.argv) > 1 else None
    return anyio.run(main_async, HERE / "holdout3.jsonl", only, HOLDOUT3_SOURCES)


if __name__ == "__main__":
    raise SystemExit(main())
