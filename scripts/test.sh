#!/usr/bin/env bash
# The whole test suite, from a fresh machine (Rust with cargo-nextest, Python 3, git, gcc,
# node/npm): installs and starts the real parts the end-to-end tests use, then runs every test,
# the `ext_*` ones included (see .config/nextest.toml).
#
# Each scripts/test-tools/*.sh (called with `start`) installs (idempotently, pinned, into ~/.cache) or starts one real
# tool and prints `export WORK_TEST_…=…` lines. A tool whose setup fails is reported loudly here
# and the tests that need it FAIL: nothing is skipped silently.
#
# Extra arguments go to `cargo nextest run` (e.g. `scripts/test.sh -E 'test(/exhaust/)'`).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
command -v python3 >/dev/null || { echo "error: python3 is required" >&2; exit 1; }
command -v git >/dev/null || { echo "error: git is required" >&2; exit 1; }
cargo nextest --version >/dev/null 2>&1 || cargo install cargo-nextest --locked
# The tests make commits in scratch repositories.
git config --global user.email >/dev/null 2>&1 || git config --global user.email "test@example.com"
git config --global user.name >/dev/null 2>&1 || git config --global user.name "work tests"

# Tools that start servers (marked `# test-tool: server`) are stopped on exit.
stop_servers() {
    for t in scripts/test-tools/*.sh; do
        grep -q '^# test-tool: server' "$t" && bash "$t" stop >/dev/null 2>&1 || true
    done
}
trap stop_servers EXIT

started_at=$(date +%s)
# Says every minute that a slow setup step (the real model's first build) is still going.
heartbeat() {
    local name=$1 since=$2 nap
    trap 'kill "$nap" 2>/dev/null; exit 0' TERM
    while :; do
        sleep 60 &
        nap=$!
        wait "$nap"
        echo "  … still setting up $name ($(( $(date +%s) - since ))s so far)" >&2
    done
}

failed_tools=()
# An optional tool (marked `# test-tool: optional <nextest filter>`, e.g. the real model, which
# builds llama.cpp from source) that cannot be set up has its tests left out of this run, said
# loudly below and reported by nextest as skipped — never as passed. Every other tool's tests
# fail when it is missing.
excluded=()
for tool in scripts/test-tools/*.sh; do
    [ -e "$tool" ] || continue
    log=$(mktemp)
    name=$(basename "$tool" .sh)
    step_start=$(date +%s)
    echo "setting up test tool $name ($tool) …" >&2
    heartbeat "$name" "$step_start" &
    beat=$!
    # What the tool says on stderr is shown as it happens (indented) and kept for the warning.
    if exports=$(bash "$tool" start 2> >(tee "$log" | sed -u 's/^/  /' >&2)); then
        kill "$beat" 2>/dev/null || true
        wait "$beat" 2>/dev/null || true
        eval "$exports"
        echo "test tool ready: $name in $(( $(date +%s) - step_start ))s" >&2
    else
        kill "$beat" 2>/dev/null || true
        wait "$beat" 2>/dev/null || true
        failed_tools+=("$tool")
        optional=$(sed -n 's/^# test-tool: optional //p' "$tool")
        if [ -n "$optional" ]; then
            echo "WARNING: $tool failed: $(grep -v '^ *$' "$log" | tail -n 1); its tests ($optional) are left out of this run" >&2
            excluded+=("$optional")
        else
            echo "WARNING: $tool failed: $(grep -v '^ *$' "$log" | tail -n 1); the tests that need it will fail" >&2
        fi
    fi
    rm -f "$log"
done

filter=()
if [ "${#excluded[@]}" -gt 0 ]; then
    expr="all()"
    for e in "${excluded[@]}"; do expr="$expr - ($e)"; done
    filter=(-E "$expr")
fi
setup_done=$(date +%s)
echo "test tools set up in $(( setup_done - started_at ))s; running the suite" >&2
status=0
cargo nextest run --workspace --profile full "${filter[@]}" "$@" || status=$?
if [ "${#failed_tools[@]}" -gt 0 ]; then
    echo "WARNING: these test tools could not be set up: ${failed_tools[*]}" >&2
fi
if [ "${#excluded[@]}" -gt 0 ]; then
    echo "WARNING: tests left out because their optional tool is missing: ${excluded[*]}" >&2
fi
now=$(date +%s)
echo "suite ran in $(( now - setup_done ))s; scripts/test.sh took $(( now - started_at ))s in all" >&2
exit "$status"
