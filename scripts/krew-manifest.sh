#!/usr/bin/env bash
# Renders deploy/krew/lien.yaml for a release: every {{addURIAndSha "URI" .TagName}} becomes
# `uri: URI` and `sha256: <sha256 of dist/<file name of URI>>`, every {{ .TagName }} the tag.
# Refuses when an archive is missing, so a manifest never names a checksum it did not compute.
#   scripts/krew-manifest.sh v0.1.0 dist/ > lien-krew.yaml
set -euo pipefail
tag="${1:?usage: krew-manifest.sh TAG DIST_DIR}"
dist="${2:?usage: krew-manifest.sh TAG DIST_DIR}"
template="$(dirname "$0")/../deploy/krew/lien.yaml"
while IFS= read -r line; do
  if [[ "$line" =~ ^([[:space:]]*)\{\{addURIAndSha\ \"(.*)\"\ \.TagName\ \}\}$ ]]; then
    indent="${BASH_REMATCH[1]}"
    uri="${BASH_REMATCH[2]//\{\{ .TagName \}\}/$tag}"
    archive="$dist/${uri##*/}"
    [[ -f "$archive" ]] || { echo "krew-manifest: $archive is missing" >&2; exit 1; }
    sha="$(sha256sum "$archive" | cut -d' ' -f1)"
    printf '%suri: %s\n%ssha256: %s\n' "$indent" "$uri" "$indent" "$sha"
  else
    printf '%s\n' "${line//\{\{ .TagName \}\}/$tag}"
  fi
done < "$template"
