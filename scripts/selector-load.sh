#!/bin/bash
# One selector Usage over N ConfigMaps, then a new Usage (issue 28; docs/benchmarks.md "A
# selector Usage over many objects"): a fresh sandbox, then examples/selector_load, which starts
# `lien run` under /usr/bin/time -v itself and prints the time until the new Usage is enforced,
# the webhook's p99 idle and during the resolution, and the floor (/healthz) beside it.
# Usage: [CARGO_TARGET_DIR=DIR] scripts/selector-load.sh OBJECTS [pinned]
#   pinned: the sandbox (the API server) on core 0, Lien and the generator on core 1, as if the
#   API server ran on another machine.
set -euo pipefail
OBJECTS=${1:?how many ConfigMaps the selector matches}
BIN=${CARGO_TARGET_DIR:-target}/release
WEBHOOK_PORT=${WEBHOOK_PORT:-28443}
SERVER=() CLIENT=()
if [ "${2:-}" = pinned ]; then SERVER=(taskset -c 0) CLIENT=(taskset -c 1); fi
DIR=$(mktemp -d)
trap 'kill "$SANDBOX" 2>/dev/null || true; rm -rf "$DIR"' EXIT
"${SERVER[@]}" "$BIN/lien" sandbox --no-lien --port 0 --kubeconfig "$DIR/kubeconfig" \
    --service "lien-system/lien-webhook=127.0.0.1:$WEBHOOK_PORT" > "$DIR/sandbox.log" 2>&1 &
SANDBOX=$!
for _ in $(seq 100); do [ -s "$DIR/kubeconfig" ] && break; sleep 0.1; done
"${CLIENT[@]}" "$BIN/examples/selector_load" --kubeconfig "$DIR/kubeconfig" \
    --lien "$BIN/lien" --webhook-addr "127.0.0.1:$WEBHOOK_PORT" --objects "$OBJECTS"
