#!/usr/bin/env bash
# test-tool: server
# test-tool: optional test(/ext_real_model/)
# A real tiny model behind an OpenAI-compatible endpoint for `ext_real_model` (see
# scripts/real-model-server.sh). `start` prints `export WORK_REAL_MODEL_URL=…`; `stop` stops it.
set -euo pipefail
cd "$(dirname "$0")/../.."
case "${1:-start}" in
start)
    scripts/real-model-server.sh start >&2
    echo "export WORK_REAL_MODEL_URL=$(scripts/real-model-server.sh url)"
    ;;
stop) scripts/real-model-server.sh stop ;;
*) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
