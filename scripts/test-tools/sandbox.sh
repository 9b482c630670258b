#!/usr/bin/env sh
# The agents' kernel sandbox (ext_sandbox, and every other test, which then runs its agents
# confined): installs Debian's `bubblewrap` (the sandbox) and `tmux` (a user's terminal server
# the liars try to reach) when missing (apt-get, as root), checks that bwrap can set up user,
# mount, PID and network namespaces here, and prints the line that says so:
#   eval "$(scripts/test-tools/sandbox.sh start)"
# Idempotent: a second run finds both and only checks and prints.
set -eu
case "${1:-start}" in
start)
    missing=""
    command -v bwrap >/dev/null 2>&1 || missing="$missing bubblewrap"
    command -v tmux >/dev/null 2>&1 || missing="$missing tmux"
    if [ -n "$missing" ]; then
        if [ "$(id -u)" != 0 ]; then
            echo "error: failed to install$missing: not root (run: apt-get install$missing)" >&2
            exit 2
        fi
        echo "installing$missing from Debian's packages" >&2
        apt-get update -q >&2
        # shellcheck disable=SC2086
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q $missing >&2
    fi
    if ! err=$(bwrap --unshare-all --die-with-parent --cap-drop ALL --ro-bind / / --proc /proc --dev /dev -- true 2>&1); then
        echo "error: failed to start a sandbox: bwrap cannot set up namespaces here: $err" >&2
        exit 2
    fi
    echo "$(bwrap --version) ready" >&2
    echo "export WORK_TEST_SANDBOX=$(command -v bwrap)"
    # The suite's agents run confined from here on (the liars_* modules, the fallback's tests,
    # stay unconfined); a mode the caller already chose wins.
    echo 'export WORK_TEST_ISOLATION="${WORK_TEST_ISOLATION:-required}"'
    ;;
stop) ;;
*) echo "usage: $0 start" >&2; exit 2 ;;
esac
