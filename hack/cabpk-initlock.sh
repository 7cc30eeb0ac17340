#!/usr/bin/env bash
# Usage: hack/cabpk-initlock.sh [PATCH]
#
# Builds, or verifies, CABPK v1.14.2 with a patch of docs/ applied:
# docs/cabpk.patch by default, the kubeadm bootstrap provider taking its
# init lock through pkg/initlock/locking when started with
# --feature-gates=KubeadmBootstrapRestoreSafeInitLock=true (as test/real
# starts it), upstream's mutex otherwise; or docs/cabpk-minimal.patch,
# CABPK's own mutex fixed in place. The source is Cluster API's module as
# hack/capi pins it, copied from the module cache; the full patch's go.mod
# line names a release of the library, which is replaced here by this work
# tree's pkg/initlock. The binary goes into a cache outside the work tree,
# in a folder of the patch's name keyed by the hash of the patch and of the
# library's module (go.mod, go.sum and sources), and is reused while both
# are unchanged. The build runs under flock /tmp/initlock-heavy.lock, like
# every heavy build on the machine. Prints the binary's path on its last
# line.
set -euo pipefail

CAPI_VERSION=v1.14.2
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
name=cabpk-initlock
patch=${1:-docs/cabpk.patch}
bin=capi-kubeadm-bootstrap-manager
# shellcheck source=hack/lib.sh
. "$here/lib.sh"
if [ ! -f "$root/$patch" ]; then
  log "$patch: no such patch in the work tree"
  exit 1
fi
patchname=$(basename "$patch" .patch)
cache="${XDG_CACHE_HOME:-$HOME/.cache}/initlock/cabpk-initlock/$patchname"

key=$( (cat "$root/$patch"; cd "$root/pkg/initlock" && git ls-files -co --exclude-standard -- go.mod go.sum '*.go' ':!:*_test.go' | LC_ALL=C sort | xargs cat) | sha256sum | cut -c1-16)
out="$cache/$key"
if [ -x "$out/$bin" ]; then
  echo "$out/$bin"
  exit 0
fi
mkdir -p "$cache"

tmp=$(mktemp -d "$cache/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
capi_tree "$tmp/cluster-api" "$root/$patch"
cd "$tmp/cluster-api"
log "building CABPK $CAPI_VERSION with $patch into $out (about 5 minutes and 1 GB cold, waiting for other heavy builds first)"
start=$(date +%s)
timer=()
if [ -x /usr/bin/time ]; then
  timer=(/usr/bin/time -f '%M' -o "$tmp/.time")
fi
mkdir -p "$tmp/bin"
# Built as hack/lib.sh builds (static, without -trimpath), so that its
# dependencies are compiled once for every build and test of Cluster API.
if ! flock /tmp/initlock-heavy.lock env CGO_ENABLED=0 GOFLAGS=-mod=mod GOWORK=off "${timer[@]}" go build \
  -ldflags "-s -w -X sigs.k8s.io/cluster-api/version.gitVersion=$CAPI_VERSION-initlock" -o "$tmp/bin/$bin" ./bootstrap/kubeadm; then
  log "build failed"
  exit 1
fi
peak=""
if [ -s "$tmp/.time" ]; then
  peak=", peak RSS $(( $(tail -n 1 "$tmp/.time") / 1024 )) MB"
fi
mkdir -p "$out.tmp"
mv "$tmp/bin/$bin" "$out.tmp/$bin"
rm -rf "$out"
mv "$out.tmp" "$out"
# Binaries of earlier patches or library versions are not used again.
for d in "$cache"/*/; do
  d=${d%/}
  if [ "${d##*/}" != "$key" ]; then
    rm -rf "$d"
  fi
done
log "done in $(( $(date +%s) - start ))s$peak (including the wait for the lock)"
echo "$out/$bin"
