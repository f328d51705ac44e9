"""The proxy's configuration file: upstreams, listener, state, policy files, logging.

Accepted shapes (YAML or JSON):

- resilient-mcp's own: ``{upstreams: {name: {...}}, policies: [...], listen: {...}, state_dir: ..., ...}``;
- an MCP host's file as-is (``hostfiles.py``): Claude Desktop, Cursor, Cline, Roo Code, Windsurf
  (``{"mcpServers": {...}}``), VS Code (``{"servers": {...}, "inputs": [...]}``, or ``"mcp": {...}`` in its
  settings), Zed (``{"context_servers": {...}}``); that app's other settings are ignored.

An upstream is either stdio (``command``, ``args``, ``env``, ``cwd``) or remote (``url``, ``headers``, ``transport``),
in the shape people already have in their ``mcpServers``. ``${VAR}`` / ``${VAR:-default}`` in ``env`` values,
``headers`` values, ``url``, ``args``, ``cwd`` and listener tokens are read from the proxy's environment, so secrets
stay out of files (VS Code's ``${env:VAR}``, ``${input:ID}``, ``${userHome}`` and ``${workspaceFolder}`` too). Errors
name the file, line and key (see ``sourcefile.py``).
"""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    PrivateAttr,
    RootModel,
    Tag,
    field_validator,
    model_validator,
)

from ..spawn.prestart import environment
from .hostfiles import HostFile, HostSettings, read_host_file
from .ops_settings import MetricsConfig, StatusConfig, TracingConfig
from .source import Document, SourceError, expand_env, load_document, validate_document

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
_HTTP_URL = re.compile(r"https?://")


def default_prefix(name: str) -> str:
    """An upstream's name as a tool-name prefix (SEP-986 characters only): "My Server" -> "My_Server"."""
    return _UNSAFE.sub("_", name).strip("_")[:64] or "upstream"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True, populate_by_name=True)


class _UpstreamCommon(_Strict):
    prefix: str | None = None
    """Prefix of this upstream's tool and prompt names when several upstreams are served; defaults to its name."""
    enabled: bool = True
    """false keeps the entry in the file but does not start it (`disabled: true`, as Cline and Cursor write it, too)."""
    connect_timeout_s: float = Field(30.0, gt=0, le=600)
    """How long starting/connecting and the MCP handshake may take."""

    @model_validator(mode="before")
    @classmethod
    def _disabled_alias(cls, v: Any) -> Any:
        if isinstance(v, dict) and "disabled" in v:
            if "enabled" in v:
                raise ValueError("use either enabled or disabled, not both")
            disabled = v["disabled"]
            if not isinstance(disabled, bool):
                raise ValueError(f"disabled must be true or false (got {disabled!r})")
            v = {k: val for k, val in v.items() if k != "disabled"} | {"enabled": not disabled}
        return v

    @field_validator("prefix")
    @classmethod
    def _prefix(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"[A-Za-z0-9_.-]{0,64}", v):
            raise ValueError("prefix may use only letters, digits, '_', '.', '-' (at most 64)")
        return v


class StdioUpstream(_UpstreamCommon):
    type: Literal["stdio"] = "stdio"
    """Optional; an entry with `command` is a stdio server."""
    protocol: Literal["auto", "legacy"] = "auto"
    """Protocol era toward this server. "auto" meets each host in its own era: with one stdio host (`wrap`,
    `serve` without `--http`) the server's one process is connected in that host's era (2026-07-28 when both speak
    it); over `--http` a 2026-07-28 host is served by a second process of the server (started at its first request
    when the server speaks that era), which shares nothing in memory with the first. "legacy" serves every host
    over one handshake-era connection (a 2026-07-28 host's requests bridged, under the proxy's own input keys):
    choose it for a server that keeps state in memory and is served over `--http` (the second process would answer
    a 2026-07-28 host's calls and reads from other memory than the first, which lists its tools and resources)."""
    command: str = Field(min_length=1)
    """The program to start (looked up on PATH)."""
    args: list[str] = Field(default_factory=list)
    """Arguments; `${VAR}` is read from the proxy's environment."""
    env: dict[str, str] = Field(default_factory=dict)
    """Variables set for the server, over the inherited ones."""
    inherit_env: Literal["minimal", "all"] | list[str] = "minimal"
    """Which of the proxy's environment variables the server sees: "minimal" is the MCP SDK's default
    (HOME LOGNAME PATH SHELL TERM USER), "all" passes everything, a list passes those names plus the minimal set."""
    cwd: str | None = None
    """Working directory of the server."""
    max_message_bytes: int = Field(default=64 * 1024 * 1024, ge=1024)
    """Largest message (one JSON-RPC line) read from the server; a larger result becomes an E4 oversized observation."""
    env_file: str | None = None
    """A file of KEY=VALUE lines (a `.env` file; `envFile` in VS Code and Cursor) read into `env`, relative to this
    file; `env` wins over it."""


