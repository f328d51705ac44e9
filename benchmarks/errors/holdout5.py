"""A fifth fresh hold-out (issue 19): servers of kinds neither the corpus nor the first four hold-outs cover.

    python -m benchmarks.errors.holdout5          # writes holdout5.jsonl (+ holdout5_success_shaped.jsonl)

It measures the rules on servers no rule was written from: GitHub's reference server (Node) in front of a fake
GitHub REST API, Brave Search's reference server (Node) in front of a fake Brave Search API, Google Maps' reference
server (Node, ``node-fetch``) in front of a fake Maps Web Service, Sentry's reference server (Python) in front of a
fake Sentry API, an MQTT server (Python, FastMCP over streamable HTTP) on Debian's Mosquitto broker, and Puppeteer's
reference server (Node) driving Debian's chromium. Every label
was written from the situation provoked, the server's own words and LABELS.md before any rule was run on these
records; records and labels were committed ("frozen before measuring") before the rules were run on them.

The GitHub, Brave and Maps servers have their API's address written into their code: a preload (``node
--require``) points the global ``fetch`` (GitHub, Brave: ``holdout4.redirected``) or ``https.request`` (Maps, whose
``node-fetch`` uses it: ``redirect_https.cjs`` written here) at the local fake; the servers' own code is unchanged.

Installed by hand for collection (not part of CI): ``npm install --prefix .tools/corpus/npm
@modelcontextprotocol/server-github@2025.4.8 @modelcontextprotocol/server-brave-search@0.6.2
@modelcontextprotocol/server-google-maps@0.6.2 @modelcontextprotocol/server-puppeteer@2025.5.12`` (with
``PUPPETEER_SKIP_DOWNLOAD=1``), ``mqtt-mcp==0.4.0`` in a Python 3.13 virtualenv at ``.tools/corpus/py/mqtt``,
``mcp-server-sentry==2025.1.14 mcp==1.0.0`` in a Python 3.11 virtualenv at ``.tools/corpus/py/sentry`` (mcp 1.0.0 is
the oldest its metadata allows and the one it works with: it raises ``McpError("text")``, which every later mcp 1.x
turns into "'str' object has no attribute 'message'" for every error), and Debian's ``mosquitto`` and ``chromium``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
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
from .holdout4 import redirected
from .servers import NPM_MODULES, bad_credentials, py_bin, service_down
from .services import free_port
from .situations import Case, Source, Workspace, _stdio

HERE = Path(__file__).resolve().parent

Reply = tuple[int, Any, dict[str, str]]


def _rate_limited(*names: str, why: str = "the service asks to slow down for a short while") -> L.Gold:
    return L.custom("D2_rate_limited", True, "rejected", "backoff_retry", *names, why=why)


def _quota(*names: str, why: str = "a quota is spent: no retry passes until someone raises it or it resets") -> L.Gold:
    return L.custom("F3_quota_exhausted", False, "rejected", "ask_user", *names, why=why)


# --- GitHub: @modelcontextprotocol/server-github (Node) in front of a fake GitHub REST API ----------------------------

_GH_TOKEN = "ghp_fakefakefakefakefakefakefakefake0000"
_GH_DOCS = "https://docs.github.com/rest"


def _gh(status: int, message: str, headers: dict[str, str] | None = None, **extra: Any) -> Reply:
    # GitHub's error bodies (docs.github.com/rest/using-the-rest-api/troubleshooting-the-rest-api and
    # .../using-the-rest-api/rate-limits-for-the-rest-api): {"message", "documentation_url", "status"}, a 422's
    # "errors" list of {"resource", "field", "code"[, "message"]}.
    body = {"message": message, **extra, "documentation_url": _GH_DOCS, "status": str(status)}
    return status, body, headers or {}


def _gh_invalid(message: str, *errors: dict[str, Any]) -> Reply:
    return _gh(422, message, errors=list(errors))


_SHA = "3f786850e387550fdab836ed7e6dc881de23001b"


def github_route(method: str, path: str, query: dict[str, list[str]], headers: dict[str, str], body: bytes) -> Any:
    if headers.get("authorization") != f"Bearer {_GH_TOKEN}":
        return _gh(401, "Bad credentials")
    parts = [unquote(p) for p in path.split("/") if p]
    sent = json.loads(body or b"{}") if body else {}
    if parts == ["user", "repos"]:
        if sent.get("name") == "app":
            return _gh_invalid("Repository creation failed.", {"resource": "Repository", "code": "custom",
                               "field": "name", "message": "name already exists on this account"})  # fmt: skip
        return _gh(403, "You have exceeded a secondary rate limit and have been temporarily blocked from content "
                   "creation. Please retry your request again later. If you reach out to GitHub Support for help, "
                   "please include the request ID 0F3A:2B1C:9D2E7:1A2B3C4:6750A1B2.",
                   {"Retry-After": "60"})  # fmt: skip
    if parts[:2] == ["search", "code"]:
        q = (query.get("q") or [""])[0]
        if "repo:" not in q and "org:" not in q and "user:" not in q:
            return _gh_invalid("Validation Failed", {"message": "Must include at least one user, organization, or "
                               "repository", "resource": "Search", "field": "q", "code": "invalid"})  # fmt: skip
        return _gh_invalid("Validation Failed", {"message": "The listed users and repositories cannot be searched "
                           "either because the resources do not exist or you do not have permission to view them.",
                           "resource": "Search", "field": "q", "code": "invalid"})  # fmt: skip
    if parts[:2] == ["search", "issues"]:
        return _gh(403, "API rate limit exceeded for user ID 583231. If you reach out to GitHub Support for help, "
                   "please include the request ID 0F3A:2B1C:9D2E7:1A2B3C4:6750A1B3 and timestamp 2026-12-02 "
                   "17:30:00 UTC.", {"x-ratelimit-limit": "5000", "x-ratelimit-remaining": "0",
                   "x-ratelimit-used": "5000", "x-ratelimit-reset": str(int(time.time()) + 3000),
                   "x-ratelimit-resource": "core"})  # fmt: skip
    if parts[:1] != ["repos"] or len(parts) < 3:
        return _gh(404, "Not Found")
    owner, repo, rest = parts[1], parts[2], parts[3:]
    if repo == "ghost":
        return _gh(404, "Not Found")
    if repo == "blocked":
        return 451, {"message": "Repository access blocked", "block": {"reason": "tos", "created_at":
                     "2026-11-02T10:00:00Z", "html_url": f"https://github.com/{owner}/{repo}"}}, {}  # fmt: skip
    if repo == "flaky":
        return 502, {"message": "Server Error"}, {}
    if repo == "unicorn":
        return 503, "<!DOCTYPE html><html><head><title>Unicorn! · GitHub</title></head><body><p>No server is " \
                    "currently available to service your request.</p></body></html>", {}  # fmt: skip
    if repo == "throttled":
        return _gh(429, "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. "
                   "If you reach out to GitHub Support for help, please include the request ID "
                   "0F3A:2B1C:9D2E7:1A2B3C4:6750A1B4.", {"Retry-After": "30"})  # fmt: skip
    if rest[:1] == ["issues"]:
        if method == "POST" and len(rest) == 1:
            if repo == "locked":
                return _gh(403, "Resource not accessible by personal access token")
            if repo == "noissues":
                return _gh(410, "Issues are disabled for this repo")
        if len(rest) >= 2 and rest[1] == "999":
            return _gh(404, "Not Found")
        if len(rest) == 3 and rest[2] == "comments" and rest[1] == "13":
            return _gh(403, "Unable to create comment because issue is locked.")
        if method == "PATCH" and "ghost-user" in (sent.get("assignees") or []):
            return _gh_invalid("Validation Failed", {"value": "ghost-user", "resource": "Issue",
                               "field": "assignees", "code": "invalid"})  # fmt: skip
        if method == "PATCH" and sent.get("milestone") == 99:
            return _gh_invalid("Validation Failed", {"value": 99, "resource": "Issue", "field": "milestone",
                               "code": "invalid"})  # fmt: skip
        return _gh(404, "Not Found")
    if rest[:1] == ["pulls"]:
        if method == "POST" and len(rest) == 1:
            head, base = sent.get("head", ""), sent.get("base", "")
            if head == "feature":
                return _gh_invalid("Validation Failed", {"resource": "PullRequest", "code": "custom",
                                   "message": f"A pull request already exists for {owner}:feature."})  # fmt: skip
            if head == base:
                return _gh_invalid("Validation Failed", {"resource": "PullRequest", "code": "custom",
                                   "message": f"No commits between {base} and {head}"})  # fmt: skip
            return _gh_invalid("Validation Failed", {"resource": "PullRequest", "field": "head", "code": "invalid"})
        if len(rest) >= 3 and rest[2] == "merge":
            if rest[1] == "7":
                return _gh(405, "Pull Request is not mergeable")
            if rest[1] == "8":
                return _gh(409, "Head branch was modified. Review and try the merge again.")
            if rest[1] == "9":
                return _gh(405, "Repository rule violations found\n\n2 of 2 required status checks are expected.\n\n")
            return _gh(404, "Not Found")
        if len(rest) >= 3 and rest[2] == "update-branch":
            return _gh_invalid("expected head sha didn't match current head ref.")
        if len(rest) >= 2 and rest[1] == "404":
            return _gh(404, "Not Found")
        return 500, {"message": "Server Error"}, {}
    if rest[:1] == ["contents"]:
        file = "/".join(rest[1:])
        if method == "PUT":
            if sent.get("branch") == "main" and repo == "guarded":
                return _gh(409, "Repository rule violations found\n\nChanges must be made through a pull request.\n\n")
            if sent.get("sha") and sent["sha"] != _SHA:
                return _gh(409, f"{file} does not match {sent['sha']}")
            if not sent.get("sha"):
                return _gh_invalid('Invalid request.\n\n"sha" wasn\'t supplied.')
        return _gh(404, "Not Found")
    if rest[:2] == ["git", "refs"]:
        if method == "POST":
            return _gh_invalid("Reference already exists")
        if rest[2:4] == ["heads", "main"]:
            return 200, {"ref": "refs/heads/main", "node_id": "x", "url": "u",
                         "object": {"sha": _SHA, "type": "commit", "url": "u"}}, {}  # fmt: skip
        return _gh(404, "Not Found")
    if rest[:1] == ["commits"]:
        sha = (query.get("sha") or [""])[0]
        return _gh(404, f"No commit found for SHA: {sha}") if sha else (200, [], {})
    if rest[:1] == ["forks"]:
        return _gh(403, "Resource not accessible by personal access token")
    return _gh(404, "Not Found")


class GitHub(Source):
    name = "github"
    package = "@modelcontextprotocol/server-github@2025.4.8"
    kind = "code hosting (cloud API)"
    language = "node"
    effects = {"get_file_contents": "read_only", "search_repositories": "read_only", "search_code": "read_only",
               "search_issues": "read_only", "search_users": "read_only", "list_commits": "read_only",
               "list_issues": "read_only", "get_issue": "read_only", "get_pull_request": "read_only",
               "list_pull_requests": "read_only", "get_pull_request_files": "read_only",
               "get_pull_request_status": "read_only", "get_pull_request_comments": "read_only",
               "get_pull_request_reviews": "read_only", "update_issue": "write_idempotent",
               "create_or_update_file": "write_idempotent"}  # fmt: skip
    token = _GH_TOKEN

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        with fake_service(github_route) as api:
            yield self.server_config(ws, f"http://127.0.0.1:{api.port}")

    def server_config(self, ws: Workspace, url: str) -> StdioUpstream:
        entry = NPM_MODULES / "@modelcontextprotocol/server-github/dist/index.js"
        return redirected(ws, entry, "https://api.github.com", url, {"GITHUB_PERSONAL_ACCESS_TOKEN": self.token})

    def cases(self, ws: Workspace) -> list[Case]:
        app = {"owner": "acme", "repo": "app"}
        return [
            Case("get_issue", {**app, "issue_number": 999}, "issue_missing",
                 L.not_found("issue_number", "list_issues")),
            Case("get_issue", {"owner": "acme", "repo": "ghost", "issue_number": 1}, "repo_missing",
                 L.not_found("repo", "search_repositories")),
            Case("get_file_contents", {**app, "path": "docs/SETUP.md"}, "file_missing",
                 L.not_found("path", "get_file_contents")),
            Case("get_pull_request", {**app, "pull_number": 404}, "pull_missing",
                 L.not_found("pull_number", "list_pull_requests")),
            Case("create_issue", {"owner": "acme", "repo": "locked", "title": "Crash on start"},
                 "token_lacks_permission",
                 L.forbidden("repo", why="the fine-grained token may not write issues in this repository; only the "
                             "user grants it")),
            Case("create_issue", {"owner": "acme", "repo": "noissues", "title": "Crash on start"}, "issues_disabled",
                 L.server_broken("repo", why="issues are turned off for this repository: only its admin turns them "
                                 "on")),
            Case("get_issue", {"owner": "acme", "repo": "blocked", "issue_number": 1}, "repo_blocked_451",
                 L.forbidden("repo", why="GitHub blocked access to this repository (legal/ToS): nobody here can "
                             "change it")),
            Case("add_issue_comment", {**app, "issue_number": 13, "body": "+1"}, "issue_locked",
                 L.forbidden("issue_number", why="the conversation is locked by maintainers")),
            Case("fork_repository", {**app, "organization": "other-org"}, "fork_not_permitted",
                 L.forbidden("organization", why="the token may not create repositories in that organisation")),
            Case("list_pull_requests", {"owner": "acme", "repo": "flaky"}, "api_502", service_down()),
            Case("list_issues", {"owner": "acme", "repo": "unicorn"}, "api_503_html", service_down()),
            Case("get_pull_request_status", {**app, "pull_number": 12}, "api_500", service_down()),
            Case("list_issues", {"owner": "acme", "repo": "throttled"}, "secondary_rate_limit_429",
                 _rate_limited(why="GitHub's secondary rate limit: Retry-After 30 s")),
            Case("search_issues", {"q": "is:open label:bug"}, "primary_rate_limit_403",
                 _quota("q", why="the hourly request quota of the token is spent (x-ratelimit-remaining 0, reset in "
                        "50 min): the user waits or uses another token")),
            Case("create_repository", {"name": "scratch-7"}, "content_creation_blocked",
                 _rate_limited(why="secondary rate limit on content creation (403 with Retry-After 60 s)")),
            Case("create_repository", {"name": "app"}, "repo_name_taken", L.conflict("name", "search_repositories")),
            Case("create_pull_request", {**app, "title": "Fix", "head": "no-such-branch", "base": "main"},
                 "pr_head_invalid", L.bad_value("head", "list_commits")),
            Case("create_pull_request", {**app, "title": "Fix", "head": "feature", "base": "main"},
                 "pr_already_exists", L.conflict("head", "list_pull_requests")),
            Case("create_pull_request", {**app, "title": "Fix", "head": "main", "base": "main"}, "pr_no_commits",
                 L.bad_value("head", why="head and base are the same branch: nothing to merge")),
            Case("merge_pull_request", {**app, "pull_number": 7}, "pr_not_mergeable",
                 L.conflict("pull_number", "get_pull_request", why="the pull request has conflicts or is not "
                            "ready: re-read it before deciding")),
            Case("merge_pull_request", {**app, "pull_number": 8, "sha": "0" * 40}, "pr_head_modified",
                 L.conflict("sha", "get_pull_request")),
            Case("merge_pull_request", {**app, "pull_number": 9}, "pr_required_checks",
                 L.conflict("pull_number", "get_pull_request_status", why="branch protection: the required "
                            "status checks have not reported yet; re-read the checks before merging")),
            Case("update_pull_request_branch", {**app, "pull_number": 12, "expected_head_sha": "1" * 40},
                 "update_branch_stale_sha", L.conflict("expected_head_sha", "get_pull_request")),
            Case("create_or_update_file", {**app, "path": "README.md", "content": "x", "message": "m",
                                           "branch": "dev", "sha": "0123abcd" * 5}, "file_sha_mismatch",
                 L.conflict("sha", "get_file_contents")),
            Case("create_or_update_file", {"owner": "acme", "repo": "guarded", "path": "README.md", "content": "x",
                                           "message": "m", "branch": "main", "sha": _SHA}, "branch_protected",
                 L.sandbox("branch", why="a ruleset requires changes through a pull request: write to another "
                           "branch and open one")),
            Case("create_branch", {**app, "branch": "main"}, "branch_exists", L.conflict("branch", "list_commits")),
            Case("create_branch", {**app, "branch": "hotfix", "from_branch": "relase"}, "from_branch_missing",
                 L.bad_value("from_branch")),
            Case("list_commits", {**app, "sha": "no-such-ref"}, "commits_bad_ref", L.bad_value("sha")),
            Case("update_issue", {**app, "issue_number": 5, "assignees": ["ghost-user"]}, "assignee_invalid",
                 L.bad_value("assignees")),
            Case("update_issue", {**app, "issue_number": 5, "milestone": 99}, "milestone_invalid",
                 L.bad_value("milestone")),
            Case("search_code", {"q": "TODO"}, "search_needs_scope", L.bad_value("q")),
            Case("search_code", {"q": "TODO repo:acme/ghost"}, "search_repo_unknown", L.bad_value("q")),
            Case("get_issue", {**app, "issue_number": "12"}, "issue_number_wrong_type", L.schema("issue_number")),
            Case("create_issue", {"owner": "acme", "title": "x"}, "missing_repo", L.missing_arg("repo")),
            Case("list_repositories", {"owner": "acme"}, "unknown_tool", L.unknown_tool("search_repositories")),
        ]  # fmt: skip


class GitHubBadToken(GitHub):
    name = "github-badtoken"
    server = "github"
    token = "ghp_revokedrevokedrevokedrevokedrevok0000"

    def cases(self, ws: Workspace) -> list[Case]:
        return [
            Case("list_issues", {"owner": "acme", "repo": "app"}, "token_refused", bad_credentials()),
            Case("create_issue", {"owner": "acme", "repo": "app", "title": "x"}, "token_refused_write",
                 bad_credentials()),
        ]  # fmt: skip


class GitHubDown(GitHub):
    name = "github-down"
    server = "github"

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        yield self.server_config(ws, f"http://127.0.0.1:{_closed_port()}")

    def cases(self, ws: Workspace) -> list[Case]:
        return [
            Case("get_issue", {"owner": "acme", "repo": "app", "issue_number": 1}, "api_unreachable", service_down()),
            Case("create_issue", {"owner": "acme", "repo": "app", "title": "x"}, "api_unreachable_write",
                 service_down(write=True)),
        ]  # fmt: skip


HOLDOUT5_SOURCES: list[Source] = [GitHub(), GitHubBadToken(), GitHubDown()]


# --- Brave Search: @modelcontextprotocol/server-brave-search (Node) in front of a fake Brave Search API ---------------

_BRAVE_KEY = "BSAfakefakefakefakefakefake01"


def _brave(status: int, code: str, detail: str, meta: dict[str, Any] | None = None, **headers: str) -> Reply:
    # Brave Search API error responses (api-dashboard.search.brave.com/app/documentation/web-search/responses,
    # "ErrorResponse"): {"type": "ErrorResponse", "error": {"id", "status", "code", "detail", "meta"}, "time"}.
    error: dict[str, Any] = {"id": "5a1f0c7e-0d2b-4c1e-9d7a-2f4e1b0c9a11", "status": status, "code": code,
                             "detail": detail}  # fmt: skip
    if meta:
        error["meta"] = meta
    return (
        status,
        {"type": "ErrorResponse", "error": error, "time": 1764696600},
        {k.replace("_", "-"): v for k, v in headers.items()},
    )


def _brave_validation(loc: str, kind: str, msg: str, value: str, **ctx: Any) -> Reply:
    errors = [{"type": kind, "loc": ["query", loc], "msg": msg, "input": value, "ctx": ctx}]
    return _brave(422, "VALIDATION", "Unable to validate request parameter(s)", {"errors": errors})


_BRAVE_PLAN = {"plan": "Free", "rate_limit": 1, "rate_current": 2, "quota_limit": 2000, "quota_current": 417,
               "component": "rate_limit"}  # fmt: skip


def brave_route(method: str, path: str, query: dict[str, list[str]], headers: dict[str, str], body: bytes) -> Any:
    if headers.get("x-subscription-token") != _BRAVE_KEY:
        return _brave(401, "SUBSCRIPTION_TOKEN_INVALID", "The provided subscription token is invalid.")
    q = (query.get("q") or [""])[0]
    count = (query.get("count") or ["10"])[0]
    if path.startswith("/res/v1/local/"):
        return _brave(403, "OPTION_NOT_IN_PLAN", "The option is not subscribed in the plan.",
                      {"plan": "Free", "option": "local"})  # fmt: skip
    if (query.get("result_filter") or [""])[0] == "locations":
        return 200, {"type": "search", "locations": {"results": [{"id": "loc-1"}, {"id": "loc-2"}]}}, {}
    if not q:
        return _brave_validation("q", "string_too_short", "String should have at least 1 character", q, min_length=1)
    if len(q) > 400:
        return _brave_validation("q", "string_too_long", "String should have at most 400 characters", q[:40],
                                 max_length=400)  # fmt: skip
    if count == "0":
        return _brave_validation("count", "greater_than_equal", "Input should be greater than or equal to 1", count,
                                 ge=1)  # fmt: skip
    if q == "burst":
        return _brave(429, "RATE_LIMITED", "Request rate limit exceeded for plan.", _BRAVE_PLAN,
                      X_RateLimit_Limit="1, 2000", X_RateLimit_Remaining="0, 1583", X_RateLimit_Reset="1, 1419704",
                      Retry_After="1")  # fmt: skip
    if q == "monthly":
        return _brave(429, "QUOTA_LIMITED", "Request quota limit exceeded for plan.",
                      {**_BRAVE_PLAN, "quota_current": 2000, "component": "quota_limit"},
                      X_RateLimit_Limit="1, 2000", X_RateLimit_Remaining="1, 0",
                      X_RateLimit_Reset="1, 1419704")  # fmt: skip
    if q == "edge":
        return 502, "<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1>" \
                    "</center></body></html>", {}  # fmt: skip
    if q == "overload":
        return _brave(503, "SERVICE_UNAVAILABLE", "The service is temporarily unavailable. Please try again later.",
                      Retry_After="5")  # fmt: skip
    if q == "slow":
        time.sleep(8)
    return 200, {"type": "search", "web": {"results": [{"title": "T", "description": "D", "url": "https://x"}]}}, {}


class BraveSearch(Source):
    name = "brave"
    package = "@modelcontextprotocol/server-brave-search@0.6.2"
    kind = "web search (cloud API)"
    language = "node"
    effects = {"brave_web_search": "read_only", "brave_local_search": "read_only"}
    key = _BRAVE_KEY

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        with fake_service(brave_route) as api:
            yield self.server_config(ws, f"http://127.0.0.1:{api.port}")

    def server_config(self, ws: Workspace, url: str) -> StdioUpstream:
        entry = NPM_MODULES / "@modelcontextprotocol/server-brave-search/dist/index.js"
        env = {"BRAVE_API_KEY": self.key} if self.key else {}
        return redirected(ws, entry, "https://api.search.brave.com", url, env)

    def cases(self, ws: Workspace) -> list[Case]:
        web = "brave_web_search"
        # The server allows one request a second of its own: each case waits that second out, except the pair
        # that provokes the server's own limit.
        return [
            Case(web, {"query": ""}, "empty_query", L.bad_value("query"), settle_s=1.1),
            Case(web, {"query": "mcp " * 120}, "query_too_long", L.bad_value("query"), settle_s=1.1),
            Case(web, {"query": "mcp proxy", "count": 0}, "count_zero", L.bad_value("count"), settle_s=1.1),
            Case(web, {"query": "burst"}, "api_rate_limited", _rate_limited(), settle_s=1.1),
            Case(web, {"query": "monthly"}, "monthly_quota_spent",
                 _quota(why="the plan's monthly quota is spent (remaining 0, reset in 16 days): only the account "
                        "owner upgrades")),
            Case(web, {"query": "mcp proxy"}, "server_rate_limit",
                 _rate_limited(why="the server's own limit of one request a second"), settle_s=1.1),
            Case(web, {"query": "edge"}, "api_502_html", service_down(), settle_s=1.1),
            Case(web, {"query": "overload"}, "api_503", service_down(), settle_s=1.1),
            Case(web, {"query": "slow"}, "api_slow", L.custom("D1_transient_execution_error", True,
                 "maybe_executed", "backoff_retry", why="the search API did not answer in time"), timeout_s=4,
                 settle_s=6),
            # A local search that finds locations sends three requests in the same second: the server's own limit
            # of one a second refuses the second one every time (the fake would answer 403 OPTION_NOT_IN_PLAN).
            Case("brave_local_search", {"query": "pizza near Berlin"}, "local_search_own_limit",
                 L.custom("D4_permanent_execution_error", False, "executed_failed", "switch_tool",
                          "brave_web_search", why="every local search with results trips the server's own "
                          "one-request-a-second limit (it sends three at once): waiting does not help; use web "
                          "search"), settle_s=1.1),
            Case(web, {}, "missing_query", L.missing_arg("query"), settle_s=1.1),
            Case(web, {"query": 42}, "query_wrong_type", L.schema("query"), settle_s=1.1),
            Case("brave_news_search", {"query": "x"}, "unknown_tool", L.unknown_tool("brave_web_search")),
        ]  # fmt: skip


class BraveBadKey(BraveSearch):
    name = "brave-badkey"
    server = "brave"
    key = "BSArevokedrevokedrevoked00001"

    def cases(self, ws: Workspace) -> list[Case]:
        return [Case("brave_web_search", {"query": "mcp"}, "token_refused", bad_credentials())]


class BraveDown(BraveSearch):
    name = "brave-down"
    server = "brave"

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        yield self.server_config(ws, f"http://127.0.0.1:{_closed_port()}")

    def cases(self, ws: Workspace) -> list[Case]:
        return [Case("brave_web_search", {"query": "mcp"}, "api_unreachable", service_down())]


class BraveNoKey(BraveSearch):
    name = "brave-nokey"
    server = "brave"
    key = ""
    startup = ("startup_api_key_missing", L.custom("F1_unauthenticated", False, "not_sent", "ask_user",
               why="the server is started without its API key: only the user configures it"))  # fmt: skip

    def cases(self, ws: Workspace) -> list[Case]:
        return []


HOLDOUT5_SOURCES += [BraveSearch(), BraveBadKey(), BraveDown(), BraveNoKey()]


# --- Google Maps: @modelcontextprotocol/server-google-maps (Node, node-fetch) in front of a fake Maps Web Service ---

_REDIRECT_HTTPS = """\
// Points https.request for one host at a local plain-HTTP fake (node-fetch sends through https.request).
const http = require("http"), https = require("https");
const from = process.env.REDIRECT_HTTPS_HOST, to = new URL(process.env.REDIRECT_HTTPS_TO);
const original = https.request;
https.request = function (input, options, callback) {
  const url = typeof input === "string" ? new URL(input) : input instanceof URL ? input : null;
  if (url && url.host === from) {
    if (typeof options === "function") { callback = options; options = {}; }
    const target = new URL(url.pathname + url.search, to);
    const opts = { ...(options || {}) };
    delete opts.agent;
    return http.request(target, opts, callback);
  }
  return original.apply(this, arguments);
};
"""

_MAPS_KEY = "AIzaFakeFakeFakeFakeFakeFakeFakeFake01"


def _maps(status: str, message: str = "", **extra: Any) -> Reply:
    # The Maps Web Services' answer to a failed request is HTTP 200 with a "status" code and an "error_message"
    # (developers.google.com/maps/documentation/geocoding/requests-geocoding#StatusCodes, .../places/web-service/
    # details#PlacesDetailsStatus, .../directions/get-directions#DirectionsStatus).
    body: dict[str, Any] = {"results": [], "status": status, **extra}
    if message:
        body["error_message"] = message
    return 200, body, {}


def maps_route(method: str, path: str, query: dict[str, list[str]], headers: dict[str, str], body: bytes) -> Any:
    arg = {k: v[0] for k, v in query.items()}
    if arg.get("key") != _MAPS_KEY:
        return _maps("REQUEST_DENIED", "The provided API key is invalid. ")
    if path.endswith("/geocode/json"):
        address, latlng = arg.get("address", ""), arg.get("latlng", "")
        if latlng:
            lat = latlng.partition(",")[0]
            if abs(float(lat)) > 90:
                return _maps("INVALID_REQUEST", "Invalid request. Invalid 'latlng' parameter.")
            return _maps("ZERO_RESULTS")
        if address == "Atlantis":
            return _maps("ZERO_RESULTS")
        if address == "Berlin busy":
            return _maps("OVER_QUERY_LIMIT", "You have exceeded your rate-limit for this API.")
        if address == "Berlin daily":
            return _maps("OVER_DAILY_LIMIT", "You have exceeded your daily request quota for this API. If you did "
                         "not set a custom daily request quota, verify your project has an active billing account: "
                         "http://g.co/dev/maps-no-account")  # fmt: skip
        if address == "Berlin flaky":
            return _maps("UNKNOWN_ERROR")
        if address == "Berlin outage":
            return (
                503,
                "<html><title>Error 503 (Service Unavailable)!!1</title><p><b>503.</b> That\u2019s an error.",
                {},
            )
        if not address:
            return _maps("INVALID_REQUEST", "Invalid request. Missing the 'address', 'components', 'latlng' or "
                         "'place_id' parameter.")  # fmt: skip
        place = {"geometry": {"location": {"lat": 52.52, "lng": 13.405}}, "place_id": "ChIJAVkDPzdOqEcRcDteW0YgIQQ",
                 "formatted_address": f"{address}, Germany"}  # fmt: skip
        return 200, {"results": [place], "status": "OK"}, {}
    if path.endswith("/place/details/json"):
        if arg.get("place_id", "").startswith("ChIJ"):
            return _maps("NOT_FOUND", result={})
        return _maps("INVALID_REQUEST", result={})
    if path.endswith("/place/textsearch/json"):
        return _maps("REQUEST_DENIED", "This API project is not authorized to use this API.")
    if path.endswith("/elevation/json"):
        return _maps("INVALID_REQUEST", "Invalid request. Invalid 'locations' parameter.")
    if path.endswith("/directions/json"):
        if arg.get("mode") == "transit":
            return _maps("ZERO_RESULTS", routes=[], geocoded_waypoints=[])
        return _maps("NOT_FOUND", routes=[], geocoded_waypoints=[{"geocoder_status": "ZERO_RESULTS"}])
    if path.endswith("/distancematrix/json"):
        return _maps("MAX_ELEMENTS_EXCEEDED", "Too many elements requested.")
    return 404, "<html><title>Error 404 (Not Found)!!1</title>", {}


class GoogleMaps(Source):
    name = "maps"
    package = "@modelcontextprotocol/server-google-maps@0.6.2"
    kind = "maps (cloud API)"
    language = "node"
    effects = {t: "read_only" for t in ("maps_geocode", "maps_reverse_geocode", "maps_search_places",
               "maps_place_details", "maps_distance_matrix", "maps_elevation", "maps_directions")}  # fmt: skip
    key = _MAPS_KEY

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        with fake_service(maps_route) as api:
            yield self.server_config(ws, f"http://127.0.0.1:{api.port}")

    def server_config(self, ws: Workspace, url: str) -> StdioUpstream:
        preload = ws.root / "redirect_https.cjs"
        preload.write_text(_REDIRECT_HTTPS)
        entry = NPM_MODULES / "@modelcontextprotocol/server-google-maps/dist/index.js"
        env = {"REDIRECT_HTTPS_HOST": "maps.googleapis.com", "REDIRECT_HTTPS_TO": url, "HOME": str(ws.root),
               **({"GOOGLE_MAPS_API_KEY": self.key} if self.key else {})}  # fmt: skip
        return _stdio("node", "--require", str(preload), str(entry), env=env)

    def cases(self, ws: Workspace) -> list[Case]:
        return [
            Case("maps_geocode", {"address": "Atlantis"}, "address_zero_results",
                 L.not_found("address", "maps_search_places", why="no place matches the address")),
            Case("maps_geocode", {"address": "Berlin busy"}, "over_query_limit", _rate_limited()),
            Case("maps_geocode", {"address": "Berlin daily"}, "over_daily_limit",
                 _quota(why="the project's daily quota is spent (or billing is off): only the owner can raise it")),
            Case("maps_geocode", {"address": "Berlin flaky"}, "unknown_error",
                 L.remote_transient(why="Google: UNKNOWN_ERROR, the request may succeed if you try again")),
            Case("maps_geocode", {"address": "Berlin outage"}, "api_503_html", service_down()),
            Case("maps_reverse_geocode", {"latitude": 95.0, "longitude": 13.4}, "latitude_out_of_range",
                 L.bad_value("latitude")),
            Case("maps_reverse_geocode", {"latitude": 0.0, "longitude": -160.0}, "reverse_zero_results",
                 L.not_found("latitude", "maps_search_places", why="no address at that point (open ocean)")),
            Case("maps_place_details", {"place_id": "ChIJ-expired-0000"}, "place_id_obsolete",
                 L.not_found("place_id", "maps_search_places", why="the place ID is no longer valid: search again")),
            Case("maps_place_details", {"place_id": "berlin"}, "place_id_malformed", L.bad_value("place_id")),
            Case("maps_search_places", {"query": "coffee"}, "api_not_enabled",
                 L.forbidden(why="the key's project is not authorised for the Places API: only its owner enables "
                             "it")),
            Case("maps_elevation", {"locations": [{"latitude": 200, "longitude": 0}]}, "elevation_bad_location",
                 L.bad_value("locations")),
            Case("maps_directions", {"origin": "Xyzzy Plugh", "destination": "Berlin"}, "directions_not_found",
                 L.bad_value("origin", why="the origin could not be geocoded")),
            Case("maps_directions", {"origin": "Berlin", "destination": "Reykjavik", "mode": "transit"},
                 "directions_zero_results",
                 L.custom("D4_permanent_execution_error", False, "executed_failed", "fix_parameter", "mode",
                          why="no transit route between these places: another mode")),
            Case("maps_distance_matrix", {"origins": ["Berlin"] * 30, "destinations": ["Paris"] * 30},
                 "max_elements_exceeded", L.bad_value("origins")),
            Case("maps_geocode", {}, "missing_address", L.missing_arg("address")),
            Case("maps_timezone", {"location": "Berlin"}, "unknown_tool", L.unknown_tool("maps_geocode")),
        ]  # fmt: skip


class GoogleMapsBadKey(GoogleMaps):
    name = "maps-badkey"
    server = "maps"
    key = "AIzaRevokedRevokedRevokedRevoked00001"

    def cases(self, ws: Workspace) -> list[Case]:
        return [Case("maps_geocode", {"address": "Berlin"}, "key_refused", bad_credentials())]


class GoogleMapsDown(GoogleMaps):
    name = "maps-down"
    server = "maps"

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        yield self.server_config(ws, f"http://127.0.0.1:{_closed_port()}")

    def cases(self, ws: Workspace) -> list[Case]:
        return [Case("maps_geocode", {"address": "Berlin"}, "api_unreachable", service_down())]


HOLDOUT5_SOURCES += [GoogleMaps(), GoogleMapsBadKey(), GoogleMapsDown()]


# --- MQTT: mqtt-mcp (Python, FastMCP over streamable HTTP) on Debian's Mosquitto ------------------------------------

_MQTT_USER, _MQTT_PASSWORD = "agent", "mqtt-good"


@contextmanager
def mosquitto(root: Path) -> Iterator[int]:
    """Debian's Mosquitto on 127.0.0.1: password file, an ACL (agent may write sensors/#, only read alarms/#)."""
    conf_dir = root / "mosquitto"
    conf_dir.mkdir(exist_ok=True)
    passwd = conf_dir / "passwd"
    passwd.write_text("")
    subprocess.run(["mosquitto_passwd", "-b", str(passwd), _MQTT_USER, _MQTT_PASSWORD], check=True)
    acl = conf_dir / "acl"
    acl.write_text(f"user {_MQTT_USER}\ntopic readwrite sensors/#\ntopic read alarms/#\n")
    port = free_port()
    conf = conf_dir / "mosquitto.conf"
    conf.write_text(f"listener {port} 127.0.0.1\nallow_anonymous false\npassword_file {passwd}\nacl_file {acl}\n"
                    "persistence false\nmessage_size_limit 1024\n")  # fmt: skip
    proc = subprocess.Popen(["mosquitto", "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_port(port)
        yield port
    finally:
        proc.terminate()
        proc.wait(10)


def _wait_port(port: int, limit_s: float = 20.0) -> None:
    import socket

    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port}")


@contextmanager
def mqtt_server(broker_port: int, password: str = _MQTT_PASSWORD) -> Iterator[str]:
    """mqtt-mcp over streamable HTTP (its only transport) on 127.0.0.1, configured for the broker."""
    port = free_port()
    env = {**os.environ, "MQTT_MCP_MQTT__HOST": "127.0.0.1", "MQTT_MCP_MQTT__PORT": str(broker_port),
           "MQTT_MCP_MQTT__USERNAME": _MQTT_USER, "MQTT_MCP_MQTT__PASSWORD": password}  # fmt: skip
    proc = subprocess.Popen([str(py_bin("mqtt", "mqtt-mcp")), "--host", "127.0.0.1", "--port", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    try:
        _wait_port(port, 60)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


class Mqtt(Source):
    name = "mqtt"
    package = "mqtt-mcp==0.4.0"
    kind = "message broker (MQTT)"
    language = "python"
    effects = {"receive_message": "read_only", "publish_message": "write_unsafe"}

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        with mosquitto(ws.root) as broker, mqtt_server(broker) as url:
            self.broker = broker
            yield RemoteUpstream(url=url, connect_timeout_s=30)

    def cases(self, ws: Workspace) -> list[Case]:
        pub, recv = "publish_message", "receive_message"
        return [
            Case(pub, {"topic": "sensors/t1", "message": "21.5", "password": "wrong"}, "wrong_password",
                 bad_credentials("password")),
            Case(pub, {"topic": "sensors/t1", "message": "21.5", "port": _closed_port()}, "broker_port_closed",
                 service_down("port", proven_refused=True)),
            Case(pub, {"topic": "sensors/#", "message": "21.5"}, "publish_wildcard_topic", L.bad_value("topic")),
            Case(pub, {"topic": "", "message": "21.5"}, "publish_empty_topic", L.bad_value("topic")),
            Case(pub, {"topic": "sensors/t1", "message": "21.5", "port": 70000}, "port_out_of_range",
                 L.bad_value("port")),
            Case(pub, {"topic": "sensors/t1", "message": "21.5", "host": "broker.invalid"}, "host_unknown",
                 L.bad_value("host", why="the broker's host name does not resolve")),
            Case(pub, {"topic": "alarms/fire", "message": "test"}, "publish_acl_denied",
                 L.forbidden("topic", why="the broker's ACL lets this user only read alarms/#")),
            Case(pub, {"topic": "sensors/blob", "message": "x" * 4096}, "message_too_large",
                 L.bad_value("message", why="larger than the broker's message_size_limit")),
            Case(recv, {"topic": "sensors/quiet", "timeout": 2}, "receive_timeout",
                 L.custom("D4_permanent_execution_error", False, "executed_failed", "fix_parameter", "timeout",
                          "topic", why="nothing was published on the topic within the timeout")),
            Case(recv, {"topic": "sensors/+/#/x", "timeout": 2}, "subscribe_bad_filter", L.bad_value("topic")),
            Case(pub, {"topic": 7, "message": "21.5"}, "topic_wrong_type", L.schema("topic")),
            Case(pub, {"topic": "sensors/t1"}, "missing_message", L.missing_arg("message")),
            Case("subscribe", {"topic": "sensors/t1"}, "unknown_tool", L.unknown_tool("receive_message")),
        ]  # fmt: skip


class MqttBrokerDown(Mqtt):
    name = "mqtt-down"
    server = "mqtt"

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        with mqtt_server(_closed_port()) as url:
            yield RemoteUpstream(url=url, connect_timeout_s=30)

    def cases(self, ws: Workspace) -> list[Case]:
        return [
            Case("receive_message", {"topic": "sensors/t1", "timeout": 2}, "broker_down",
                 service_down(proven_refused=True)),
            Case("publish_message", {"topic": "sensors/t1", "message": "1"}, "broker_down_write",
                 service_down(proven_refused=True)),
        ]  # fmt: skip


HOLDOUT5_SOURCES += [Mqtt(), MqttBrokerDown()]


# --- Sentry: mcp-server-sentry (Python, the reference server) in front of a fake Sentry API --------------------------

_SENTRY_TOKEN = "sntrys_fakefakefakefakefakefakefake0001"

# The server's API address is a constant in its code (https://sentry.io/api/0/): this start-up script mounts an httpx
# transport that sends those requests to the local fake (the messages keep the real URL); the server is unchanged.
_SENTRY_LAUNCH = """\
import sys
import httpx
from mcp_server_sentry.server import main

host, port = sys.argv.pop(1), int(sys.argv.pop(1))


class Redirect(httpx.AsyncHTTPTransport):
    async def handle_async_request(self, request):
        url = request.url.copy_with(scheme="http", host=host, port=port)
        return await super().handle_async_request(httpx.Request(request.method, url, headers=request.headers))


_init = httpx.AsyncClient.__init__


def _patched(self, *args, **kwargs):
    kwargs.setdefault("transport", Redirect())
    _init(self, *args, **kwargs)


httpx.AsyncClient.__init__ = _patched
main()
"""


def _sentry(status: int, detail: str, **headers: str) -> Reply:
    # Sentry's API errors (docs.sentry.io/api/ "Rate Limits", "Authentication"; Django REST framework's bodies):
    # {"detail": "..."}.
    return status, {"detail": detail}, {k.replace("_", "-"): v for k, v in headers.items()}


_SENTRY_EVENT = {"entries": [{"type": "exception", "data": {"values": [{"type": "KeyError", "value": "'user'",
                 "stacktrace": {"frames": [{"filename": "app.py", "lineNo": 12, "function": "view"}]}}]}}]}  # fmt: skip


def sentry_route(method: str, path: str, query: dict[str, list[str]], headers: dict[str, str], body: bytes) -> Any:
    if headers.get("authorization") != f"Bearer {_SENTRY_TOKEN}":
        return _sentry(401, "Invalid token")
    parts = [p for p in path.split("/") if p]  # api 0 issues ID [hashes]
    issue = parts[3] if len(parts) > 3 else ""
    if issue == "404":
        return _sentry(404, "The requested resource does not exist")
    if issue == "403":
        return _sentry(403, "You do not have permission to perform this action.")
    if issue == "429":
        return _sentry(429, "You are attempting to use this endpoint too frequently. Limit is 40 requests in 1 "
                       "seconds", Retry_After="1", X_Sentry_Rate_Limit_Remaining="0")  # fmt: skip
    if issue == "500":
        return _sentry(500, "Internal Error")
    if issue == "502":
        return 502, "<html><head><title>502 Bad Gateway</title></head><body><h1>502 Bad Gateway</h1></body></html>", {}
    if issue == "503":
        return (
            503,
            "<html><body><h1>503 Service Unavailable</h1>Sentry is down for maintenance.</body></html>",
            {"Retry-After": "120"},
        )
    data = {"title": "KeyError: 'user'", "status": "unresolved", "level": "error", "firstSeen": "2026-11-30T10:00Z",
            "lastSeen": "2026-12-02T09:00Z", "count": "17"}  # fmt: skip
    if issue == "777" and parts[-1] == "hashes":
        return 200, [], {}
    if parts[-1] == "hashes":
        if issue == "888":
            return _sentry(404, "The requested resource does not exist")
        return 200, [{"id": "h1", "latestEvent": _SENTRY_EVENT}], {}
    if issue == "999":
        return 200, {"title": "KeyError"}, {}  # an issue body without the fields the server reads
    return 200, data, {}


class Sentry(Source):
    name = "sentry"
    package = "mcp-server-sentry==2025.1.14"
    kind = "error monitoring (cloud API)"
    language = "python"
    effects = {"get_sentry_issue": "read_only"}
    token = _SENTRY_TOKEN

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        with fake_service(sentry_route) as api:
            yield self.server_config(ws, api.port)

    def server_config(self, ws: Workspace, port: int) -> StdioUpstream:
        launch = ws.root / "sentry_launch.py"
        launch.write_text(_SENTRY_LAUNCH)
        env = {"SENTRY_TOKEN": self.token} if self.token else {}
        return _stdio(py_bin("sentry", "python"), str(launch), "127.0.0.1", str(port), env=env)

    def cases(self, ws: Workspace) -> list[Case]:
        get = "get_sentry_issue"
        return [
            Case(get, {"issue_id_or_url": "404"}, "issue_missing", L.not_found("issue_id_or_url")),
            Case(get, {"issue_id_or_url": "403"}, "issue_not_permitted",
                 L.forbidden("issue_id_or_url", why="the token's user is no member of the issue's project")),
            Case(get, {"issue_id_or_url": "429"}, "rate_limited",
                 _rate_limited(why="Sentry's per-endpoint limit (40 a second, Retry-After 1)")),
            Case(get, {"issue_id_or_url": "500"}, "api_500", service_down()),
            Case(get, {"issue_id_or_url": "502"}, "api_502", service_down()),
            Case(get, {"issue_id_or_url": "503"}, "api_503_maintenance", service_down()),
            Case(get, {"issue_id_or_url": "777"}, "issue_without_events",
                 L.custom("D4_permanent_execution_error", False, "executed_failed", "ask_user",
                          why="the issue has no stored events (retention): there is no stack trace to read")),
            Case(get, {"issue_id_or_url": "888"}, "hashes_missing", L.not_found("issue_id_or_url",
                 why="the issue was merged or deleted between the two requests")),
            Case(get, {"issue_id_or_url": "999"}, "issue_body_unexpected",
                 L.server_broken(why="the API's answer lacks fields the server expects: the server is out of date")),
            Case(get, {"issue_id_or_url": "PROJ-1A2"}, "short_id_not_numeric", L.bad_value("issue_id_or_url")),
            Case(get, {"issue_id_or_url": "https://example.com/issues/12/"}, "url_not_sentry",
                 L.bad_value("issue_id_or_url")),
            Case(get, {"issue_id_or_url": "https://acme.sentry.io/projects/web/"}, "url_not_an_issue",
                 L.bad_value("issue_id_or_url")),
            Case(get, {}, "missing_issue", L.missing_arg("issue_id_or_url")),
            Case(get, {"issue_id_or_url": 12345}, "issue_wrong_type", L.schema("issue_id_or_url")),
            Case("list_sentry_issues", {"project": "web"}, "unknown_tool", L.unknown_tool("get_sentry_issue")),
        ]  # fmt: skip


class SentryBadToken(Sentry):
    name = "sentry-badtoken"
    server = "sentry"
    token = "sntrys_revokedrevokedrevokedrevoked0001"

    def cases(self, ws: Workspace) -> list[Case]:
        return [Case("get_sentry_issue", {"issue_id_or_url": "12"}, "token_refused", bad_credentials())]


class SentryDown(Sentry):
    name = "sentry-down"
    server = "sentry"

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        yield self.server_config(ws, _closed_port())

    def cases(self, ws: Workspace) -> list[Case]:
        return [Case("get_sentry_issue", {"issue_id_or_url": "12"}, "api_unreachable", service_down())]


class SentryNoToken(Sentry):
    name = "sentry-notoken"
    server = "sentry"
    token = ""
    startup = ("startup_token_missing", L.custom("F1_unauthenticated", False, "not_sent", "ask_user",
               why="the server is started without its auth token: only the user configures it"))  # fmt: skip

    def cases(self, ws: Workspace) -> list[Case]:
        return []


HOLDOUT5_SOURCES += [Sentry(), SentryBadToken(), SentryDown(), SentryNoToken()]


# --- Puppeteer: @modelcontextprotocol/server-puppeteer (Node) driving Debian's chromium ------------------------------


def _page_route(method: str, path: str, query: dict[str, list[str]], headers: dict[str, str], body: bytes) -> Any:
    page = ("<html><head><title>Shop</title></head><body><h1 id='title'>Shop</h1><form><input id='q' name='q'>"
            "<select id='size'><option value='s'>S</option><option value='m'>M</option></select>"
            "<button id='go' disabled>Go</button></form></body></html>")  # fmt: skip
    return 200, page, {}


class Puppeteer(Source):
    name = "puppeteer"
    package = "@modelcontextprotocol/server-puppeteer@2025.5.12"
    kind = "browser automation"
    language = "node"
    effects = {"puppeteer_screenshot": "read_only", "puppeteer_navigate": "write_idempotent",
               "puppeteer_hover": "write_idempotent"}  # fmt: skip

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        with fake_service(_page_route) as site:
            self.site = site.base
            entry = NPM_MODULES / "@modelcontextprotocol/server-puppeteer/dist/index.js"
            launch = {"headless": True, "executablePath": shutil.which("chromium") or "/usr/bin/chromium",
                      "args": ["--no-sandbox", "--disable-gpu"]}  # fmt: skip
            yield _stdio("node", str(entry), env={"PUPPETEER_LAUNCH_OPTIONS": json.dumps(launch),
                         "ALLOW_DANGEROUS": "true", "HOME": str(ws.root)})  # fmt: skip

    def cases(self, ws: Workspace) -> list[Case]:
        nav = "puppeteer_navigate"
        return [
            Case(nav, {"url": f"{self.site}/shop"}, "open_page", L.unknown_tool(), setup=True),
            Case("puppeteer_click", {"selector": "#checkout"}, "click_missing_element", L.bad_value("selector")),
            Case("puppeteer_fill", {"selector": "#email", "value": "a@b.c"}, "fill_missing_element",
                 L.bad_value("selector"), timeout_s=45),
            Case("puppeteer_select", {"selector": "#title", "value": "m"}, "select_not_a_select",
                 L.bad_value("selector")),
            Case("puppeteer_hover", {"selector": "div[[bad"}, "selector_syntax", L.bad_value("selector"), timeout_s=45),
            Case("puppeteer_evaluate", {"script": "return 1 +"}, "script_syntax_error", L.bad_value("script")),
            Case("puppeteer_evaluate", {"script": "document.querySelector('#nope').click()"}, "script_type_error",
                 L.bad_value("script")),
            Case("puppeteer_screenshot", {"name": "cart", "selector": "#cart"}, "screenshot_missing_element",
                 L.bad_value("selector")),
            Case(nav, {"url": f"http://127.0.0.1:{_closed_port()}/"}, "site_refused",
                 L.remote_transient("url", why="the site refuses connections (down)")),
            Case(nav, {"url": "not a url"}, "invalid_url", L.bad_value("url")),
            Case(nav, {"url": "http://shop.invalid/"}, "host_unknown",
                 L.bad_value("url", why="the host name does not resolve")),
            Case(nav, {"url": f"{self.site}/shop", "launchOptions": {"executablePath": "/opt/nope/chrome"}},
                 "browser_not_found", L.bad_value("launchOptions", why="no browser at that executablePath")),
            Case(nav, {}, "missing_url", L.missing_arg("url")),
            Case("puppeteer_scroll", {"y": 100}, "unknown_tool", L.unknown_tool("puppeteer_evaluate")),
        ]  # fmt: skip


HOLDOUT5_SOURCES += [Puppeteer()]


def main() -> int:
    from .collect import main_async

    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    only = set(sys.argv[1].split(",")) if len(sys.argv) > 1 else None
    return anyio.run(main_async, HERE / "holdout5.jsonl", only, HOLDOUT5_SOURCES)


if __name__ == "__main__":
    raise SystemExit(main())
