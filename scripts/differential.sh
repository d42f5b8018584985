#!/usr/bin/env bash
# The sandbox measured against kube-apiserver v1.32.13, request by request (docs/sandbox.md,
# "Measured against kube-apiserver"): every case of tests/differential/cases/ on a fresh
# `lien sandbox` and a fresh real control plane, compared; prints `N of M cases identical`.
#
#   scripts/differential.sh                  # build lien if needed, run, report
#   scripts/differential.sh --only 'crd'     # the cases whose id matches
#   scripts/differential.sh --write-docs     # also rewrite docs/sandbox.md's generated section
#   scripts/differential.sh --check-docs     # CI: fail if that section is not this run's
#   scripts/differential.sh --rejudge --write-docs   # no run: the last run's differences judged
#                                            # again against known.yaml (after editing it)
#
# Exits non-zero when a difference is not explained in tests/differential/known.yaml, an
# explanation explains nothing any more, or a status code differs. Needs kubectl, python3 with
# venv, and the real control plane (built here on first use: scripts/control-plane.sh build).
# LIEN=/path/to/lien runs that binary instead of building one.
set -euo pipefail
cd "$(dirname "$0")/.."
target="${CARGO_TARGET_DIR:-$PWD/target}"

# The runner's Python environment: pinned, made once, remade when the pins change.
venv="${LIEN_DIFFERENTIAL_VENV:-$target/differential-venv}"
requirements=tools/differential/requirements.txt
mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
flock 9
if [[ ! -f "$venv/.pinned" ]] || ! cmp -s "$venv/.pinned" "$requirements"; then
  rm -rf "$venv"
  python3 -m venv "$venv" >&2
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps -r "$requirements" >&2
  cp "$requirements" "$venv/.pinned"
fi
exec 9>&-

rejudge=false
for arg in "$@"; do [[ "$arg" == --rejudge ]] && rejudge=true; done
if $rejudge; then
  exec "$venv/bin/python" tools/differential/differential.py --out "$target/differential" "$@"
fi

bash scripts/control-plane.sh build >/dev/null

if [[ -z "${LIEN:-}" ]]; then
  # The workspace's debug build, as the tests use it (`--workspace`: building one package alone
  # would unify features differently and rebuild dependencies).
  cargo build --workspace --bins --quiet --locked
  LIEN="$target/debug/lien"
fi

exec "$venv/bin/python" tools/differential/differential.py --lien "$LIEN" --out "$target/differential" "$@"
