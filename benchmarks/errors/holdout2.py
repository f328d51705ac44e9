"""A second fresh hold-out (issue 19): servers of kinds neither the corpus nor the first hold-out covers.

    python -m benchmarks.errors.holdout2          # writes holdout2.jsonl (+ holdout2_success_shaped.jsonl)

It measures whether the rules *as improved after the first hold-out* generalise: a Docker Engine server (Python,
mcp 2.x) in front of a fake Docker Engine API, a memcached server (Python) on Debian's memcached, a vector store
(Chroma's server, Python, on a local persistent Chroma), an S3 server (Python, aioboto3) in front of a fake S3 API,
and a PDF reader (Node) on local files. Every label was written from the situation provoked, the server's own words
and LABELS.md before any rule was run on these records; records and labels were committed ("frozen before
measuring") before the rules were run on them, and no rule was changed after reading the figures.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import anyio

from resilient_mcp.policy.config import RemoteUpstream, StdioUpstream

from . import labels as L
from .holdout import _closed_port, fake_service
from .servers import bad_credentials, no_privilege, node, py_bin, read_only_mode, service_down
from .services import _wait_port, free_port
from .situations import Case, Source, Workspace, _stdio

HERE = Path(__file__).resolve().parent

# --- Docker: mcp-server-docker (Python, mcp 2.x) in front of a fake Docker Engine API ------------------------------

_WEB_ID = "3f2a1c9d8e7b" + "0" * 52
_WEB = {
    "Id": _WEB_ID,
    "Name": "/web",
    "Created": "2026-11-30T10:00:00Z",
    "State": {"Status": "running", "Running": True},
    "Config": {"Image": "nginx:latest", "Labels": {}},
    "Image": "sha256:9b1f2c3d4e5f",
    "NetworkSettings": {"Ports": {}},
}
_API_ID = "7c4d" + "1" * 60
_API = {**_WEB, "Id": _API_ID, "Name": "/api", "HostConfig": {"LogConfig": {"Type": "none"}}}


def _msg(status: int, message: str) -> tuple[int, Any, dict[str, str]]:
    return status, {"message": message}, {}


def docker_route(method: str, path: str, query: dict[str, list[str]], headers: dict[str, str], body: bytes) -> Any:
    parts = [unquote(p) for p in path.split("/") if p]
    if parts and parts[0].startswith("v1."):
        parts = parts[1:]
    if parts in (["version"], ["_ping"]):
        return 200, {"ApiVersion": "1.45", "Version": "27.3.1", "MinAPIVersion": "1.24", "Os": "linux"}, {}
    what = parts[0] if parts else ""
    if what == "containers":
        if parts[1:] == ["create"]:
            return _msg(404, "No such image: acme/api:2.1")
        name = parts[1] if len(parts) > 1 else ""
        found = {"web": _WEB, _WEB_ID: _WEB, "api": _API, _API_ID: _API}.get(name)
        if found is None:
            return _msg(404, f"No such container: {name}")
        rest = parts[2:]
        if rest == ["json"]:
            return 200, found, {}
        if method == "DELETE":
            return _msg(
                409,
                'cannot remove container "/web": container is running: stop the container before removing or '
                "force remove",
            )
        if rest == ["start"]:
            return _msg(
                500,
                f"driver failed programming external connectivity on endpoint web ({_WEB_ID}): Bind for "
                "0.0.0.0:8080 failed: port is already allocated",
            )
        if rest == ["logs"]:
            return _msg(501, "configured logging driver does not support reading")
        return _msg(404, "page not found")
    if what == "images":
        if parts[1:] == ["create"]:
            image = (query.get("fromImage") or [""])[0]
            tag = (query.get("tag") or [""])[0]
            if image == "acme/api":
                return _msg(404, f"manifest for acme/api:{tag} not found: manifest unknown: manifest unknown")
            return _msg(
                500,
                'Get "https://registry-1.docker.io/v2/": dial tcp: lookup registry-1.docker.io on 127.0.0.53:53: '
                "server misbehaving",
            )
        if method == "DELETE":
            return _msg(
                409,
                'conflict: unable to remove repository reference "nginx:latest" (must force) - container '
                "3f2a1c9d8e7b is using its referenced image 9b1f2c3d4e5f",
            )
        return _msg(404, "No such image: " + "/".join(parts[1:-1]))
    if what == "networks":
        if parts[1:] == ["create"]:
            import json

            name = json.loads(body or b"{}").get("Name", "")
            if name == "host-net":
                return _msg(
                    403,
                    "authorization denied by plugin opa-docker-authz: request rejected by administrative policy",
                )
            return _msg(409, f"network with name {name} already exists")
        return _msg(404, f"network {parts[1] if len(parts) > 1 else ''} not found")
    if what == "volumes":
        name = parts[1] if len(parts) > 1 else ""
        if name == "pgdata":
            if method == "DELETE":
                return _msg(409, f"remove pgdata: volume is in use - [{_WEB_ID}]")
            return 200, {"Name": "pgdata", "Driver": "local", "Mountpoint": "/var/lib/docker/volumes/pgdata/_data"}, {}
        return _msg(404, f"get {name}: no such volume")
    return _msg(404, "page not found")


class Docker(Source):
    name = "docker"
    package = "mcp-server-docker==0.3.0"
    kind = "container engine"
    language = "python"
    effects = {
        "list_containers": "read_only",
        "fetch_container_logs": "read_only",
        "list_images": "read_only",
        "list_networks": "read_only",
        "list_volumes": "read_only",
        "pull_image": "write_idempotent",
    }

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        with fake_service(docker_route) as engine:
            yield self.server_config(f"tcp://127.0.0.1:{engine.port}")

    def server_config(self, host: str) -> StdioUpstream:
        return _stdio(py_bin("docker-py", "mcp-server-docker"), env={"DOCKER_HOST": host, "HOME": "/tmp"})

    def cases(self, ws: Workspace) -> list[Case]:
        lookup = L.not_found("container_id", "list_containers")
        return [
            Case("start_container", {"container_id": "web-9"}, "container_missing", lookup),
            Case("fetch_container_logs", {"container_id": "web-9"}, "container_missing", lookup),
            Case("remove_container", {"container_id": "web"}, "container_running",
                 L.conflict("container_id", "stop_container", why="the container is running: stop it first")),
            Case("start_container", {"container_id": "web"}, "port_allocated",
                 L.conflict(why="another container holds the host port: the world is not as the call assumes")),
            Case("fetch_container_logs", {"container_id": "api"}, "log_driver_cannot_read",
                 L.server_broken(why="the container's logging driver keeps no logs: only its owner can change it")),
            Case("create_container", {"image": "acme/api:2.1"}, "image_missing",
                 L.not_found("image", "pull_image")),
            Case("pull_image", {"repository": "acme/api", "tag": "9.9"}, "tag_missing", L.bad_value("tag")),
            Case("pull_image", {"repository": "nginx", "tag": "latest"}, "registry_unreachable",
                 L.remote_transient("repository")),
            Case("remove_image", {"image": "nginx:latest"}, "image_in_use",
                 L.conflict("image", why="a container uses the image: remove it first or force")),
            Case("create_network", {"name": "backend"}, "network_exists", L.conflict("name")),
            Case("create_network", {"name": "host-net"}, "authz_plugin_denied", no_privilege("name")),
            Case("remove_volume", {"volume_name": "cache"}, "volume_missing",
                 L.not_found("volume_name", "list_volumes")),
            Case("remove_volume", {"volume_name": "pgdata"}, "volume_in_use", L.conflict("volume_name")),
            Case("stop_container", {}, "missing_container_id", L.missing_arg("container_id")),
            Case("fetch_container_logs", {"container_id": "web", "tail": "ten"}, "tail_wrong_type", L.schema("tail")),
            Case("exec_in_container", {"container_id": "web", "cmd": "ls"}, "unknown_tool", L.unknown_tool()),
        ]  # fmt: skip


class DockerDown(Docker):
    """The daemon is not listening: the server's client asks for the API version when it starts (and exits)."""

    name = "docker-down"
    server = "docker"
    startup = ("startup_daemon_down", service_down())

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        yield self.server_config(f"tcp://127.0.0.1:{_closed_port()}")


