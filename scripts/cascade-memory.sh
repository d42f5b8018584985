#!/bin/bash
# CascadeRule memory at its bounds (issue 28): the sandbox alone, `lien run` against it under
# /usr/bin/time -v, then examples/cascade_memory; prints Lien's peak RSS.
# Usage: CASCADE_BENCH_DIR=DIR scripts/cascade-memory.sh PARENTS CHILDREN NAME_LENGTH
set -e
cd "${CASCADE_BENCH_DIR:?a directory holding the release lien and cascade_memory binaries}"
API_PORT=${API_PORT:-26543}
WEBHOOK_PORT=${WEBHOOK_PORT:-27543}
rm -f kubeconfig sandbox.log lien.log
./lien sandbox --no-lien --port $API_PORT --kubeconfig $PWD/kubeconfig \
    --service lien-system/lien-webhook=127.0.0.1:$WEBHOOK_PORT > sandbox.log 2>&1 &
SANDBOX=$!
sleep 2
export KUBECONFIG=$PWD/kubeconfig
printf 'apiVersion: v1\nkind: Namespace\nmetadata: {name: lien-system}\n' | kubectl apply -f - >/dev/null
RUST_LOG=${RUST_LOG:-warn} ${LIEN_ENV:-} /usr/bin/time -v ./lien run --install-crds --webhook-addr 127.0.0.1:$WEBHOOK_PORT --no-leader-election > lien.out 2> lien.log &
TIME=$!
sleep 3
LIEN=$(pgrep -n -f "lien run --install-crds --webhook-addr 127.0.0.1:$WEBHOOK_PORT")
# Lien's RSS every second, beside the example's phases.
(while kill -0 $LIEN 2>/dev/null; do echo "$(date +%s) $(ps -o rss= -p $LIEN)"; sleep 1; done) > rss.log &
./cascade_memory "$@" | while read -r line; do echo "$(date +%s) $line"; done
echo "lien run's RSS now: $(ps -o rss= -p $LIEN) KiB"
kill -INT $LIEN
wait $TIME || true
grep -E "Maximum resident" lien.log
kill $SANDBOX
