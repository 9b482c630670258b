#!/usr/bin/env sh
# Installs the MCP inspector (pinned; its `--cli` mode is @modelcontextprotocol/inspector-cli,
# which cannot run outside the inspector package) into ~/.cache/work-test-tools/ and prints
# the line that points the tests at it:
#   eval "$(scripts/test-tools/mcp-inspector.sh)"
# Idempotent: a second run finds the installed version and only prints the line.
set -eu
VERSION=0.21.2
PKG=@modelcontextprotocol/inspector
DIR="${HOME}/.cache/work-test-tools/mcp-inspector-${VERSION}"
BIN="${DIR}/node_modules/.bin/mcp-inspector"
if [ ! -x "$BIN" ]; then
    command -v npm >/dev/null 2>&1 || { echo "error: failed to install ${PKG}: npm is not on PATH" >&2; exit 2; }
    mkdir -p "$DIR"
    npm install --silent --no-fund --no-audit --prefix "$DIR" "${PKG}@${VERSION}" >&2
fi
echo "export WORK_TEST_MCP_INSPECTOR=${BIN}"
