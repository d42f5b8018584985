#!/usr/bin/env bash
# Load benchmarks of the sandbox API server (docs/benchmarks.md, "Sandbox API server").
# Needs oha (`cargo install oha --locked`) and a release build (`cargo build --release -p lien`).
# Every run is bounded in time; all traffic goes to 127.0.0.1.
set -euo pipefail
LIEN=${LIEN:-/work/target/release/lien}
DUR=${DUR:-20s}
work=$(mktemp -d)
stop() { kill -INT $(pgrep -P "$pid") 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
trap 'stop; rm -rf "$work"' EXIT

/usr/bin/time -v -o "$work/time.txt" "$LIEN" sandbox --port 0 --kubeconfig "$work/kubeconfig" 2>"$work/sandbox.log" &
pid=$!
for _ in $(seq 100); do [ -s "$work/kubeconfig" ] && break; sleep 0.1; done
# The kubeconfig is JSON: the server URL, the CA and the admin's token.
read -r URL TOKEN < <(python3 -c 'import json,sys; k=json.load(open(sys.argv[1])); print(k["clusters"][0]["cluster"]["server"], k["users"][0]["user"]["token"])' "$work/kubeconfig")
python3 -c 'import json,sys,base64; k=json.load(open(sys.argv[1])); sys.stdout.write(base64.b64decode(k["clusters"][0]["cluster"]["certificate-authority-data"]).decode())' "$work/kubeconfig" >"$work/ca.pem"
AUTH="Authorization: Bearer $TOKEN"
c() { curl -sS --fail --cacert "$work/ca.pem" -H "$AUTH" -H 'Content-Type: application/json' "$@" >/dev/null; }

c -X POST "$URL/api/v1/namespaces" -d '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"bench"}}'
for i in $(seq 1 100); do
  c -X POST "$URL/api/v1/namespaces/bench/configmaps" \
    -d "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"cm-$i\",\"labels\":{\"app\":\"bench\"}},\"data\":{\"key\":\"value-$i\",\"other\":\"some text of a realistic size for a small configmap\"}}"
done

run() { echo "== oha $*"; oha --no-tui --cacert "$work/ca.pem" -H "$AUTH" "$@"; }
ONE="$URL/api/v1/namespaces/bench/configmaps/cm-1"
LIST="$URL/api/v1/namespaces/bench/configmaps"
echo "== machine: $(nproc) cores, $(date -u +%FT%TZ), load before: $(cut -d' ' -f1-3 /proc/loadavg)"
run -z "$DUR" -c 50 "$ONE"                                   # saturation, GET one object
run -z "$DUR" -c 50 "$LIST"                                  # saturation, list of 100
run -z "$DUR" -c 50 -q 5000 --latency-correction "$ONE"      # constant 5,000 req/s
run -z "$DUR" -c 10 -q 500 --latency-correction "$LIST"      # constant 500 lists/s
# Creates (generateName, so every request makes a new object), bounded in time.
run -z 10s -c 20 -m POST -T application/json \
  -d '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"generateName":"load-"},"data":{"a":"b"}}' \
  "$URL/api/v1/namespaces/bench/configmaps"
stop
echo "== /usr/bin/time -v of the sandbox"
grep -E 'Maximum resident|Elapsed|User time|System time' "$work/time.txt"
