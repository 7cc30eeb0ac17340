#!/usr/bin/env bash
# Builds, or verifies, the third-party binaries that make test-real and make
# demo-real run beside the control plane of hack/kube.sh:
#   velero                          Velero server and CLI     (hack/pins/velero)
#   velero-plugin-for-aws           Velero's AWS object-store plugin (hack/pins/velero-aws)
#   s3-server                       our S3 endpoint over gofakes3 (hack/s3)
#   capi-kubeadm-bootstrap-manager  Cluster API's kubeadm bootstrap provider, CABPK (hack/capi)
#   capi-manager                    Cluster API's core manager (hack/capi)
# They are built from the Go modules pinned in those folders, one at a time
# to bound the memory used, into a cache outside the work tree. A binary is
# rebuilt only when it is missing or its stamp (version and a hash of the
# contents of its module's go.mod and go.sum, and of the sources for
# s3-server, never of their paths) differs.
# Prints the folder holding the binaries on its last line.
set -euo pipefail

VELERO_VERSION=v1.18.3
VELERO_AWS_VERSION=v1.14.3
CAPI_VERSION=v1.14.2
here=$(cd "$(dirname "$0")" && pwd)
dir="${INITLOCK_STACK_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/initlock/stack}"
name=stack
mkdir -p "$dir"
# shellcheck source=hack/lib.sh
. "$here/lib.sh"

# key MODULE VERSION [FILE...]: what a binary's stamp must hold.
key() {
  local mod=$1 version=$2; shift 2
  local files=("$here/$mod/go.mod" "$here/$mod/go.sum")
  for f in "$@"; do files+=("$here/$mod/$f"); done
  printf '%s %s\n' "$version" "$(cat "${files[@]}" | sha256sum | cut -d' ' -f1)"
}

# ok BIN KEY: the binary is present and was built from KEY.
ok() {
  [ -x "$dir/$1" ] && [ -f "$dir/.$1.stamp" ] && [ "$(cat "$dir/.$1.stamp")" = "$2" ]
}

stamp() { printf '%s\n' "$2" > "$dir/.$1.stamp"; }

# one BIN MODULE VERSION PKG LDFLAGS NOTE [FILE...]: build BIN unless it is
# up to date.
one() {
  local bin=$1 mod=$2 version=$3 pkg=$4 ldflags=$5 note=$6; shift 6
  local k out
  k=$(key "$mod" "$version" "$@")
  if ok "$bin" "$k"; then
    return
  fi
  log "building $bin $version into $dir ($note)"
  build "$mod" "-s -w $ldflags" "$pkg"
  out=${pkg##*/}
  [ "$pkg" = . ] && out=${mod##*/}
  if [ "$out" != "$bin" ]; then
    mv "$dir/$out" "$dir/$bin"
  fi
  stamp "$bin" "$k"
}

one s3-server s3 "gofakes3-v1.2.0" . "" "seconds cold" main.go
one capi-kubeadm-bootstrap-manager capi "$CAPI_VERSION" sigs.k8s.io/cluster-api/bootstrap/kubeadm \
  "-X sigs.k8s.io/cluster-api/version.gitVersion=$CAPI_VERSION" "about 1.5 minutes cold"
one capi-manager capi "$CAPI_VERSION" sigs.k8s.io/cluster-api/core \
  "-X sigs.k8s.io/cluster-api/version.gitVersion=$CAPI_VERSION" "about 20 s after CABPK"
one velero pins/velero "$VELERO_VERSION" github.com/vmware-tanzu/velero/cmd/velero \
  "-X github.com/vmware-tanzu/velero/pkg/buildinfo.Version=$VELERO_VERSION" "about 3 minutes cold"
one velero-plugin-for-aws pins/velero-aws "$VELERO_AWS_VERSION" github.com/vmware-tanzu/velero-plugin-for-aws/velero-plugin-for-aws \
  "" "about 2 minutes cold; its link alone takes 3.5 GB of memory"

log "velero ${VELERO_VERSION}, velero-plugin-for-aws ${VELERO_AWS_VERSION}, s3-server, CABPK and core ${CAPI_VERSION} ready"
echo "$dir"
