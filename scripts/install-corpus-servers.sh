#!/usr/bin/env bash
# Installs the third-party MCP servers the error corpus is collected from (benchmarks/errors/collect.py), pinned,
# into .tools/corpus/: npm servers under .tools/corpus/npm, each Python server in its own virtualenv under
# .tools/corpus/py/NAME (most of them are built on the mcp 1.x SDK and cannot share the project's mcp 2.x venv).
# PostgreSQL and redis-server come from Debian. The collector is run by hand; CI never runs this script.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-peers.sh >/dev/null
NPM_FLAGS=(--no-audit --no-fund --loglevel=error)
CORPUS=.tools/corpus
mkdir -p "$CORPUS"

if ! command -v pg_ctl >/dev/null && ! ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1; then
  apt-get update && apt-get install -y postgresql
fi
command -v redis-server >/dev/null || { apt-get update && apt-get install -y redis-server; }
# The fresh hold-out (benchmarks/errors/holdout.py): MariaDB behind two MySQL servers, Debian's chromium behind
# Playwright's server (no browser download).
command -v mariadbd >/dev/null || { apt-get update && apt-get install -y mariadb-server; }
command -v chromium >/dev/null || { apt-get update && apt-get install -y chromium; }
# The second fresh hold-out (benchmarks/errors/holdout2.py): Debian's memcached behind the memcached server, openssl
# for the fake Jira API's self-signed certificate.
command -v memcached >/dev/null || { apt-get update && apt-get install -y memcached; }
command -v openssl >/dev/null || { apt-get update && apt-get install -y openssl; }
# The third fresh hold-out (benchmarks/errors/holdout3.py): Debian's OpenSSH daemon behind the SSH server.
[ -x /usr/sbin/sshd ] || { apt-get update && apt-get install -y openssh-server; }
# The fourth fresh hold-out (benchmarks/errors/holdout4.py): Debian's OpenLDAP slapd behind the LDAP server.
[ -x /usr/sbin/slapd ] || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y slapd; }
# The fifth fresh hold-out (benchmarks/errors/holdout5.py): Debian's Mosquitto behind the MQTT server (chromium above
# behind Puppeteer's server).
command -v mosquitto >/dev/null || { apt-get update && apt-get install -y mosquitto; }
# The sixth fresh hold-out (benchmarks/errors/holdout6.py): Debian's pandoc behind the document converter.
command -v pandoc >/dev/null || { apt-get update && apt-get install -y pandoc; }

NPM_SERVERS=(
  mcp-fetch-server@1.1.2
  @modelcontextprotocol/server-postgres@0.6.2
  @modelcontextprotocol/server-redis@2025.4.25
  @bytebase/dbhub@1.4.0
  @cyanheads/git-mcp-server@2.15.3
  @negokaz/excel-mcp-server@0.12.0
  @ivotoby/openapi-mcp-server@1.16.1
  @adamhancock/bullmq-mcp@1.0.7
  mcp-searxng@2.4.0
  @wonderwhy-er/desktop-commander@0.2.52
  @modelcontextprotocol/server-gitlab@2025.4.25
  @benborla29/mcp-server-mysql@2.0.9
  @elastic/mcp-server-elasticsearch@0.3.1
  @playwright/mcp@0.0.83
  @sylphx/pdf-reader-mcp@2.4.0
  mcp-server-code-runner@0.1.8
  ssh-mcp@2.11.0
  kubernetes-mcp-server@0.0.67
  airtable-mcp-server@1.14.0
  caldav-mcp@0.10.0
  @modelcontextprotocol/server-slack@2025.4.25
  @modelcontextprotocol/server-github@2025.4.8
  @modelcontextprotocol/server-brave-search@0.6.2
  @modelcontextprotocol/server-google-maps@0.6.2
  @modelcontextprotocol/server-puppeteer@2025.5.12
  todoist-mcp@1.3.4
  @notionhq/notion-mcp-server@2.5.2
  @stripe/mcp@0.2.5
)
if [ ! -f "$CORPUS/npm/.installed" ] || [ "$(cat "$CORPUS/npm/.installed")" != "${NPM_SERVERS[*]}" ]; then
  # No browser downloads (a dependency of desktop-commander pulls puppeteer; Playwright's server drives Debian's
  # chromium).
  PUPPETEER_SKIP_DOWNLOAD=1 PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --prefix "$CORPUS/npm" "${NPM_FLAGS[@]}" "${NPM_SERVERS[@]}"
  echo "${NPM_SERVERS[*]}" > "$CORPUS/npm/.installed"
fi

