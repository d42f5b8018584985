#!/usr/bin/env bash
# A real Kubernetes control plane for tests: etcd, kube-apiserver and kube-controller-manager as
# plain processes on 127.0.0.1 (no containers, kubelet or scheduler). See docs/testing.md.
#
#   scripts/control-plane.sh build
#       Builds the pinned versions from the Go module proxy, once, into a cache outside the
#       checkout (${XDG_CACHE_HOME:-$HOME/.cache}/lien/control-plane/k8s-<v>-etcd-<v>/); a no-op
#       when cached. Prints the versions and how long it took.
#   scripts/control-plane.sh start [--no-admission-client-cert] [--data-dir DIR]
#                                  [--service-cluster-ip-range CIDR] [--controllers LIST]
#       Builds if needed, then runs one control plane: prints a JSON line (kubeconfig, server,
#       admission client CA, data dir, pids) once ready, and stops everything on Ctrl-C, SIGTERM,
#       or end of file on stdin when stdin is a pipe.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
tools="$root/tools/control-plane"
# The one place the versions are pinned is the build modules' go.mod files.
k8s_version=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ { print $2; exit }' "$tools/kubernetes/go.mod")
etcd_version=$(awk '$1 == "go.etcd.io/etcd/server/v3" && $2 ~ /^v/ { print $2; exit }' "$tools/etcd/go.mod")
cache_root="${XDG_CACHE_HOME:-$HOME/.cache}/lien/control-plane"
bin_dir="$cache_root/k8s-$k8s_version-etcd-$etcd_version/bin"
# The launcher is this repository's code and changes with it: keyed by its sources' hash.
launcher_hash=$(cat "$tools/launcher/go.mod" "$tools/launcher"/*.go | sha256sum | cut -c1-16)
launcher="$cache_root/launcher-$launcher_hash/lien-control-plane"

# Only the Go toolchain on the machine (no download of another), modules from the proxy only,
# and the versions the committed go.sum files pin.
export GOTOOLCHAIN=local GOFLAGS=-mod=readonly

log() { echo "control-plane: $*" >&2; }

build_components() {
  local out="$bin_dir.tmp.$$" started=$SECONDS
  rm -rf "$out"
  mkdir -p "$out"
  log "building kube-apiserver and kube-controller-manager $k8s_version, etcd $etcd_version (first time only: ~10 min of CPU, 12-22 min measured on a busy 2-core machine)"
  # As Kubernetes' own release build stamps them: /version and `kubectl version` show the
  # release, and the binaries carry no paths of this machine.
  local pkg=k8s.io/component-base/version client=k8s.io/client-go/pkg/version minor=${k8s_version#v1.}
  minor=${minor%%.*}
  local stamp="" p
  for p in $pkg $client; do
    stamp+=" -X $p.gitVersion=$k8s_version -X $p.gitMajor=1 -X $p.gitMinor=$minor"
    stamp+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  (cd "$tools/kubernetes" &&
    go build -trimpath -ldflags "-s -w$stamp" -o "$out/" \
      k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager)
  (cd "$tools/etcd" && go build -trimpath -ldflags "-s -w" -o "$out/etcd" go.etcd.io/etcd/server/v3)
  # Whole or not at all: a build killed halfway leaves only the .tmp directory behind.
  rm -rf "$bin_dir"
  mv "$out" "$bin_dir"
  log "built in $((SECONDS - started)) s into $bin_dir"
}

build_launcher() {
  local out="$launcher.tmp.$$"
  mkdir -p "$(dirname "$launcher")"
  (cd "$tools/launcher" && go build -trimpath -o "$out" .)
  mv "$out" "$launcher"
  # Earlier sources' launchers (10 MB each) go; a checkout still using one rebuilds it in
  # seconds, and a running one keeps running.
  find "$cache_root" -maxdepth 1 -name 'launcher-*' ! -name "launcher-$launcher_hash" -exec rm -rf {} +
}

# Builds what is missing. Two test processes may get here at once on a fresh machine: the lock
# makes the second wait for the first's build and then find it done.
ensure_built() {
  if [[ -x "$bin_dir/kube-apiserver" && -x "$launcher" ]]; then
    return
  fi
  mkdir -p "$cache_root"
  exec 9>"$cache_root/.lock"
  if ! flock -n 9; then
    log "waiting for another build to finish (lock $cache_root/.lock)"
    flock 9
  fi
  [[ -x "$bin_dir/kube-apiserver" ]] || build_components
  [[ -x "$launcher" ]] || build_launcher
  exec 9>&-
}

main() {
  local cmd=${1:-} started=$SECONDS
  [[ $# -gt 0 ]] && shift
  case "$cmd" in
    build)
      ensure_built
      echo "control plane: kube-apiserver and kube-controller-manager $k8s_version, etcd $etcd_version ($(go version | cut -d' ' -f3))"
      echo "control plane: ready in $bin_dir ($((SECONDS - started)) s)"
      ;;
    start)
      ensure_built
      exec "$launcher" --bin-dir "$bin_dir" "$@"
      ;;
    *)
      echo "usage: $0 build | start [--no-admission-client-cert] [--data-dir DIR] [--service-cluster-ip-range CIDR] [--controllers LIST]" >&2
      exit 2
      ;;
  esac
}

# bash reads a script as it runs it: a build lasts many minutes, and a checkout that changes this
# file meanwhile (a rebase, a pull) would have bash go on reading the new text at the old offset
# (it once failed "syntax error near unexpected token `in'"). Everything above is definitions;
# this one line runs them, read whole before anything starts.
main "$@"; exit
