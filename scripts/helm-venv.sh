#!/usr/bin/env bash
# Makes (once) the Python virtual environment that renders deploy/helm/lien with Helm's own
# engine, and prints its python. No `helm` binary can be installed on this project's machines
# (Debian bookworm has no helm package; only crates.io, PyPI, Debian's and npm's registries are
# reachable), so the chart is rendered by helm-python-sdk from PyPI: ctypes bindings to
# libhelm_c, a C ABI over Helm's Go SDK (v4.2.3 for 0.2.2) shipped in the wheel — the same
# template engine, values merging and values.schema.json validation as `helm template`.
#   scripts/helm-venv.sh            # -> <workspace>/target/helm-venv/bin/python
# Safe to run from several processes at once (a lock), and a no-op once made.
set -euo pipefail
cd "$(dirname "$0")/.."
pin="helm-python-sdk==0.2.2"
venv="${LIEN_HELM_VENV:-$PWD/target/helm-venv}"
mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
flock 9
if [[ ! -f "$venv/.pinned" || "$(cat "$venv/.pinned")" != "$pin" ]]; then
  rm -rf "$venv"
  python3 -m venv "$venv" >&2
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$pin" >&2
  echo "$pin" > "$venv/.pinned"
fi
echo "$venv/bin/python"
