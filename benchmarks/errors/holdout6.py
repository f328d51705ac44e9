"""A sixth fresh hold-out (issue 19): servers of kinds neither the corpus nor the first five hold-outs cover.

    python -m benchmarks.errors.holdout6          # writes holdout6.jsonl (+ holdout6_success_shaped.jsonl)

It measures the rules on servers no rule was written from: a task manager (``todoist-mcp``, Node) in front of a fake
Todoist API, a document converter (``mcp-pandoc``, Python, mcp 2.x) on Debian's pandoc, Notion's official server
(Node, tools generated from Notion's OpenAPI document) in front of a fake Notion API, Stripe's server (``@stripe/mcp``
0.2.5 with ``@stripe/agent-toolkit``, Node, stripe-node) in front of a fake Stripe API, and a Jenkins server
(``mcp-jenkins``, Python, FastMCP, requests) in front of a fake Jenkins. Every label was written from the situation
provoked, the server's own words and LABELS.md before any rule was run on these records; records and labels were
committed ("frozen before measuring") before the rules were run on them.

The Todoist server has its API's address written into its code: a preload (``node --require``) points the global
``fetch`` at the local fake (``holdout4.redirected``); stripe-node sends through ``https.request`` with an options
object, which a preload written here points at the fake; Notion's server takes ``BASE_URL``, the Jenkins server
``JENKINS_URL``. The servers' own code is unchanged.

Installed by hand for collection (not part of CI; ``scripts/install-corpus-servers.sh`` has them): ``npm install
--prefix .tools/corpus/npm todoist-mcp@1.3.4 @notionhq/notion-mcp-server@2.5.2 @stripe/mcp@0.2.5`` (0.2.5 is the last
that runs the toolkit locally; 0.3.x only forwards to Stripe's hosted server), ``mcp-pandoc==0.11.1`` and
``mcp-jenkins==3.6.0`` in Python 3.13 virtualenvs at ``.tools/corpus/py/pandoc`` and ``.tools/corpus/py/jenkins``,
and Debian's ``pandoc`` (2.17; no LaTeX engine).
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import anyio

from resilient_mcp.policy.config import RemoteUpstream, StdioUpstream

from . import labels as L
from .holdout import _closed_port, fake_service
from .holdout4 import redirected
from .servers import NPM_MODULES, bad_credentials, py_bin, service_down
from .situations import Case, Source, Workspace, _stdio

HERE = Path(__file__).resolve().parent

Reply = tuple[int, Any, dict[str, str]]


def _rate_limited(*names: str, why: str = "the service asks to slow down for a short while") -> L.Gold:
    return L.custom("D2_rate_limited", True, "rejected", "backoff_retry", *names, why=why)


def _quota(*names: str, why: str = "a quota or plan limit is spent: no retry passes until someone raises it") -> L.Gold:
    return L.custom("F3_quota_exhausted", False, "rejected", "ask_user", *names, why=why)


def _fix(fault: str, *names: str, why: str) -> L.Gold:
    return L.custom(fault, False, "executed_failed", "fix_parameter", *names, why=why)


# --- Todoist: todoist-mcp (Node) in front of a fake Todoist API v1 -------------------------------------------------

_TD_TOKEN = "0123456789abcdef0123456789abcdef01234567"


def _td(status: int, error: str, code: int, tag: str, **extra: Any) -> Reply:
    # Todoist API v1 errors (developer.todoist.com/api/v1/#tag/Errors): {"error", "error_code", "error_extra",
    # "error_tag", "http_code"}; a 429 carries "retry_after" in error_extra.
    extra.setdefault("event_id", "c4b1d5e0a2f84f0c9d3b7a6e5f1c2d3e")
    body = {"error": error, "error_code": code, "error_extra": extra, "error_tag": tag, "http_code": status}
    headers = {"Retry-After": str(extra["retry_after"])} if "retry_after" in extra else {}
    return status, body, headers


_TD_TASK = {"id": "6X7rM8997g3RQmvh", "content": "Buy milk", "project_id": "6Jf8VQXxpwv56VQ7", "priority": 1}


def todoist_route(method: str, path: str, query: dict[str, list[str]], headers: dict[str, str], body: bytes) -> Any:
    if headers.get("authorization") != f"Bearer {_TD_TOKEN}":
        return _td(401, "Invalid token", 401, "AUTH_INVALID_TOKEN")
    parts = [unquote(p) for p in path.split("/") if p][2:]  # /api/v1/<rest>
    arg = {k: v[0] for k, v in query.items()}
    sent = json.loads(body or b"{}") if body else {}
    project = arg.get("project_id") or sent.get("project_id") or ""
    if project == "6Jf8VQXxpwvGhost":
        return _td(404, "Project not found", 21, "PROJECT_NOT_FOUND")
    if project == "6Jf8VQXxpwvTeam0":
        return _td(403, "Forbidden", 102, "FORBIDDEN")
    if arg.get("limit") and int(arg["limit"]) > 200:
        return _td(400, "Invalid argument value", 20, "INVALID_ARGUMENT_VALUE", argument="limit")
    if arg.get("cursor") == "expired":
        return _td(400, "Invalid argument value", 20, "INVALID_ARGUMENT_VALUE", argument="cursor")
    if parts == ["tasks", "filter"]:
        q = arg.get("query", "")
        if q.endswith("&") or q.count("(") != q.count(")"):
            return _td(400, "Invalid filter query", 478, "INVALID_SEARCH_QUERY", argument="query")
        if q == "overdue":
            return _td(429, "Too many requests", 35, "TOO_MANY_REQUESTS", retry_after=12)
        if q == "p1":
            return _td(500, "Service unavailable", 500, "INTERNAL_SERVER_ERROR")
        if q == "7 days":
            return 503, "<html><head><title>503 Service Temporarily Unavailable</title></head><body><center>" \
                        "<h1>503 Service Temporarily Unavailable</h1></center></body></html>", {}  # fmt: skip
        if q == "#Inbox & @slow":
            time.sleep(10)
        return 200, {"results": [_TD_TASK], "next_cursor": None}, {}
    if parts == ["comments"] and method == "GET":
        if not arg.get("task_id") and not arg.get("project_id"):
            return _td(400, "Required argument is missing", 19, "ARGUMENT_MISSING", argument="task_id")
        if arg.get("task_id") == "6X7rM8997g3Ghost":
            return _td(404, "Task not found", 478, "ITEM_NOT_FOUND")
        return 200, {"results": [], "next_cursor": None}, {}
    if parts[:1] == ["projects"] and parts[2:] == ["collaborators"]:
        if parts[1] == "6Jf8VQXxpwvGhost":
            return _td(404, "Project not found", 21, "PROJECT_NOT_FOUND")
        return 200, {"results": [], "next_cursor": None}, {}
    if parts == ["labels"] and method == "GET":
        return 502, "<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1>" \
                    "</center><hr><center>cloudflare</center></body></html>", {}  # fmt: skip
    if parts == ["tasks"] and method == "POST":
        if sent.get("project_id") == "6Jf8VQXxpwvFull":
            return _td(403, "Maximum number of items per user project limit reached", 48,
                       "MAX_ITEMS_LIMIT_REACHED")  # fmt: skip
        if sent.get("due_string") == "when pigs fly":
            return _td(400, "Date is invalid", 31, "INVALID_DATE_FORMAT", argument="due_string")
        return 200, _TD_TASK, {}
    if parts[:1] == ["tasks"] and len(parts) >= 2:
        if parts[1] == "6X7rM8997g3Ghost":
            return _td(404, "Task not found", 478, "ITEM_NOT_FOUND")
        if parts[2:] == ["close"] and parts[1] == "6X7rM8997g3Done0":
            return _td(400, "Item is already completed", 52, "ITEM_ALREADY_COMPLETED")
        return 200, _TD_TASK, {}
    if parts == ["labels"] and method == "POST":
        return _td(409, "Label already exists", 72, "LABEL_ALREADY_EXISTS", argument="name")
    if parts[:1] == ["projects"] and method == "DELETE":
        return _td(400, "Inbox project cannot be deleted", 59, "INBOX_PROJECT_DELETE_FORBIDDEN")
    if parts == ["projects"] and method == "POST":
        return _td(400, "Invalid argument value", 20, "INVALID_ARGUMENT_VALUE", argument="name")
    return 200, {"results": [], "next_cursor": None}, {}


_TD_READS = ("get_tasks_list", "get_tasks_by_filter", "get_tasks", "get_projects_list", "get_projects",
             "get_comments_list", "get_comments", "get_labels_list", "get_shared_labels", "get_sections_list",
             "get_collaborators")  # fmt: skip


class Todoist(Source):
    name = "todoist"
    package = "todoist-mcp@1.3.4"
    kind = "task manager (cloud API)"
    language = "node"
    effects = {
        **dict.fromkeys(_TD_READS, "read_only"),
        "update_tasks": "write_idempotent",
        "close_tasks": "write_idempotent",
    }
    token = _TD_TOKEN

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        with fake_service(todoist_route) as api:
            yield self.server_config(ws, f"http://127.0.0.1:{api.port}")

    def server_config(self, ws: Workspace, url: str) -> StdioUpstream:
        entry = NPM_MODULES / "todoist-mcp/dist/index.js"
        return redirected(ws, entry, "https://api.todoist.com", url, {"API_KEY": self.token})

    def cases(self, ws: Workspace) -> list[Case]:
        flt = "get_tasks_by_filter"
        return [
            Case("get_tasks_list", {"project_id": "6Jf8VQXxpwvGhost"}, "project_missing",
                 L.not_found("project_id", "get_projects_list")),
            Case("get_tasks_list", {"project_id": "6Jf8VQXxpwvTeam0"}, "project_forbidden",
                 L.forbidden("project_id", why="a workspace project the user is no member of")),
            Case("get_tasks_list", {"limit": 500}, "limit_too_large", L.bad_value("limit")),
            Case(flt, {"query": "today &"}, "filter_syntax", L.bad_value("query")),
            Case(flt, {"query": "(today | overdue"}, "filter_unbalanced", L.bad_value("query")),
            Case(flt, {"query": "overdue"}, "rate_limited",
                 _rate_limited(why="Todoist's request limit: retry_after 12 s")),
            Case(flt, {"query": "p1"}, "api_500", service_down()),
            Case(flt, {"query": "7 days"}, "api_503_html", service_down()),
            Case(flt, {"query": "#Inbox & @slow"}, "api_slow",
                 L.custom("C3_attempt_timeout", True, "maybe_executed", "backoff_retry",
                          why="the API does not answer and the server has no timeout of its own: the proxy's "
                          "attempt timer fires"), timeout_s=4, settle_s=7),
            Case("get_comments_list", {}, "comments_need_task", L.missing_arg("task_id", "project_id")),
            Case("get_comments_list", {"task_id": "6X7rM8997g3Ghost"}, "comments_task_missing",
                 L.not_found("task_id", "get_tasks_list")),
            Case("get_collaborators", {"id": "6Jf8VQXxpwvGhost"}, "collaborators_project_missing",
                 L.not_found("id", "get_projects_list")),
            Case("get_collaborators", {"id": "../user"}, "path_parameter_refused",
                 L.bad_value("id", why="the server's own check refuses characters other than letters, digits, _ "
                             "and -")),
            Case("get_labels_list", {}, "api_502_html", service_down()),
            Case("get_tasks", {"items": [{"task_id": "6X7rM8997g3Ghost"}]}, "task_missing_batch",
                 L.not_found("task_id", "get_tasks_list")),
            Case("create_tasks", {"items": [{"content": "Ship", "project_id": "6Jf8VQXxpwvFull"}]},
                 "project_item_limit",
                 _quota("project_id", why="the plan's limit of tasks per project is reached: the user upgrades or "
                        "cleans up")),
            Case("create_tasks", {"items": [{"content": "Ship", "due_string": "when pigs fly"}]}, "due_invalid",
                 L.bad_value("due_string")),
            Case("create_tasks", {"items": [{"content": "Ship", "project_id": "6Jf8VQXxpwvGhost"}]},
                 "create_in_missing_project", L.not_found("project_id", "get_projects_list")),
            Case("close_tasks", {"items": [{"task_id": "6X7rM8997g3Done0"}]}, "task_already_completed",
                 L.conflict("task_id", "get_tasks")),
            # The server spreads the create fields into the update schema: every update needs "content".
            Case("update_tasks", {"items": [{"task_name": "no such task anywhere"}]}, "update_requires_content",
                 L.missing_arg("content")),
            Case("create_labels", {"items": [{"name": "waiting"}]}, "label_exists",
                 L.conflict("name", "get_labels_list")),
            Case("delete_projects", {"items": [{"id": "6Jf8VQXxpwvInbx"}]}, "delete_inbox",
                 L.sandbox("id", why="the API never deletes the Inbox project: another project may be deleted")),
            Case("create_projects", {"items": [{"name": "x" * 200}]}, "project_name_too_long",
                 L.bad_value("name")),
            Case("get_tasks_list", {"limit": "ten"}, "limit_wrong_type", L.schema("limit")),
            Case(flt, {}, "missing_query", L.missing_arg("query")),
            Case("create_tasks", {"items": [{"description": "no title"}]}, "create_missing_content",
                 L.missing_arg("content")),
            Case("search_tasks", {"query": "milk"}, "unknown_tool", L.unknown_tool("get_tasks_by_filter")),
        ]  # fmt: skip


class TodoistBadToken(Todoist):
    name = "todoist-badtoken"
    server = "todoist"
    token = "ffffffffffffffffffffffffffffffffdeadbeef"

    def cases(self, ws: Workspace) -> list[Case]:
        return [
            Case("get_projects_list", {}, "token_refused", bad_credentials()),
            Case("get_tasks_by_filter", {"query": "today"}, "token_refused_filter", bad_credentials()),
            Case("create_tasks", {"items": [{"content": "Ship"}]}, "token_refused_write", bad_credentials()),
        ]


class TodoistDown(Todoist):
    name = "todoist-down"
    server = "todoist"

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        yield self.server_config(ws, f"http://127.0.0.1:{_closed_port()}")

    def cases(self, ws: Workspace) -> list[Case]:
        return [
            Case("get_projects_list", {}, "api_unreachable", service_down()),
            Case("create_tasks", {"items": [{"content": "Ship"}]}, "api_unreachable_write",
                 service_down(write=True)),
        ]  # fmt: skip


class TodoistNoKey(Todoist):
    name = "todoist-nokey"
    server = "todoist"
    token = ""
    startup = ("startup_api_key_missing", L.custom("F1_unauthenticated", False, "not_sent", "ask_user",
               why="the server is started without its API key: only the user configures it"))  # fmt: skip

    def cases(self, ws: Workspace) -> list[Case]:
        return []


HOLDOUT6_SOURCES: list[Source] = [Todoist(), TodoistBadToken(), TodoistDown(), TodoistNoKey()]


# --- Pandoc: mcp-pandoc (Python, mcp 2.x low-level server) on Debian's pandoc 2.17 -----------------------------------


def _pandoc_files(root: Path) -> Path:
    d = root / "convert"
    d.mkdir(exist_ok=True)
    (d / "report.md").write_text("# Report\n\nSome *text*.\n")
    (d / "letter.docx").write_text("Dear Ann,\nthis is plain text saved with a .docx name.\n")
    (d / "style.odt").write_bytes(b"PK\x03\x04 not really an odt")
    (d / "broken.yaml").write_text("from: markdown\nto: [html\n  standalone: true\n")
    (d / "list.yaml").write_text("- markdown\n- html\n")
    (d / "fail.lua").write_text('function Para(el)\n  error("the house style forbids paragraphs")\nend\n')
    (d / "out").mkdir(exist_ok=True)
    return d


class Pandoc(Source):
    name = "pandoc"
    package = "mcp-pandoc==0.11.1"
    kind = "document converter"
    language = "python"
    effects = {"convert-contents": "write_idempotent"}

    def config(self, ws: Workspace) -> StdioUpstream | RemoteUpstream:
        self.dir = _pandoc_files(ws.root)
        return _stdio(py_bin("pandoc", "mcp-pandoc"), env={"HOME": str(ws.root)})

    def cases(self, ws: Workspace) -> list[Case]:
        d, conv = self.dir, "convert-contents"
        md = "# Title\n\nBody text.\n"
        return [
            Case(conv, {"input_file": str(d / "missing.md"), "output_format": "html"}, "input_file_missing",
                 _fix("D4_permanent_execution_error", "input_file", why="the input file does not exist (the server "
                      "has no tool to list files)")),
            Case(conv, {"contents": md, "output_format": "pdf", "output_file": str(d / "out" / "t.pdf")},
                 "pdf_engine_missing",
                 L.server_broken(why="the host has no LaTeX engine (xelatex): only its admin installs one; another "
                                 "output format works")),
            Case(conv, {"contents": md, "output_format": "docx"}, "output_file_required",
                 L.missing_arg("output_file")),
            # The schema offers "pdf" as an input format; pandoc cannot read PDF (pypandoc's own check refuses it).
            Case(conv, {"contents": md, "input_format": "pdf", "output_format": "html"}, "input_format_unsupported",
                 L.bad_value("input_format")),
            Case(conv, {"output_format": "html"}, "no_contents_nor_file", L.missing_arg("contents", "input_file")),
            Case(conv, {"contents": md, "output_format": "docx", "output_file": str(d / "out" / "a.docx"),
                        "reference_doc": str(d / "house.docx")}, "reference_doc_missing",
                 _fix("D4_permanent_execution_error", "reference_doc", why="the reference document does not exist")),
            Case(conv, {"contents": md, "output_format": "docx", "output_file": str(d / "out" / "b.docx"),
                        "reference_doc": str(d / "style.odt")}, "reference_doc_wrong_kind",
                 L.bad_value("reference_doc")),
            Case(conv, {"contents": md, "output_format": "html", "defaults_file": str(d / "nope.yaml")},
                 "defaults_file_missing",
                 _fix("D4_permanent_execution_error", "defaults_file", why="the defaults file does not exist")),
            Case(conv, {"contents": md, "output_format": "html", "defaults_file": str(d / "broken.yaml")},
                 "defaults_file_unparsable",
                 L.server_broken("defaults_file", why="the defaults file is not valid YAML: only its author fixes "
                                 "it")),
            Case(conv, {"contents": md, "output_format": "html", "defaults_file": str(d / "list.yaml")},
                 "defaults_file_not_a_mapping",
                 L.server_broken("defaults_file", why="the defaults file is YAML but not a mapping of options")),
            Case(conv, {"contents": md, "output_format": "html", "filters": [str(d / "toc.lua")]}, "filter_missing",
                 _fix("D4_permanent_execution_error", "filters", why="the filter file does not exist")),
            Case(conv, {"contents": md, "output_format": "html", "filters": [str(d / "fail.lua")]}, "filter_fails",
                 L.server_broken("filters", why="the Lua filter raises an error: a bug in the filter, only its "
                                 "author fixes it")),
            Case(conv, {"contents": md, "output_format": "html", "output_file": str(d / "nodir" / "x" / "r.html")},
                 "output_dir_missing",
                 _fix("D4_permanent_execution_error", "output_file", why="the output file's directory does not "
                      "exist")),
            Case(conv, {"contents": md, "output_format": "html", "output_file": str(d / "out")},
                 "output_is_directory", L.bad_value("output_file")),
            Case(conv, {"contents": "{\"blocks\": [", "input_format": "json", "output_format": "html"},
                 "input_format_not_offered", L.schema("input_format")),
            Case(conv, {"input_file": str(d / "letter.docx"), "output_format": "markdown"}, "docx_not_a_zip",
                 L.server_broken("input_file", why="the file is named .docx but is no Word document: broken data")),
            Case(conv, {"contents": md, "output_format": "odt", "output_file": str(d / "out" / "c.odt"),
                        "reference_doc": str(d / "style.odt")}, "reference_doc_corrupt",
                 L.server_broken("reference_doc", why="the reference document is no valid ODT: broken data")),
            Case(conv, {"contents": 42, "output_format": "html"}, "contents_wrong_type", L.schema("contents")),
            Case(conv, {"contents": md, "output_format": "rtf2"}, "output_format_unknown", L.schema("output_format")),
            Case("convert-file", {"input_file": str(d / "report.md")}, "unknown_tool",
                 L.unknown_tool("convert-contents")),
        ]  # fmt: skip


HOLDOUT6_SOURCES += [Pandoc()]


# --- Notion: @notionhq/notion-mcp-server (Node, tools generated from Notion's OpenAPI document) ----------------------

_NOTION_TOKEN = "ntn_fakefakefakefakefakefakefakefakefakefake0001"
_NOTION_PAGE = "59833787-2cf9-4fdf-8782-e53db20768a5"


def _notion(status: int, code: str, message: str, **headers: str) -> Reply:
    # Notion's error responses (developers.notion.com/reference/status-codes): {"object": "error", "status", "code",
    # "message", "request_id"}; a 429 "rate_limited" carries Retry-After.
    body = {"object": "error", "status": status, "code": code, "message": message,
            "request_id": "2f1c9a4e-7b3d-4c55-9e0a-1d2b3c4d5e6f"}  # fmt: skip
    return status, body, {k.replace("_", "-"): v for k, v in headers.items()}


_UUID = re.compile(r"^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$")


def notion_route(method: str, path: str, query: dict[str, list[str]], headers: dict[str, str], body: bytes) -> Any:
    if headers.get("authorization") != f"Bearer {_NOTION_TOKEN}":
        return _notion(401, "unauthorized", "API token is invalid.")
    parts = [unquote(p) for p in path.split("/") if p][1:]  # /v1/<rest>
    sent = json.loads(body or b"{}") if body else {}
    ident = parts[1] if len(parts) > 1 else ""
    if ident.startswith("00000000"):
        kind = {"pages": "page", "blocks": "block", "data_sources": "data_source", "databases": "database"}
        return _notion(404, "object_not_found", f"Could not find {kind.get(parts[0], 'object')} with ID: {ident}. "
                       "Make sure the relevant pages and databases are shared with your integration.")  # fmt: skip
    if parts[:1] in (["pages"], ["blocks"], ["data_sources"], ["databases"]) and ident and not _UUID.match(ident):
        return _notion(400, "validation_error", f"path failed validation: path.{parts[0][:-1]}_id should be a "
                       f"valid uuid, instead was `\"{ident}\"`.")  # fmt: skip
    if ident.startswith("11111111"):
        return _notion(403, "restricted_resource", "Insufficient permissions for this endpoint.")
    if ident.startswith("22222222"):
        return _notion(409, "conflict_error", "Conflict occurred while saving. Please try again.")
    if ident.startswith("33333333"):
        return _notion(400, "validation_error", "Can't edit block that is archived. You must unarchive the block "
                       "before editing.")  # fmt: skip
    if parts == ["search"]:
        q = sent.get("query", "")
        if q == "busy":
            return _notion(429, "rate_limited", "You have been rate limited. Please try again in a few minutes.",
                           Retry_After="8")  # fmt: skip
        if q == "outage":
            return _notion(
                503,
                "service_unavailable",
                "Notion is unavailable. This can occur when the time to "
                "respond to a request takes longer than 60 seconds, the maximum request timeout.",
            )
        if q == "db":
            return _notion(503, "database_connection_unavailable", "Notion's database is unavailable or is not in a "
                           "state that can be queried. Try again later.")  # fmt: skip
        if q == "flaky":
            return _notion(500, "internal_server_error", "Unexpected error occurred.")
        if q == "edge":
            return _notion(502, "bad_gateway", "Notion encountered an issue while attempting to complete this "
                           "request (e.g., failed to establish a connection with an upstream server). Please try "
                           "again.")  # fmt: skip
        if q == "slowpoke":
            return _notion(504, "gateway_timeout", "Notion timed out while attempting to complete this request. "
                           "Please try again later.")  # fmt: skip
        if (sent.get("page_size") or 0) > 100:
            return _notion(400, "validation_error", "body failed validation: body.page_size should be less than or "
                           "equal to `100`, instead was `500`.")  # fmt: skip
        return 200, {"object": "list", "results": [], "has_more": False}, {}
    if parts == ["pages"] and method == "POST":
        parent = sent.get("parent", {})
        if parent.get("page_id", "").startswith("00000000"):
            return _notion(404, "object_not_found", f"Could not find page with ID: {parent['page_id']}. Make sure "
                           "the relevant pages and databases are shared with your integration.")  # fmt: skip
        return _notion(400, "validation_error", "body failed validation. Fix one:\nbody.parent.page_id should be "
                       "defined, instead was `undefined`.\nbody.parent.database_id should be defined, instead was "
                       "`undefined`.")  # fmt: skip
    if parts[:1] == ["data_sources"] and parts[2:] == ["query"]:
        return _notion(400, "validation_error", "Could not find property with name or id: Stauts")
    if parts[:1] == ["comments"] and method == "POST":
        return _notion(403, "restricted_resource", "Insufficient permissions for this endpoint.")
    if parts == ["users"]:
        return _notion(403, "restricted_resource", "Insufficient permissions for this endpoint.")
    return 200, {"object": "page", "id": _NOTION_PAGE}, {}


class Notion(Source):
    name = "notion"
    package = "@notionhq/notion-mcp-server@2.5.2"
    kind = "notes and wiki (cloud API)"
    language = "node"
    effects = {"API-post-search": "read_only", "API-retrieve-a-page": "read_only",
               "API-get-block-children": "read_only", "API-retrieve-a-block": "read_only",
               "API-get-users": "read_only", "API-query-data-source": "read_only",
               "API-patch-page": "write_idempotent", "API-update-a-block": "write_idempotent"}  # fmt: skip
    token = _NOTION_TOKEN

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        with fake_service(notion_route) as api:
            yield self.server_config(ws, f"http://127.0.0.1:{api.port}")

    def server_config(self, ws: Workspace, url: str) -> StdioUpstream:
        entry = NPM_MODULES / "@notionhq/notion-mcp-server/bin/cli.mjs"
        env = {"BASE_URL": url, "HOME": str(ws.root), **({"NOTION_TOKEN": self.token} if self.token else {})}
        return _stdio("node", str(entry), env=env)

    def cases(self, ws: Workspace) -> list[Case]:
        ghost, page = "00000000-1111-4222-8333-444444444444", "API-retrieve-a-page"
        return [
            Case(page, {"page_id": ghost}, "page_missing_or_unshared",
                 L.not_found("page_id", "API-post-search", why="no page with this ID is shared with the "
                             "integration")),
            Case("API-get-block-children", {"block_id": ghost}, "block_missing", L.not_found("block_id",
                 "API-post-search")),
            Case(page, {"page_id": "not-a-uuid"}, "page_id_not_uuid", L.bad_value("page_id")),
            Case(page, {"page_id": "11111111-2222-4333-8444-555555555555"}, "page_restricted",
                 L.forbidden("page_id", why="the integration lacks the capability for this endpoint")),
            Case("API-patch-page", {"page_id": "22222222-3333-4444-8555-666666666666", "archived": True},
                 "page_save_conflict",
                 L.conflict("page_id", "API-retrieve-a-page", why="Notion's conflict_error: the page changed while "
                            "saving; re-read it, then decide")),
            Case("API-update-a-block", {"block_id": "33333333-4444-4555-8666-777777777777",
                                        "paragraph": {"rich_text": [{"text": {"content": "x"}}]}},
                 "block_archived", L.conflict("block_id", "API-retrieve-a-block", why="the block is archived: "
                                              "unarchive it first")),
            Case("API-post-search", {"query": "busy"}, "rate_limited", _rate_limited(why="Retry-After 8 s")),
            Case("API-post-search", {"query": "outage"}, "api_503", service_down()),
            Case("API-post-search", {"query": "db"}, "api_503_database", service_down()),
            Case("API-post-search", {"query": "flaky"}, "api_500", service_down()),
            Case("API-post-search", {"query": "edge"}, "api_502", service_down()),
            Case("API-post-search", {"query": "slowpoke"}, "api_504", service_down()),
            Case("API-post-search", {"query": "x", "page_size": 500}, "page_size_too_large",
                 L.bad_value("page_size")),
            Case("API-post-page", {"parent": {"page_id": ghost}, "properties": {"title": [{"text": {"content":
                 "Notes"}}]}}, "parent_missing", L.not_found("parent", "API-post-search")),
            Case("API-post-page", {"parent": {}, "properties": {}}, "parent_empty", L.bad_value("parent")),
            Case("API-query-data-source", {"data_source_id": "44444444-5555-4666-8777-888888888888",
                                           "filter": {"property": "Stauts", "select": {"equals": "Done"}}},
                 "filter_property_unknown", L.bad_value("filter")),
            Case("API-create-a-comment", {"parent": {"page_id": "44444444-5555-4666-8777-888888888888"},
                                          "rich_text": [{"text": {"content": "+1"}}]}, "comment_capability_missing",
                 L.forbidden(why="the integration has no comment capability: only the workspace owner grants it")),
            Case("API-get-users", {}, "users_capability_missing",
                 L.forbidden(why="the integration has no user-information capability")),
            Case(page, {}, "missing_page_id", L.missing_arg("page_id")),
            Case("API-search", {"query": "x"}, "unknown_tool", L.unknown_tool("API-post-search")),
        ]  # fmt: skip


class NotionBadToken(Notion):
    name = "notion-badtoken"
    server = "notion"
    token = "ntn_revokedrevokedrevokedrevokedrevokedrevoked01"

    def cases(self, ws: Workspace) -> list[Case]:
        return [Case("API-post-search", {"query": "roadmap"}, "token_refused", bad_credentials())]


class NotionDown(Notion):
    name = "notion-down"
    server = "notion"

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        yield self.server_config(ws, f"http://127.0.0.1:{_closed_port()}")

    def cases(self, ws: Workspace) -> list[Case]:
        return [
            Case("API-post-search", {"query": "roadmap"}, "api_unreachable", service_down(proven_refused=True)),
            Case("API-patch-page", {"page_id": _NOTION_PAGE, "archived": True}, "api_unreachable_write",
                 service_down(write=True, proven_refused=True)),
        ]  # fmt: skip


HOLDOUT6_SOURCES += [Notion(), NotionBadToken(), NotionDown()]


# --- Stripe: @stripe/mcp 0.2.5 (Node, @stripe/agent-toolkit, stripe-node) in front of a fake Stripe API -------------

# stripe-node calls https.request(options) with an options object (host, port, path), which holdout5's preload (a URL
# or a string) does not cover: this one also rewrites an options object for that host (stripe-node waits for TLS's
# "secureConnect" before it writes the body: the plain socket's "connect" is passed on as that).
_REDIRECT_HTTPS_OPTIONS = """\
const http = require("http"), https = require("https");
const from = process.env.REDIRECT_HTTPS_HOST, to = new URL(process.env.REDIRECT_HTTPS_TO);
const original = https.request;
https.request = function (input, options, callback) {
  const host = input && typeof input === "object" && !(input instanceof URL) ? input.hostname || input.host : null;
  if (host === from) {
    const opts = { ...input, protocol: "http:", host: to.hostname, hostname: to.hostname, port: to.port };
    delete opts.agent;
    const req = http.request(opts, typeof options === "function" ? options : callback);
    // stripe-node writes the body on the socket's "secureConnect": a plain socket says "connect".
    req.once("socket", (socket) => socket.once("connect", () => socket.emit("secureConnect")));
    return req;
  }
  return original.apply(this, arguments);
};
"""


_STRIPE_KEY = "rk_test_51Fake0000000000000000000000000000000000000000000000000000000000000000000000000000000000"


def _stripe(status: int, kind: str, message: str, code: str = "", param: str = "", **headers: str) -> Reply:
    # Stripe's error object (docs.stripe.com/api/errors, docs.stripe.com/error-codes): {"error": {"type", "code",
    # "message", "param", "doc_url", "request_log_url"}}; a 429 is type "invalid_request_error" with code
    # "rate_limit" (docs.stripe.com/rate-limits).
    log = "https://dashboard.stripe.com/test/logs/req_Fake0000000001"
    error: dict[str, Any] = {"type": kind, "message": message, "request_log_url": log}
    if code:
        error["code"] = code
        error["doc_url"] = f"https://stripe.com/docs/error-codes/{code.replace('_', '-')}"
    if param:
        error["param"] = param
    return status, {"error": error}, {"Request-Id": "req_Fake0000000001", **headers}


def stripe_route(method: str, path: str, query: dict[str, list[str]], headers: dict[str, str], body: bytes) -> Any:
    from urllib.parse import parse_qs

    if headers.get("authorization") != f"Bearer {_STRIPE_KEY}":
        return _stripe(401, "invalid_request_error", "Invalid API Key provided: rk_test_********************" +
                       "revoked", code="api_key_invalid")  # fmt: skip
    form = {k: v[0] for k, v in parse_qs(body.decode()).items()} if body else {}
    arg = {**{k: v[0] for k, v in query.items()}, **form}
    parts = [p for p in path.split("/") if p][1:]  # /v1/<rest>
    if parts == ["coupons"] and method == "POST":
        name = arg.get("name", "")
        if name == "BURST":
            return _stripe(429, "invalid_request_error", "Request rate limit exceeded. Learn more about rate limits "
                           "here https://stripe.com/docs/rate-limits.", code="rate_limit")  # fmt: skip
        if name == "LOCKED":
            return _stripe(
                403,
                "invalid_request_error",
                "The provided key 'rk_test_********************0000' does "
                "not have the required permissions for this endpoint on account 'acct_1Fake00000000001'. "
                "Having the 'rak_coupon_write' permission would allow this request to continue.",
            )
        if name == "BROKEN":
            return _stripe(500, "api_error", "An unknown error occurred")
        if arg.get("percent_off") and arg.get("amount_off"):
            return _stripe(400, "invalid_request_error", "You may only specify one of these parameters: "
                           "amount_off, percent_off.", code="parameter_unknown", param="amount_off")  # fmt: skip
        if arg.get("currency", "").lower() not in ("usd", "eur"):
            return _stripe(400, "invalid_request_error", f"Invalid currency: {arg.get('currency', '').lower()}. "
                           "Stripe currently supports these currencies: usd, aed, afn, all, amd, ...",
                           code="parameter_invalid_string", param="currency")  # fmt: skip
        return 200, {"id": "Z4OV52SU", "object": "coupon"}, {}
    if parts == ["refunds"] and method == "POST":
        pi = arg.get("payment_intent", "")
        if pi == "pi_3Ghost000000000000000000":
            return _stripe(404, "invalid_request_error", f"No such payment_intent: '{pi}'",
                           code="resource_missing", param="payment_intent")  # fmt: skip
        if pi == "pi_3Refunded00000000000000":
            return _stripe(400, "invalid_request_error", "Charge ch_3Refunded00000000000000 has already been "
                           "refunded.", code="charge_already_refunded")  # fmt: skip
        return _stripe(400, "invalid_request_error", "Refund amount ($500.00) is greater than unrefunded amount on "
                       "charge ($20.00)", code="amount_too_large", param="amount")  # fmt: skip
    if parts[:1] == ["invoices"] and parts[2:] == ["finalize"]:
        return _stripe(400, "invalid_request_error", "This invoice is already finalized, you can't re-finalize a "
                       "non-draft invoice.", code="invoice_unexpected_state")  # fmt: skip
    if parts[:1] == ["subscriptions"] and len(parts) == 2:
        return _stripe(404, "invalid_request_error", f"No such subscription: '{parts[1]}'",
                       code="resource_missing", param="id")  # fmt: skip
    if parts == ["customers"] and method == "GET":
        return 503, "<html><body><h1>503 Service Unavailable</h1>No server is available to handle this request." \
                    "</body></html>", {}  # fmt: skip
    if parts == ["prices"] and method == "POST":
        return _stripe(400, "invalid_request_error", f"No such product: '{arg.get('product', '')}'",
                       code="resource_missing", param="product")  # fmt: skip
    return 200, {"object": "list", "data": [], "has_more": False}, {}


class Stripe(Source):
    name = "stripe"
    package = "@stripe/mcp@0.2.5"
    kind = "payments (cloud API)"
    language = "node"
    effects = {"list_customers": "read_only", "list_products": "read_only", "list_prices": "read_only",
               "list_invoices": "read_only", "list_coupons": "read_only", "retrieve_balance": "read_only",
               "list_payment_intents": "read_only", "list_subscriptions": "read_only",
               "list_disputes": "read_only", "search_stripe_documentation": "read_only",
               "cancel_subscription": "write_idempotent", "finalize_invoice": "write_idempotent"}  # fmt: skip
    key = _STRIPE_KEY
    args: tuple[str, ...] = ("--tools=all",)

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        with fake_service(stripe_route) as api:
            yield self.server_config(ws, f"http://127.0.0.1:{api.port}")

    def server_config(self, ws: Workspace, url: str) -> StdioUpstream:
        preload = ws.root / "redirect_https_options.cjs"
        preload.write_text(_REDIRECT_HTTPS_OPTIONS)
        entry = NPM_MODULES / "@stripe/mcp/dist/index.js"
        key = [f"--api-key={self.key}"] if self.key else []
        env = {"REDIRECT_HTTPS_HOST": "api.stripe.com", "REDIRECT_HTTPS_TO": url, "HOME": str(ws.root)}
        return _stdio("node", "--require", str(preload), str(entry), *self.args, *key, env=env)

    def cases(self, ws: Workspace) -> list[Case]:
        cpn = "create_coupon"
        return [
            Case(cpn, {"name": "BURST", "amount_off": 500}, "rate_limited",
                 _rate_limited(why="Stripe's per-second request limit")),
            Case(cpn, {"name": "LOCKED", "amount_off": 500}, "restricted_key_permission",
                 L.forbidden(why="the restricted key lacks the coupon write permission: only the account owner "
                             "grants it")),
            Case(cpn, {"name": "BROKEN", "amount_off": 500}, "api_error_500", service_down(write=True)),
            Case(cpn, {"name": "Spring", "amount_off": 500, "percent_off": 10}, "amount_and_percent",
                 L.bad_value("percent_off", why="the API takes amount_off or percent_off, not both (the tool's "
                             "schema requires amount_off)")),
            Case(cpn, {"name": "Spring", "amount_off": 500, "currency": "usx"}, "currency_invalid",
                 L.bad_value("currency")),
            Case("create_refund", {"payment_intent": "pi_3Ghost000000000000000000"}, "refund_payment_missing",
                 L.not_found("payment_intent", "list_payment_intents")),
            Case("create_refund", {"payment_intent": "pi_3Refunded00000000000000"}, "refund_already_refunded",
                 L.conflict("payment_intent", "list_payment_intents")),
            Case("create_refund", {"payment_intent": "pi_3Paid000000000000000000", "amount": 50000},
                 "refund_amount_too_large", L.bad_value("amount")),
            Case("finalize_invoice", {"invoice": "in_1Open00000000000000000"}, "invoice_already_finalized",
                 L.conflict("invoice", "list_invoices")),
            Case("cancel_subscription", {"subscription": "sub_1Ghost0000000000000000"}, "subscription_missing",
                 L.not_found("subscription", "list_subscriptions")),
            Case("create_price", {"product": "prod_Ghost000000001", "unit_amount": 1000, "currency": "usd"},
                 "price_product_missing", L.not_found("product", "list_products")),
            Case("list_customers", {}, "api_503_html", service_down()),
            Case("list_customers", {"limit": 500}, "limit_out_of_range", L.schema("limit")),
            Case("create_customer", {"name": "Ann", "email": "not-an-email"}, "email_invalid", L.schema("email")),
            Case("create_customer", {"email": "ann@example.com"}, "missing_name", L.missing_arg("name")),
            Case(cpn, {"name": "Spring"}, "coupon_missing_amount", L.missing_arg("amount_off")),
            Case("delete_customer", {"customer": "cus_1"}, "unknown_tool", L.unknown_tool()),
        ]  # fmt: skip


class StripeBadKey(Stripe):
    name = "stripe-badkey"
    server = "stripe"
    key = "rk_test_51Fake0000000000000000000000000000000000000000000000000000000000000000000000revoked"

    def cases(self, ws: Workspace) -> list[Case]:
        return [
            Case("create_coupon", {"name": "Spring", "amount_off": 500}, "key_refused", bad_credentials()),
            Case("list_products", {}, "key_refused_list", bad_credentials()),
        ]  # fmt: skip


class StripeDown(Stripe):
    name = "stripe-down"
    server = "stripe"

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        yield self.server_config(ws, f"http://127.0.0.1:{_closed_port()}")

    def cases(self, ws: Workspace) -> list[Case]:
        return [
            Case("create_coupon", {"name": "Spring", "amount_off": 500}, "api_unreachable_write",
                 service_down(write=True)),
            Case("list_products", {}, "api_unreachable", service_down()),
        ]  # fmt: skip


def _stripe_startup(situation: str, fault: str, why: str) -> tuple[str, L.Gold]:
    return situation, L.custom(fault, False, "not_sent", "ask_user", why=why)


class StripeNoKey(Stripe):
    name = "stripe-nokey"
    server = "stripe"
    key = ""
    startup = _stripe_startup(
        "startup_api_key_missing", "F1_unauthenticated", "started without an API key: only the user configures it"
    )

    def cases(self, ws: Workspace) -> list[Case]:
        return []


class StripePublishableKey(StripeNoKey):
    name = "stripe-pkkey"
    key = "pk_test_51Fake000000000000000000000000000000000000000000000000000000000000000000000000000000"
    startup = _stripe_startup(
        "startup_publishable_key",
        "F1_unauthenticated",
        "a publishable key where a secret or restricted key is needed: only the user has one",
    )


class StripeNoTools(StripeNoKey):
    name = "stripe-notools"
    key = _STRIPE_KEY
    args = ()
    startup = _stripe_startup(
        "startup_tools_argument_missing",
        "D4_permanent_execution_error",
        "the command line lacks --tools: only whoever configured the server fixes it",
    )


class StripeUnknownTool(StripeNoKey):
    name = "stripe-badtools"
    key = _STRIPE_KEY
    args = ("--tools=customers.delete",)
    startup = _stripe_startup(
        "startup_tools_argument_invalid",
        "D4_permanent_execution_error",
        "the command line names a tool the server does not have",
    )


class StripeBadAccount(StripeNoKey):
    name = "stripe-badaccount"
    key = _STRIPE_KEY
    args = ("--tools=all", "--stripe-account=cus_1Fake")
    startup = _stripe_startup(
        "startup_account_argument_invalid",
        "D4_permanent_execution_error",
        "the connected account argument is no account ID (acct_...)",
    )


HOLDOUT6_SOURCES += [Stripe(), StripeBadKey(), StripeDown(), StripeNoKey(), StripePublishableKey(), StripeNoTools(),
                     StripeUnknownTool(), StripeBadAccount()]  # fmt: skip


# --- Jenkins: mcp-jenkins (Python, FastMCP, requests) in front of a fake Jenkins ----------------------------------

_JENKINS_USER, _JENKINS_TOKEN = "agent", "11fakefakefakefakefakefakefakefake"


def _jetty(status: int, reason: str, message: str = "") -> Reply:
    # Jenkins answers a missing object with Jetty's HTML error page (HTTP ERROR 404 Not Found), a missing permission
    # with 403 and "<user> is missing the <Permission> permission" (jenkins.io/doc/book/security/access-control/
    # permissions/), a refused password with 401 "Invalid password/token for user", and 503 "Jenkins is getting ready
    # to work" while it starts (jenkins.io/doc/book/system-administration/).
    body = (
        f"<html><head><meta http-equiv='Content-Type' content='text/html;charset=utf-8'/><title>Error {status} "
        f"{reason}</title></head><body><h2>HTTP ERROR {status} {reason}</h2><table><tr><th>URI:</th><td>/</td>"
        f"</tr><tr><th>STATUS:</th><td>{status}</td></tr><tr><th>MESSAGE:</th><td>{message or reason}</td></tr>"
        "</table><hr/><a href='https://eclipse.org/jetty'>Powered by Jetty:// 12.0.16</a></body></html>"
    )
    return status, body, {"X-Jenkins": "2.479.3"}


def jenkins_route(method: str, path: str, query: dict[str, list[str]], headers: dict[str, str], body: bytes) -> Any:
    import base64

    auth = headers.get("authorization", "")
    expected = "Basic " + base64.b64encode(f"{_JENKINS_USER}:{_JENKINS_TOKEN}".encode()).decode()
    if auth != expected:
        return _jetty(401, "Unauthorized", f"Invalid password/token for user: {_JENKINS_USER}")
    if path.startswith("/crumbIssuer"):
        return 200, {"_class": "hudson.security.csrf.DefaultCrumbIssuer", "crumb": "0f1e2d3c4b5a",
                     "crumbRequestField": "Jenkins-Crumb"}, {}  # fmt: skip
    parts = [unquote(p) for p in path.split("/") if p]
    jobs = [parts[i + 1] for i, p in enumerate(parts[:-1]) if p == "job"]
    if "starting" in jobs:
        return 503, "<html><head><title>Starting Jenkins</title></head><body><h1>Please wait while Jenkins is " \
                    "getting ready to work...</h1></body></html>", {}  # fmt: skip
    if "slow" in jobs:
        time.sleep(8)
    if "ghost" in jobs or (parts[:1] == ["computer"] and "ghost-agent" in parts) or \
            (parts[:2] == ["queue", "item"] and parts[2] == "424242"):  # fmt: skip
        return _jetty(404, "Not Found")
    if "release" in jobs and parts[-1] in ("build", "buildWithParameters"):
        return _jetty(403, "Forbidden", f"{_JENKINS_USER} is missing the Job/Build permission")
    if parts == ["scriptText"]:
        return _jetty(403, "Forbidden", f"{_JENKINS_USER} is missing the Overall/Administer permission")
    if "app" in jobs and parts[-1] == "build" and method == "POST":
        return 400, "<html><body><h1>Error</h1><p>This page expects a form submission but had only {}</p>" \
                    "</body></html>", {}  # fmt: skip
    if "app" in jobs and parts[-1] == "buildWithParameters":
        return 400, "<html><body>Nothing is submitted</body></html>", {}
    if "app" in jobs and parts[-1] == "config.xml" and method == "POST":
        return 500, "<html><body><h2>Oops!</h2><pre>java.io.IOException: Unable to read\n\tat hudson.model." \
                    "AbstractItem.updateByXml(AbstractItem.java:866)\nCaused by: com.thoughtworks.xstream.io." \
                    "StreamException:  : XML document structures must start and end within the same entity." \
                    "</pre></body></html>", {}  # fmt: skip
    if "app" in jobs and ("testReport" in parts or "999" in parts):
        return _jetty(404, "Not Found")
    if "app" in jobs:
        return 200, {"_class": "hudson.model.FreeStyleProject", "name": "app", "fullName": "app", "url": "u",
                     "buildable": True, "color": "blue", "lastBuild": {"number": 7, "url": "u"}}, {}  # fmt: skip
    return 200, {"_class": "hudson.model.Hudson", "jobs": [], "views": [], "computer": []}, {}


_JENKINS_READS = ("get_item", "get_build", "get_build_console_output", "get_build_test_report", "get_queue_item",
                  "get_node", "get_all_items", "get_item_config")  # fmt: skip


class Jenkins(Source):
    name = "jenkins"
    package = "mcp-jenkins==3.6.0"
    kind = "CI/CD server"
    language = "python"
    effects = {**dict.fromkeys(_JENKINS_READS, "read_only"), "set_item_config": "write_idempotent"}
    password = _JENKINS_TOKEN

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        with fake_service(jenkins_route) as api:
            yield self.server_config(ws, f"http://127.0.0.1:{api.port}")

    def server_config(self, ws: Workspace, url: str) -> StdioUpstream:
        env = {"JENKINS_URL": url, "JENKINS_USERNAME": _JENKINS_USER, "JENKINS_PASSWORD": self.password,
               "JENKINS_TIMEOUT": "3", "HOME": str(ws.root)}  # fmt: skip
        return _stdio(py_bin("jenkins", "mcp-jenkins"), env=env)

    def cases(self, ws: Workspace) -> list[Case]:
        return [
            Case("get_item", {"fullname": "ghost"}, "job_missing", L.not_found("fullname", "get_all_items")),
            Case("get_item", {"fullname": "team/ghost"}, "job_in_folder_missing",
                 L.not_found("fullname", "get_all_items")),
            Case("get_build", {"fullname": "app", "number": 999}, "build_missing",
                 L.not_found("number", "get_item")),
            Case("get_build_console_output", {"fullname": "app", "number": 999}, "console_build_missing",
                 L.not_found("number", "get_item")),
            Case("get_build_test_report", {"fullname": "app", "number": 7}, "no_test_report",
                 L.custom("D4_permanent_execution_error", False, "executed_failed", "ask_user", "number",
                          why="the build published no test report (the job does not archive one)")),
            Case("get_queue_item", {"id": 424242}, "queue_item_gone", L.not_found("id", "get_all_queue_items",
                 why="the queue item left the queue (it started or was cancelled)")),
            Case("get_node", {"name": "ghost-agent"}, "node_missing", L.not_found("name", "get_all_nodes")),
            Case("build_item", {"fullname": "release", "build_type": "build"}, "build_not_permitted",
                 L.forbidden("fullname", why="the user lacks the Job/Build permission on this job")),
            Case("run_groovy_script", {"script": "println(Jenkins.instance.numExecutors)"}, "script_not_permitted",
                 L.forbidden(why="the script console needs Overall/Administer")),
            Case("build_item", {"fullname": "app", "build_type": "buildWithParameters", "data": {"BRANCH": "x"}},
                 "job_not_parameterised", L.bad_value("build_type", why="the job has no parameters: use 'build'")),
            Case("set_item_config", {"fullname": "app", "config_xml": "<project><builders>"},
                 "config_xml_malformed", L.bad_value("config_xml")),
            Case("get_item", {"fullname": "starting"}, "jenkins_starting",
                 L.remote_transient(why="Jenkins is starting up (503): it will answer shortly")),
            Case("get_item", {"fullname": "slow"}, "jenkins_slow",
                 L.remote_transient(why="Jenkins answered slower than the server's own 3 s timeout")),
            Case("get_build", {"fullname": "app", "number": "seven"}, "number_wrong_type", L.schema("number")),
            Case("get_item", {}, "missing_fullname", L.missing_arg("fullname")),
            Case("build_item", {"fullname": "app", "build_type": "rebuild"}, "build_type_not_in_enum",
                 L.schema("build_type")),
            Case("trigger_build", {"fullname": "app"}, "unknown_tool", L.unknown_tool("build_item")),
        ]  # fmt: skip


class JenkinsBadPassword(Jenkins):
    name = "jenkins-badauth"
    server = "jenkins"
    password = "11revokedrevokedrevokedrevoked00"

    def cases(self, ws: Workspace) -> list[Case]:
        return [
            Case("get_item", {"fullname": "app"}, "token_refused", bad_credentials()),
            Case("build_item", {"fullname": "app", "build_type": "build"}, "token_refused_write", bad_credentials()),
        ]  # fmt: skip


class JenkinsDown(Jenkins):
    name = "jenkins-down"
    server = "jenkins"

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        yield self.server_config(ws, f"http://127.0.0.1:{_closed_port()}")

    def cases(self, ws: Workspace) -> list[Case]:
        return [
            Case("get_all_items", {}, "jenkins_unreachable", service_down(proven_refused=True)),
            Case("build_item", {"fullname": "app", "build_type": "build"}, "jenkins_unreachable_write",
                 service_down(write=True, proven_refused=True)),
        ]  # fmt: skip


HOLDOUT6_SOURCES += [Jenkins(), JenkinsBadPassword(), JenkinsDown()]


def main() -> int:
    from .collect import main_async

    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    only = set(sys.argv[1].split(",")) if len(sys.argv) > 1 else None
    return anyio.run(main_async, HERE / "holdout6.jsonl", only, HOLDOUT6_SOURCES)


if __name__ == "__main__":
    raise SystemExit(main())
