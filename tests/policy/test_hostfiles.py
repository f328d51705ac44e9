"""The config files people already have, read as they are: Claude Desktop, Cline/Cursor/Roo Code per-server keys,
VS Code's servers and inputs, Zed's context_servers; ``check`` names a command that is not on PATH; an upstream that
cannot start is visible to the host; names a server already prefixes stay readable."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.server import Server

from resilient_mcp.cli import load_setup
from resilient_mcp.faults import EffectClass
from resilient_mcp.policy.config import load_config
from resilient_mcp.policy.source import SourceError
from resilient_mcp.proxy.catalog import CatalogConflict
from tests.harness import proxied, text
from tests.helpers import child_env, proxy_argv, run_cli

PY = sys.executable
DEMO = ["-m", "resilient_mcp.demo.upstream"]


def _write(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body, encoding="utf-8")
    return path


def _check(path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return run_cli("check", "--config", str(path), *extra)


# --- Cline / Cursor / Roo Code / Claude Desktop ----------------------------------------------------------------------

CLINE = """{
  "mcpServers": {
    "git": {
      "command": "%(py)s", "args": ["-m", "resilient_mcp.demo.upstream"],
      "disabled": false, "autoApprove": ["git_status"], "timeout": 30,
      "disabledTools": ["sales_report"]
    },
    "retired": {"command": "no-such-mcp-server-anywhere", "disabled": true, "alwaysAllow": ["x"]},
    "remote": {"url": "http://127.0.0.1:9/mcp", "transportType": "streamableHttp", "timeout": 600000}
  }
}
"""


def test_a_cline_file_is_read_as_it_is_disabled_servers_are_skipped_and_timeouts_apply(tmp_path: Path) -> None:
    path = _write(tmp_path / "cline_mcp_settings.json", CLINE % {"py": PY})
    config, policy = load_setup(path)
    assert set(config.enabled_upstreams()) == {"git", "remote"}, "disabled: true is not started"
    assert config.upstreams["retired"].enabled is False
    assert config.upstreams["remote"].transport == "streamable-http"
    # timeout: 30 (Cline: seconds) is the host's own timeout of git's tool calls: the proxy's deadline is under it;
    # 600000 (Gemini CLI: ms) = 600 s
    git = policy.resolve("git", "lookup_order", "git__lookup_order").timeouts
    assert (git.attempt_s, git.total_s) == (25, 25)
    remote = policy.resolve("remote", "x", "remote__x").timeouts
    assert (remote.attempt_s, remote.total_s) == (500, 500)
    assert policy.resolve("other", "x", "other__x").timeouts.total_s == 50, "other upstreams keep the default"
    # disabledTools hides and refuses the tool
    assert not policy.is_visible("git", "sales_report", "git__sales_report")
    assert policy.is_visible("git", "lookup_order", "git__lookup_order")
    notes = dict((f["upstream"], (e, f)) for e, f in config.host.notes if e == "host_keys_ignored")
    assert notes["git"][1]["keys"] == ["autoApprove"], "ignored keys are named once, with why"
    assert "require_approval" in notes["git"][1]["why"][0]
    assert "retired" not in notes, "a disabled server's keys need no note"


def test_a_policy_files_timeout_for_the_upstream_wins_over_the_host_files(tmp_path: Path) -> None:
    policy_file = _write(tmp_path / "p.yaml", "upstreams: {git: {defaults: {timeouts: {attempt_s: 5}}}}\n")
    body = json.loads(CLINE % {"py": PY})
    body["policies"] = [str(policy_file)]
    path = _write(tmp_path / "mcp.json", json.dumps(body))
    _, policy = load_setup(path)
    assert policy.resolve("git", "lookup_order", "git__lookup_order").timeouts.attempt_s == 5


def test_a_bad_timeout_is_an_error_naming_the_line_and_key(tmp_path: Path) -> None:
    path = _write(tmp_path / "mcp.json", '{"mcpServers": {\n "a": {"command": "x",\n "timeout": "soon"}}}\n')
    with pytest.raises(SourceError) as err:
        load_config(path)
    assert "mcp.json:3: mcpServers.a.timeout" in str(err.value) and "'soon'" in str(err.value)


def test_every_wrong_server_entry_of_a_host_file_is_named_with_its_line(tmp_path: Path) -> None:
    body = '{"mcpServers": {\n "a": {"command": 5},\n "b": {"args": []},\n "c": {"command": "x", "prefix": "a b"}}}\n'
    with pytest.raises(SourceError) as err:
        load_config(_write(tmp_path / "mcp.json", body))
    assert [line.split(":")[1] for line in err.value.problems] == ["2", "3", "4"]
    assert "mcpServers.b: an upstream needs either 'command'" in str(err.value)


def test_a_claude_desktop_file_keeps_working_and_its_app_settings_are_ignored(tmp_path: Path) -> None:
    body = {"globalShortcut": "Ctrl+Space", "mcpServers": {"orders": {"command": PY, "args": DEMO}}}
    config = load_config(_write(tmp_path / "claude_desktop_config.json", json.dumps(body)))
    assert list(config.enabled_upstreams()) == ["orders"] and config.host.notes == []


def test_keys_unknown_to_a_host_file_are_ignored_but_a_typo_in_resilient_mcps_own_format_is_an_error(
    tmp_path: Path,
) -> None:
    host = load_config(_write(tmp_path / "a.json", '{"mcpServers": {"a": {"command": "x", "dev": {"watch": "*"}}}}'))
    assert [(e, f["keys"]) for e, f in host.host.notes] == [("host_keys_ignored", ["dev"])]
    with pytest.raises(SourceError) as err:
        load_config(_write(tmp_path / "b.yaml", "upstreams:\n  a:\n    command: x\n    comand: y\n"))
    assert "b.yaml:4: upstreams.a.comand: unknown key" in str(err.value)


def test_disabled_and_enabled_together_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="either enabled or disabled"):
        load_config(_write(tmp_path / "c.yaml", "upstreams:\n  a: {command: x, disabled: true, enabled: true}\n"))


# --- VS Code -----------------------------------------------------------------------------------------------------

VSCODE = """{
  // .vscode/mcp.json, as VS Code writes it (comments allowed)
  "inputs": [
    {"type": "promptString", "id": "orders-token", "description": "Orders API token", "password": true}
  ],
  "servers": {
    "orders": {
      "type": "stdio",
      "command": "%(py)s",
      "args": ["-m", "resilient_mcp.demo.upstream", "${workspaceFolder}"],
      "env": {"TOKEN": "${input:orders-token}", "HOME_SEEN": "${userHome}", "FROM_ENV": "${env:ORDERS_REGION}"},
      "envFile": "${workspaceFolder}/.env"
    },
    "remote": {"type": "http", "url": "http://127.0.0.1:9/mcp",
               "headers": {"Authorization": "Bearer ${input:orders-token}"}}
  }
}
"""


def _vscode(tmp_path: Path) -> Path:
    _write(tmp_path / ".env", "# defaults\nexport LEVEL=debug\nTOKEN=from-file\nQUOTED='a b'\n")
    return _write(tmp_path / ".vscode" / "mcp.json", VSCODE % {"py": PY})


def test_a_vscode_prompted_input_is_read_from_mcp_input_variables(tmp_path: Path) -> None:
    environ = {"MCP_INPUT_ORDERS_TOKEN": "s3cret", "ORDERS_REGION": "eu", "PATH": "/usr/bin"}
    config = load_config(_vscode(tmp_path), environ)
    orders = config.upstreams["orders"]
    assert orders.args[-1] == str(tmp_path), "${workspaceFolder} is the folder holding .vscode/"
    assert orders.env == {
        "LEVEL": "debug",
        "TOKEN": "s3cret",
        "QUOTED": "a b",
        "HOME_SEEN": str(Path.home()),
        "FROM_ENV": "eu",
    }, "envFile is read; env wins over it"
    assert config.upstreams["remote"].headers == {"Authorization": "Bearer s3cret"}


def test_a_vscode_prompted_input_that_is_not_set_is_an_error_naming_the_variable(tmp_path: Path) -> None:
    with pytest.raises(SourceError) as err:
        load_config(_vscode(tmp_path), {"ORDERS_REGION": "eu"})
    message = str(err.value)
    assert "mcp.json:11: servers.orders.env.TOKEN" in message
    assert '${input:orders-token} ("Orders API token")' in message and "MCP_INPUT_ORDERS_TOKEN" in message


def test_vscode_user_settings_with_an_mcp_section_are_read(tmp_path: Path) -> None:
    settings = {"editor.fontSize": 14, "mcp": {"servers": {"orders": {"command": PY, "args": DEMO}}}}
    config = load_config(_write(tmp_path / "settings.json", json.dumps(settings)))
    assert list(config.enabled_upstreams()) == ["orders"]


# --- Zed ---------------------------------------------------------------------------------------------------------

ZED = """// Zed settings
//
// For information on how to configure Zed, see the Zed documentation.
{
  "theme": "One Dark",
  "context_servers": {
    "orders": {"source": "custom", "command": "%(py)s", "args": ["-m", "resilient_mcp.demo.upstream"], "env": {}},
    "older": {"command": {"path": "%(py)s", "args": ["-m", "resilient_mcp.demo.upstream"], "env": {"A": "1"}},
              "settings": {}},
    "from-extension": {"source": "extension", "settings": {"key": "value"}}, /* started by Zed itself */
  },
}
"""


def test_zed_context_servers_in_both_shapes_are_read_and_extension_servers_skipped(tmp_path: Path) -> None:
    config = load_config(_write(tmp_path / "settings.json", ZED % {"py": PY}))
    assert set(config.enabled_upstreams()) == {"orders", "older"}
    older = config.upstreams["older"]
    assert (older.command, older.args, older.env) == (PY, DEMO, {"A": "1"})
    events = {(e, f["upstream"]) for e, f in config.host.notes}
    assert ("host_server_skipped", "from-extension") in events and ("host_keys_ignored", "orders") in events


# --- check: commands resolve ---------------------------------------------------------------------------------------


def test_check_names_the_stdio_command_that_is_not_on_path_and_exits_2(tmp_path: Path) -> None:
    body = {
        "mcpServers": {
            "orders": {"command": "python3", "args": DEMO},
            "git": {"command": "uvx-not-installed-here", "args": ["mcp-server-git"]},
            "local": {"command": "./bin/server.sh"},
            "retired": {"command": "also-missing", "disabled": True},
        }
    }
    body["mcpServers"]["local"]["cwd"] = str(tmp_path)
    _write(tmp_path / "bin" / "server.sh", "#!/bin/sh\n").chmod(0o644)
    done = _check(_write(tmp_path / "mcp.json", json.dumps(body)))
    assert done.returncode == 2, done.stderr
    assert "upstream 'git' cannot start: command 'uvx-not-installed-here' is not found on PATH" in done.stderr
    assert "upstream 'local' cannot start: command './bin/server.sh'" in done.stderr
    assert "not executable" in done.stderr, "a path is checked relative to the server's cwd"
    assert "orders" not in done.stderr.split("config not ok")[0].replace("(orders", ""), "python3 resolves"
    assert "also-missing" not in done.stderr and "upstream 'retired' is disabled" in done.stderr


def test_check_passes_when_every_command_resolves_and_prints_the_notes(tmp_path: Path) -> None:
    done = _check(_write(tmp_path / "cline.json", CLINE % {"py": PY}))
    assert done.returncode == 0, done.stderr
    assert "config ok: 2 upstream(s) (git, remote)" in done.stderr
    assert "note: host_keys_ignored: upstream=git, keys=['autoApprove']" in done.stderr
    assert "note: host_timeout_applied: upstream=remote, timeout=600000, read_as=milliseconds" in done.stderr


# --- serve: an upstream that cannot start is visible ----------------------------------------------------------------


async def _serve_and_list(config: Path, tmp_path: Path) -> tuple[str | None, list[str]]:
    params = StdioServerParameters(
        command=PY, args=proxy_argv("serve", "--config", str(config))[1:], env=child_env(state_home=tmp_path)
    )
    with anyio.fail_after(120):
        async with Client(params, mode="legacy", cache=None) as client:
            return client.instructions, [t.name for t in (await client.list_tools()).tools]


@pytest.mark.anyio
async def test_serve_tells_the_host_which_upstream_could_not_start_and_serves_the_others(tmp_path: Path) -> None:
    body = {"mcpServers": {"orders": {"command": PY, "args": DEMO}, "git": {"command": "uvx-not-installed-here"}}}
    instructions, tools = await _serve_and_list(_write(tmp_path / "mcp.json", json.dumps(body)), tmp_path)
    assert "orders__lookup_order" in tools
    assert instructions is not None
    assert instructions.startswith("NOTICE: 1 of 2 upstream MCP servers behind this proxy failed to start ('git':")
    assert "Tell the user" in instructions and "repair_action" in instructions, "the usual instructions follow"


@pytest.mark.anyio
async def test_serve_with_every_upstream_failing_says_no_tools_are_available_and_logs_an_error(tmp_path: Path) -> None:
    body = {"mcpServers": {"git": {"command": "uvx-not-installed-here"}}}
    config = _write(tmp_path / "mcp.json", json.dumps(body))
    instructions, tools = await _serve_and_list(config, tmp_path)
    assert tools == []
    assert instructions is not None and instructions.startswith("NOTICE: No tools are available")
    assert "uvx-not-installed-here" in instructions


def test_serve_logs_an_error_for_a_missing_command_and_for_no_tools_and_one_info_per_skipped_thing(
    tmp_path: Path,
) -> None:
    body = {
        "mcpServers": {
            "git": {"command": "uvx-not-installed-here", "autoApprove": ["git_status"]},
            "old": {"command": "gone", "disabled": True},
        }
    }
    config = _write(tmp_path / "mcp.json", json.dumps(body))
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}
    done = subprocess.run(
        proxy_argv("--log-format", "json", "serve", "--config", str(config)),
        input=json.dumps(init) + "\n",
        capture_output=True,
        text=True,
        timeout=120,
        env=child_env(state_home=tmp_path),
    )
    events = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    names = {(e.get("event"), e.get("level")) for e in events}
    assert ("upstream_command_not_found", "error") in names and ("no_tools_available", "error") in names, done.stderr
    once = [(e["event"], e.get("upstream")) for e in events if e["event"] in ("upstream_disabled", "host_keys_ignored")]
    assert once == [("upstream_disabled", "old"), ("host_keys_ignored", "git")]
    answer = json.loads(done.stdout.splitlines()[0])
    assert answer["result"]["instructions"].startswith("NOTICE: No tools are available")


# --- names a server already prefixes ----------------------------------------------------------------------------


def _server(name: str, tools: list[str]) -> Server[Any]:
    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        schema = {"type": "object"}
        return types.ListToolsResult(tools=[types.Tool(name=t, input_schema=schema) for t in tools])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(text=f"{name} ran {params.name}")])

    return Server(name, on_list_tools=list_tools, on_call_tool=call_tool)


@pytest.mark.anyio
async def test_a_tool_already_named_with_its_servers_prefix_keeps_its_name_and_routes_to_it() -> None:
    git = _server("git", ["git_status", "Git-log", "status", "git__diff", "gitk"])
    fetch = _server("fetch", ["fetch", "fetch_url"])
    policy = {"defaults": {"effect": EffectClass.READ_ONLY.value}}
    async with proxied({"git": git, "fetch": fetch}, policy) as h:
        names = {t.name for t in (await h.client.list_tools()).tools}
        assert names == {
            "git_status",
            "Git-log",
            "git__status",
            "git__git__diff",
            "git__gitk",
            "fetch__fetch",
            "fetch_url",
        }
        assert text(await h.client.call_tool("git_status", {})) == "git ran git_status"
        assert text(await h.client.call_tool("git__status", {})) == "git ran status"
        assert text(await h.client.call_tool("fetch_url", {})) == "fetch ran fetch_url"
        assert h.proxy.routing.catalog.upstream_for_name("git_commit") == "git", "known even while git is down"


@pytest.mark.anyio
async def test_a_kept_name_that_meets_another_upstreams_name_is_a_conflict_not_a_silent_shadow() -> None:
    git = _server("git", ["git_status"])
    other = _server("other", ["git_status"])
    with pytest.raises(CatalogConflict, match="git_status"):
        async with proxied(
            {"git": git, "other": other},
            config={"upstreams": {"git": {"command": "in-memory"}, "other": {"command": "in-memory", "prefix": ""}}},
        ):
            pass


# --- one real file per host, in the shape of that host's documentation (tests/fixtures/hostfiles/) ------------------

HOSTFILES = Path(__file__).parents[1] / "fixtures" / "hostfiles"


def _load(path: Path, environ: dict[str, str] | None = None) -> Any:
    return load_config(path, environ=environ if environ is not None else {})


def _kinds(config: Any) -> dict[str, str]:
    return {name: ("stdio" if hasattr(up, "command") else "remote") for name, up in config.upstreams.items()}


def test_claude_desktop_file() -> None:
    config = _load(HOSTFILES / "claude-desktop" / "claude_desktop_config.json")
    assert _kinds(config) == {"filesystem": "stdio"}
    assert config.upstreams["filesystem"].args[-1] == "/Users/username/Downloads"


def test_claude_code_file_expands_variables_with_defaults_in_every_string_also_at_the_start_of_a_url() -> None:
    path = HOSTFILES / "claude-code" / ".mcp.json"
    config = _load(path, {"API_KEY": "k-123"})
    api, local = config.upstreams["api-server"], config.upstreams["local-server"]
    assert api.url == "https://api.example.com/mcp" and api.headers["Authorization"] == "Bearer k-123"
    assert (local.command, local.args) == ("npx", ["-y", "@modelcontextprotocol/server-memory"])
    assert local.env["CACHE_DIR"] == "/tmp"
    other = _load(path, {"API_KEY": "k", "API_BASE_URL": "http://127.0.0.1:9", "SERVER_BIN": "/opt/bin/mem"})
    assert other.upstreams["api-server"].url == "http://127.0.0.1:9/mcp"
    assert other.upstreams["local-server"].command == "/opt/bin/mem"
    with pytest.raises(SourceError) as err:
        _load(path, {"API_KEY": "k", "API_BASE_URL": "api.example.com"})
    assert "mcpServers.api-server.url" in str(err.value) and "does not start with http://" in str(err.value)


def test_cursor_project_file_resolves_workspace_folder_to_the_project_not_the_cursor_folder() -> None:
    path = HOSTFILES / "cursor-project" / ".cursor" / "mcp.json"
    config = _load(path, {"API_KEY": "secret"})
    files = config.upstreams["project-files"]
    project = (HOSTFILES / "cursor-project").resolve()
    assert files.args[-1] == str(project)
    assert files.env == {"PROJECT_NAME": "cursor-project", "API_KEY": "secret"}
    assert config.upstreams["remote-server"].headers == {"API_KEY": "secret"}


def test_cursor_global_file_with_a_disabled_server() -> None:
    config = _load(HOSTFILES / "cursor-global" / ".cursor" / "mcp.json")
    assert set(config.enabled_upstreams()) == {"server-name"}, "disabled: its variables and env file are not read"
    assert config.upstreams["server-name"].env == {"API_KEY": "value"}


def test_vscode_file_with_inputs_servers_and_workspace_folder() -> None:
    config = _load(HOSTFILES / "vscode" / ".vscode" / "mcp.json", {"MCP_INPUT_PERPLEXITY_KEY": "pk"})
    assert _kinds(config) == {"Perplexity": "stdio", "github": "remote", "fetch": "stdio"}
    assert config.upstreams["Perplexity"].env == {"PERPLEXITY_API_KEY": "pk"}
    assert config.upstreams["fetch"].cwd == str((HOSTFILES / "vscode").resolve())


def test_windsurf_file_reads_server_url() -> None:
    config = _load(HOSTFILES / "windsurf" / "mcp_config.json", {"GITHUB_TOKEN": "g", "FIGMA_TOKEN": "f"})
    assert _kinds(config) == {"github": "stdio", "figma": "remote"}
    assert config.upstreams["figma"].url == "https://mcp.figma.com/mcp"
    assert config.upstreams["figma"].headers == {"Authorization": "Bearer f"}


def test_cline_file() -> None:
    config, policy = load_setup(HOSTFILES / "cline" / "cline_mcp_settings.json")
    assert _kinds(config) == {"weather": "stdio", "remote": "remote"}
    assert config.upstreams["remote"].transport == "streamable-http"
    assert policy.resolve("weather", "get_forecast", "weather__get_forecast").timeouts.total_s == 25


def test_zed_settings_file() -> None:
    config = _load(HOSTFILES / "zed" / "settings.json")
    assert _kinds(config) == {"local-mcp-server": "stdio", "remote-mcp-server": "remote"}, "extension servers skip"


def test_gemini_cli_file_honours_include_tools_as_an_allow_list_and_exclude_tools_as_a_deny_list(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DB_CONNECTION_STRING", "postgres://db")
    monkeypatch.setenv("EXTERNAL_SERVICE_TOKEN", "t")
    config, policy = load_setup(HOSTFILES / "gemini" / ".gemini" / "settings.json")
    assert _kinds(config) == {"myPythonServer": "stdio", "dockerizedServer": "stdio", "httpServer": "remote"}
    assert config.upstreams["httpServer"].url == "http://localhost:3000/mcp"
    py = "myPythonServer"
    assert policy.is_visible(py, "safe_tool", f"{py}__safe_tool")
    assert not policy.is_visible(py, "write_file", f"{py}__write_file"), "outside includeTools: hidden and refused"
    assert not policy.is_visible("dockerizedServer", "file_deleter", "dockerizedServer__file_deleter")
    assert policy.is_visible("dockerizedServer", "anything_else", "dockerizedServer__anything_else")
    assert policy.resolve(py, "safe_tool", f"{py}__safe_tool").timeouts.total_s == 12.5  # 15000 ms, under it


def test_continue_file_lists_servers_by_name() -> None:
    config = _load(HOSTFILES / "continue" / ".continue" / "mcpServers" / "sqlite.yaml")
    assert _kinds(config) == {"SQLite MCP": "stdio", "Remote docs": "remote"}
    assert config.upstreams["SQLite MCP"].args[-1] == "/path/to/your/database.db"


# --- files a host would read differently, or that cannot work --------------------------------------------------------


def test_a_host_file_with_no_servers_is_an_error_naming_the_file(tmp_path: Path) -> None:
    path = _write(tmp_path / "claude_desktop_config.json", '{"mcpServers": {}}')
    with pytest.raises(SourceError) as err:
        load_config(path)
    assert str(path) in str(err.value) and "lists no servers" in str(err.value)


def test_a_server_with_both_command_and_url_is_an_error_saying_hosts_differ(tmp_path: Path) -> None:
    body = {"mcpServers": {"both": {"command": "npx", "args": ["x"], "serverUrl": "https://a.example/mcp"}}}
    with pytest.raises(SourceError) as err:
        load_config(_write(tmp_path / "mcp_config.json", json.dumps(body)))
    assert "mcpServers.both: has both command and serverUrl" in str(err.value)


@pytest.mark.parametrize(
    ("command", "args"),
    [
        ("resilient-mcp", ["serve", "--config", "claude_desktop_config.json"]),
        ("/usr/local/bin/resilient-mcp", ["wrap", "--", "npx", "-y", "@modelcontextprotocol/server-memory"]),
        ("python3", ["-m", "resilient_mcp.cli", "serve", "--config", "x.json"]),
        ("uvx", ["resilient-mcp", "--log-level", "debug", "wrap", "--", "mcp-server-time"]),
    ],
)
def test_a_host_file_that_lists_the_proxy_itself_is_refused(tmp_path: Path, command: str, args: list[str]) -> None:
    body = {"mcpServers": {"me": {"command": command, "args": args}, "time": {"command": "mcp-server-time"}}}
    path = _write(tmp_path / "claude_desktop_config.json", json.dumps(body))
    with pytest.raises(SourceError) as err:
        load_setup(path)  # what serve, check and explain load
    assert "mcpServers.me: this server is resilient-mcp itself" in str(err.value)
    assert "inside itself" in str(err.value) and "mcp-server-time" not in str(err.value)


def test_serve_of_a_host_file_that_lists_the_proxy_itself_exits_with_the_message_and_starts_nothing(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "started"
    body = {"mcpServers": {"me": {"command": "resilient-mcp", "args": ["wrap", "--", "touch", str(marker)]}}}
    done = run_cli("serve", "--config", str(_write(tmp_path / "mcp.json", json.dumps(body))), timeout=60)
    assert done.returncode == 2 and "resilient-mcp itself (resilient-mcp wrap)" in done.stderr
    assert not marker.exists()


def test_a_server_that_only_mentions_the_proxy_in_its_arguments_is_not_refused(tmp_path: Path) -> None:
    body = {
        "mcpServers": {"fs": {"command": "npx", "args": ["-y", "server-filesystem", "/src/resilient-mcp", "serve"]}}
    }
    config = load_config(_write(tmp_path / "mcp.json", json.dumps(body)))
    assert set(config.upstreams) == {"fs"}
