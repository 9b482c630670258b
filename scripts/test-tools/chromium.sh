#!/usr/bin/env bash
# Installs headless Chromium for the report tests (crates/work-cli/tests/cli/ext_chromium.rs)
# and prints the line that points the tests at it:
#
#   eval "$(scripts/test-tools/chromium.sh)"    # export WORK_TEST_CHROMIUM=/usr/bin/chromium
#
# Chromium comes from Debian's `chromium` package (apt-get, as root, only when it is missing);
# an already installed chromium, chromium-browser or google-chrome on PATH is used as it is.
# Idempotent: a second run installs nothing. Progress goes to stderr, the export to stdout.
set -euo pipefail

find_browser() {
    for name in chromium chromium-browser google-chrome; do
        if command -v "$name" >/dev/null 2>&1; then
            command -v "$name"
            return 0
        fi
    done
    return 1
}

if ! browser=$(find_browser); then
    if [ "$(id -u)" != 0 ]; then
        echo "chromium.sh: chromium is not installed and this is not root; install Debian's chromium package" >&2
        exit 1
    fi
    echo "chromium.sh: installing Debian's chromium package" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >&2
    browser=$(find_browser) || { echo "chromium.sh: chromium still not on PATH after the install" >&2; exit 1; }
fi

"$browser" --version >&2 || true
echo "export WORK_TEST_CHROMIUM=$browser"
