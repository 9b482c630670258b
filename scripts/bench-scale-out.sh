#!/usr/bin/env bash
# Dispatches per second through the NATS queue against the local fan-out, on loopback
# (docs/scale-out.md prints the figures). One exhaust round of N finder dispatches, run
# locally with cap C, then through one nats-server and W workers (each in its own clone,
# S slots each) with the same cap... and with the cap raised to W×S.
#
#   scripts/bench-scale-out.sh [N=400] [SLEEP_MS=0] [W=3] [S=4] [C=8]
#
# SLEEP_MS makes each finder wait that long (a model's latency) before answering. Needs
# nats-server (scripts/test-tools/nats.sh start) and a built `work` (WORK_BIN, default
# target/release/work, then target/debug/work).
set -euo pipefail
N=${1:-400}; SLEEP_MS=${2:-0}; W=${3:-3}; S=${4:-4}; C=${5:-8}
cd "$(dirname "$0")/.."
WORK=${WORK_BIN:-$( [ -x target/release/work ] && echo "$PWD/target/release/work" || echo "$PWD/target/debug/work")}
NATS=${WORK_TEST_NATS_SERVER:-$(command -v nats-server || echo /usr/sbin/nats-server)}
[ -x "$WORK" ] || { echo "error: failed to find the work binary (cargo build --release -p work-cli)" >&2; exit 2; }
[ -x "$NATS" ] || { echo "error: failed to find nats-server (scripts/test-tools/nats.sh start)" >&2; exit 2; }
TMP=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$TMP"; }
trap cleanup EXIT
now() { date +%s.%N; }
rate() { python3 -c "import sys; n,a,b=int(sys.argv[1]),float(sys.argv[2]),float(sys.argv[3]); print('%.1f dispatches/s (%.2f s)' % (n/(b-a), b-a))" "$@"; }

git init -q -b main "$TMP/repo"
git -C "$TMP/repo" -c user.email=b@x -c user.name=b commit -q --allow-empty -m root
# The finder is bash builtins only (no fork, no interpreter start-up): the figures are the
# engine's and the queue's cost per dispatch, not an agent's. A wait is a read with a timeout on
# a FIFO that never delivers.
mkfifo "$TMP/fifo"
WAIT=$(printf '%d.%03d' $((SLEEP_MS / 1000)) $((SLEEP_MS % 1000)))
cat > "$TMP/finder.sh" <<SH
#!/bin/bash
IFS= read -r req
[[ \$req =~ \\"angle\\":\\"([a-z0-9]+)\\" ]] && angle=\${BASH_REMATCH[1]}
[ "$SLEEP_MS" -gt 0 ] && { read -r -t $WAIT _ <> "$TMP/fifo" || true; }
printf '{"angle":"%s","items":[]}\\n' "\$angle"
SH
chmod +x "$TMP/finder.sh"
AGENT="command:$TMP/finder.sh"
ANGLES=$(python3 -c "print(','.join('a%04d' % i for i in range($N)))")
run_exhaust() { # dir cap [queue]
    local dir=$1 cap=$2; shift 2
    (cd "$dir" && "$WORK" exhaust bench -k 2 --angles "$ANGLES" --angles-per-round "$N" --max-rounds 1 \
        --concurrency "$cap" --agent "$AGENT" --fresh --json "$@" >/dev/null 2>"$TMP/last.log") || {
        code=$?; [ $code -le 1 ] || { cat "$TMP/last.log" >&2; exit $code; }; }
}

echo "N=$N finder dispatches, finder sleep ${SLEEP_MS} ms, $W workers x $S slots, cap $C" >&2
t0=$(now); run_exhaust "$TMP/repo" "$C"; t1=$(now)
echo "local fan-out (cap $C):            $(rate "$N" "$t0" "$t1")"

PORT=$(python3 -c "import socket; s=socket.socket(); s.bind(('127.0.0.1',0)); print(s.getsockname()[1])")
"$NATS" -js -a 127.0.0.1 -p "$PORT" -sd "$TMP/js" >"$TMP/nats.log" 2>&1 & PIDS+=($!)
for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/"$PORT") 2>/dev/null && break; sleep 0.1; done
URL="nats://127.0.0.1:$PORT"
for i in $(seq "$W"); do
    git clone -q "$TMP/repo" "$TMP/w$i"
    (cd "$TMP/w$i" && exec "$WORK" worker --queue "$URL" --agent "$AGENT" --concurrency "$S" --name "w$i") \
        2>"$TMP/w$i.log" & PIDS+=($!)
done
sleep 1
t0=$(now); run_exhaust "$TMP/repo" "$C" --queue "$URL"; t1=$(now)
echo "queue, $W workers (cap $C):         $(rate "$N" "$t0" "$t1")"
CAP=$((W * S))
t0=$(now); run_exhaust "$TMP/repo" "$CAP" --queue "$URL"; t1=$(now)
echo "queue, $W workers (cap $CAP):        $(rate "$N" "$t0" "$t1")"
