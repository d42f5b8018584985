#!/usr/bin/env bash
# Release archives of `lien` for Linux, their sha256 files, and the krew manifest naming them.
#
#   scripts/release.sh                       # amd64 and arm64 into dist/, writes deploy/krew/lien.yaml
#   scripts/release.sh --arch amd64 --out /tmp/d --krew /tmp/d/lien.yaml
#   scripts/release.sh --krew-only --out dist # the krew manifest and SHA256SUMS from archives
#                                             # built already (one per runner, in the workflow)
#
# Each archive, dist/lien-v<version>-linux-<arch>.tar.gz, holds `lien` (krew links it as
# `kubectl-lien`), LICENSE and README.md; dist/<archive>.sha256 is `sha256sum`'s line for it,
# and dist/SHA256SUMS lists every archive. The binary is static (`--libc musl`, the default:
# Rust's `*-unknown-linux-musl` targets link musl in, so it runs on any Linux and on an image
# with no libc at all); `--libc gnu` builds against the machine's glibc instead, for a machine
# without the musl target. It is built as the Dockerfile and the tests build it: the crate
# `lien`, default features, `--locked`, `--release` (tests/release.rs holds them to one command).
# `LIEN_RELEASE_URL` is where the krew manifest says the archives are (default: a placeholder).
# `LIEN_IMAGE_REPOSITORY`, if set, is the registry the release's image is pushed to: the binary
# then defaults `lien manifests --image` (and the chart's `image`) to `<it>:<version>`.
# The archives are reproducible for one toolchain and checkout (sorted entries, fixed mtime and
# owner, gzip without a name or time). Every architecture asked for must build, or nothing is
# written to the krew manifest: it never names a checksum this run did not compute.
set -euo pipefail
cd "$(dirname "$0")/.."
out=dist
krew=deploy/krew/lien.yaml
libc=musl
build=1
arches=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --arch) arches+=("${2:?--arch needs amd64 or arm64}"); shift 2 ;;
    --out) out="${2:?--out needs a directory}"; shift 2 ;;
    --krew) krew="${2:?--krew needs a file}"; shift 2 ;;
    --libc) libc="${2:?--libc needs musl or gnu}"; shift 2 ;;
    --krew-only) build=0; shift ;;
    *) echo "release.sh: unknown argument $1 (--arch amd64|arm64, --out DIR, --krew FILE, --libc musl|gnu, --krew-only)" >&2; exit 2 ;;
  esac
done
[[ "$libc" == musl || "$libc" == gnu ]] || { echo "release.sh: --libc is musl or gnu, not $libc" >&2; exit 2; }
[[ ${#arches[@]} -gt 0 ]] || arches=(amd64 arm64)
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)"
[[ -n "$version" ]] || { echo "release.sh: no version in Cargo.toml's [workspace.package]" >&2; exit 1; }
tag="v$version"
# Where the release's files are downloaded from (the release workflow: https://github.com/OWNER/REPO).
home="${LIEN_RELEASE_URL:-https://example.invalid/lien}"

triple_of() {
  case "$1" in
    amd64) echo "x86_64-unknown-linux-$libc" ;;
    arm64) echo "aarch64-unknown-linux-$libc" ;;
    *) echo "release.sh: unknown architecture $1 (amd64 or arm64)" >&2; return 1 ;;
  esac
}

host_arch() {
  case "$(uname -m)" in x86_64) echo amd64 ;; aarch64) echo arm64 ;; *) uname -m ;; esac
}

# The line tables (profile.release debug = "line-tables-only") are four fifths of the binary:
# archives and the image drop them and keep the symbols, so a panic's backtrace still names
# functions.
strip_of() {
  if [[ "$1" == arm64 && "$(uname -m)" != aarch64 ]]; then echo aarch64-linux-gnu-strip; else echo strip; fi
}

