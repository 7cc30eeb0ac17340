#!/usr/bin/env bash
# Builds, or verifies, the control-plane binaries the tests and the demo run:
# etcd, kube-apiserver and kube-controller-manager. They are built from Go
# modules pinned in hack/pins/etcd and hack/pins/kube and kept in a cache
# outside the work tree. A binary is rebuilt only when it is missing or
# reports the wrong version. Prints the folder holding the binaries on its
# last line.
set -euo pipefail

KUBE_VERSION=v1.37.2
ETCD_VERSION=3.7.3
here=$(cd "$(dirname "$0")" && pwd)
dir="${INITLOCK_KUBE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/initlock/kube-${KUBE_VERSION}-etcd-${ETCD_VERSION}}"
mkdir -p "$dir"

name=kube
# shellcheck source=hack/lib.sh
. "$here/lib.sh"

# ok NAME: the binary is present and reports the pinned version.
ok() {
  local bin="$dir/$1" want out
  [ -x "$bin" ] || return 1
  case "$1" in
    etcd) want="etcd Version: ${ETCD_VERSION}" ;;
    *) want="Kubernetes ${KUBE_VERSION}" ;;
  esac
  # Read the whole output: cutting it off with head would kill the binary
  # with SIGPIPE, which pipefail then reports as a failure.
  out=$("$bin" --version 2>/dev/null) || return 1
  [ "${out%%$'\n'*}" = "$want" ]
}

if ! ok etcd; then
  log "building etcd ${ETCD_VERSION} into $dir (about 55 s on a cold cache)"
  build pins/etcd "-s -w" go.etcd.io/etcd/server/v3
  mv "$dir/server" "$dir/etcd" # the package at the module root is named after its folder
  ok etcd || { log "etcd reports the wrong version"; exit 1; }
fi

if ! ok kube-apiserver || ! ok kube-controller-manager; then
  log "building kube-apiserver and kube-controller-manager ${KUBE_VERSION} into $dir"
  log "a cold build takes about 5.5 minutes and 2.6 GB of memory on 2 cores; later runs reuse the binaries"
  minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
  vf=""
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    vf="$vf -X $p.gitVersion=${KUBE_VERSION} -X $p.gitMajor=1 -X $p.gitMinor=${minor} -X $p.gitTreeState=clean"
  done
  build pins/kube "-s -w$vf" k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager
  for b in kube-apiserver kube-controller-manager; do
    ok "$b" || { log "$b reports the wrong version: $("$dir/$b" --version 2>&1 | head -n 1)"; exit 1; }
  done
fi

log "etcd ${ETCD_VERSION}, kube-apiserver and kube-controller-manager ${KUBE_VERSION} ready"
echo "$dir"
