#!/usr/bin/env bash
# The Helm chart of a release, packaged, as the release workflow publishes it:
#
#   scripts/release-chart.sh LIEN_BINARY DIST      # writes DIST/lien-<version>.tgz
#
# The chart is written by the release's own binary (`lien manifests --helm-chart`), so its
# values default to that binary's image — the release's, when it was built with
# LIEN_IMAGE_REPOSITORY (scripts/release.sh) — and is then packaged as `helm package` packages
# it: by `helm` where it is installed (the workflow), else by Helm's own Go SDK from PyPI
# (scripts/helm-package.py, in the virtual environment of scripts/helm-venv.sh; CI here).
# The package is rendered once with Helm's engine before it is kept (a chart that does not
# render is not released).
set -euo pipefail
cd "$(dirname "$0")/.."
lien="${1:?usage: release-chart.sh LIEN_BINARY DIST}"
dist="${2:?usage: release-chart.sh LIEN_BINARY DIST}"
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$lien" manifests --helm-chart "$work/lien"
mkdir -p "$dist"
if command -v helm >/dev/null 2>&1; then
  helm lint --strict "$work/lien"
  helm package "$work/lien" --destination "$dist" --version "$version" --app-version "$version"
else
  python="$(bash scripts/helm-venv.sh)"
  "$python" scripts/helm-render.py "$work/lien" --lint >/dev/null
  "$python" scripts/helm-package.py "$work/lien" "$dist" "$version"
fi
test -s "$dist/lien-$version.tgz"
echo "$dist/lien-$version.tgz: image $(sed -n 's/^image: //p' "$work/lien/values.yaml")" >&2
