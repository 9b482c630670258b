#!/usr/bin/env sh
# nats-server for the scale-out tests (ext_nats): installs Debian's `nats-server` package when
# it is missing (apt-get, as root) and prints the line that points the tests at it:
#   eval "$(scripts/test-tools/nats.sh start)"
# The tests start their own servers and three-node JetStream clusters from that binary, on free
# loopback ports in temporary directories, and kill them when they end: nothing is left running
# here. Idempotent: a second run finds the binary and only prints the line.
# JetStream clustering needs nats-server 2.2 or later (Debian bookworm ships 2.9).
set -eu
BIN=/usr/sbin/nats-server
case "${1:-start}" in
start)
    if [ ! -x "$BIN" ]; then
        if [ "$(id -u)" != 0 ]; then
            echo "error: failed to install nats-server: not root (run: apt-get install nats-server)" >&2
            exit 2
        fi
        echo "installing nats-server from Debian's packages" >&2
        apt-get update -q >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q nats-server >&2
    fi
    version=$("$BIN" --version 2>/dev/null | sed 's/^[^0-9]*//' | head -1)
    major=$(echo "$version" | cut -d. -f1)
    minor=$(echo "$version" | cut -d. -f2)
    if [ "${major:-0}" -lt 2 ] || { [ "$major" -eq 2 ] && [ "${minor:-0}" -lt 2 ]; }; then
        echo "error: failed to use nats-server ${version}: JetStream clustering needs 2.2 or later" >&2
        exit 2
    fi
    echo "nats-server ${version} ready" >&2
    echo "export WORK_TEST_NATS_SERVER=${BIN}"
    ;;
stop)
    # The tests stop the servers they start; nothing to do.
    ;;
*)
    echo "error: failed to run nats.sh: unknown verb \`$1\` (start, stop)" >&2
    exit 2
    ;;
esac
