#!/usr/bin/env bash
# Counts the lines of Go the project ships, the lines that support its
# tests and tools, and the lines of tests, and prints the ratio of the two
# last to the first.
#
#   shipped: the non-test files of the project's packages that the shipped
#            binaries (initlock-manager, kubectl-initlock, the Velero
#            plugin and copy-plugins) and the library module
#            (pkg/initlock/...) compile;
#   support: every other non-test Go file of the project (test kits,
#            explorer, chaos, demo, benchmark report, release tooling);
#   tests:   every _test.go file.
#
# Pinned tool modules (hack/pins) are not counted.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOWORK="$PWD/go.work"

shipped_pkgs=$(go list -deps -f '{{if not .Standard}}{{.Dir}}{{end}}' \
	./cmd/initlock-manager ./cmd/kubectl-initlock ./cmd/velero-plugin-initlock ./cmd/copy-plugins \
	github.com/initlock/initlock/pkg/initlock/... | grep "^$PWD/" | sort -u)

count() { xargs -r cat | wc -l; }

all_go=$(git ls-files '*.go' | grep -v '^hack/pins/')
tests=$(printf '%s\n' "$all_go" | grep '_test\.go$' || true)
nontest=$(printf '%s\n' "$all_go" | grep -v '_test\.go$' || true)
shipped=""
support=""
while IFS= read -r f; do
	dir="$PWD/$(dirname "$f")"
	if grep -xF "$dir" <<<"$shipped_pkgs" >/dev/null; then
		shipped+="$f"$'\n'
	else
		support+="$f"$'\n'
	fi
done <<<"$nontest"

s=$(printf '%s' "$shipped" | count)
u=$(printf '%s' "$support" | count)
t=$(printf '%s\n' "$tests" | count)
printf 'shipped  %6d\nsupport  %6d\ntests    %6d\n(support+tests)/shipped  %.2f\n' "$s" "$u" "$t" "$(echo "($u+$t)/$s" | bc -l)"
