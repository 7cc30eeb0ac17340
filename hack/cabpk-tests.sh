#!/usr/bin/env bash
# Runs Cluster API's own tests of the kubeadm bootstrap provider (CABPK),
# the packages ./bootstrap/kubeadm/... of Cluster API $CAPI_VERSION, twice:
# as released, then with docs/cabpk.patch (CABPK taking its init lock
# through pkg/initlock, with the patch's changes to those tests). The source
# is the module hack/capi pins, from the module cache; the library is this
# work tree's pkg/initlock. envtest's control plane is hack/kube.sh's.
#
# Both runs use one folder at a fixed path in the cache, so that the Go
# build cache serves the packages the patch does not change, and later
# runs; one run at a time holds it. Each run compiles the test binaries
# first (timed apart from the tests), then runs the tests with -count=1.
# Prints, per run, the packages and the tests (subtests included) that
# passed, failed and were skipped; the full output is kept in the cache
# folder (upstream.log, patched.log). Fails when a test fails in either run.
#
# A heavy build: on a shared machine run it under flock /tmp/heavy.lock.
set -euo pipefail

CAPI_VERSION=v1.14.2
PKGS=./bootstrap/kubeadm/...
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
name=cabpk-tests
work="${XDG_CACHE_HOME:-$HOME/.cache}/initlock/cabpk-tests"
# shellcheck source=hack/lib.sh
. "$here/lib.sh"

assets=$("$here/kube.sh" 2>/dev/null)
mkdir -p "$work"
exec 9>"$work/.lock"
flock 9

# count LOG WHAT: the tests, and their subtests, of LOG (go test -v) that
# ended with WHAT (PASS, FAIL or SKIP).
count() { echo "$(grep -cE -- "^--- $2: " "$1") tests and $(grep -cE -- "^ +--- $2: " "$1") subtests"; }

failed=0
for run in upstream patched; do
  tree="$work/cluster-api"
  if [ "$run" = upstream ]; then
    capi_tree "$tree"
  else
    capi_tree "$tree" "$root/docs/cabpk.patch"
  fi
  start=$(date +%s)
  log "$run: compiling the test binaries of $PKGS"
  (cd "$tree" && GOFLAGS=-mod=mod GOWORK=off go test -c -o "$work/bin-$run/" $PKGS)
  compiled=$(date +%s)
  log "$run: compiled in $((compiled - start))s; running the tests"
  rc=0
  (cd "$tree" && KUBEBUILDER_ASSETS="$assets" GOFLAGS=-mod=mod GOWORK=off go test -count=1 -timeout=20m -v $PKGS) >"$work/$run.log" 2>&1 || rc=$?
  rm -rf "$work/bin-$run"
  pkgs=$(grep -cE '^(ok|FAIL)[[:space:]]+sigs\.k8s\.io/' "$work/$run.log" || true)
  log "$run: $pkgs packages in $(($(date +%s) - compiled))s; passed: $(count "$work/$run.log" PASS);" \
    "failed: $(count "$work/$run.log" FAIL); skipped: $(count "$work/$run.log" SKIP) (log: $work/$run.log)"
  if [ "$rc" -ne 0 ]; then
    grep -E -- '^(--- FAIL|FAIL|panic:)|^ +--- FAIL' "$work/$run.log" >&2 || true
    log "$run: FAILED"
    failed=1
  fi
done
exit "$failed"