# Refuse up front, before any build, naming what is missing for which architecture.
for arch in "${arches[@]}"; do
  [[ $build == 1 ]] || break
  triple="$(triple_of "$arch")"
  if command -v rustup >/dev/null 2>&1 && ! rustup target list --installed | grep -qx "$triple"; then
    echo "release.sh: cannot build linux-$arch: the Rust standard library for $triple is not installed." >&2
    echo "  Run 'rustup target add $triple' (it downloads from rustup's servers; where they cannot be" >&2
    echo "  reached, pass --libc gnu for a glibc build of the machine's own architecture)." >&2
    exit 1
  fi
  if [[ "$arch" == arm64 && "$(uname -m)" != aarch64 ]] && ! command -v aarch64-linux-gnu-gcc >/dev/null 2>&1; then
    echo "release.sh: cannot link linux-arm64: no aarch64-linux-gnu-gcc (apt-get install gcc-aarch64-linux-gnu)." >&2
    exit 1
  fi
  if [[ "$libc" == musl && "$arch" == "$(host_arch)" ]] && ! command -v musl-gcc >/dev/null 2>&1; then
    echo "release.sh: cannot build static linux-$arch: no musl-gcc for ring's C code (apt-get install musl-tools), or pass --libc gnu." >&2
    exit 1
  fi
  if ! command -v "$(strip_of "$arch")" >/dev/null 2>&1; then
    echo "release.sh: no $(strip_of "$arch") for linux-$arch (apt-get install binutils${arch/amd64/}${arch/arm64/-aarch64-linux-gnu})." >&2
    exit 1
  fi
done

mkdir -p "$out"
target_dir="${CARGO_TARGET_DIR:-$PWD/target}"
for arch in "${arches[@]}"; do
  [[ $build == 1 ]] || break
  triple="$(triple_of "$arch")"
  if [[ "$arch" == arm64 && "$(uname -m)" != aarch64 ]]; then
    export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
    export CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc
    export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_LINKER=aarch64-linux-gnu-gcc
    export CC_aarch64_unknown_linux_musl=aarch64-linux-gnu-gcc
  fi
  echo "== building linux-$arch ($triple)" >&2
  cargo build --release --locked -p lien --target "$triple"
  stage="$(mktemp -d)"
  cp "$target_dir/$triple/release/lien" "$stage/lien"
  "$(strip_of "$arch")" --strip-debug "$stage/lien"
  cp LICENSE README.md "$stage/"
  archive="lien-$tag-linux-$arch.tar.gz"
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$stage" -cf - lien LICENSE README.md \
    | gzip -n -9 > "$out/$archive"
  rm -rf "$stage"
  (cd "$out" && sha256sum "$archive" > "$archive.sha256")
  echo "$out/$archive $(cut -d' ' -f1 < "$out/$archive.sha256")" >&2
done

for arch in "${arches[@]}"; do
  [[ -f "$out/lien-$tag-linux-$arch.tar.gz.sha256" ]] || {
    echo "release.sh: no $out/lien-$tag-linux-$arch.tar.gz.sha256 (build it first, or leave --krew-only out)" >&2
    exit 1
  }
  (cd "$out" && sha256sum -c --quiet "lien-$tag-linux-$arch.tar.gz.sha256")
done
(cd "$out" && cat lien-"$tag"-linux-*.tar.gz.sha256 > SHA256SUMS)

# The krew manifest (https://krew.sigs.k8s.io/docs/developer-guide/plugin-manifest/), for the
# archives just built: uploaded as lien-<tag>-linux-<arch>.tar.gz beside the release.
{
  cat <<YAML
# krew plugin manifest for \`kubectl lien\`, written by scripts/release.sh for $tag from the archives
# it built (each sha256 below is that of the archive it names; 'scripts/release.sh' writes it anew).
apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: lien
spec:
  version: "$tag"
  homepage: $home
  shortDescription: Why is this object blocked, its use graph, a safe deletion order
  description: |
    Lien makes deletion safe: an object in use (declared by Usages, ClusterUsages and
    DependencyRules) cannot be deleted first. This plugin answers what a refused delete leaves
    open:
      kubectl lien why configmap/settings -n shop   # who holds it, through which Usage or rule
      kubectl lien graph -n shop -o svg > g.svg     # the "X is used by Y" graph (dot, mermaid, svg, json)
      kubectl lien plan -n shop --all --apply --skip-held
                                                    # delete in a safe order, step by step, after [y/N];
                                                    # leave what a protection keeps
    It reads through your kubeconfig and permissions; Lien must be installed in the cluster.
  caveats: |
    Lien itself must run in the cluster (\`lien manifests | kubectl apply -f -\`); without its CRDs
    the plugin says so and exits non-zero.
  platforms:
YAML
  for arch in "${arches[@]}"; do
    archive="lien-$tag-linux-$arch.tar.gz"
    cat <<YAML
    - selector:
        matchLabels: {os: linux, arch: $arch}
      uri: $home/releases/download/$tag/$archive
      sha256: $(cut -d' ' -f1 < "$out/$archive.sha256")
      bin: lien
YAML
  done
} > "$krew.tmp"
mv "$krew.tmp" "$krew"
echo "wrote $krew" >&2
