#!/usr/bin/env bash
# Load and memory benchmark of the real webhook server (TLS, axum, 100k relations) on loopback.
# Numbers and conditions: docs/benchmarks.md, "Webhook over HTTPS".
#
#   cargo build --release -p lien-webhook --example serve_bench
#   SERVE=$CARGO_TARGET_DIR/release/examples/serve_bench DUR=20s ./scripts/bench-webhook.sh
#
# PIN=1 pins the server to CPU 0 and oha to CPU 1 (taskset); PIN=0 (default) lets both float
# over the 2 cores. Every run is bounded in time (oha -z, serve_bench --seconds, timeout).
# FLOOR=1 (default) also drives the same server's static /healthz the same ways: the floor of
# TLS + HTTP + the load generator on this machine, to read Lien's figures against; FLOOR=0
# skips it.
set -euo pipefail

SERVE=${SERVE:-${CARGO_TARGET_DIR:-target}/release/examples/serve_bench}
DUR=${DUR:-20s}
RATE=${RATE:-5000}
PIN=${PIN:-0}
FLOOR=${FLOOR:-1}
OUT=${OUT:-$(mktemp -d /tmp/lien-webhook-bench.XXXXXX)}
mkdir -p "$OUT"

if [ "$PIN" = 1 ]; then
  SERVER_CPU=(taskset -c 0)
  CLIENT_CPU=(taskset -c 1)
else
  SERVER_CPU=()
  CLIENT_CPU=()
fi

echo "== $(date -u +%FT%TZ) nproc=$(nproc) loadavg=$(cut -d' ' -f1-3 /proc/loadavg) pin=$PIN out=$OUT"
# The server exits by itself after 15 minutes at most.
"${SERVER_CPU[@]}" /usr/bin/time -v -o "$OUT/time.txt" \
  "$SERVE" --out "$OUT" --seconds 900 >"$OUT/serve.log" 2>&1 &
SERVER_PID=$!
stop() { kill -TERM "$(awk '/^pid /{print $2}' "$OUT/serve.log")" 2>/dev/null || true; }
trap stop EXIT
for _ in $(seq 1 300); do
  grep -q '^port ' "$OUT/serve.log" 2>/dev/null && break
  sleep 0.1
done
PORT=$(awk '/^port /{print $2}' "$OUT/serve.log")
URL="https://127.0.0.1:$PORT/validate"
cat "$OUT/serve.log"

run() { # name, oha arguments...
  local name=$1
  shift
  echo "== $name: oha $* (loadavg $(cut -d' ' -f1-3 /proc/loadavg))"
  timeout 120 "${CLIENT_CPU[@]}" oha --no-tui --cacert "$OUT/ca.pem" -m POST \
    -T application/json "$@" "$URL" | tee "$OUT/$name.txt" |
    grep -E 'Success rate|Requests/sec|Slowest|Fastest|Average|50.00%|90.00%|99.00%|99.90%|\[[0-9]+\]|Error|aborted'
}

floor() { # name, oha arguments... (GET /healthz: a static "ok", no decision)
  local name=$1
  shift
  echo "== $name: oha $* GET /healthz (loadavg $(cut -d' ' -f1-3 /proc/loadavg))"
  timeout 120 "${CLIENT_CPU[@]}" oha --no-tui --cacert "$OUT/ca.pem" "$@" \
    "https://127.0.0.1:$PORT/healthz" | tee "$OUT/$name.txt" |
    grep -E 'Success rate|Requests/sec|Slowest|Fastest|Average|50.00%|90.00%|99.00%|99.90%|\[[0-9]+\]|Error|aborted'
}

# A warm-up, so the first timed run does not pay for page faults and connection set-up.
run warmup -z 3s -c 50 -D "$OUT/denied-5k.json" >/dev/null

run denied-5k-const -z "$DUR" -c 50 -q "$RATE" --latency-correction -D "$OUT/denied-5k.json"
run allowed-5k-const -z "$DUR" -c 50 -q "$RATE" --latency-correction -D "$OUT/allowed-5k.json"
run denied-5k-sat -z "$DUR" -c 50 -D "$OUT/denied-5k.json"
run allowed-5k-sat -z "$DUR" -c 50 -D "$OUT/allowed-5k.json"

if [ "$FLOOR" = 1 ]; then
  floor healthz-const -z "$DUR" -c 50 -q "$RATE" --latency-correction
  floor healthz-sat -z "$DUR" -c 50
fi

# The answers are what they should be (one request each, outside the timings).
for body in denied allowed; do
  printf '%s: ' "$body"
  curl -sS --cacert "$OUT/ca.pem" -H 'Content-Type: application/json' \
    --data-binary "@$OUT/$body-5k.json" "$URL" | head -c 300
  echo
done

# SIGTERM to serve_bench itself (GNU time would die of it and leave the server running).
kill -TERM "$(awk '/^pid /{print $2}' "$OUT/serve.log")"
wait "$SERVER_PID" || true
trap - EXIT
cat "$OUT/serve.log"
grep -E 'Maximum resident|Elapsed|Percent of CPU|User time|System time' "$OUT/time.txt"