class RemoteUpstream(_UpstreamCommon):
    type: Literal["streamable-http", "http", "sse"] = "streamable-http"
    """Transport (`transport:` is accepted too): streamable-http (alias http) or sse."""
    url: str = Field(min_length=1)
    """The server's endpoint, e.g. http://127.0.0.1:8000/mcp."""
    protocol: Literal["auto", "legacy"] = "auto"
    """Protocol era toward this server: "auto" serves each host in its own era (handshake-era hosts over the
    handshake connection; 2026-07-28 hosts over a second session in that era when the server speaks it, else over
    the first); "legacy" serves every host over the handshake connection (2026-07-28 hosts bridged)."""
    headers: dict[str, str] = Field(default_factory=dict)
    """HTTP headers sent with every request, e.g. Authorization: "Bearer ${TOKEN}"."""
    max_message_bytes: int = Field(default=64 * 1024 * 1024, ge=1024)
    """Largest response body or SSE event read from the server (`type: sse`: at most 1 MiB per event, the MCP SDK's
    limit); a larger result becomes an E4 oversized observation, the rest of it unread."""

    @model_validator(mode="before")
    @classmethod
    def _transport_alias(cls, v: Any) -> Any:
        if isinstance(v, dict) and "transport" in v and "type" not in v:
            v = {("type" if k == "transport" else k): val for k, val in v.items()}
        return v

    @property
    def transport(self) -> Literal["streamable-http", "sse"]:
        return "sse" if self.type == "sse" else "streamable-http"

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        if not v.startswith("${") and not _HTTP_URL.match(v):  # ${API_BASE_URL:-https://...}/mcp: checked expanded
            raise ValueError("url must start with http:// or https://")
        return v


def _upstream_kind(v: Any) -> str | None:
    """Stdio when ``command`` is there, remote when ``url`` is (or when ``type``/``transport`` says so)."""
    if isinstance(v, BaseModel):
        return "stdio" if isinstance(v, StdioUpstream) else "remote"
    if not isinstance(v, dict):
        return None
    kind = v.get("type") or v.get("transport")
    if kind == "stdio" or ("command" in v and "url" not in v):
        return "stdio"
    if kind in ("streamable-http", "http", "sse") or "url" in v:
        return "remote"
    return None


UpstreamConfig = Annotated[
    Annotated[StdioUpstream, Tag("stdio")] | Annotated[RemoteUpstream, Tag("remote")],
    Discriminator(
        _upstream_kind,
        custom_error_type="upstream_kind",
        custom_error_message="an upstream needs either 'command' (a stdio server) or 'url' (a remote server)",
    ),
]


class ListenConfig(_Strict):
    http: str | None = None
    """Serve streamable HTTP on HOST:PORT instead of stdio (``--http`` overrides)."""
    path: str = "/mcp"
    """The MCP endpoint's path."""
    auth_tokens: list[str] = Field(default_factory=list)
    """Static bearer tokens; when set, a request without one of them gets 401. ``${VAR}`` allowed."""
    allow_unauthenticated_remote: bool = False
    """Required to bind a non-loopback address without auth_tokens."""
    allowed_hosts: list[str] = Field(default_factory=list)
    """Extra Host header values accepted by DNS-rebinding protection (``name:port`` or ``name:*``); ``${VAR}`` is read
    from the environment (a replica's own address: ``${POD_IP}:*``)."""
    allowed_origins: list[str] = Field(default_factory=list)
    """Extra Origin header values accepted by DNS-rebinding protection (e.g. https://app.example.com)."""
    stateless: bool = False
    """Stateless HTTP: no sessions, no cancellation, no out-of-band notifications. Off by default."""
    header_timeout_s: float = Field(10.0, gt=0, le=600)
    """A connection must send a request's complete headers within this many seconds (else 408 and closed)."""
    body_timeout_s: float = Field(30.0, gt=0, le=3600)
    """A request's whole body must arrive within this many seconds of its headers (else 408 and closed)."""
    max_connections: int | None = Field(None, ge=8)
    """Open connections at most (default: 3/4 of the open-file limit, at most 4096); see docs/usage.md, Over HTTP."""
    max_json_items: int = Field(100_000, ge=100)
    """JSON items (strings and keys, numbers, literals, objects, arrays) one request may hold; more gets 413."""