HOLDOUT2_SOURCES: list[Source] = [Docker(), DockerDown()]


# --- memcached: AWS Labs' server (Python) on Debian's memcached -----------------------------------------------------


@contextmanager
def memcached(root: Path, *, item_max: str = "512k") -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    root.mkdir(parents=True, exist_ok=True)
    port = free_port()
    user = ["-u", "memcache"] if os.geteuid() == 0 else []
    binary = shutil.which("memcached") or "/usr/bin/memcached"
    argv = [binary, "-l", "127.0.0.1", "-p", str(port), "-U", "0", "-m", "8", "-I", item_max, *user]
    log = (root / f"memcached-{port}.log").open("wb")
    proc = subprocess.Popen(argv, stdout=log, stderr=log)
    try:
        _wait_port(port, proc, "memcached")
        yield port, proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(30)
        log.close()


class Memcached(Source):
    """``awslabs.memcached-mcp-server``: answers memcached's errors as successful results (success-shaped)."""

    name = "memcached"
    package = "awslabs-memcached-mcp-server==1.1.1"
    kind = "cache"
    language = "python"
    effects = {"cache_get": "read_only", "cache_gets": "read_only", "cache_get_many": "read_only",
               "cache_set": "write_idempotent", "cache_delete": "write_idempotent"}  # fmt: skip
    readonly = False

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        with memcached(ws.root / self.name) as (port, proc):
            ws.extra["memcached"] = proc
            yield self.server_config(port)

    def server_config(self, port: int) -> StdioUpstream:
        args = ["--readonly"] if self.readonly else []
        env = {"MEMCACHED_HOST": "127.0.0.1", "MEMCACHED_PORT": str(port), "HOME": "/tmp"}
        return _stdio(py_bin("memcached-py", "awslabs.memcached-mcp-server"), *args, env=env)

    def cases(self, ws: Workspace) -> list[Case]:
        long_key = "session:" + "x" * 300
        seed = L.custom("", False, "", "")
        return [
            Case("cache_set", {"key": "greeting", "value": "hello", "expire": 0}, "seed", seed, setup=True),
            Case("cache_set", {"key": "visits", "value": "12", "expire": 0}, "seed", seed, setup=True),
            Case("cache_get", {"key": long_key}, "key_too_long", L.bad_value("key")),
            Case("cache_set", {"key": "user 42", "value": "Ann", "expire": 0}, "key_with_space", L.bad_value("key")),
            Case("cache_incr", {"key": "greeting"}, "incr_not_a_number",
                 L.bad_value("key", why="the key holds a value that is not a number")),
            Case("cache_cas", {"key": "visits", "value": "13", "cas": 999999, "expire": 0}, "cas_mismatch",
                 L.conflict("key", "cache_gets", why="the value changed since it was read: re-read, then decide")),
            Case("cache_set", {"key": "k"}, "missing_value", L.missing_arg("value")),
            Case("cache_set", {"key": "k", "value": "v", "expire": "soon"}, "expire_wrong_type", L.schema("expire")),
            Case("cache_scan", {"pattern": "user:*"}, "unknown_tool", L.unknown_tool()),
            # The server passes expire=None to memcached when the call leaves it out: every write without it fails.
            Case("cache_set", {"key": "greeting", "value": "hi"}, "expire_omitted",
                 L.bad_value("expire", why="the server's own defect: it needs an explicit expire (0 for none)")),
        ]  # fmt: skip