# uv builds the per-server virtualenvs (a registry package; its wheel ships the binary).
if [ ! -x "$CORPUS/uv/bin/uv" ]; then
  python3.11 -m venv "$CORPUS/uv"
  "$CORPUS/uv/bin/pip" install -q uv==0.13.9
fi
UV="$CORPUS/uv/bin/uv"
# name=requirement [extra requirement...]: the venv's name is the server's short name in servers.py. Servers
# written against the mcp 1.x SDK get mcp<2 (mcp 2 removed the decorators they use; they crash at start).
PY_SERVERS=(
  "sqlite-ref=mcp-server-sqlite==2025.4.25 mcp<2"
  "duckdb=mcp-server-duckdb==1.1.0 mcp<2"
  "redis-py=redis-mcp-server==0.5.1 mcp<2"
  "shell=mcp-shell-server==1.1.14 mcp<2"
  "text-editor=mcp-text-editor==1.2.2 mcp<2"
  "excel-py=excel-mcp-server==2.2.2"
  "word=office-word-mcp-server==1.1.11"
  "alchemy=mcp-alchemy==2026.10.15.202659 psycopg2-binary==2.9.11"
  "openapi-py=mcp-openapi-proxy==0.4.0"
  "git-mcp=git-mcp==0.3.2 mcp<2"
  "mcp-sqlite=mcp-sqlite==0.3.2 mcp<2"
  "mysql-py=mysql-mcp-server==0.4.4"
  "rabbitmq-py=mcp-server-rabbitmq==2.2.0 fastmcp==2.10.6 mcp<2 pydantic==2.11.7"
  "docker-py=mcp-server-docker==0.3.0"
  "memcached-py=awslabs-memcached-mcp-server==1.1.1"
  "chroma-py=chroma-mcp==0.2.6 pydantic==2.11.7"
  "s3-py=aws-s3-mcp==0.1.3 mcp<2"
  "jira-py=jira-mcp-server-hopcos==0.2.0"
  "prometheus-py=prometheus-mcp-server==1.6.2"
  "grafana-py=mcp-grafana==2.1.1"
  "obsidian-py=mcp-obsidian==0.2.3"
  "couchdb-py=couchdb-mcp-server==0.1.0"
  "hass=hass-mcp==0.6.1"
  "ldap=ldap-mcp==0.1.1"
  "email=mcp-email-server==1.13.3"
  "radicale=radicale==3.9.0"
  "mqtt=mqtt-mcp==0.4.0"
  "sentry=mcp-server-sentry==2025.1.14 mcp==1.0.0"
  "pandoc=mcp-pandoc==0.11.1"
  "jenkins=mcp-jenkins==3.6.0"
)
# The interpreter itself, not a pyenv shim (a shim for a version that is not pyenv's global one fails).
find_python() {
  local exe
  for exe in "$(command -v "$1" || true)" "$HOME"/.pyenv/versions/*/bin/"$1"; do
    if [ -n "$exe" ] && "$exe" -c 'import sys' 2>/dev/null; then "$exe" -c 'import sys; print(sys.executable)'; return; fi
  done
  echo "$1 not found" >&2; return 1
}
# mcp-server-sentry works with mcp 1.0.0 only (it raises McpError("text"), which every later mcp 1.x turns into
# "'str' object has no attribute 'message'"); mqtt-mcp needs Python 3.13.
# mcp-text-editor 1.2.x needs Python 3.13, mcp-sqlite 3.12+ (pyenv's here). postgres-mcp 0.3.0 is not installed:
# it pins pglast==7.2.0, which has no build for these Pythons. mcp-server-docker 0.3.0 needs Python 3.12+.
declare -A PYTHON_OF=([text-editor]=python3.13 [mcp-sqlite]=python3.13 [docker-py]=python3.13 [prometheus-py]=python3.13
  [grafana-py]=python3.13 [obsidian-py]=python3.13 [couchdb-py]=python3.13 [hass]=python3.13 [ldap]=python3.13
  [email]=python3.12 [mqtt]=python3.13 [pandoc]=python3.13 [jenkins]=python3.13)
for entry in "${PY_SERVERS[@]}"; do
  name=${entry%%=*}
  reqs=${entry#*=}
  dir="$CORPUS/py/$name"
  if [ ! -f "$dir/.installed" ] || [ "$(cat "$dir/.installed")" != "$reqs" ]; then
    rm -rf "$dir"
    python=$(find_python "${PYTHON_OF[$name]:-python3.11}")
    "$UV" venv -q --python "$python" "$dir"
    # shellcheck disable=SC2086
    VIRTUAL_ENV="$dir" "$UV" pip install -q $reqs || { echo "install failed: $name" >&2; continue; }
    echo "$reqs" > "$dir/.installed"
  fi
done
echo "corpus servers installed under $CORPUS"