class LoggingConfig(_Strict):
    level: Literal["debug", "info", "warning", "error"] = "info"
    """Least severe level logged."""
    format: Literal["auto", "console", "json"] = "auto"
    """auto: console on a TTY, JSON otherwise. Always to stderr."""


class FaultsConfig(_Strict):
    plan: str | None = None
    """A fault plan file (YAML/JSON, see ``resilient_mcp/chaos/plan.py``), relative to this file."""
    rules: list[dict[str, Any]] | None = None
    """Or the plan's rules inline (checked, like a plan file, by the chaos package when the config is loaded)."""
    seed: int | None = None
    """The seed of `probability` draws (overrides the plan file's)."""

    @model_validator(mode="after")
    def _one_source(self) -> FaultsConfig:
        if (self.plan is None) == (self.rules is None):
            raise ValueError("faults needs either plan: FILE or rules: [...] (not both)")
        return self


class StateConfig(_Strict):
    """Where the state lives: ``sqlite`` (embedded, one machine; ``state_dir``) or ``redis`` (shared by replicas)."""

    backend: Literal["sqlite", "redis"] = "sqlite"
    url: str | None = None
    """redis only: ``redis://[user:password@]host:port/db``, ``rediss://`` (TLS) or ``unix:///path``. ``${VAR}``
    allowed."""
    key_prefix: str = Field("resilient-mcp:", min_length=1, max_length=64)
    """Prefix of every key, so several deployments can share one Redis."""
    username: str | None = None
    """ACL user (instead of in the url). ``${VAR}`` allowed."""
    password: str | None = None
    """Password (instead of in the url). ``${VAR}`` allowed."""
    secret: str | None = None
    """The HMAC key of fingerprints and audit hashes (at least 32 characters, ``${VAR}`` allowed); default: one
    created in Redis by the first replica (``SET NX``) and shared by all."""
    connect_timeout_s: float = Field(2.0, gt=0, le=60)
    command_timeout_s: float = Field(2.0, gt=0, le=60)
    """Every Redis command fails after this long (the store then counts as unavailable)."""
    max_connections: int = Field(64, ge=2, le=10_000)
    """Connections in the pool of one replica."""
    audit_max_entries: int = Field(100_000, ge=100)
    """The audit stream is capped near this many entries (``XADD MAXLEN ~``)."""

    @model_validator(mode="after")
    def _url(self) -> StateConfig:
        if self.backend == "redis":
            if not self.url:
                raise ValueError("state.backend redis needs state.url (for example redis://127.0.0.1:6379/0)")
            if not self.url.startswith(("redis://", "rediss://", "unix://", "${")):
                raise ValueError(f"state.url {self.url!r}: use redis://, rediss:// (TLS) or unix://")
        elif self.url is not None:
            raise ValueError("state.url is for backend: redis (the sqlite backend uses state_dir)")
        return self