class MemcachedReadonly(Memcached):
    name = "memcached-readonly"
    server = "memcached"
    readonly = True

    def cases(self, ws: Workspace) -> list[Case]:
        return [
            Case("cache_set", {"key": "greeting", "value": "hi", "expire": 0}, "write_refused", read_only_mode("key")),
            Case("cache_delete", {"key": "greeting"}, "write_refused", read_only_mode("key")),
        ]


class MemcachedDown(Memcached):
    name = "memcached-down"
    server = "memcached"

    def cases(self, ws: Workspace) -> list[Case]:
        def stop(ws: Workspace) -> None:
            proc: subprocess.Popen[bytes] = ws.extra["memcached"]
            proc.terminate()
            proc.wait(30)

        return [
            Case("cache_get", {"key": "greeting"}, "memcached_down", service_down("key"), before=stop),
            Case("cache_set", {"key": "greeting", "value": "hi", "expire": 0}, "memcached_down",
                 service_down("key", write=True)),
        ]  # fmt: skip


HOLDOUT2_SOURCES += [Memcached(), MemcachedReadonly(), MemcachedDown()]


# --- a vector store: chroma-mcp (Python, mcp 1.x) on a local persistent Chroma ------------------------------------


class Chroma(Source):
    name = "chroma"
    package = "chroma-mcp==0.2.6"
    kind = "vector store"
    language = "python"
    effects = {
        "chroma_list_collections": "read_only",
        "chroma_get_collection_info": "read_only",
        "chroma_get_collection_count": "read_only",
        "chroma_peek_collection": "read_only",
        "chroma_query_documents": "read_only",
        "chroma_get_documents": "read_only",
    }

    def config(self, ws: Workspace) -> StdioUpstream:
        data = ws.root / "chroma"
        data.mkdir(exist_ok=True)
        # No network: the default embedding function's model cannot be downloaded (as on an offline host).
        env = {"HOME": str(ws.root), "ANONYMIZED_TELEMETRY": "false"}
        return _stdio(
            py_bin("chroma-py", "chroma-mcp"), "--client-type", "persistent", "--data-dir", str(data), env=env
        )

    def cases(self, ws: Workspace) -> list[Case]:
        lookup = L.not_found("collection_name", "chroma_list_collections")
        nothing = L.custom("", False, "", "")
        no_model = L.remote_transient(
            why="the embedding model must be downloaded and the host cannot reach it: the service behind fails"
        )
        return [
            Case("chroma_create_collection", {"collection_name": "docs"}, "seed", nothing, setup=True),
            Case("chroma_get_collection_info", {"collection_name": "invoices"}, "collection_missing", lookup),
            Case("chroma_get_collection_count", {"collection_name": "invoices"}, "collection_missing", lookup),
            Case("chroma_delete_collection", {"collection_name": "invoices"}, "collection_missing", lookup),
            Case("chroma_create_collection", {"collection_name": "docs"}, "collection_exists",
                 L.conflict("collection_name")),
            Case("chroma_create_collection", {"collection_name": "a"}, "bad_collection_name",
                 L.bad_value("collection_name")),
            Case("chroma_create_collection", {"collection_name": "notes", "embedding_function_name": "nomic"},
                 "unknown_embedding_function", L.bad_value("embedding_function_name")),
            Case("chroma_create_collection", {"collection_name": "notes", "embedding_function_name": "openai"},
                 "embedding_key_missing", bad_credentials("embedding_function_name")),
            Case("chroma_add_documents", {"collection_name": "docs", "documents": ["a", "b"], "ids": ["1"]},
                 "ids_documents_mismatch", L.bad_value("ids")),
            Case("chroma_add_documents", {"collection_name": "docs", "documents": [], "ids": []},
                 "empty_documents", L.bad_value("documents")),
            Case("chroma_get_documents", {"collection_name": "docs", "where": {"year": {"$near": 2020}}},
                 "bad_where_operator", L.bad_value("where")),
            Case("chroma_query_documents", {"collection_name": "docs", "query_texts": ["refund policy"]},
                 "embedding_model_unreachable", no_model),
            Case("chroma_add_documents", {"collection_name": "docs", "documents": ["refunds in 30 days"],
                                          "ids": ["faq-1"]},
                 "embedding_model_unreachable", service_down("documents", write=True)),
            Case("chroma_query_documents", {"collection_name": "docs"}, "missing_query_texts",
                 L.missing_arg("query_texts")),
            Case("chroma_peek_collection", {"collection_name": "docs", "limit": "five"}, "limit_wrong_type",
                 L.schema("limit")),
            Case("chroma_reset", {}, "unknown_tool", L.unknown_tool()),
        ]  # fmt: skip


