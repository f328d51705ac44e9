"""A fourth fresh hold-out (issue 19): servers of kinds neither the corpus nor the first three hold-outs cover.

    python -m benchmarks.errors.holdout4          # writes holdout4.jsonl (+ holdout4_success_shaped.jsonl)

It measures the rules on servers no rule was written from: a Kubernetes server (a Go binary shipped in an npm
package) in front of a fake Kubernetes API server (its ``Status`` objects), an Airtable server (Node) in front of a
fake Airtable Web API, a CalDAV server (Node) on a real Radicale, an LDAP server (Python) on Debian's OpenLDAP slapd,
an email server (Python) sending through a fake SMTP server (Postfix's reply codes), a Home Assistant server (Python)
in front of a fake Home Assistant REST API, and Slack's reference server (Node) in front of a fake Slack Web API.
Every label was written from the situation provoked, the server's own words and LABELS.md before any rule was run on
these records; records and labels were committed ("frozen before measuring") before the rules were run on them.

The Slack and Airtable servers have their API's address written into their code (``https://slack.com/api``,
``https://api.airtable.com``): a preload (``node --require``, ``redirect_fetch.cjs`` written here) points the global
``fetch`` at the local fake; the servers' own code is unchanged.
"""

from __future__ import annotations

import json
import os
import socketserver
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import anyio

from resilient_mcp.policy.config import RemoteUpstream, StdioUpstream

from . import labels as L
from .holdout import _closed_port, fake_service
from .servers import CORPUS_TOOLS, NPM_MODULES, bad_credentials, py_bin, service_down
from .situations import Case, Source, Workspace, _stdio

HERE = Path(__file__).resolve().parent

Reply = tuple[int, Any, dict[str, str]]


def _rate_limited(*names: str) -> L.Gold:
    return L.custom("D2_rate_limited", True, "rejected", "backoff_retry", *names,
                    why="the service asks to slow down for a short while")  # fmt: skip


def _quota(*names: str, why: str = "a quota is spent: no retry passes until someone raises it or it resets") -> L.Gold:
    return L.custom("F3_quota_exhausted", False, "rejected", "ask_user", *names, why=why)


# --- Kubernetes: kubernetes-mcp-server (Go binary in an npm package) in front of a fake API server --------------------

_K8S_TOKEN = "k8s-good"


def _status(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> Reply:
    # The API server's error body: a metav1.Status (kubernetes.io/docs/reference/using-api/api-concepts/
    # "Response status kind"); reasons from k8s.io/apimachinery/pkg/apis/meta/v1 StatusReason.
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "details": details or {}, "code": code}  # fmt: skip
    headers = {"Retry-After": "1"} if code == 429 else {}
    return code, body, headers


_K8S_CORE = [
    ("pods", "Pod", True, ["get", "list", "create", "delete", "update", "patch"]),
    ("pods/log", "Pod", True, ["get"]),
    ("pods/exec", "PodExecOptions", True, ["create", "get"]),
    ("namespaces", "Namespace", False, ["get", "list"]),
    ("nodes", "Node", False, ["get", "list"]),
    ("nodes/proxy", "NodeProxyOptions", False, ["get"]),
    ("events", "Event", True, ["get", "list"]),
    ("services", "Service", True, ["get", "list", "create", "delete", "update", "patch"]),
    ("configmaps", "ConfigMap", True, ["get", "list", "create", "delete", "update", "patch"]),
]
_K8S_APPS = [
    ("deployments", "Deployment", True, ["get", "list", "create", "delete", "update", "patch"]),
    ("deployments/scale", "Scale", True, ["get", "update", "patch"]),
    ("statefulsets", "StatefulSet", True, ["get", "list", "create", "delete", "update", "patch"]),
    ("statefulsets/scale", "Scale", True, ["get", "update", "patch"]),
]


def _resource_list(group_version: str, resources: list[tuple[str, str, bool, list[str]]]) -> dict[str, Any]:
    return {
        "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version,
        "resources": [{"name": n, "singularName": "", "namespaced": ns, "kind": k, "verbs": v}
                      for n, k, ns, v in resources],
    }  # fmt: skip


_POD: dict[str, Any] = {
    "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-0", "namespace": "default", "uid": "1",
    "resourceVersion": "100"}, "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]},
    "status": {"phase": "Running"},
}  # fmt: skip
_SA = 'User "system:serviceaccount:default:mcp-agent"'


def kubernetes_route(method: str, path: str, query: dict[str, list[str]], headers: dict[str, str], body: bytes) -> Any:
    if _K8S_STATE.get("token_refused"):  # this client sends its kubeconfig token only over TLS: a flag instead
        return _status(401, "Unauthorized", "Unauthorized")
    if path == "/version":
        return 200, {"major": "1", "minor": "31", "gitVersion": "v1.31.2", "platform": "linux/amd64"}, {}
    if path == "/api":
        return 200, {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}, {}
    if path == "/apis":
        apps = {"groupVersion": "apps/v1", "version": "v1"}
        return 200, {"kind": "APIGroupList", "apiVersion": "v1",
                     "groups": [{"name": "apps", "versions": [apps], "preferredVersion": apps}]}, {}  # fmt: skip
    if path == "/api/v1":
        return 200, _resource_list("v1", _K8S_CORE), {}
    if path == "/apis/apps/v1":
        return 200, _resource_list("apps/v1", _K8S_APPS), {}
    parts = [unquote(p) for p in path.split("/") if p]
    at = 2 if parts[:1] == ["api"] else 3  # /api/v1/namespaces/NS/..., /apis/GROUP/VERSION/namespaces/NS/...
    ns = parts[at + 1] if len(parts) > at + 1 and parts[at] == "namespaces" else ""
    if parts[:2] == ["api", "v1"] and len(parts) >= 6 and parts[4] == "pods":
        return _k8s_pod(method, ns, parts[5], parts[6:], query)
    if parts[:2] == ["api", "v1"] and len(parts) >= 4 and parts[2] == "nodes":
        return _status(404, "NotFound", f'nodes "{parts[3]}" not found', {"name": parts[3], "kind": "nodes"})
    if parts[:3] == ["apis", "apps", "v1"] and len(parts) >= 7:
        return _k8s_workload(method, ns, parts[5], parts[6], parts[7:], body)
    if parts[:2] == ["api", "v1"] and len(parts) == 6 and parts[4] == "configmaps":
        return _k8s_apply(method, ns, "configmaps", "ConfigMap", parts[5], body)
    return _status(404, "NotFound", "the server could not find the requested resource")


def _forbidden(verb: str, resource: str, ns: str, name: str, group: str = "") -> Reply:
    what = f'{resource}.{group} "{name}"' if group else f'{resource} "{name}"'
    return _status(403, "Forbidden", f'{what} is forbidden: {_SA} cannot {verb} resource "{resource}" in API group '
                   f'"{group}" in the namespace "{ns}"', {"name": name, "kind": resource})  # fmt: skip


def _k8s_pod(method: str, ns: str, name: str, sub: list[str], query: dict[str, list[str]]) -> Reply:
    if ns == "team-b":
        return _forbidden("get" if method == "GET" else "delete", "pods", ns, name)
    if ns == "kube-system":
        return _forbidden("delete", "pods", ns, name) if method == "DELETE" else (200, _POD, {})
    if sub == ["exec"]:
        return _forbidden("create", "pods/exec", ns, name)
    if name == "etcd-slow":
        return _status(500, "InternalError", "etcdserver: request timed out")
    if name == "busy-1":
        return _status(429, "TooManyRequests", "Too many requests, please try again later.")
    if name == "web-503":
        return _status(503, "ServiceUnavailable", "the server is currently unable to handle the request")
    if name == "gw-504":
        return _status(504, "Timeout", "Timeout: request did not complete within requested timeout - context "
                       "deadline exceeded")  # fmt: skip
    if method == "PATCH":  # pods_run: server-side apply of a new pod
        if ns == "batch":
            return _status(403, "Forbidden", f'pods "{name}" is forbidden: exceeded quota: compute-resources, '
                           "requested: limits.cpu=2,limits.memory=4Gi, used: limits.cpu=15,limits.memory=30Gi, "
                           "limited: limits.cpu=16,limits.memory=32Gi", {"name": name, "kind": "pods"})  # fmt: skip
        if ns == "legacy":
            return _status(403, "Forbidden", f'pods "{name}" is forbidden: unable to create new content in namespace '
                           "legacy because it is being terminated", {"name": name, "kind": "pods"})  # fmt: skip
        return 200, {**_POD, "metadata": {**_POD["metadata"], "name": name}}, {}
    if name in ("web-0", "batch-2"):
        if sub == ["log"]:
            container = (query.get("container") or [""])[0]
            if container and container not in ("web", "job"):
                return _status(400, "BadRequest", f"container {container} is not valid for pod {name}")
            if name == "batch-2":
                return _status(400, "BadRequest", f'container "job" in pod "{name}" is waiting to start: '
                               "ContainerCreating")  # fmt: skip
            if (query.get("previous") or [""])[0] == "true":
                return _status(400, "BadRequest", f'previous terminated container "web" in pod "{name}" not found')
            return 200, "GET / 200\n", {}
        if method == "DELETE":
            return 200, _POD, {}
        return 200, _POD, {}
    return _status(404, "NotFound", f'pods "{name}" not found', {"name": name, "kind": "pods"})


