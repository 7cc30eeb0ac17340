#!/usr/bin/env bash
# Runs Cluster API's own tests of the kubeadm bootstrap provider (CABPK),
# the packages ./bootstrap/kubeadm/... of Cluster API $CAPI_VERSION, four
# times: as released (upstream); with docs/cabpk-minimal.patch (minimal:
# CABPK's own mutex re-adopting, taking over and releasing the lock with
# preconditions, with its tests; it must not name this project); and twice
# with docs/cabpk.patch, which puts initlock's mutex behind CABPK's feature
# gate KubeadmBootstrapRestoreSafeInitLock (alpha, off by default):
# gate-off, the gate as it defaults, where CABPK runs upstream's mutex and
# upstream's tests run as released but for the patch's two new tests, which
# enable the gate themselves; and gate-on, the same tree with the gate set
# for the whole test binary by the environment variable
# CAPI_TEST_FEATURE_GATES=KubeadmBootstrapRestoreSafeInitLock=true, which
# the patch has the TestMain of reconcilers/kubeadmconfig read (the package
# whose tests build the reconciler's init lock by the gate). With the gate
# on, those tests run initlock's mutex on initlocktest's fake client and
# log "KubeadmBootstrapRestoreSafeInitLock enabled: the init lock is
# *locking.ControlPlaneInitMutex[...]"; the script requires that line in
# the gate-on run and its absence in the others, and prints its count. The
# source is the module hack/capi pins, from the module cache; the library is
# this work tree's pkg/initlock. envtest's control plane is hack/kube.sh's.
#
# Every run uses one folder at a fixed path in the cache, so that the Go
# build cache serves the packages a patch does not change, and later runs;
# one run at a time holds it. Each run compiles the test binaries first
# (timed apart from the tests), then runs each binary in its package's
# folder, two at a time, as go test -v does (go test would link them all
# again); gate-on runs gate-off's binaries. Prints,
# per run, the packages and the tests (subtests included) that passed,
# failed and were skipped, and the four together at the end; the full
# output is kept in the cache folder (upstream.log, minimal.log,
# gate-off.log, gate-on.log). Fails when a test fails in any run.
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

# The minimal patch is for Cluster API as it is: nothing of this project.
if grep -q initlock "$root/docs/cabpk-minimal.patch"; then
  log "docs/cabpk-minimal.patch names initlock: it must need nothing but Cluster API's own module"
  exit 1
fi

assets=$("$here/kube.sh" 2>/dev/null)
mkdir -p "$work"
exec 9>"$work/.lock"
flock 9