HOLDOUT2_SOURCES += [Chroma()]


# --- S3: aws-s3-mcp (Python, aioboto3) in front of a fake S3 API ---------------------------------------------------


def _s3_error(status: int, code: str, message: str, **more: str) -> tuple[int, Any, dict[str, str]]:
    extra = "".join(f"<{k}>{v}</{k}>" for k, v in more.items())
    xml = (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>{message}</Message>{extra}'
        "<RequestId>4442587FB7D0A2F9</RequestId><HostId>fake</HostId></Error>"
    )
    return status, xml, {"x-amz-request-id": "4442587FB7D0A2F9"}


_LISTING = (
    '<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult><Name>reports</Name><Prefix></Prefix><KeyCount>1'
    "</KeyCount><MaxKeys>1000</MaxKeys><IsTruncated>false</IsTruncated><Contents><Key>q3.csv</Key>"
    "<LastModified>2026-11-30T10:00:00.000Z</LastModified><ETag>&quot;abc&quot;</ETag><Size>12</Size>"
    "<StorageClass>STANDARD</StorageClass></Contents></ListBucketResult>"
)


def s3_route(method: str, path: str, query: dict[str, list[str]], headers: dict[str, str], body: bytes) -> Any:
    auth = headers.get("authorization", "")
    if "Credential=AKIDEXPIRED/" in auth:
        return _s3_error(403, "InvalidAccessKeyId", "The AWS Access Key Id you provided does not exist in our records.",
                         AWSAccessKeyId="AKIDEXPIRED")  # fmt: skip
    parts = [unquote(p) for p in path.split("/") if p]
    bucket = parts[0] if parts else ""
    key = "/".join(parts[1:])
    if bucket == "archive-2019":
        return _s3_error(404, "NoSuchBucket", "The specified bucket does not exist", BucketName=bucket)
    if bucket == "payroll":
        return _s3_error(403, "AccessDenied", "Access Denied")
    if bucket == "busy":
        return _s3_error(503, "SlowDown", "Please reduce your request rate.")
    if bucket == "flaky":
        return _s3_error(500, "InternalError", "We encountered an internal error. Please try again.")
    if not key:
        return 200, _LISTING, {"Content-Type": "application/xml"}
    if key == "q3.csv":
        return 200, "id,total\n1,10\n", {"Content-Type": "text/csv"}
    if key == "cold/2019.csv":
        return _s3_error(403, "InvalidObjectState", "The operation is not valid for the object's storage class",
                         StorageClass="GLACIER")  # fmt: skip
    return _s3_error(404, "NoSuchKey", "The specified key does not exist.", Key=key)


