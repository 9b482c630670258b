#!/usr/bin/env bash
# Installs the real agent CLIs the end-to-end tests drive (crates/work-cli/tests/cli/ext_claude.rs,
# ext_codex.rs) at pinned versions into ~/.cache/work-test-tools/npm, from the npm registry only
# (the platform binaries come as the packages' optional dependencies). Idempotent: a second run
# with the pinned versions in place installs nothing. Prints the variables the tests read:
#   export WORK_TEST_CLAUDE=…/claude
#   export WORK_TEST_CODEX=…/codex
# Usage: eval "$(scripts/test-tools/agent-clis.sh)"
set -euo pipefail

CLAUDE_CODE_VERSION=2.1.332
CODEX_VERSION=0.171.0

prefix="${WORK_TEST_TOOLS:-$HOME/.cache/work-test-tools}/npm"
bin="$prefix/node_modules/.bin"

command -v npm >/dev/null || { echo "error: failed to install the agent CLIs: npm is not on PATH (install Node.js 20 or later)" >&2; exit 1; }

installed() { # package version
    local pj="$prefix/node_modules/$1/package.json"
    [ -f "$pj" ] && grep -q "\"version\": \"$2\"" "$pj"
}

if ! installed @anthropic-ai/claude-code "$CLAUDE_CODE_VERSION" || ! installed @openai/codex "$CODEX_VERSION"; then
    mkdir -p "$prefix"
    npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error \
        "@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION" "@openai/codex@$CODEX_VERSION" >&2
fi

claude_version=$("$bin/claude" --version 2>/dev/null || true)
codex_version=$("$bin/codex" --version 2>/dev/null || true)
case "$claude_version" in "$CLAUDE_CODE_VERSION"*) ;; *)
    echo "error: failed to install Claude Code $CLAUDE_CODE_VERSION: \`claude --version\` says \`$claude_version\`" >&2; exit 1 ;;
esac
case "$codex_version" in *"$CODEX_VERSION"*) ;; *)
    echo "error: failed to install Codex $CODEX_VERSION: \`codex --version\` says \`$codex_version\`" >&2; exit 1 ;;
esac

echo "export WORK_TEST_CLAUDE=$bin/claude"
echo "export WORK_TEST_CODEX=$bin/codex"