class ProxyConfig(_Strict):
    upstreams: dict[str, UpstreamConfig] = Field(default_factory=dict, alias="mcpServers")
    """The servers to wrap, by name (`mcpServers` is accepted too, as in Claude Desktop's file)."""
    policies: list[str] = Field(default_factory=list)
    """Policy files or directories (every *.yaml, *.yml, *.json inside), relative to this file."""
    state_dir: str | None = None
    """SQLite state (idempotency records, stored outputs, audit). Default: $XDG_STATE_HOME/resilient-mcp."""
    state: StateConfig = StateConfig()
    """The state backend: sqlite (default, in ``state_dir``) or redis (shared by several replicas)."""
    prefix_separator: str = "__"
    """Between an upstream's prefix and its tool names when several upstreams are served."""
    listen: ListenConfig = ListenConfig()
    """The HTTP listener (stdio is used when `listen.http` is not set and `--http` is not given)."""
    logging: LoggingConfig = LoggingConfig()
    """Log level and format (always to stderr)."""
    faults: FaultsConfig | None = None
    """Chaos mode: inject faults between the proxy and its upstreams as a fault plan says (testing only)."""
    metrics: MetricsConfig = MetricsConfig()
    """Prometheus metrics at /metrics (see docs/operations.md)."""
    status: StatusConfig = StatusConfig()
    """The live status page at /status."""
    tracing: TracingConfig = TracingConfig()
    """OpenTelemetry traces of tool calls (the [otel] extra)."""

    base_dir: str = Field(default=".", exclude=True)
    source: str | None = Field(default=None, exclude=True)
    """The file this config was read from (for messages that name a line of it)."""
    _host: HostSettings | None = PrivateAttr(default=None)

    @field_validator("upstreams")
    @classmethod
    def _names(cls, v: dict[str, UpstreamConfig]) -> dict[str, UpstreamConfig]:
        for name in v:
            if not name.strip() or len(name) > 128:
                raise ValueError(f"upstream name {name!r}: use 1 to 128 characters")
        return v

    @field_validator("prefix_separator")
    @classmethod
    def _sep(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9_.-]{1,8}", v):
            raise ValueError("prefix_separator may use only letters, digits, '_', '.', '-' (1 to 8 characters)")
        return v

    @model_validator(mode="after")
    def _listen_safe(self) -> ProxyConfig:
        if self.listen.http:
            check_http_bind(self.listen.http, self.listen)
        return self

    def enabled_upstreams(self) -> dict[str, StdioUpstream | RemoteUpstream]:
        return {name: up for name, up in self.upstreams.items() if up.enabled}

    def local_upstreams(self) -> list[str]:
        """The upstreams started as a local command (stdio): the policy uses their ``readOnlyHint`` by default."""
        return [name for name, up in self.upstreams.items() if isinstance(up, StdioUpstream)]

    @property
    def host(self) -> HostSettings:
        """What a host's file said beyond the servers themselves (``hostfiles.py``); empty for other files."""
        return self._host if self._host is not None else HostSettings()

    def host_policy(self) -> dict[str, Any] | None:
        """The policy layer a host's file implies (per-server ``timeout``, ``disabledTools``), under every policy
        file: a ``PolicyFile`` mapping, or None."""
        return self.host.policy()

    def resolve_path(self, p: str) -> Path:
        path = Path(os.path.expanduser(p))
        return (path if path.is_absolute() else Path(self.base_dir) / path).resolve()

    def policy_paths(self) -> list[Path]:
        out: list[Path] = []
        for entry in self.policies:
            p = self.resolve_path(entry)
            if p.is_dir():
                out.extend(sorted(q for q in p.iterdir() if q.suffix in (".yaml", ".yml", ".json")))
            else:
                out.append(p)
        return out

    def state_path(self) -> Path:
        if self.state_dir:
            return self.resolve_path(self.state_dir)
        base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
        return Path(base) / "resilient-mcp"


def check_http_bind(value: str, listen: ListenConfig) -> None:
    """Refuse to serve a non-loopback address without bearer tokens unless the admin opted in explicitly."""
    host, _ = split_host_port(value)
    if not is_loopback(host) and not listen.auth_tokens and not listen.allow_unauthenticated_remote:
        raise ValueError(
            f"binding {host}, which is not a loopback address, needs listen.auth_tokens "
            "(or listen.allow_unauthenticated_remote: true to accept anyone who can reach it)"
        )


