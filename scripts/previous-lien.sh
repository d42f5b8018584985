#!/usr/bin/env bash
# The `lien` of the previous version (the commit scripts/previous-version names), built once
# into a cache outside the checkout; prints its path. tests/ha.rs rolls from it to this build
# (LIEN_PREVIOUS_BIN, set by scripts/test.sh): an upgrade between two versions.
#
# The commit's sources come from this repository's history (`git archive`); its own Cargo.lock
# is honoured (`--locked`), so only crates.io is reached. A checkout without that history (a
# shallow clone) says so and prints nothing: the rollout then runs this build to itself.
set -euo pipefail
cd "$(dirname "$0")/.."
commit="$(grep -v '^#' scripts/previous-version | head -1 | tr -d '[:space:]')"
full="$(git rev-parse --verify --quiet "$commit^{commit}" || true)"
if [[ -z "$full" ]]; then
  echo "previous-lien.sh: commit $commit (scripts/previous-version) is not in this checkout's history: no previous version to upgrade from" >&2
  exit 0
fi
cache="${LIEN_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lien/tools}/previous-$full"
if [[ ! -x "$cache/lien" ]]; then
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  mkdir -p "$work/src" "$cache"
  git archive "$full" | tar -x -C "$work/src"
  echo "previous-lien.sh: building lien at ${full:0:12} (once; cached in $cache)" >&2
  # Its own target directory, removed afterwards: the current build's stays untouched.
  (cd "$work/src" && CARGO_TARGET_DIR="$work/target" CARGO_INCREMENTAL=0 \
    cargo build --locked -p lien --bin lien >&2)
  cp "$work/target/debug/lien" "$cache/lien.tmp" && mv "$cache/lien.tmp" "$cache/lien"
fi
echo "$cache/lien"