def _k8s_workload(method: str, ns: str, resource: str, name: str, sub: list[str], body: bytes) -> Reply:
    kind = {"deployments": "Deployment", "statefulsets": "StatefulSet"}.get(resource, resource)
    if sub == ["scale"]:
        if name not in ("web", "db"):
            return _status(404, "NotFound", f'{resource}.apps "{name}" not found', {"name": name, "group": "apps",
                           "kind": resource})  # fmt: skip
        if method == "GET":
            return 200, {"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": {"name": name, "namespace":
                         ns or "default", "resourceVersion": "7"}, "spec": {"replicas": 2},
                         "status": {"replicas": 2}}, {}  # fmt: skip
        sent = json.loads(body or b"{}")
        replicas = (sent.get("spec") or {}).get("replicas", 0)
        if isinstance(replicas, int) and replicas < 0:
            return _status(422, "Invalid", f'Scale.autoscaling "{name}" is invalid: spec.replicas: Invalid value: '
                           f"{replicas}: must be greater than or equal to 0", {"name": name, "group": "autoscaling",
                           "kind": "Scale", "causes": [{"reason": "FieldValueInvalid", "message": "Invalid value: "
                           f"{replicas}: must be greater than or equal to 0", "field": "spec.replicas"}]})  # fmt: skip
        if name == "db":
            return _status(409, "Conflict", f'Operation cannot be fulfilled on {resource}.apps "{name}": the object '
                           "has been modified; please apply your changes to the latest version and try again",
                           {"name": name, "group": "apps", "kind": resource})  # fmt: skip
        return 200, {"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": {"name": name},
                     "spec": {"replicas": replicas}}, {}  # fmt: skip
    return _k8s_apply(method, ns, f"{resource}.apps", kind, name, body)


def _k8s_apply(method: str, ns: str, resource: str, kind: str, name: str, body: bytes) -> Reply:
    try:
        sent = json.loads(body or b"{}")
    except ValueError:
        sent = {}
    meta, spec = sent.get("metadata") or {}, sent.get("spec") or {}
    details = {"name": name, "kind": resource.split(".")[0]}
    if ns == "batch":
        return _status(
            403,
            "Forbidden",
            f'{resource} "{name}" is forbidden: exceeded quota: object-counts, requested: '
            f"count/{resource}=1, used: count/{resource}=20, limited: count/{resource}=20",
            details,
        )
    if method == "GET":
        return _status(404, "NotFound", f'{resource} "{name}" not found', details)
    if name != name.lower() or "_" in name:
        return _status(422, "Invalid", f'{kind}.apps "{name}" is invalid: metadata.name: Invalid value: "{name}": a '
                       "lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                       "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
                       "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
                       details)  # fmt: skip
    if isinstance(spec.get("replicas"), int) and spec["replicas"] < 0:
        return _status(422, "Invalid", f'{kind}.apps "{name}" is invalid: spec.replicas: Invalid value: '
                       f'{spec["replicas"]}: must be greater than or equal to 0', details)  # fmt: skip
    if meta.get("resourceVersion"):
        return _status(
            409,
            "Conflict",
            f'Operation cannot be fulfilled on {resource} "{name}": the object has been '
            "modified; please apply your changes to the latest version and try again",
            details,
        )
    if name == "web" and spec.get("selector"):
        return _status(422, "Invalid", f'{kind}.apps "{name}" is invalid: spec.selector: Invalid value: '
                       'v1.LabelSelector{MatchLabels:map[string]string{"app":"web2"}, MatchExpressions:[]v1.'
                       "LabelSelectorRequirement(nil)}: field is immutable", details)  # fmt: skip
    if name == "payments":
        return _status(400, "BadRequest", 'admission webhook "validate.kyverno.svc-fail" denied the request: \n\n'
                       f"resource {kind}/{ns}/{name} was blocked due to the following policies\n\n"
                       "restrict-image-registries:\n  validate-registries: 'validation error: Images must come from "
                       "registry.acme.internal. rule validate-registries failed at path "
                       "/spec/template/spec/containers/0/image/'\n")  # fmt: skip
    return 200, sent, {}


_K8S_STATE: dict[str, Any] = {}


def _kubeconfig(root: Path, port: int, token: str) -> Path:
    path = root / f"kubeconfig-{port}-{token}"
    path.write_text(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: lab\n  cluster:\n"
        f"    server: http://127.0.0.1:{port}\ncontexts:\n- name: lab\n  context:\n    cluster: lab\n"
        f"    user: agent\n    namespace: default\ncurrent-context: lab\nusers:\n- name: agent\n  user:\n"
        f"    token: {token}\n"
    )
    return path


