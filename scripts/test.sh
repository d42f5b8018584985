#!/usr/bin/env bash
# The README's test command: what a fresh machine of this project's kind lacks, then the whole
# suite against both targets, with the committed lock file and every test run (`--locked
# --no-fail-fast`). Extra arguments go to both cargo nextest runs (e.g. `-E 'test(gc)'`).
#
# - cargo-nextest, if missing (it is not on every machine).
# - The previous version's `lien` (scripts/previous-lien.sh: the commit scripts/previous-version
#   names, built once into a cache outside the checkout), which the rolling-update test upgrades
#   from.
# - The real Kubernetes control plane (scripts/control-plane.sh build: built once from the Go
#   module proxy into a cache outside the checkout; ~10 CPU-minutes the first time, nothing
#   afterwards). Built here, before the suite, so that its time is not spent inside a test's
#   deadline.
# - Then every test against the sandbox (`cargo nextest run --workspace`), and the end-to-end
#   tests again against a real control plane per test (LIEN_E2E_TARGET=real: etcd,
#   kube-apiserver and kube-controller-manager with Lien as `lien run` processes; see
#   docs/testing.md). Both tiers run even if the first fails; the script fails if either did.
set -uo pipefail
cd "$(dirname "$0")/.."
if ! cargo nextest --version >/dev/null 2>&1; then
  cargo install cargo-nextest --locked || exit 1
fi
bash scripts/control-plane.sh build || exit 1
# The previous version's `lien` (scripts/previous-version), which the HA rollout test upgrades
# from; built once, cached like the control plane.
previous="$(bash scripts/previous-lien.sh)" || exit 1
if [[ -n "$previous" ]]; then
  export LIEN_PREVIOUS_BIN="$previous"
fi

status=0
started=$SECONDS
echo "== tests: every test against the sandbox"
cargo nextest run --workspace --locked --no-fail-fast "$@" || status=1
sandbox_took=$((SECONDS - started))

started=$SECONDS
echo "== tests: the end-to-end tests against a real control plane (LIEN_E2E_TARGET=real)"
LIEN_E2E_TARGET=real cargo nextest run --workspace --locked --no-fail-fast \
  --test e2e --test ha --test uninstall --test plugin --test least_privilege --test cert_manager "$@" || status=1
real_took=$((SECONDS - started))

echo "== tests: sandbox tier ${sandbox_took} s, real control plane tier ${real_took} s"
exit "$status"