class S3(Source):
    name = "s3"
    package = "aws-s3-mcp==0.1.3"
    kind = "object store"
    language = "python"
    key_id = "AKIDGOOD"

    def effect(self, tool: str) -> str:
        return "read_only"  # every tool of this server reads

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        with fake_service(s3_route) as api:
            yield self.server_config(api.base)

    def server_config(self, endpoint: str) -> StdioUpstream:
        env = {
            "AWS_ENDPOINT_URL": endpoint,
            "AWS_ACCESS_KEY_ID": self.key_id,
            "AWS_SECRET_ACCESS_KEY": "secret",
            "AWS_REGION": "us-east-1",
            "AWS_EC2_METADATA_DISABLED": "true",
            "HOME": "/tmp",
        }
        return _stdio(py_bin("s3-py", "aws-s3-mcp"), env=env)

    def cases(self, ws: Workspace) -> list[Case]:
        listing = "s3_list_objects"
        return [
            Case(listing, {"bucket_name": "archive-2019"}, "bucket_missing", L.not_found("bucket_name")),
            Case("s3_get_text_content", {"bucket_name": "reports", "key": "q4.csv"}, "key_missing",
                 L.not_found("key", listing)),
            Case("s3_get_object_content", {"bucket_name": "reports", "key": "q4.csv"}, "key_missing",
                 L.not_found("key", listing)),
            Case(listing, {"bucket_name": "payroll"}, "access_denied", no_privilege("bucket_name")),
            Case("s3_count_objects", {"bucket_name": "busy"}, "slow_down",
                 L.custom("D2_rate_limited", True, "rejected", "backoff_retry")),
            Case(listing, {"bucket_name": "flaky"}, "internal_error", L.remote_transient()),
            Case("s3_get_text_content", {"bucket_name": "reports", "key": "cold/2019.csv"}, "object_archived",
                 L.server_broken("key", why="the object is archived (Glacier): it must be restored first")),
            Case("s3_extract_pdf_text", {"bucket_name": "reports", "key": "q3.csv"}, "not_a_pdf",
                 L.bad_value("key", why="the object is not a PDF")),
            Case(listing, {"bucket_name": "reports", "max_keys": 0}, "max_keys_zero", L.bad_value("max_keys")),
            Case(listing, {"bucket_name": ""}, "empty_bucket_name", L.bad_value("bucket_name")),
            Case("s3_get_text_content", {"bucket_name": "reports"}, "missing_key", L.missing_arg("key")),
            Case(listing, {"bucket_name": "reports", "max_keys": "all"}, "max_keys_wrong_type", L.schema("max_keys")),
            Case("s3_put_object", {"bucket_name": "reports", "key": "x"}, "unknown_tool", L.unknown_tool()),
        ]  # fmt: skip


