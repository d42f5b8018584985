#!/usr/bin/env bash
# The README's test command: what a fresh machine of this project's kind lacks, then the whole
# suite. Extra arguments go to cargo nextest (e.g. `--locked --no-fail-fast`, `-E 'test(gc)'`).
#
# - cargo-nextest, if missing (it is not on every machine).
# - The real Kubernetes control plane the control-plane tests start (scripts/control-plane.sh
#   build: built once from the Go module proxy into a cache outside the checkout; ~10 CPU-minutes
#   the first time, nothing afterwards). Built here, before the suite, so that its time is not
#   spent inside a test's deadline.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! cargo nextest --version >/dev/null 2>&1; then
  cargo install cargo-nextest --locked
fi
bash scripts/control-plane.sh build
exec cargo nextest run --workspace "$@"