class Kubernetes(Source):
    name = "kubernetes"
    package = "kubernetes-mcp-server@0.0.67"
    kind = "container orchestrator"
    language = "go"
    effects = {"configuration_view": "read_only", "events_list": "read_only", "namespaces_list": "read_only",
               "nodes_log": "read_only", "nodes_stats_summary": "read_only", "nodes_top": "read_only",
               "pods_get": "read_only", "pods_list": "read_only", "pods_list_in_namespace": "read_only",
               "pods_log": "read_only", "pods_top": "read_only", "resources_get": "read_only",
               "resources_list": "read_only", "resources_create_or_update": "write_idempotent",
               "resources_scale": "write_idempotent"}  # fmt: skip
    token = _K8S_TOKEN

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        with fake_service(kubernetes_route) as api:
            yield self.server_config(ws, api.port)

    def server_config(self, ws: Workspace, port: int) -> StdioUpstream:
        binary = NPM_MODULES / "kubernetes-mcp-server-linux-amd64/bin/kubernetes-mcp-server-linux-amd64"
        kubeconfig = _kubeconfig(ws.root, port, self.token)
        return _stdio(binary, "--kubeconfig", str(kubeconfig), env={"HOME": str(ws.root)})

    def cases(self, ws: Workspace) -> list[Case]:
        apply, scale, get = "resources_create_or_update", "resources_scale", "resources_get"

        def deployment(name: str, ns: str = "default", replicas: int = 2, **extra: Any) -> dict[str, str]:
            meta: dict[str, Any] = {"name": name, "namespace": ns, **extra.pop("meta", {})}
            pod = {"spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}}
            spec = {"replicas": replicas, "template": pod,
                    **extra}  # fmt: skip
            return {"resource": json.dumps({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
                                            "spec": spec})}  # fmt: skip

        k8s_5xx = L.remote_transient(why="the API server failed for now: wait and retry")
        return [
            Case("pods_get", {"name": "web-9"}, "pod_missing", L.not_found("name", "pods_list")),
            Case("pods_get", {"name": "api-0", "namespace": "team-b"}, "rbac_forbidden_get",
                 L.forbidden("namespace", why="RBAC: the service account may not read pods there; only an admin "
                             "grants it")),
            Case("pods_delete", {"name": "coredns-5d78c9869d-x2x7q", "namespace": "kube-system"},
                 "rbac_forbidden_delete", L.forbidden("namespace", why="RBAC: the service account may not delete "
                                                      "pods there")),
            Case("pods_delete", {"name": "web-7"}, "delete_missing_pod", L.not_found("name", "pods_list")),
            Case("pods_exec", {"name": "web-0", "command": ["ls", "/"]}, "rbac_forbidden_exec",
                 L.forbidden(why="RBAC: the service account may not create pods/exec")),
            Case("pods_get", {"name": "etcd-slow"}, "etcd_timeout", k8s_5xx),
            Case("pods_get", {"name": "busy-1"}, "priority_and_fairness_429", _rate_limited()),
            Case("pods_get", {"name": "web-503"}, "apiserver_503", k8s_5xx),
            Case("pods_get", {"name": "gw-504"}, "apiserver_504", k8s_5xx),
            Case("pods_log", {"name": "web-0", "container": "sidecar"}, "log_container_missing",
                 L.bad_value("container", "pods_get")),
            Case("pods_log", {"name": "batch-2"}, "log_container_starting",
                 L.custom("D1_transient_execution_error", True, "executed_failed", "backoff_retry",
                          why="the container is still being created: its log exists once it starts")),
            Case("pods_log", {"name": "web-0", "previous": True}, "log_no_previous_container",
                 L.custom("D4_permanent_execution_error", False, "executed_failed", "fix_parameter", "previous",
                          why="the container never restarted: there is no previous log; ask for the current one")),
            Case("pods_log", {"name": "web-11"}, "log_pod_missing", L.not_found("name", "pods_list")),
            Case("pods_run", {"image": "python:3.12", "name": "etl-7", "namespace": "batch"}, "resource_quota_pod",
                 _quota(why="the namespace's ResourceQuota is spent: an admin raises it or something is removed")),
            Case("pods_run", {"image": "busybox", "name": "probe-1", "namespace": "legacy"}, "namespace_terminating",
                 L.conflict("namespace", why="the namespace is being deleted: nothing new can be created in it")),
            Case(apply, deployment("Web_App"), "invalid_name", L.bad_value("resource")),
            Case(apply, deployment("api", replicas=-1), "negative_replicas", L.bad_value("resource")),
            Case(apply, deployment("web", meta={"resourceVersion": "41"}), "stale_resource_version",
                 L.conflict("resource", get)),
            Case(apply, deployment("web", selector={"matchLabels": {"app": "web2"}}), "immutable_selector",
                 L.bad_value("resource", why="the selector of an existing Deployment cannot change")),
            Case(apply, deployment("payments"), "admission_webhook_denied",
                 L.sandbox("resource", why="a cluster policy (admission webhook) refuses the image: use an allowed "
                           "registry")),
            Case(apply, deployment("worker", ns="batch"), "object_count_quota",
                 _quota(why="the namespace's object-count quota is spent")),
            Case(apply, {"resource": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n data: [x"},
                 "malformed_yaml", L.bad_value("resource", why="the manifest does not parse")),
            Case(apply, {"resource": json.dumps({"apiVersion": "example.com/v1", "kind": "Widget",
                                                 "metadata": {"name": "w"}})}, "kind_not_served",
                 L.bad_value("resource", why="the cluster serves no such kind")),
            Case(get, {"apiVersion": "apps/v1", "kind": "Deployment", "name": "checkout"}, "deployment_missing",
                 L.not_found("name", "resources_list")),
            Case(scale, {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web-x", "scale": 3},
                 "scale_missing_deployment", L.not_found("name", "resources_list")),
            Case(scale, {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "scale": -1},
                 "scale_negative", L.bad_value("scale")),
            Case(scale, {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db", "scale": 5},
                 "scale_conflict", L.conflict("scale", get)),
            Case("nodes_log", {"name": "worker-9", "query": "kubelet"}, "node_missing",
                 L.not_found("name", "resources_list")),
            Case("nodes_top", {}, "metrics_api_missing",
                 L.server_broken(why="the cluster has no metrics API (metrics-server): only its admin installs it")),
            Case("pods_get", {}, "missing_name", L.missing_arg("name")),
            Case(get, {"apiVersion": "apps/v1", "name": "web"}, "missing_kind", L.missing_arg("kind")),
            Case("pods_exec", {"name": "web-0", "command": "ls /"}, "command_not_array", L.schema("command")),
            Case("deployments_list", {}, "unknown_tool", L.unknown_tool("resources_list")),
        ]  # fmt: skip


class KubernetesBadToken(Kubernetes):
    name = "kubernetes-badtoken"
    server = "kubernetes"

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        _K8S_STATE["token_refused"] = True
        try:
            with fake_service(kubernetes_route) as api:
                yield self.server_config(ws, api.port)
        finally:
            _K8S_STATE.clear()

    def cases(self, ws: Workspace) -> list[Case]:
        return [
            Case("pods_list", {}, "token_refused", bad_credentials()),
            Case("namespaces_list", {}, "token_refused", bad_credentials()),
        ]


class KubernetesDown(Kubernetes):
    name = "kubernetes-down"
    server = "kubernetes"

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        yield self.server_config(ws, _closed_port())

    def cases(self, ws: Workspace) -> list[Case]:
        return [
            Case("pods_list", {}, "apiserver_down", service_down()),
            Case("resources_scale", {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "scale": 3},
                 "apiserver_down", service_down(write=True)),
        ]  # fmt: skip


HOLDOUT4_SOURCES: list[Source] = [Kubernetes(), KubernetesBadToken(), KubernetesDown()]


# --- Airtable: airtable-mcp-server (Node) in front of a fake Airtable Web API -----------------------------------------

_REDIRECT_FETCH = """\
// Points the global fetch at a local fake: the server's API address is written into its code.
const from = process.env.REDIRECT_FETCH_FROM, to = process.env.REDIRECT_FETCH_TO;
const original = globalThis.fetch;
globalThis.fetch = (input, init) => {
  let url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
  if (from && url.startsWith(from)) url = to + url.slice(from.length);
  return original(typeof input === "string" || input instanceof URL ? url : new Request(url, input), init);
};
"""


def redirected(ws: Workspace, entry: Path, api: str, fake: str, env: dict[str, str]) -> StdioUpstream:
    preload = ws.root / "redirect_fetch.cjs"
    preload.write_text(_REDIRECT_FETCH)
    env = {"REDIRECT_FETCH_FROM": api, "REDIRECT_FETCH_TO": fake, "HOME": str(ws.root), **env}
    return _stdio("node", "--require", str(preload), str(entry), env=env)


def _at(status: int, kind: str, message: str = "", retry_after: str = "") -> Reply:
    # Airtable's error bodies and statuses (airtable.com/developers/web/api/errors): {"error": {"type", "message"}}.
    body: Any = {"error": {"type": kind, "message": message}} if message else {"error": kind}
    return status, body, {"Retry-After": retry_after} if retry_after else {}


# A fake personal access token of the real length (the server warns about a short one).
_AT_KEY = "patK9fakefakefake0.0123456789abcdef0123456789abcdef0123456789abcdef0123456789ab"
_AT_TABLES = {"tables": [{"id": "tblTasks0000001", "name": "Tasks", "primaryFieldId": "fldName00000001", "fields": [
    {"id": "fldName00000001", "name": "Name", "type": "singleLineText"},
    {"id": "fldStatus000001", "name": "Status", "type": "singleSelect",
     "options": {"choices": [{"id": "sel1", "name": "Open"}, {"id": "sel2", "name": "Done"}]}},
    {"id": "fldDue000000001", "name": "Due", "type": "date", "options": {"dateFormat": {"name": "iso"}}},
    {"id": "fldNotes0000001", "name": "Notes", "type": "multilineText"}],
    "views": [{"id": "viwAll000000001", "name": "All", "type": "grid"}]}]}  # fmt: skip


def airtable_route(method: str, path: str, query: dict[str, list[str]], headers: dict[str, str], body: bytes) -> Any:
    if headers.get("authorization") != f"Bearer {_AT_KEY}":
        return _at(401, "AUTHENTICATION_REQUIRED", "Authentication required")
    parts = [unquote(p) for p in path.split("/") if p][1:]  # /v0/...
    meta = parts[:2] == ["meta", "bases"]
    base = parts[2] if meta and len(parts) > 2 else (parts[0] if parts and not meta else "")
    if meta and len(parts) == 2:
        return 200, {"bases": [{"id": "appK9", "name": "Ops", "permissionLevel": "create"}]}, {}
    if base == "appOther":
        return _at(403, "INVALID_PERMISSIONS_OR_MODEL_NOT_FOUND", "Invalid permissions, or the requested model was "
                   "not found. Check that both your user and your token have the required permissions, and that "
                   "the model names and/or ids are correct.")  # fmt: skip
    if base == "appFree":
        return _at(402, "PUBLIC_API_BILLING_LIMIT_EXCEEDED", "The monthly API call limit of the workspace's plan has "
                   "been reached. Upgrade the plan to make more API calls.")  # fmt: skip
    if base == "appBusy":
        return _at(429, "RATE_LIMIT_REACHED", "Rate limit exceeded. Please try again later", retry_after="30")
    if base != "appK9":
        return _at(404, "NOT_FOUND")
    sent = json.loads(body or b"{}") if body else {}
    if meta:
        if len(parts) == 4 and parts[3] == "tables" and method == "GET":
            return 200, _AT_TABLES, {}
        if len(parts) == 4 and method == "POST":
            return _at(422, "DUPLICATE_TABLE_NAME", f'Table name "{sent.get("name")}" already exists')
        if len(parts) == 6 and parts[5] == "fields":
            return _at(422, "DUPLICATE_OR_EMPTY_FIELD_NAME", f'Field name "{sent.get("name")}" already exists')
        return _at(404, "NOT_FOUND")
    table = parts[1] if len(parts) > 1 else ""
    if table == "Archive":
        return 503, {"error": {"type": "SERVICE_UNAVAILABLE", "message": "Service Unavailable"}}, {}
    if table == "Imports":
        return 502, "<html><body><h1>502 Bad Gateway</h1></body></html>", {}
    if table not in ("Tasks", "tblTasks0000001"):
        return _at(404, "TABLE_NOT_FOUND", f"Could not find table {table} in application {base}")
    if len(parts) == 3 and method == "GET":
        return _at(404, "NOT_FOUND")  # a record id that does not exist
    formula = (query.get("filterByFormula") or [""])[0]
    if "stauts" in formula.lower():
        return _at(422, "INVALID_FILTER_BY_FORMULA", "The formula for filtering records is invalid: Unknown field "
                   "names: stauts")  # fmt: skip
    view = (query.get("view") or [""])[0]
    if view and view != "All":
        return _at(422, "VIEW_NAME_NOT_FOUND", f'Could not find view "{view}" in table "{table}"')
    if method == "DELETE":
        ids = query.get("records[]") or []
        if len(ids) > 10:
            return _at(422, "INVALID_REQUEST_UNKNOWN", "Invalid request: parameter validation failed. Check your "
                       "request data.")  # fmt: skip
        return _at(404, "NOT_FOUND")
    for record in sent.get("records", [sent]) if sent else []:
        if record.get("id", "").startswith("recGone"):
            return _at(422, "ROW_DOES_NOT_EXIST", f"Record ID {record['id']} does not exist in this table")
        fields = record.get("fields", {})
        for name in fields:
            if name not in ("Name", "Status", "Due", "Notes"):
                return _at(422, "UNKNOWN_FIELD_NAME", f'Unknown field name: "{name}"')
        if "Due" in fields and not str(fields["Due"])[:4].isdigit():
            return _at(422, "INVALID_VALUE_FOR_COLUMN", f'Cannot parse date value "{fields["Due"]}" for field Due')
        if fields.get("Status") not in (None, "Open", "Done"):
            return _at(422, "INVALID_MULTIPLE_CHOICE_OPTIONS", "Insufficient permissions to create new select option "
                       f'""{fields["Status"]}""')  # fmt: skip
    if method == "GET":
        return 200, {"records": []}, {}
    return 200, {"id": "recNew000000001", "createdTime": "2026-12-02T00:00:00.000Z", "fields": {}}, {}


class Airtable(Source):
    name = "airtable"
    package = "airtable-mcp-server@1.14.0"
    kind = "spreadsheet database (cloud API)"
    language = "node"
    effects = {"list_records": "read_only", "search_records": "read_only", "list_bases": "read_only",
               "list_tables": "read_only", "describe_table": "read_only", "get_record": "read_only",
               "list_comments": "read_only", "update_records": "write_idempotent"}  # fmt: skip
    key = _AT_KEY

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        with fake_service(airtable_route) as api:
            yield self.server_config(ws, f"http://127.0.0.1:{api.port}")

    def server_config(self, ws: Workspace, url: str) -> StdioUpstream:
        entry = NPM_MODULES / "airtable-mcp-server/dist/main.js"
        return redirected(ws, entry, "https://api.airtable.com", url, {"AIRTABLE_API_KEY": self.key})

    def cases(self, ws: Workspace) -> list[Case]:
        k9 = {"baseId": "appK9", "tableId": "Tasks"}
        return [
            Case("get_record", {**k9, "recordId": "recMissing00001"}, "record_missing",
                 L.not_found("recordId", "list_records")),
            Case("list_records", {"baseId": "appK9", "tableId": "Taks"}, "table_missing",
                 L.not_found("tableId", "list_tables")),
            Case("describe_table", {"baseId": "appK9", "tableId": "Taks"}, "describe_table_missing",
                 L.not_found("tableId", "list_tables")),
            Case("list_tables", {"baseId": "appZZ"}, "base_missing", L.not_found("baseId", "list_bases")),
            Case("list_records", {"baseId": "appOther", "tableId": "Tasks"}, "base_not_permitted",
                 L.forbidden("baseId", why="the token may not read this base (or it does not exist): the user "
                             "grants access")),
            Case("list_records", {"baseId": "appFree", "tableId": "Tasks"}, "billing_limit",
                 _quota(why="the plan's monthly API call limit is spent: only the account owner can upgrade")),
            Case("list_records", {"baseId": "appBusy", "tableId": "Tasks"}, "rate_limited", _rate_limited()),
            Case("list_records", {"baseId": "appK9", "tableId": "Archive"}, "service_unavailable", service_down()),
            Case("create_record", {"baseId": "appK9", "tableId": "Imports", "fields": {"Name": "x"}}, "bad_gateway",
                 service_down(write=True)),
            Case("list_records", {**k9, "filterByFormula": "{Stauts} = 'Open'"}, "bad_formula",
                 L.bad_value("filterByFormula")),
            Case("list_records", {**k9, "view": "Sprint 9"}, "view_missing", L.not_found("view", "describe_table")),
            Case("create_record", {**k9, "fields": {"Name": "Ship", "Stauts": "Open"}}, "unknown_field",
                 L.bad_value("fields", "describe_table")),
            Case("create_record", {**k9, "fields": {"Name": "Ship", "Due": "next friday"}}, "bad_date_value",
                 L.bad_value("fields")),
            Case("create_record", {**k9, "fields": {"Name": "Ship", "Status": "Urgent"}}, "select_option_missing",
                 L.bad_value("fields", why="not one of the field's options, and the token may not add options")),
            Case("update_records", {**k9, "records": [{"id": "recGone000000001", "fields": {"Status": "Done"}}]},
                 "update_missing_record", L.not_found("records", "list_records")),
            Case("delete_records", {**k9, "recordIds": [f"rec{i:014d}" for i in range(12)]}, "too_many_records",
                 L.bad_value("recordIds")),
            Case("create_field", {**k9, "nested": {"field": {"name": "Status", "type": "singleLineText"}}},
                 "field_name_taken", L.conflict("nested", "describe_table")),
            Case("create_table", {"baseId": "appK9", "name": "Tasks", "fields": [{"name": "Name",
                                  "type": "singleLineText"}]}, "table_name_taken",
                 L.conflict("name", "list_tables")),
            Case("search_records", {"baseId": "appK9", "tableId": "tblTasks0000001", "searchTerm": "ship",
                                    "fieldIds": ["fldNope"]}, "search_bad_field",
                 L.bad_value("fieldIds", "describe_table")),
            Case("list_tables", {"baseId": "appK9", "detailLevel": "everything"}, "detail_not_in_enum",
                 L.schema("detailLevel")),
            Case("get_record", {"baseId": "appK9", "recordId": "rec1"}, "missing_table", L.missing_arg("tableId")),
            Case("list_views", {"baseId": "appK9"}, "unknown_tool", L.unknown_tool("describe_table")),
        ]  # fmt: skip


class AirtableBadKey(Airtable):
    name = "airtable-badkey"
    server = "airtable"
    key = _AT_KEY.replace("fake0", "fake1")  # a revoked token

    def cases(self, ws: Workspace) -> list[Case]:
        return [Case("list_records", {"baseId": "appK9", "tableId": "Tasks"}, "token_refused", bad_credentials())]


class AirtableDown(Airtable):
    name = "airtable-down"
    server = "airtable"

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        yield self.server_config(ws, f"http://127.0.0.1:{_closed_port()}")

    def cases(self, ws: Workspace) -> list[Case]:
        return [Case("list_bases", {}, "api_unreachable", service_down())]


HOLDOUT4_SOURCES += [Airtable(), AirtableBadKey(), AirtableDown()]


# --- CalDAV: caldav-mcp (Node) on a real Radicale (PyPI) -------------------------------------------------------------


@contextmanager
def radicale(root: Path) -> Iterator[int]:
    """Radicale on 127.0.0.1: htpasswd users alice (owner of two calendars) and bob, rights owner_only."""
    import subprocess

    from .services import _wait_port, free_port

    d = root / "radicale"
    cols = d / "collections" / "collection-root"
    for user, cal, name in (("alice", "work", "Work"), ("alice", "home", "Home"), ("bob", "private", "Bob")):
        (cols / user / cal).mkdir(parents=True, exist_ok=True)
        (cols / user / cal / ".Radicale.props").write_text(
            json.dumps(
                {"tag": "VCALENDAR", "D:displayname": name, "C:supported-calendar-component-set": "VEVENT,VTODO"}
            )
        )
    (d / "users").write_text("alice:cal-good\nbob:bob-good\n")
    port = free_port()
    (d / "config").write_text(
        f"[server]\nhosts = 127.0.0.1:{port}\nmax_content_length = 20000\n[auth]\ntype = htpasswd\n"
        f"htpasswd_filename = {d / 'users'}\nhtpasswd_encryption = plain\ndelay = 0\n[rights]\ntype = owner_only\n"
        f"[storage]\nfilesystem_folder = {d / 'collections'}\n[logging]\nlevel = warning\n"
    )  # fmt: skip
    exe = CORPUS_TOOLS / "py" / "radicale" / "bin" / "radicale"
    proc = subprocess.Popen([str(exe), "--config", str(d / "config")], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        _wait_port(port, proc, "radicale")
        yield port
    finally:
        proc.terminate()
        proc.wait(10)


class CalDav(Source):
    name = "caldav"
    package = "caldav-mcp@0.10.0"
    kind = "calendar"
    language = "node"
    effects = {"list-calendars": "read_only", "list-events": "read_only", "list-todos": "read_only"}
    user, password = "alice", "cal-good"

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        with radicale(ws.root) as port:
            yield self.server_config(f"http://127.0.0.1:{port}/")

    def server_config(self, url: str) -> StdioUpstream:
        env = {"CALDAV_BASE_URL": url, "CALDAV_USERNAME": self.user, "CALDAV_PASSWORD": self.password}
        return _stdio("node", str(NPM_MODULES / "caldav-mcp/dist/index.js"), env=env)

    def cases(self, ws: Workspace) -> list[Case]:
        work, bob = "/alice/work/", "/bob/private/"
        when = {"start": "2026-12-03T09:00:00Z", "end": "2026-12-03T10:00:00Z"}
        other = L.forbidden("calendarUrl", why="the calendar belongs to another user: only its owner can share it")
        return [
            Case("delete-event", {"uid": "no-such-event-1", "calendarUrl": work}, "delete_missing_event",
                 L.not_found("uid", "list-events")),
            Case("update-event", {"uid": "no-such-event-2", "calendarUrl": work, "summary": "x"},
                 "update_missing_event", L.not_found("uid", "list-events")),
            Case("complete-todo", {"uid": "no-such-todo-1", "calendarUrl": work}, "complete_missing_todo",
                 L.not_found("uid", "list-todos")),
            Case("delete-todo", {"uid": "no-such-todo-2", "calendarUrl": work}, "delete_missing_todo",
                 L.not_found("uid", "list-todos")),
            Case("list-events", {**when, "calendarUrl": "/alice/travel/"}, "calendar_missing",
                 L.not_found("calendarUrl", "list-calendars")),
            Case("create-event", {"summary": "Standup", **when, "calendarUrl": "/alice/travel/"},
                 "create_in_missing_calendar", L.not_found("calendarUrl", "list-calendars")),
            Case("list-events", {**when, "calendarUrl": bob}, "other_users_calendar_read", other),
            Case("create-event", {"summary": "Standup", **when, "calendarUrl": bob}, "other_users_calendar_write",
                 other),
            Case("create-event", {"summary": "Offsite", **when, "calendarUrl": work, "description": "x" * 30000},
                 "event_too_large", L.bad_value("description", why="the server's maximum request size")),
            Case("list-events", {"start": "next week", "end": "2026-12-10T00:00:00Z", "calendarUrl": work},
                 "bad_date_string", L.schema("start")),
            Case("create-event", {"summary": "Standup", "start": "tomorrow 9am", "end": when["end"],
                                  "calendarUrl": work}, "start_not_iso", L.schema("start")),
            Case("create-event", {"summary": "Standup", **when, "calendarUrl": work,
                                  "recurrenceRule": {"freq": "HOURLY"}}, "freq_not_in_enum",
                 L.schema("recurrenceRule")),
            Case("create-event", {"summary": "Standup", **when}, "missing_calendar_url", L.missing_arg("calendarUrl")),
            Case("create-meeting", {"summary": "Standup", **when, "calendarUrl": work}, "unknown_tool",
                 L.unknown_tool("create-event")),
        ]  # fmt: skip


class CalDavBadPassword(CalDav):
    name = "caldav-badpassword"
    server = "caldav"
    password = "cal-old"
    startup = ("startup_wrong_password", L.custom("F1_unauthenticated", False, "not_sent", "ask_user",
               why="the server's connection check at start is refused: the password is wrong"))  # fmt: skip

    def cases(self, ws: Workspace) -> list[Case]:
        return []


class CalDavDown(CalDav):
    name = "caldav-down"
    server = "caldav"
    startup = ("startup_caldav_down", L.custom("D1_transient_execution_error", True, "not_sent", "backoff_retry",
               why="the CalDAV server does not answer when the MCP server starts: it may come back"))  # fmt: skip

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        yield self.server_config(f"http://127.0.0.1:{_closed_port()}/")

    def cases(self, ws: Workspace) -> list[Case]:
        return []


HOLDOUT4_SOURCES += [CalDav(), CalDavBadPassword(), CalDavDown()]


# --- Slack: the reference server (Node) in front of a fake Slack Web API ----------------------------------------------


def _slack(error: str, status: int = 200, **extra: Any) -> Reply:
    # Slack's Web API answers most errors with HTTP 200 and {"ok": false, "error": <code>} (api.slack.com/web
    # "Evaluating responses"); rate limits are HTTP 429 with Retry-After (api.slack.com/apis/rate-limits).
    return status, {"ok": False, "error": error, **extra}, {"Retry-After": "3"} if status == 429 else {}


def slack_route(method: str, path: str, query: dict[str, list[str]], headers: dict[str, str], body: bytes) -> Any:
    if headers.get("authorization") != "Bearer xoxb-fake-good":
        return _slack("invalid_auth")
    api = path.rsplit("/", 1)[-1]
    sent: dict[str, Any] = json.loads(body) if body else {k: v[0] for k, v in query.items()}
    channel = str(sent.get("channel", ""))
    if channel == "C0BUSY":
        return _slack("ratelimited", 429)
    if channel == "C0FLAKY":
        return _slack("fatal_error", 500)  # docs: "The server could not complete your operation(s)"
    if channel.startswith("C0GONE"):
        return _slack("channel_not_found")
    if channel == "C0ARCH":
        return _slack("is_archived")
    if channel == "C0PRIV" and api in ("chat.postMessage", "conversations.history"):
        return _slack("not_in_channel")
    if api == "chat.postMessage" and channel == "C0ANN":
        return _slack("restricted_action")
    if api == "chat.postMessage" and len(str(sent.get("text", ""))) > 40000:
        return _slack("msg_too_long")
    if api == "chat.postMessage" and sent.get("thread_ts") == "1700000000.000000":
        return _slack("thread_not_found")
    if api == "reactions.add":
        if sent.get("name") == "thumbsup":
            return _slack("already_reacted")
        if sent.get("name") == "not-an-emoji":
            return _slack("invalid_name")
        if sent.get("timestamp") == "1.0":
            return _slack("message_not_found")
    if api == "users.profile.get" and str(sent.get("user", "")).startswith("U0GONE"):
        return _slack("user_not_found")
    if api == "users.list":
        return _slack("missing_scope", needed="users:read", provided="channels:read,chat:write")
    return 200, {"ok": True, "channel": channel, "ts": "1764633600.000100", "messages": [], "channels": []}, {}


class Slack(Source):
    name = "slack"
    package = "@modelcontextprotocol/server-slack@2025.4.25"
    kind = "chat"
    language = "node"
    effects = {"slack_list_channels": "read_only", "slack_get_channel_history": "read_only",
               "slack_get_thread_replies": "read_only", "slack_get_users": "read_only",
               "slack_get_user_profile": "read_only"}  # fmt: skip
    token = "xoxb-fake-good"

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        with fake_service(slack_route) as api:
            yield self.server_config(ws, f"http://127.0.0.1:{api.port}/api")

    def server_config(self, ws: Workspace, url: str) -> StdioUpstream:
        entry = NPM_MODULES / "@modelcontextprotocol/server-slack/dist/index.js"
        env = {"SLACK_BOT_TOKEN": self.token, "SLACK_TEAM_ID": "T0FAKE"}
        return redirected(ws, entry, "https://slack.com/api", url, env)

    def cases(self, ws: Workspace) -> list[Case]:
        post, react = "slack_post_message", "slack_add_reaction"
        return [
            Case(post, {"channel_id": "C0GONE1", "text": "deploy done"}, "channel_not_found",
                 L.not_found("channel_id", "slack_list_channels")),
            Case("slack_get_channel_history", {"channel_id": "C0GONE2"}, "history_channel_not_found",
                 L.not_found("channel_id", "slack_list_channels")),
            Case(post, {"channel_id": "C0ARCH", "text": "deploy done"}, "channel_archived",
                 L.conflict("channel_id", why="the channel is archived: nothing can be posted there until it is "
                            "unarchived")),
            Case(post, {"channel_id": "C0PRIV", "text": "deploy done"}, "bot_not_in_channel",
                 L.forbidden("channel_id", why="the bot is not a member of the channel: someone must invite it")),
            Case(post, {"channel_id": "C0ANN", "text": "deploy done"}, "posting_restricted",
                 L.forbidden("channel_id", why="the workspace restricts who may post there")),
            Case(post, {"channel_id": "C0OPS", "text": "x" * 40001}, "message_too_long", L.bad_value("text")),
            Case("slack_reply_to_thread", {"channel_id": "C0OPS", "thread_ts": "1700000000.000000", "text": "ok"},
                 "thread_not_found", L.not_found("thread_ts", "slack_get_channel_history")),
            Case(react, {"channel_id": "C0OPS", "timestamp": "1764633600.000100", "reaction": "thumbsup"},
                 "already_reacted", L.conflict("reaction", why="the bot already added this reaction")),
            Case(react, {"channel_id": "C0OPS", "timestamp": "1764633600.000100", "reaction": "not-an-emoji"},
                 "invalid_emoji_name", L.bad_value("reaction")),
            Case(react, {"channel_id": "C0OPS", "timestamp": "1.0", "reaction": "eyes"}, "message_not_found",
                 L.not_found("timestamp", "slack_get_channel_history")),
            Case("slack_get_user_profile", {"user_id": "U0GONE1"}, "user_not_found",
                 L.not_found("user_id", "slack_get_users")),
            Case("slack_get_users", {}, "missing_scope",
                 L.forbidden(why="the bot token lacks the users:read scope: the workspace admin adds it")),
            Case("slack_get_channel_history", {"channel_id": "C0BUSY"}, "rate_limited", _rate_limited()),
            Case("slack_get_channel_history", {"channel_id": "C0FLAKY"}, "fatal_error", service_down()),
            Case(post, {"channel_id": "C0OPS"}, "missing_text", L.missing_arg("text")),
            Case("slack_get_user_profile", {}, "missing_user_id", L.missing_arg("user_id")),
            Case("slack_send_dm", {"user_id": "U1", "text": "hi"}, "unknown_tool", L.unknown_tool(post)),
        ]  # fmt: skip


class SlackBadToken(Slack):
    name = "slack-badtoken"
    server = "slack"
    token = "xoxb-fake-revoked"

    def cases(self, ws: Workspace) -> list[Case]:
        return [Case("slack_list_channels", {}, "token_refused", bad_credentials())]


class SlackDown(Slack):
    name = "slack-down"
    server = "slack"

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        yield self.server_config(ws, f"http://127.0.0.1:{_closed_port()}/api")

    def cases(self, ws: Workspace) -> list[Case]:
        return [
            Case(
                "slack_post_message", {"channel_id": "C0OPS", "text": "hi"}, "api_unreachable", service_down(write=True)
            )
        ]


HOLDOUT4_SOURCES += [Slack(), SlackBadToken(), SlackDown()]


# --- Home Assistant: hass-mcp (Python) in front of a fake Home Assistant REST API -------------------------------------


def hass_route(method: str, path: str, query: dict[str, list[str]], headers: dict[str, str], body: bytes) -> Any:
    # Home Assistant's REST API (developers.home-assistant.io/docs/api/rest): 401 "401: Unauthorized" as text,
    # {"message": ...} bodies for 400/404.
    if headers.get("authorization") != "Bearer ha-good":
        return 401, "401: Unauthorized", {}
    parts = [unquote(p) for p in path.split("/") if p][1:]
    if parts == []:
        return 200, {"message": "API running."}, {}
    if parts == ["config"]:
        return 200, {"version": "2026.11.3", "location_name": "Home"}, {}
    if parts[:1] == ["states"] and len(parts) == 2:
        entity = parts[1]
        if entity == "sensor.grid_power":
            return 502, "<html><body><h1>502 Bad Gateway</h1></body></html>", {}
        if entity == "light.kitchen":
            return 200, {"entity_id": entity, "state": "off", "attributes": {}, "last_changed": ""}, {}
        return 404, {"message": "Entity not found."}, {}
    if parts[:1] == ["services"] and len(parts) == 3:
        domain, service = parts[1], parts[2]
        if domain == "lock":
            return 403, {"message": "Forbidden"}, {}
        if domain == "climate":
            return 400, {"message": "Invalid data for call_service at pos 1: value must be at most 35 for dictionary "
                         "value @ data['temperature']"}, {}  # fmt: skip
        if domain == "vacuum":
            return 500, "500 Internal Server Error\n\nServer got itself in trouble", {}
        if service not in ("turn_on", "turn_off", "toggle"):
            return 400, {"message": f"Service {domain}.{service} not found."}, {}
        return 200, [], {}
    if parts[:1] == ["template"]:
        return 200, "", {}
    return 404, {"message": "Not found"}, {}


class HomeAssistant(Source):
    name = "hass"
    package = "hass-mcp==0.6.1"
    kind = "smart home"
    language = "python"
    effects = {
        "get_version": "read_only",
        "get_entity": "read_only",
        "list_entities": "read_only",
        "search_entities_tool": "read_only",
        "get_history": "read_only",
        "get_history_range": "read_only",
    }
    token = "ha-good"

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        with fake_service(hass_route) as api:
            yield self.server_config(ws, f"http://127.0.0.1:{api.port}")

    def server_config(self, ws: Workspace, url: str) -> StdioUpstream:
        env = {"HA_URL": url, "HA_TOKEN": self.token, "HOME": str(ws.root)}
        return _stdio(py_bin("hass", "hass-mcp"), env=env)

    def cases(self, ws: Workspace) -> list[Case]:
        act = "entity_action"
        return [
            Case("get_entity", {"entity_id": "light.garage"}, "entity_missing",
                 L.not_found("entity_id", "search_entities_tool")),
            Case("get_entity", {"entity_id": "sensor.grid_power"}, "proxy_502", service_down()),
            Case("call_service_tool", {"domain": "lock", "service": "unlock", "data": {"entity_id": "lock.front"}},
                 "service_forbidden", L.forbidden(why="the token's user may not call this service")),
            Case("call_service_tool", {"domain": "climate", "service": "set_temperature",
                                       "data": {"entity_id": "climate.living", "temperature": 60}},
                 "service_data_invalid", L.bad_value("data")),
            Case("call_service_tool", {"domain": "light", "service": "blink", "data": {}}, "service_missing",
                 L.bad_value("service")),
            Case("call_service_tool", {"domain": "vacuum", "service": "start", "data": {}}, "integration_error",
                 service_down(write=True)),
            Case(act, {"entity_id": "light.kitchen", "action": "explode"}, "bad_action", L.bad_value("action")),
            Case("get_history_range", {"entity_id": "light.kitchen", "start_time": "2026-12-02T10:00:00Z",
                                       "end_time": "2026-12-01T10:00:00Z"}, "end_before_start",
                 L.bad_value("start_time", "end_time")),
            Case("get_entity", {}, "missing_entity_id", L.missing_arg("entity_id")),
            Case("turn_on_light", {"entity_id": "light.kitchen"}, "unknown_tool", L.unknown_tool(act)),
        ]  # fmt: skip


class HomeAssistantBadToken(HomeAssistant):
    name = "hass-badtoken"
    server = "hass"
    token = "ha-expired"

    def cases(self, ws: Workspace) -> list[Case]:
        return [Case("get_entity", {"entity_id": "light.kitchen"}, "token_refused", bad_credentials())]


class HomeAssistantDown(HomeAssistant):
    name = "hass-down"
    server = "hass"

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        yield self.server_config(ws, f"http://127.0.0.1:{_closed_port()}")

    def cases(self, ws: Workspace) -> list[Case]:
        return [Case("get_entity", {"entity_id": "light.kitchen"}, "ha_down", service_down())]


HOLDOUT4_SOURCES += [HomeAssistant(), HomeAssistantBadToken(), HomeAssistantDown()]


# --- LDAP: ldap-mcp (Python, read-only) on Debian's OpenLDAP slapd ----------------------------------------------------

_LDAP_BASE = "dc=acme,dc=test"
_LDAP_READER = f"cn=mcp-reader,ou=services,{_LDAP_BASE}"


def _ldap_ldif() -> str:
    people = "".join(
        f"dn: uid=user{i},ou=people,{_LDAP_BASE}\nobjectClass: inetOrgPerson\nuid: user{i}\ncn: User {i}\n"
        f"sn: {i}\nmail: user{i}@acme.test\n\n"
        for i in range(12)
    )
    return (
        f"dn: {_LDAP_BASE}\nobjectClass: dcObject\nobjectClass: organization\ndc: acme\no: Acme\n\n"
        f"dn: ou=people,{_LDAP_BASE}\nobjectClass: organizationalUnit\nou: people\n\n"
        f"dn: ou=services,{_LDAP_BASE}\nobjectClass: organizationalUnit\nou: services\n\n"
        f"dn: ou=hr,{_LDAP_BASE}\nobjectClass: organizationalUnit\nou: hr\n\n"
        f"dn: uid=salaries,ou=hr,{_LDAP_BASE}\nobjectClass: inetOrgPerson\nuid: salaries\ncn: Salaries\nsn: hr\n\n"
        f"dn: {_LDAP_READER}\nobjectClass: person\ncn: mcp-reader\nsn: reader\nuserPassword: ldap-good\n\n" + people
    )


@contextmanager
def slapd(root: Path) -> Iterator[tuple[int, Any]]:
    """Debian's slapd on 127.0.0.1 (mdb, acme.test): the reader sees people, not ou=hr; a size limit of 5."""
    import subprocess

    from .services import _wait_port, free_port

    d = root / "slapd"
    (d / "db").mkdir(parents=True, exist_ok=True)
    conf = d / "slapd.conf"
    conf.write_text(
        "include /etc/ldap/schema/core.schema\ninclude /etc/ldap/schema/cosine.schema\n"
        "include /etc/ldap/schema/inetorgperson.schema\nmodulepath /usr/lib/ldap\nmoduleload back_mdb\n"
        f"pidfile {d / 'slapd.pid'}\nsizelimit 5\n"
        f'database mdb\nsuffix "{_LDAP_BASE}"\nrootdn "cn=admin,{_LDAP_BASE}"\nrootpw admin-fake\n'
        f"directory {d / 'db'}\nmaxsize 10485760\n"
        f'access to dn.subtree="ou=hr,{_LDAP_BASE}" by * none\n'
        "access to attrs=userPassword by anonymous auth by * none\naccess to * by * read\n"
    )
    if not (d / "db" / "data.mdb").exists():
        (d / "data.ldif").write_text(_ldap_ldif())
        subprocess.run(["/usr/sbin/slapadd", "-f", str(conf), "-l", str(d / "data.ldif")], check=True,
                       capture_output=True, timeout=60)  # fmt: skip
    port = free_port()
    proc = subprocess.Popen(["/usr/sbin/slapd", "-d", "0", "-f", str(conf), "-h", f"ldap://127.0.0.1:{port}/"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        _wait_port(port, proc, "slapd")
        yield port, proc
    finally:
        proc.terminate()
        proc.wait(10)


class Ldap(Source):
    name = "ldap"
    package = "ldap-mcp==0.1.1"
    kind = "directory"
    language = "python"
    effects = {"ldap_search": "read_only", "ldap_get_entry": "read_only", "ldap_compare": "read_only",
               "ldap_get_schema": "read_only"}  # fmt: skip
    password = "ldap-good"

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        with slapd(ws.root) as (port, proc):
            ws.extra["slapd"] = proc
            yield self.server_config(ws, port)

    def server_config(self, ws: Workspace, port: int) -> StdioUpstream:
        env = {"LDAP_URI": f"ldap://127.0.0.1:{port}", "LDAP_BIND_DN": _LDAP_READER, "LDAP_BIND_PASSWORD":
               self.password, "LDAP_BASE_DN": _LDAP_BASE, "LDAP_TIMEOUT": "5", "HOME": str(ws.root)}  # fmt: skip
        return _stdio(py_bin("ldap", "ldap-mcp"), env=env)

    def cases(self, ws: Workspace) -> list[Case]:
        get, search = "ldap_get_entry", "ldap_search"

        def stop_slapd(ws: Workspace) -> None:
            ws.extra["slapd"].terminate()
            ws.extra["slapd"].wait(10)

        return [
            Case(get, {"dn": f"uid=nobody,ou=people,{_LDAP_BASE}"}, "entry_missing", L.not_found("dn", search)),
            Case(get, {"dn": f"uid=salaries,ou=hr,{_LDAP_BASE}"}, "entry_hidden_by_acl",
                 L.forbidden("dn", why="the directory's access control hides the entry from this bind DN")),
            Case(get, {"dn": "user1@acme.test"}, "dn_syntax", L.bad_value("dn", search)),
            Case(search, {"filter": "(&(objectClass=person)(cn=User 1)"}, "filter_unbalanced", L.bad_value("filter")),
            Case(search, {"filter": "objectClass=person"}, "filter_without_parentheses", L.bad_value("filter")),
            Case(search, {"filter": "(objectClass=person)", "attributes": ["cn", "mobileNumber"]},
                 "attribute_not_in_schema", L.bad_value("attributes", "ldap_get_schema")),
            Case("ldap_compare", {"dn": f"uid=user1,ou=people,{_LDAP_BASE}", "attribute": "badgeColour",
                                  "value": "red"}, "compare_unknown_attribute", L.bad_value("attribute")),
            Case(search, {"filter": "(uid=user1)", "scope": "tree"}, "scope_not_in_enum", L.schema("scope")),
            Case(get, {}, "missing_dn", L.missing_arg("dn")),
            Case("ldap_modify", {"dn": _LDAP_BASE}, "unknown_tool", L.unknown_tool(search)),
            Case(search, {"filter": "(uid=user2)"}, "slapd_stopped", service_down(), before=stop_slapd),
        ]  # fmt: skip


class LdapBadPassword(Ldap):
    name = "ldap-badpassword"
    server = "ldap"
    password = "ldap-old"
    startup = ("startup_invalid_credentials", bad_credentials())

    def cases(self, ws: Workspace) -> list[Case]:
        return []


class LdapDown(Ldap):
    name = "ldap-down"
    server = "ldap"
    startup = ("startup_ldap_down", L.custom("D1_transient_execution_error", True, "not_sent", "backoff_retry",
               why="the directory does not answer when the MCP server starts: it may come back"))  # fmt: skip

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        yield self.server_config(ws, _closed_port())

    def cases(self, ws: Workspace) -> list[Case]:
        return []


HOLDOUT4_SOURCES += [Ldap(), LdapBadPassword(), LdapDown()]


# --- Email: mcp-email-server (Python) sending through a fake SMTP server ----------------------------------------------


class _SmtpHandler(socketserver.StreamRequestHandler):
    """An SMTP server's replies (RFC 5321 reply codes, RFC 3463 enhanced codes, Postfix's wording)."""

    good_password = "mail-good"

    def _say(self, line: str) -> None:
        self.wfile.write(line.encode() + b"\r\n")
        self.wfile.flush()

    def handle(self) -> None:
        import base64

        self._say("220 mx.acme.test ESMTP Postfix (Debian/GNU)")
        authed, rcpts = False, []
        while True:
            raw = self.rfile.readline()
            if not raw:
                return
            line = raw.decode(errors="replace").rstrip("\r\n")
            verb = line.split(" ", 1)[0].upper()
            if verb in ("EHLO", "HELO"):
                self.wfile.write(b"250-mx.acme.test\r\n250-PIPELINING\r\n250-SIZE 20000\r\n250-AUTH PLAIN LOGIN\r\n"
                                 b"250-8BITMIME\r\n250 SMTPUTF8\r\n")  # fmt: skip
                self.wfile.flush()
            elif verb == "AUTH":
                parts = line.split(" ")
                if parts[1].upper() == "PLAIN":
                    blob = parts[2] if len(parts) > 2 else ""
                    if not blob:
                        self._say("334 ")
                        blob = self.rfile.readline().decode().strip()
                    password = base64.b64decode(blob).split(b"\0")[-1].decode()
                else:
                    self._say("334 VXNlcm5hbWU6")
                    self.rfile.readline()
                    self._say("334 UGFzc3dvcmQ6")
                    password = base64.b64decode(self.rfile.readline().strip()).decode()
                if password != self.good_password:
                    self._say("535 5.7.8 Error: authentication failed: authentication failure")
                else:
                    authed = True
                    self._say("235 2.7.0 Authentication successful")
            elif verb == "MAIL":
                self._say("250 2.1.0 Ok" if authed else "530 5.7.0 Must issue a STARTTLS command first")
            elif verb == "RCPT":
                addr = line.split(":", 1)[1].strip().strip("<>").split(">")[0]
                user, _, domain = addr.partition("@")
                if domain not in ("acme.test",):
                    self._say(f"554 5.7.1 <{addr}>: Relay access denied")
                elif user == "burst":  # the sender's hourly limit (a policy service): 421 closes the session
                    self._say("421 4.7.0 mx.acme.test Error: too many messages from this sender, try again later")
                    return
                elif user == "nobody":
                    self._say(f"550 5.1.1 <{addr}>: Recipient address rejected: User unknown in virtual mailbox table")
                elif user == "grey":
                    self._say(f"450 4.7.1 <{addr}>: Recipient address rejected: Greylisted, see "
                              "http://postgrey.schweikert.ch/help/acme.test.html")  # fmt: skip
                elif user == "full":
                    self._say(f"452 4.2.2 <{addr}>: Recipient address rejected: Mailbox full")
                else:
                    rcpts.append(addr)
                    self._say("250 2.1.5 Ok")
            elif verb == "DATA":
                if not rcpts:
                    self._say("554 5.5.1 Error: no valid recipients")
                    continue
                self._say("354 End data with <CR><LF>.<CR><LF>")
                size = 0
                while True:
                    chunk = self.rfile.readline()
                    if not chunk or chunk in (b".\r\n", b".\n"):
                        break
                    size += len(chunk)
                if size > 20000:
                    self._say("552 5.3.4 Message size exceeds fixed limit")
                else:
                    self._say("250 2.0.0 Ok: queued as 4Bq1xY0zZ9z")
                rcpts = []
            elif verb == "RSET":
                rcpts = []
                self._say("250 2.0.0 Ok")
            elif verb == "QUIT":
                self._say("221 2.0.0 Bye")
                return
            else:
                self._say("502 5.5.2 Error: command not recognized")


@contextmanager
def fake_smtp() -> Iterator[int]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _SmtpHandler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


class Email(Source):
    name = "email"
    package = "mcp-email-server==1.13.3"
    kind = "email"
    language = "python"
    effects = {"list_available_accounts": "read_only", "list_emails_metadata": "read_only",
               "get_emails_content": "read_only", "list_allowed_recipients": "read_only"}  # fmt: skip
    password = "mail-good"

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        with fake_smtp() as port:
            yield self.server_config(ws, port)

    def server_config(self, ws: Workspace, smtp_port: int) -> StdioUpstream:
        env = {"MCP_EMAIL_SERVER_ACCOUNT_NAME": "work", "MCP_EMAIL_SERVER_EMAIL_ADDRESS": "agent@acme.test",
               "MCP_EMAIL_SERVER_PASSWORD": self.password, "MCP_EMAIL_SERVER_IMAP_HOST": "127.0.0.1",
               "MCP_EMAIL_SERVER_IMAP_PORT": str(_closed_port()), "MCP_EMAIL_SERVER_IMAP_SSL": "false",
               "MCP_EMAIL_SERVER_SMTP_HOST": "127.0.0.1", "MCP_EMAIL_SERVER_SMTP_PORT": str(smtp_port),
               "MCP_EMAIL_SERVER_SMTP_SSL": "false", "MCP_EMAIL_SERVER_SAVE_TO_SENT": "false",
               "MCP_EMAIL_SERVER_ALLOWED_RECIPIENTS": "*@acme.test,*@other.example",
               "MCP_EMAIL_SERVER_CONFIG_PATH": str(ws.root / "email-config.toml"), "HOME": str(ws.root)}  # fmt: skip
        return _stdio(py_bin("email", "mcp-email-server"), "stdio", env=env)

    def cases(self, ws: Workspace) -> list[Case]:
        send = "send_email"

        def mail(*to: str, **extra: Any) -> dict[str, Any]:
            return {"account_name": "work", "recipients": list(to), "subject": "Release 4.2", "body": "Shipped.",
                    **extra}  # fmt: skip

        refused_now = L.custom(
            "D1_transient_execution_error",
            True,
            "rejected",
            "backoff_retry",
            why="a temporary (4xx) refusal before the message was accepted: try again later",
        )
        return [
            Case(send, mail("nobody@acme.test"), "recipient_unknown",
                 L.custom("D4_permanent_execution_error", False, "executed_failed", "ask_user", "recipients",
                          why="the mailbox does not exist: only the user knows the right address")),
            Case(send, mail("grey@acme.test"), "greylisted", refused_now),
            Case(send, mail("full@acme.test"), "mailbox_full", refused_now),
            Case(send, mail("burst@acme.test"), "sender_rate_limited", L.custom("D2_rate_limited", True, "rejected",
                 "backoff_retry", why="the mail server limits how many messages this sender may send per hour")),
            Case(send, mail("ceo@other.example"), "relay_denied",
                 L.forbidden("recipients", why="the mail server does not relay to outside domains for this account")),
            Case(send, mail("ops@acme.test", body="x" * 30000), "message_too_large", L.bad_value("body")),
            Case(send, mail("boss@partner.example"), "recipient_not_allowlisted",
                 L.forbidden("recipients", why="the MCP server's recipient allow-list refuses it: only the user "
                             "changes the list")),
            Case(send, {**mail("ops@acme.test"), "account_name": "personal"}, "account_missing",
                 L.not_found("account_name", "list_available_accounts")),
            Case(send, mail("not an address"), "address_invalid",
                 L.sandbox("recipients", why="what happened: the allow-list refused a string that is no address")),
            Case(send, mail(), "recipients_empty", L.schema("recipients")),
            Case("list_emails_metadata", {"account_name": "work"}, "imap_down", service_down()),
            Case(send, {"account_name": "work", "recipients": ["ops@acme.test"], "subject": "x"}, "missing_body",
                 L.missing_arg("body")),
            Case("reply_email", {"account_name": "work"}, "unknown_tool", L.unknown_tool(send)),
        ]  # fmt: skip


class EmailBadPassword(Email):
    name = "email-badpassword"
    server = "email"
    password = "mail-old"

    def cases(self, ws: Workspace) -> list[Case]:
        return [Case("send_email", {"account_name": "work", "recipients": ["ops@acme.test"], "subject": "x",
                                    "body": "y"}, "smtp_auth_failed", bad_credentials())]  # fmt: skip


class EmailSmtpDown(Email):
    name = "email-smtp-down"
    server = "email"

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        yield self.server_config(ws, _closed_port())

    def cases(self, ws: Workspace) -> list[Case]:
        return [Case("send_email", {"account_name": "work", "recipients": ["ops@acme.test"], "subject": "x",
                                    "body": "y"}, "smtp_down", service_down(write=True))]  # fmt: skip


HOLDOUT4_SOURCES += [Email(), EmailBadPassword(), EmailSmtpDown()]


def main() -> int:
    from .collect import main_async

    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    only = set(sys.argv[1].split(",")) if len(sys.argv) > 1 else None
    return anyio.run(main_async, HERE / "holdout4.jsonl", only, HOLDOUT4_SOURCES)


if __name__ == "__main__":
    raise SystemExit(main())