class S3BadKey(S3):
    name = "s3-badkey"
    server = "s3"
    key_id = "AKIDEXPIRED"

    def cases(self, ws: Workspace) -> list[Case]:
        return [Case("s3_list_objects", {"bucket_name": "reports"}, "access_key_refused", bad_credentials())]


class S3Down(S3):
    name = "s3-down"
    server = "s3"

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        yield self.server_config(f"http://127.0.0.1:{_closed_port()}")

    def cases(self, ws: Workspace) -> list[Case]:
        return [Case("s3_list_objects", {"bucket_name": "reports"}, "endpoint_down", service_down("bucket_name"))]


HOLDOUT2_SOURCES += [S3(), S3BadKey(), S3Down()]


# --- a PDF reader (Node) on local files -----------------------------------------------------------------------------


def one_page_pdf(text: str) -> bytes:
    """A valid one-page PDF with one line of text (objects and xref offsets written by hand)."""
    stream = f"BT /F1 18 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R"
        b" /Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, obj in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + obj + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % off for off in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


_ENCRYPT = (
    "import sys, pypdf\n"
    "r = pypdf.PdfReader(sys.argv[1]); w = pypdf.PdfWriter()\n"
    "[w.add_page(p) for p in r.pages]\n"
    "w.encrypt(user_password='s3cret', owner_password='owner', algorithm='RC4-128')\n"
    "w.write(sys.argv[2])\n"
)


def pdf_route(method: str, path: str, query: dict[str, list[str]], headers: dict[str, str], body: bytes) -> Any:
    if path == "/busy.pdf":
        return 503, "<h1>503 Service Unavailable</h1>", {"Retry-After": "5"}
    return 404, "<h1>404 Not Found</h1>", {}


class PdfReader(Source):
    """``@sylphx/pdf-reader-mcp``: one tool, ``read_pdf``; its errors and a failed source come back as ``isError``."""

    name = "pdf-reader"
    package = "@sylphx/pdf-reader-mcp@2.4.0"
    kind = "pdf"
    language = "node"

    def effect(self, tool: str) -> str:
        return "read_only"

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        docs = ws.root / "pdfs"
        docs.mkdir(exist_ok=True)
        (docs / "invoice.pdf").write_bytes(one_page_pdf("Invoice 2026-117"))
        (docs / "broken.pdf").write_bytes(one_page_pdf("Contract")[:180])
        (docs / "orders.csv").write_text("id,total\n1,10\n")
        (ws.root / "outside.pdf").write_bytes(one_page_pdf("Payroll"))
        with anyio.fail_after(60):  # pypdf from the S3 server's venv writes the encrypted copy
            await anyio.run_process(
                [str(py_bin("s3-py", "python")), "-c", _ENCRYPT, str(docs / "invoice.pdf"), str(docs / "locked.pdf")]
            )
        with fake_service(pdf_route) as site:
            ws.extra["pdf_site"] = site.base
            env = {"MCP_PDF_ALLOWED_HOSTS": "127.0.0.1", "HOME": str(ws.root)}
            yield node("@sylphx/pdf-reader-mcp", "dist/index.js", f"--allow-dir={docs}", env=env)

    def cases(self, ws: Workspace) -> list[Case]:
        docs, site, read = ws.root / "pdfs", ws.extra["pdf_site"], "read_pdf"

        def src(**source: Any) -> dict[str, Any]:
            return {"sources": [source]}

        return [
            Case(read, src(path=str(docs / "invoice-2025.pdf")), "file_missing", L.not_found("path")),
            Case(read, src(path=str(docs / "orders.csv")), "not_a_pdf",
                 L.bad_value("path", why="the file is not a PDF")),
            Case(read, src(path=str(docs / "broken.pdf")), "pdf_corrupt",
                 L.server_broken("path", why="the PDF file is broken: no argument reads it")),
            Case(read, src(path=str(docs / "locked.pdf")), "pdf_password",
                 L.custom("F1_unauthenticated", False, "rejected", "ask_user",
                          why="the PDF is encrypted: only the user has the password")),
            Case(read, src(path=str(ws.root / "outside.pdf")), "outside_allowed_dir", L.sandbox("path")),
            Case(read, src(url="https://docs.example.com/spec.pdf"), "host_not_allowed", L.forbidden("url")),
            Case(read, src(url=site + "/missing.pdf"), "url_404", L.not_found("url")),
            Case(read, src(url=site + "/busy.pdf"), "url_503", service_down("url", proven_refused=True)),
            Case(read, src(url=f"http://127.0.0.1:{_closed_port()}/a.pdf"), "url_refused", L.remote_transient("url")),
            Case(read, src(path=str(docs / "invoice.pdf"), pages="3-1"), "bad_page_range", L.bad_value("pages")),
            # Provoked as the server's own page check; the text showed its input schema refused it (reviewed): B2.
            Case(read, src(path=str(docs / "invoice.pdf"), pages=[0]), "page_zero", L.schema("pages")),
            Case(read, src(), "source_without_path_or_url", L.missing_arg("path")),
            Case(read, {}, "missing_sources", L.missing_arg("sources")),
            Case(read, {"sources": "invoice.pdf"}, "sources_wrong_type", L.schema("sources")),
            Case("pdf_to_text", {"path": "invoice.pdf"}, "unknown_tool", L.unknown_tool()),
        ]  # fmt: skip


