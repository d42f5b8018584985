#!/bin/bash
# The CascadeRule load benchmark: the sandbox alone, `lien run` against it under /usr/bin/time,
# then examples/cascade_load. Usage: CASCADE_BENCH_DIR=DIR scripts/cascade-bench.sh PARENTS COMPOSED LATENCY_MS
set -e
cd "${CASCADE_BENCH_DIR:?a directory holding the release lien and cascade_load binaries}"
rm -f kubeconfig sandbox.log lien.log
# The sandbox sends the Service's webhook calls (the rules and Usage hooks) to `lien run`.
./lien sandbox --no-lien --port 26443 --kubeconfig $PWD/kubeconfig \
    --service lien-system/lien-webhook=127.0.0.1:27443 > sandbox.log 2>&1 &
SANDBOX=$!
sleep 2
export KUBECONFIG=$PWD/kubeconfig
printf 'apiVersion: v1\nkind: Namespace\nmetadata: {name: lien-system}\n' | kubectl apply -f - >/dev/null
RUST_LOG=${RUST_LOG:-info} /usr/bin/time -v ./lien run --install-crds --webhook-addr 127.0.0.1:27443 --no-leader-election > lien.out 2> lien.log &
TIME=$!
sleep 3
./cascade_load "$@"
sleep 6   # one more "cascade: API requests" log line
LIEN=$(ps -o pid= --ppid $TIME | tr -d ' ')
kill -INT $LIEN
wait $TIME || true
sed 's/\x1b\[[0-9;]*m//g' lien.log | grep "cascade: API requests" | tail -1
grep -E "Maximum resident" lien.log
kill $SANDBOX