# run_tests TREE BINS LOG: runs the test binary in BINS of each package of
# $PKGS in TREE that has tests, in the package's folder, two at a time, and
# writes their output to LOG as go test -v does: each package's output, then
# its ok or FAIL line. Fails when one fails.
run_tests() {
  local tree=$1 bins=$2 out=$3 pkg dir n=0
  local parts="$out.d"
  rm -rf "$parts" && mkdir -p "$parts"
  while read -r pkg dir; do
    n=$((n + 1))
    if [ "$n" -gt 2 ]; then wait -n || true; fi
    (
      bin="$bins/${pkg##*/}.test" start=$(date +%s.%N) rc=0
      if [ ! -x "$bin" ]; then
        echo "no test binary $bin for $pkg"
        rc=1
      else
        (cd "$dir" && "$bin" -test.paniconexit0 -test.v=true -test.timeout=20m) 2>&1 || rc=$?
      fi
      took=$(echo "$(date +%s.%N) - $start" | bc)
      if [ "$rc" -eq 0 ]; then printf 'ok  \t%s\t%.3fs\n' "$pkg" "$took"; else printf 'FAIL\t%s\t%.3fs\n' "$pkg" "$took"; fi
    ) >"$parts/$(printf '%03d' "$n")" &
  done < <(cd "$tree" && GOFLAGS=-mod=mod GOWORK=off go list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}} {{.Dir}}{{end}}' $PKGS)
  wait
  if [ "$n" -eq 0 ]; then
    echo "FAIL	no package of $PKGS with tests found in $tree" >"$out"
    rm -rf "$parts"
    return 1
  fi
  cat "$parts"/* >"$out"
  rm -rf "$parts"
  ! grep -qE '^FAIL[[:space:]]' "$out"
}

# count LOG WHAT: the tests, and their subtests, of LOG (go test -v) that
# ended with WHAT (PASS, FAIL or SKIP).
count() { echo "$(grep -cE -- "^--- $2: " "$1") tests and $(grep -cE -- "^ +--- $2: " "$1") subtests"; }

# The log of the single patched run of earlier versions of this script.
rm -f "$work/patched.log"

failed=0
summary=()
# The line the tests of docs/cabpk.patch log when they run initlock's mutex.
marker='KubeadmBootstrapRestoreSafeInitLock enabled: the init lock is \*locking\.ControlPlaneInitMutex\['
for run in upstream minimal gate-off gate-on; do
  tree="$work/cluster-api"
  gates=""
  case "$run" in
    upstream) capi_tree "$tree" ;;
    minimal) capi_tree "$tree" "$root/docs/cabpk-minimal.patch" ;;
    gate-off) capi_tree "$tree" "$root/docs/cabpk.patch" ;;
    # The tree of gate-off, as it is, and its test binaries.
    gate-on) gates=KubeadmBootstrapRestoreSafeInitLock=true ;;
  esac
  start=$(date +%s)
  if [ "$run" != gate-on ]; then
    log "$run: compiling the test binaries of $PKGS"
    rm -rf "$work/bin"
    # Static, as hack/lib.sh builds CABPK and CAPI core: one compile of their
    # dependencies serves both. No -trimpath: envtest finds its CRDs from its
    # source file's path.
    (cd "$tree" && CGO_ENABLED=0 GOFLAGS=-mod=mod GOWORK=off go test -c -ldflags=-w -o "$work/bin/" $PKGS)
  fi
  compiled=$(date +%s)
  log "$run: compiled in $((compiled - start))s; running the tests${gates:+ with CAPI_TEST_FEATURE_GATES=$gates}"
  rc=0
  (export CAPI_TEST_FEATURE_GATES="$gates" KUBEBUILDER_ASSETS="$assets" && run_tests "$tree" "$work/bin" "$work/$run.log") || rc=$?
  pkgs=$(grep -cE '^(ok|FAIL)[[:space:]]+sigs\.k8s\.io/' "$work/$run.log" || true)
  initlocks=$(grep -cE -- "$marker" "$work/$run.log" || true)
  line="$run: $pkgs packages in $(($(date +%s) - compiled))s; passed: $(count "$work/$run.log" PASS); failed: $(count "$work/$run.log" FAIL); skipped: $(count "$work/$run.log" SKIP)"
  if [ "$run" = gate-on ]; then
    line="$line; initlock's mutex behind the reconciler in $initlocks tests and subtests"
  fi
  log "$line (log: $work/$run.log)"
  summary+=("$line")
  # Gate on, the reconciler's tests must run initlock's mutex; otherwise never.
  if { [ "$run" = gate-on ] && [ "$initlocks" -eq 0 ]; } || { [ "$run" != gate-on ] && [ "$initlocks" -ne 0 ]; }; then
    log "$run: the tests ran initlock's mutex behind the reconciler $initlocks times, against the gate"
    summary+=("$run: FAILED (the gate)")
    failed=1
  fi
  if [ "$rc" -ne 0 ]; then
    grep -E -- '^(--- FAIL|FAIL|panic:)|^ +--- FAIL' "$work/$run.log" >&2 || true
    log "$run: FAILED"
    summary+=("$run: FAILED")
    failed=1
  fi
done
rm -rf "$work/bin"
for line in "${summary[@]}"; do
  log "$line"
done
exit "$failed"