HOLDOUT2_SOURCES += [PdfReader()]


# --- an issue tracker: jira-mcp-server-hopcos (Python, mcp 2.x) in front of a fake Jira Cloud REST API ------------
# The server refuses a plain http:// base URL: the fake speaks TLS with a self-signed certificate for 127.0.0.1, which
# the server's HTTP client trusts through SSL_CERT_FILE.


@contextmanager
def tls_fake_service(route: Any, cert: Path, key: Path) -> Iterator[Any]:
    with fake_service(route, tls=(cert, key)) as fake:
        yield fake


def self_signed(root: Path) -> tuple[Path, Path]:
    cert, key = root / "fake-jira.crt", root / "fake-jira.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return cert, key


def _jira(status: int, messages: list[str], errors: dict[str, str] | None = None, retry_after: str = "") -> Any:
    headers = {"Retry-After": retry_after} if retry_after else {}
    return status, {"errorMessages": messages, "errors": errors or {}}, headers


def jira_route(method: str, path: str, query: dict[str, list[str]], headers: dict[str, str], body: bytes) -> Any:
    import base64
    import json

    good = "Basic " + base64.b64encode(b"bot@example.com:atl-good").decode()
    if headers.get("authorization") != good:
        return 401, "Client must be authenticated to access this resource.", {}
    parts = [unquote(p) for p in path.split("/") if p][3:]  # rest/api/3/<...>
    if parts == ["myself"]:
        return 200, {"accountId": "5b10", "emailAddress": "bot@example.com", "displayName": "bot"}, {}
    if parts[:1] == ["issue"] and len(parts) >= 2:
        key = parts[1]
        if key == "OPS-1":
            return _jira(503, ["Service temporarily unavailable"], retry_after="1")
        if key == "OPS-2":
            return _jira(429, ["Rate limit exceeded."], retry_after="1")
        if key.startswith("HR-"):
            return _jira(403, ["You do not have permission to edit issues in this project."])
        if key != "APP-1":
            return _jira(404, ["Issue does not exist or you do not have permission to see it."])
        if parts[2:] == ["transitions"] and method == "POST":
            return _jira(400, ["Transition id '99' is not valid for this issue."])
        if parts[2:] == ["comment"] and method == "POST":
            return _jira(400, [], {"comment": "Comment body can not be empty!"})
        return 200, {"key": "APP-1", "id": "10001", "fields": {"summary": "Crash on start"}}, {}
    if parts == ["issue"] and method == "POST":
        sent = json.loads(body or b"{}")
        fields = sent.get("fields", sent)  # this server sends the fields unwrapped
        project = (fields.get("project") or {}).get("key", "")
        if project == "HR":
            return _jira(403, ["You do not have permission to create issues in this project."])
        if project not in ("APP", "OPS"):
            return _jira(400, [], {"project": "valid project is required"})
        if (fields.get("issuetype") or {}).get("name") not in ("Bug", "Task", "Story"):
            return _jira(400, [], {"issuetype": "Specify a valid issue type"})
        return 201, {"id": "10002", "key": "APP-2"}, {}
    if parts[:2] == ["search", "jql"]:
        text = json.loads(body or b"{}").get("jql", "") if method == "POST" else (query.get("jql") or [""])[0]
        if "statuss" in text:
            return _jira(400, ["Field 'statuss' does not exist or you do not have permission to view it."])
        return 200, {"issues": [], "isLast": True}, {}
    return _jira(404, ["Not found"])