def split_host_port(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not (0 <= int(port) <= 65535):
        raise ValueError(f"{value!r} is not HOST:PORT (for example 127.0.0.1:8080)")
    return host.strip("[]") or "127.0.0.1", int(port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _expand(
    doc: Document, cfg: ProxyConfig, environ: dict[str, str] | None, top: tuple[str, ...] = ("upstreams",)
) -> ProxyConfig:
    ex = _Expander(doc, cfg, environ)
    ups = {name: ex.upstream(name, up, (*top, name)) for name, up in cfg.upstreams.items()}
    tokens = [ex(t, ("listen", "auth_tokens", i)) for i, t in enumerate(cfg.listen.auth_tokens)]
    allowed_hosts = [ex(h, ("listen", "allowed_hosts", i)) for i, h in enumerate(cfg.listen.allowed_hosts)]
    for i, token in enumerate(tokens):
        if len(token.strip()) < 8:
            loc = ("listen", "auth_tokens", i)
            ex.problems.append(
                f"{doc.path}:{doc.line_of(loc) or '?'}: listen.auth_tokens[{i}]: a token must have at least 8 "
                "characters (is its environment variable set?)"
            )
    metrics = cfg.metrics
    if metrics.token is not None:
        metrics = metrics.model_copy(update={"token": ex(metrics.token, ("metrics", "token"))})
        if len((metrics.token or "").strip()) < 8:
            line = doc.line_of(("metrics", "token")) or "?"
            ex.problems.append(f"{doc.path}:{line}: metrics.token: use at least 8 characters (is its variable set?)")
    state = cfg.state
    if state.backend == "redis":
        expanded = {
            f: ex(v, ("state", f))
            for f in ("url", "username", "password", "secret")
            if isinstance(v := getattr(state, f), str)
        }
        state = state.model_copy(update=expanded)
        if state.secret is not None and len(state.secret) < 32:
            line = doc.line_of(("state", "secret")) or "?"
            ex.problems.append(f"{doc.path}:{line}: state.secret: use 32 characters or more")
    if ex.problems:
        raise SourceError(doc.path, ex.problems)
    listen = cfg.listen.model_copy(update={"auth_tokens": tokens, "allowed_hosts": allowed_hosts})
    return cfg.model_copy(update={"upstreams": ups, "listen": listen, "state": state, "metrics": metrics})


class _Expander:
    """Environment variables expanded in a config's values, each problem kept with the file, line and key."""

    def __init__(self, doc: Document, cfg: ProxyConfig, environ: dict[str, str] | None) -> None:
        self.doc, self.cfg, self.environ = doc, cfg, environ
        self.env_now = dict(os.environ if environ is None else environ)
        self.problems: list[str] = []

    def __call__(self, value: str, loc: tuple[str | int, ...]) -> str:
        try:
            return expand_env(self.cfg.host.expand_variables(value, self.env_now, self.doc.path), self.environ)
        except KeyError as exc:
            line = self.doc.line_of(loc)
            self.problems.append(f"{self.doc.path}:{line or '?'}: {'.'.join(map(str, loc))}: {exc.args[0]}")
            return value

    def env_file(self, up: StdioUpstream, loc: tuple[str | int, ...]) -> dict[str, str]:
        if up.env_file is None:
            return {}
        path = self.cfg.resolve_path(self(up.env_file, loc))
        try:
            return read_env_file(path)
        except (OSError, ValueError) as exc:
            self.problems.append(f"{self.doc.path}:{self.doc.line_of(loc) or '?'}: {'.'.join(map(str, loc))}: {exc}")
            return {}

    def upstream(
        self, name: str, up: StdioUpstream | RemoteUpstream, base: tuple[str, ...]
    ) -> StdioUpstream | RemoteUpstream:
        ex, host = self, self.cfg.host
        if not up.enabled:  # not started: its variables need not be set
            return up
        if isinstance(up, StdioUpstream):
            from_file = self.env_file(up, (*base, host.key_of(name, "env_file")))
            return up.model_copy(
                update={
                    "command": ex(up.command, (*base, "command")),
                    "env": from_file | {k: ex(v, (*base, "env", k)) for k, v in up.env.items()},
                    "args": [ex(a, (*base, "args", i)) for i, a in enumerate(up.args)],
                    "cwd": None if up.cwd is None else ex(up.cwd, (*base, "cwd")),
                }
            )
        url_key = (*base, host.key_of(name, "url"))
        url = ex(up.url, url_key)
        if url != up.url and not _HTTP_URL.match(url):
            self.problems.append(
                f"{self.doc.path}:{self.doc.line_of(url_key) or '?'}: {'.'.join(map(str, url_key))}: {up.url!r} "
                f"expands to {url[:80]!r}, which does not start with http:// or https:// (check the variable's value)"
            )
        return up.model_copy(
            update={"url": url, "headers": {k: ex(v, (*base, "headers", k)) for k, v in up.headers.items()}}
        )


class _OneUpstream(RootModel[UpstreamConfig]):
    pass


def _validate_host(doc: Document, data: dict[str, Any], host: HostFile) -> ProxyConfig:
    """An MCP host's file: its servers (made native by ``hostfiles``) and this proxy's own keys, if any; that app's
    other settings are ignored. Each server is validated where it stands in the file (errors name its line)."""
    problems: list[str] = []
    own = {k: v for k, v in data.items() if k in ProxyConfig.model_fields and k not in ("upstreams", "base_dir")}
    cfg = ProxyConfig()
    try:
        cfg = validate_document(ProxyConfig, doc, data=own)
    except SourceError as exc:
        problems.extend(exc.problems)
    ups: dict[str, StdioUpstream | RemoteUpstream] = {}
    for name, entry in host.servers.items():
        loc = (*host.servers_loc, name)
        try:
            ups[name] = validate_document(_OneUpstream, doc, data=entry, prefix=loc).root
        except SourceError as exc:
            problems.extend(exc.problems)
    try:
        ProxyConfig._names(ups)
    except ValueError as exc:
        problems.append(f"{doc.path}:{doc.line_of(host.servers_loc) or '?'}: {'.'.join(host.servers_loc)}: {exc}")
    if problems:
        raise SourceError(doc.path, problems)
    return cfg.model_copy(update={"upstreams": ups})


def parse_config(doc: Document, environ: dict[str, str] | None = None) -> ProxyConfig:
    data = doc.data
    if data is None:
        data = {}
    if not isinstance(data, dict):
        what = "upstreams: ..., mcpServers: ..., servers: ... or context_servers: ..."
        raise SourceError(doc.path, [f"{doc.path}:1: the file must hold a mapping ({what})"])
    host = read_host_file(doc, data)
    cfg = validate_document(ProxyConfig, doc, data=data) if host is None else _validate_host(doc, data, host)
    cfg = cfg.model_copy(update={"base_dir": str(Path(doc.path).resolve().parent), "source": doc.path})
    cfg._host = host.settings if host is not None else None
    return _expand(doc, cfg, environ, host.servers_loc if host is not None else ("upstreams",))


def load_config(path: str | os.PathLike[str], environ: dict[str, str] | None = None) -> ProxyConfig:
    return parse_config(load_document(path), environ)


def read_env_file(path: Path) -> dict[str, str]:
    """``KEY=VALUE`` lines (``export`` and quotes allowed, ``#`` comments and blank lines skipped), as in a ``.env``."""
    out: dict[str, str] = {}
    for n, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.removeprefix("export ").partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise ValueError(f"{path}:{n}: not a KEY=VALUE line")
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        out[key] = value
    return out


def command_problem(up: StdioUpstream, environ: dict[str, str] | None = None) -> str | None:
    """Why ``up.command`` cannot be started, or None: a bare name is looked up on the PATH the server gets (as the
    process is started), a path (with a ``/``) relative to the server's ``cwd``."""
    cmd = up.command
    if os.sep in cmd or (os.altsep is not None and os.altsep in cmd):
        path = Path(os.path.expanduser(cmd))
        if not path.is_absolute():
            path = Path(up.cwd or os.getcwd()) / path
        if not path.is_file():
            return f"command {cmd!r}: {path} does not exist"
        if not os.access(path, os.X_OK):
            return f"command {cmd!r}: {path} is not executable (chmod +x, or start it with its interpreter)"
        return None
    search = stdio_environment(up, environ).get("PATH") or os.defpath
    if shutil.which(cmd, path=search) is None:
        return (
            f"command {cmd!r} is not found on PATH ({search}): install it, or give its full path "
            "(`command -v` in the shell where it works prints it)"
        )
    return None


def stdio_environment(up: StdioUpstream, environ: dict[str, str] | None = None) -> dict[str, str]:
    """The complete environment a stdio upstream is started with (passed to the SDK as ``env``)."""
    return environment(up.inherit_env, up.env, environ)