class Jira(Source):
    name = "jira"
    package = "jira-mcp-server-hopcos==0.2.0"
    kind = "issue tracker"
    language = "python"
    effects = {"jira_get_issue": "read_only", "jira_search_issues": "read_only", "jira_get_transitions": "read_only",
               "jira_get_comments": "read_only", "jira_search_issues_jql_only": "read_only"}  # fmt: skip
    token = "atl-good"

    @asynccontextmanager
    async def started(self, ws: Workspace) -> AsyncIterator[StdioUpstream | RemoteUpstream]:
        cert, key = self_signed(ws.root)
        with tls_fake_service(jira_route, cert, key) as api:
            yield self.server_config(f"https://127.0.0.1:{api.port}", cert, ws)

    def server_config(self, base: str, cert: Path, ws: Workspace) -> StdioUpstream:
        env = {
            "JIRA_BASE_URL": base,
            "JIRA_AUTH_METHOD": "basic",
            "JIRA_USER_EMAIL": "bot@example.com",
            "JIRA_API_TOKEN": self.token,
            "SSL_CERT_FILE": str(cert),
            "HOME": str(ws.root),
        }
        return _stdio(py_bin("jira-py", "jira-mcp-server"), env=env)

    def cases(self, ws: Workspace) -> list[Case]:
        get, create = "jira_get_issue", "jira_create_issue"
        issue = {"project_key": "APP", "summary": "Crash on start", "issue_type": "Bug"}
        lookup = L.not_found("issue_key", "jira_search_issues")
        return [
            Case(get, {"issue_key": "APP-999"}, "issue_missing", lookup),
            Case("jira_add_comment", {"issue_key": "APP-999", "body": "seen again"}, "issue_missing", lookup),
            Case(get, {"issue_key": "HR-7"}, "no_permission", no_privilege("issue_key")),
            Case(create, {**issue, "project_key": "HR"}, "no_permission", no_privilege("project_key")),
            Case(create, {**issue, "issue_type": "Defect"}, "bad_issue_type", L.bad_value("issue_type")),
            Case(create, {**issue, "project_key": "NOPE"}, "bad_project", L.bad_value("project_key")),
            Case("jira_transition_issue", {"issue_key": "APP-1", "transition_id": "99"}, "bad_transition",
                 L.bad_value("transition_id", "jira_get_transitions")),
            Case("jira_add_comment", {"issue_key": "APP-1", "body": ""}, "empty_comment", L.bad_value("body")),
            Case("jira_search_issues", {"jql": "statuss = Done"}, "jql_unknown_field", L.bad_value("jql")),
            Case(get, {"issue_key": "OPS-1"}, "jira_unavailable", service_down(proven_refused=True)),
            Case(get, {"issue_key": "OPS-2"}, "rate_limited", L.custom("D2_rate_limited", True, "rejected",
                                                                       "backoff_retry")),
            Case(create, {"project_key": "APP", "summary": "x"}, "missing_issue_type", L.missing_arg("issue_type")),
            Case(get, {"issue_key": 42}, "issue_key_wrong_type", L.schema("issue_key")),
            Case("jira_archive_issue", {"issue_key": "APP-1"}, "unknown_tool", L.unknown_tool()),
        ]  # fmt: skip


class JiraBadToken(Jira):
    name = "jira-badtoken"
    server = "jira"
    token = "atl-revoked"

    def cases(self, ws: Workspace) -> list[Case]:
        return [
            Case("jira_get_issue", {"issue_key": "APP-1"}, "token_refused", bad_credentials()),
            Case("jira_create_issue", {"project_key": "APP", "summary": "x", "issue_type": "Bug"}, "token_refused",
                 bad_credentials()),
        ]  # fmt: skip


HOLDOUT2_SOURCES += [Jira(), JiraBadToken()]


def main() -> int:
    from .collect import main_async

    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    only = set(sys.argv[1].split(",")) if len(sys.argv) > 1 else None
    return anyio.run(main_async, HERE / "holdout2.jsonl", only, HOLDOUT2_SOURCES)


if __name__ == "__main__":
    raise SystemExit(main())
