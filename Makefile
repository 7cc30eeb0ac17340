# initlock: make test runs everything CI runs; make demo shows what initlock does.
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

GO ?= go
# The Go modules of project code, by folder: lint and unit visit each in
# turn, and go.work lists the same folders (make lint checks it). The
# modules that only pin a tool or a peer's version are in hack/pins.
MODULES := . pkg/initlock hack/contention hack/capi hack/s3 hack/release test/alerts test/release/publish
# Every go command here resolves the module it runs in on its own, from that
# module's go.mod and go.sum, as a consumer of the library and a release build
# do; go.work serves editors and go commands typed by hand, and make quick.
export GOWORK := off
# -trimpath: the build cache keys the project's packages by module path, not
# by folder, so a fresh clone reuses what any other clone compiled, and the
# release's builds (-trimpath too) reuse the tests'. -ldflags=-w: test
# binaries and the programs tests build are linked without DWARF, which takes
# a third of a link's CPU (stack traces need none); a go command given
# -ldflags of its own (the release, the peers) replaces it.
export GOFLAGS += -trimpath -ldflags=-w
# Tests build as the release does, static (CGO_ENABLED=0): the release's
# builds and the tests' then share one compile of each dependency, and none
# needs cgo. CGO_ENABLED=1 in the environment (for go test -race) wins.
export CGO_ENABLED ?= 0
# The go flags of every build and test in hack/capi, Cluster API's module:
# without -trimpath, as CAPI's own tests of CABPK must build (their envtest
# finds its CRDs from its source file's path), so that those tests, the
# peers' builds of CABPK and CAPI core and these share one compile of
# Cluster API's dependencies.
CAPI_GOFLAGS := -ldflags=-w
# The modules that build on the same Kubernetes libraries at the same
# versions (make lint checks it).
SHARED_VERSIONS := . hack/contention test/alerts
# Packages under test in the root module. test/e2e has its own target.
PKGS ?= ./...
TEST_FLAGS ?= -count=1 -timeout=30m
# What make unit passes to go test in a module, after TEST_FLAGS. A module
# without it has no test to run there: those of hack/capi, hack/release and
# test/release/publish check a release (make test-release), and hack/s3 has
# none.
UNIT_. = $(PKGS)
UNIT_pkg/initlock = ./...
# Contention next to the upstream lock: one round, its request counts
# asserted; and the races between the two locks.
UNIT_hack/contention = -bench=. -benchtime=1x ./...
# The alert rules of config/monitoring, evaluated with Prometheus's own
# packages against the real manager (a module of its own, so that only
# this test depends on Prometheus).
UNIT_test/alerts = ./...
# make quick: the packages of the product (the library's module and what
# the shipped binaries compile), the explorer and the fault catalogue it
# checks, whose tests start no control plane (the others fail, rather than
# skip, without one). The tools' tests (demo, benchmark report, release)
# run in make test.
QUICK_PKGS ?= ./cmd/initlock-manager ./internal/cli/... ./internal/controllers/lock ./internal/copier ./internal/explore ./internal/kubeenv/faults ./internal/kubeenv/wire ./internal/lockguard ./internal/manager \
	./internal/relink/... ./internal/velero ./internal/version ./pkg/initlock/...
# Without -count=1, go test's cache skips the packages that did not change.
# -short skips the checks of the explorer's own reductions (make test runs
# them).
QUICK_FLAGS ?= -short -timeout=10m
# The path of golangci-lint's binary, built from its pin if need be: go tool
# -modfile runs only outside a workspace, and golangci-lint runs in one.
GOLANGCI_LINT := $(GO) tool -n -modfile=$(CURDIR)/hack/pins/golangci-lint/go.mod golangci-lint
CONTROLLER_GEN := $(GO) tool -modfile=$(CURDIR)/hack/pins/controller-gen/go.mod controller-gen
KUSTOMIZE := $(GO) tool -modfile=$(CURDIR)/hack/pins/kustomize/go.mod kustomize

# started is, in a recipe, the time it began (make expands a recipe whole
# before running its first line), so that a last line can print how long
# it took; timed starts such lines, which .ci/run's report collects.
started = $(shell date +%s)
timed := make timing:

# The packages of every module, as patterns of the workspace: PKGS in the
# root module, all of them elsewhere.
workspace-pkgs = $(foreach m,$(MODULES),$(if $(filter .,$(m)),$(PKGS),./$(m)/...))

.PHONY: all
all: test

.PHONY: help
help: ## Show the targets.
	@grep -hE '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

.PHONY: kube
kube: ## Build, or verify, etcd, kube-apiserver and kube-controller-manager in the cache.
	@hack/kube.sh >/dev/null

.PHONY: test
test: kube lint unit ## Lint (with govet) and run every test against the real control plane.

.PHONY: unit
unit: kube ## Run the tests (real control plane) without lint.
	@# The other modules' tests run beside the root module's, each module
	@# after the other (their tests mostly wait on control planes); their
	@# output follows the root module's.
	@assets="$$(hack/kube.sh 2>/dev/null)"; log=$$(mktemp); \
	( $(foreach m,$(filter-out .,$(MODULES)),$(if $(UNIT_$(m)),cd $(CURDIR)/$(m) && echo "cd $(m) && go test $(TEST_FLAGS) $(UNIT_$(m))" && KUBEBUILDER_ASSETS="$$assets" $(GO) test $(TEST_FLAGS) $(UNIT_$(m)) || exit 1; echo "$(timed) unit module $(m): $$(( $$(date +%s) - $(started) ))s since make unit began";)) ) >"$$log" 2>&1 & others=$$!; \
	echo "go test $(TEST_FLAGS) $(UNIT_.)"; root=0; KUBEBUILDER_ASSETS="$$assets" $(GO) test $(TEST_FLAGS) $(UNIT_.) || root=$$?; \
	echo "$(timed) unit module .: $$(( $$(date +%s) - $(started) ))s since make unit began"; \
	rest=0; wait $$others || rest=$$?; cat "$$log"; rm -f "$$log"; \
	[ $$root -eq 0 ] && [ $$rest -eq 0 ]
	@# The library's benchmarks assert request counts: one iteration each.
	KUBEBUILDER_ASSETS="$$(hack/kube.sh 2>/dev/null)" $(GO) test -run='^$$' -bench=. -benchtime=1x $(TEST_FLAGS) ./test/library
	@echo "$(timed) unit: $$(( $$(date +%s) - $(started) ))s"

.PHONY: quick
quick: ## Run the tests that need no control plane (QUICK_PKGS), without building one.
	@# No assets, and a cache folder without binaries: a package of the list
	@# that starts a control plane fails here instead of finding one.
	GOWORK=$(CURDIR)/go.work KUBEBUILDER_ASSETS= INITLOCK_KUBE_DIR=/nonexistent \
		$(GO) test $(QUICK_FLAGS) $(QUICK_PKGS)

.PHONY: lines
lines: ## Count the lines of Go shipped, of support and of tests (hack/lines.sh).
	@hack/lines.sh

.PHONY: lint
# golangci-lint's govet runs every analyzer go vet runs, and more, with the
# build tags of every test, so go vet is not run apart.
lint: verify-generate ## gofmt, golangci-lint with govet (one pass over every module of MODULES) and generated files.
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@# go.work uses the modules of MODULES, no more and no fewer.
	@want=$$(printf '%s\n' $(MODULES) | sort); \
	have=$$($(GO) work edit -json go.work | sed -n 's/^.*"DiskPath": "\(.*\)".*$$/\1/p' | sed 's|^\./||' | sort); \
	if [ "$$want" != "$$have" ]; then echo "go.work and MODULES name different modules:"; diff <(echo "$$want") <(echo "$$have"); exit 1; fi
	@# The modules of SHARED_VERSIONS build every dependency they share at the
	@# versions go.work resolves, so that this pass and their tests compile
	@# each once (docs/development.md).
	@f='{{if .Module}}{{if not .Module.Main}}{{.Module.Path}} {{.Module.Version}}{{end}}{{end}}'; \
	for m in $(SHARED_VERSIONS); do \
		d=$$(cd $(CURDIR)/$$m && diff <($(GO) list -test -deps -f "$$f" ./... | grep -v '^github.com/initlock/' | sort -u) \
			<(GOWORK=$(CURDIR)/go.work $(GO) list -test -deps -f "$$f" ./... | grep -v '^github.com/initlock/' | sort -u)) || { \
			echo "$$m/go.mod requires other versions than go.work resolves; go get these there (>):"; echo "$$d"; exit 1; }; \
	done
	@# One pass over every module, resolved together in the workspace: the
	@# dependencies they share are loaded and analysed once, at one version.
	@# Each module still compiles at its own versions in its tests and in
	@# the builds from it (make unit, stack, test-e2e and test-release).
	lint=$$($(GOLANGCI_LINT)) && GOWORK=$(CURDIR)/go.work "$$lint" run --config $(CURDIR)/.golangci.yml \
		$(workspace-pkgs)
	@echo "$(timed) golangci-lint: $$(( $$(date +%s) - $(started) ))s"

# Benchmark report (cmd/initlock-benchreport): the library, the library under
# contention next to the upstream lock (module hack/contention), the manager
# and every other package with benchmarks, in one go. Writes results/bench:
# bench.txt (benchstat format), bench.log, summary.md, scaling.png, memory.png.
BENCH_DIR ?= results/bench
BENCH_FLAGS ?=

.PHONY: bench
bench: kube ## Run every benchmark and write the report into results/bench (BENCH_FLAGS=-quick: a short run).
	KUBEBUILDER_ASSETS="$$(hack/kube.sh 2>/dev/null)" $(GO) run ./cmd/initlock-benchreport -out $(BENCH_DIR) $(BENCH_FLAGS)

# Exhaustive exploration (internal/explore): make test runs its scenarios;
# make explore runs them, the deep scenarios, and the mutation check (each
# rule of the protocol broken in a copy of the source must be caught). The
# deep scenarios with a budget of their own must end within it (three
# callers with the manager and an adversary event: about 40 minutes on 2
# cores); the others get INITLOCK_EXPLORE_BUDGET each (default 15m).
# Results: results/explore/explore.log.
EXPLORE_DIR ?= results/explore

.PHONY: explore
explore: ## Explore the protocol deeply and run the mutation check (takes long; results/explore).
	@mkdir -p $(EXPLORE_DIR)
	INITLOCK_EXPLORE_DEEP=1 INITLOCK_EXPLORE_MUTATIONS=1 \
		$(GO) test -count=1 -timeout=0 -v -run='^(TestExplore|TestExploreDeep|TestMutations)$$' ./internal/explore \
		| tee $(EXPLORE_DIR)/explore.log

# Chaos scenarios on the real control plane (internal/chaos). Scenario i has
# seed SEED+i (SEED empty: from the clock); SIZE=long makes bigger scenarios.
# A failed scenario prints its seed: make chaos SEED=<seed> RUNS=1 replays it.
SEED ?=
RUNS ?= 200
SIZE ?= short
CHAOS_DIR ?= results/chaos

.PHONY: chaos
chaos: kube ## Run randomised chaos scenarios: make chaos [SEED=...] [RUNS=200] [SIZE=short|long].
	@mkdir -p $(CHAOS_DIR)
	KUBEBUILDER_ASSETS="$$(hack/kube.sh 2>/dev/null)" CHAOS_SEED=$(SEED) CHAOS_RUNS=$(RUNS) CHAOS_SIZE=$(SIZE) \
		CHAOS_OUT=$(CURDIR)/$(CHAOS_DIR) CHAOS_TOTALS=$(CURDIR)/$(CHAOS_DIR)/totals.txt \
		$(GO) test -run='^TestChaos$$' -count=1 -timeout=0 -v ./internal/chaos | tee $(CHAOS_DIR)/chaos.log

# RBAC for the initlock manager, generated from kubebuilder markers: the
# default role, the opt-in role for relinking Secrets
# (internal/relink/secrets), bound by the config/relink-secrets overlay, and
# the opt-in role for clusters with OwnerReferencesPermissionEnforcement
# (internal/relink/enforcement), bound by config/owner-references-enforcement.
RBAC_GEN := rbac:roleName=manager-role paths=./internal/manager/... paths=./internal/controllers/... paths=./internal/relink
RBAC_GEN_SECRETS := rbac:roleName=initlock-relink-secrets paths=./internal/relink/secrets
RBAC_GEN_ENFORCEMENT := rbac:roleName=initlock-owner-references-enforcement paths=./internal/relink/enforcement

.PHONY: generate
generate: ## Generate the role.yaml of config/rbac, config/relink-secrets and config/owner-references-enforcement from the kubebuilder markers.
	$(CONTROLLER_GEN) $(RBAC_GEN) output:rbac:dir=config/rbac
	$(CONTROLLER_GEN) $(RBAC_GEN_SECRETS) output:rbac:dir=config/relink-secrets
	$(CONTROLLER_GEN) $(RBAC_GEN_ENFORCEMENT) output:rbac:dir=config/owner-references-enforcement

.PHONY: verify-generate
verify-generate: ## Check that generated files are up to date and that config/ renders.
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	$(CONTROLLER_GEN) $(RBAC_GEN) output:rbac:dir="$$tmp/rbac"; \
	$(CONTROLLER_GEN) $(RBAC_GEN_SECRETS) output:rbac:dir="$$tmp/relink-secrets"; \
	$(CONTROLLER_GEN) $(RBAC_GEN_ENFORCEMENT) output:rbac:dir="$$tmp/owner-references-enforcement"; \
	for d in rbac relink-secrets owner-references-enforcement; do \
		if ! diff -u config/$$d/role.yaml "$$tmp/$$d/role.yaml"; then echo "config/$$d/role.yaml is out of date: run 'make generate'"; exit 1; fi; \
	done; \
	$(KUSTOMIZE) build config/default >/dev/null; \
	$(KUSTOMIZE) build config/relink-secrets >/dev/null; \
	$(KUSTOMIZE) build config/owner-references-enforcement >/dev/null; \
	$(KUSTOMIZE) build config/monitoring >/dev/null

# DEMO_FLAGS are passed to the demo, e.g. make demo DEMO_FLAGS=--keep.
DEMO_FLAGS ?=

.PHONY: demo
demo: kube ## Show on a local control plane what initlock fixes (DEMO_FLAGS=--keep leaves it running).
	@echo "demo: compiling (a few minutes on a cold Go build cache, seconds afterwards)" >&2
	$(GO) run ./cmd/initlock-demo $(DEMO_FLAGS)

# KUSTOMIZE_DIR is the kustomization make manifests renders, MANIFESTS the
# file it writes, and IMG, when set, the manager image to install (e.g.
# registry.example.com/initlock-manager:v0.1.0).
KUSTOMIZE_DIR ?= config/default
MANIFESTS ?= dist/install.yaml
IMG ?=

.PHONY: manifests
manifests: ## Render config/ with kustomize into dist/install.yaml (IMG=... sets the manager image).
	@mkdir -p dist; tmp=$$(mktemp -d dist/.kustomize.XXXXXX); trap 'rm -rf "$$tmp" "$(MANIFESTS).tmp"' EXIT; \
	printf 'resources:\n- ../../$(KUSTOMIZE_DIR)\n' > "$$tmp/kustomization.yaml"; \
	if [ -n "$(IMG)" ]; then (cd "$$tmp" && $(KUSTOMIZE) edit set image initlock-manager=$(IMG)); fi; \
	mkdir -p "$$(dirname $(MANIFESTS))"; \
	$(KUSTOMIZE) build "$$tmp" > "$(MANIFESTS).tmp"; \
	mv "$(MANIFESTS).tmp" "$(MANIFESTS)"; \
	echo "wrote $(MANIFESTS)" >&2

.PHONY: test-e2e
test-e2e: kube ## Run the end-to-end tests: two control planes and clusterctl move (build tag e2e).
	$(GO) vet -tags e2e ./test/e2e/...
	@# The move program is built here, with the hack/capi module, so that its
	@# cold build does not count against the test timeout.
	tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	(cd hack/capi && GOFLAGS=$(CAPI_GOFLAGS) $(GO) build -o "$$tmp/move" ./move); \
	INITLOCK_E2E_MOVE="$$tmp/move" KUBEBUILDER_ASSETS="$$(hack/kube.sh 2>/dev/null)" \
		$(GO) test -tags e2e -v $(TEST_FLAGS) ./test/e2e/...

# --- Real stack: the real Velero server, Cluster API core and CABPK (test/real) ---
# hack/stack.sh builds Velero v1.18.3, its AWS plugin v1.14.3, the S3 server
# of hack/s3, CABPK and CAPI core v1.14.2 into the cache, one at a time; the
# first build takes about 7 minutes on an idle machine of 2 cores. initlock-manager and
# velero-plugin-initlock are built from this tree for each run.

.PHONY: stack
stack: ## Build, or verify, Velero, its AWS plugin, the S3 server, CABPK and CAPI core in the cache.
	@hack/stack.sh >/dev/null

# real-env builds initlock's own binaries into $$tmp and exports their paths
# and those of the caches.
define real-env
tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
$(GO) build -o "$$tmp/" ./cmd/initlock-manager ./cmd/velero-plugin-initlock; \
export INITLOCK_MANAGER="$$tmp/initlock-manager" INITLOCK_VELERO_PLUGIN="$$tmp/velero-plugin-initlock" \
	INITLOCK_STACK_DIR="$$(hack/stack.sh 2>/dev/null)" KUBEBUILDER_ASSETS="$$(hack/kube.sh 2>/dev/null)";
endef

.PHONY: test-real
test-real: kube stack ## Run the scenarios on the real Velero server, CAPI core and CABPK (build tag real).
	$(GO) vet -tags real ./test/real/...
	@# CABPK with docs/cabpk.patch and with docs/cabpk-minimal.patch, cached by
	@# the hash of the patch and the library; test/real runs the first with the
	@# patch's feature gate on.
	@hack/cabpk-initlock.sh >/dev/null
	@hack/cabpk-initlock.sh docs/cabpk-minimal.patch >/dev/null
	@# The test binary is compiled before the clock of the test timeout starts.
	@# -parallel 4: the scenarios that run subtests side by side (the naive
	@# copies, the failed-init scenarios) mostly wait on CABPK's requeues.
	$(GO) test -tags real -c -o /dev/null ./test/real
	$(real-env) (cd hack/capi && GOFLAGS=$(CAPI_GOFLAGS) $(GO) build -o "$$tmp/move" ./move); \
		INITLOCK_MOVE="$$tmp/move" INITLOCK_CABPK_INITLOCK="$$(hack/cabpk-initlock.sh 2>/dev/null)" \
		INITLOCK_CABPK_MINIMAL="$$(hack/cabpk-initlock.sh docs/cabpk-minimal.patch 2>/dev/null)" \
		$(GO) test -tags real -v $(TEST_FLAGS) -parallel 4 ./test/real/...

# CABPK's own tests: Cluster API v1.14.2's ./bootstrap/kubeadm/... run four
# times, as released, with docs/cabpk-minimal.patch, and with docs/cabpk.patch
# with its feature gate KubeadmBootstrapRestoreSafeInitLock off and on,
# envtest on hack/kube.sh's control plane (hack/cabpk-tests.sh). All must pass.
.PHONY: test-cabpk
test-cabpk: kube ## Run CAPI v1.14.2's own tests of CABPK as released, with docs/cabpk-minimal.patch, and with docs/cabpk.patch gate off and on.
	hack/cabpk-tests.sh

.PHONY: demo-real
demo-real: kube stack ## The seed's story on the real Velero server, CAPI core and CABPK (DEMO_FLAGS=-v).
	@echo "demo-real: compiling (a few minutes on a cold Go build cache, seconds afterwards)" >&2
	$(real-env) $(GO) run ./cmd/initlock-demo --real $(DEMO_FLAGS)
# --- end of the real stack ---

# ---- Release: images without Docker and the release artefacts ----------
# hack/release (a module of its own, with go-containerregistry) builds them;
# see docs/release.md. DIST is where they are written, REGISTRY where the
# images are to be published (REGISTRY/NAME:VERSION), DOWNLOAD_URL where the
# files are (DOWNLOAD_URL/VERSION/FILE: the krew manifest and the release
# notes name them there).
VERSION ?=
REGISTRY ?= ghcr.io/initlock
DOWNLOAD_URL ?= https://github.com/initlock/initlock/releases/download
DIST ?= dist
PLATFORMS ?= linux/amd64,linux/arm64
ARCHIVE_PLATFORMS ?= linux/amd64,linux/arm64,darwin/amd64,darwin/arm64
RELEASE_TEST_VERSION := v0.1.0-test
# The test release is made for another registry and download location than
# the defaults, so that its tests see that every reference follows them.
RELEASE_TEST_REGISTRY := registry.example.com/initlock
RELEASE_TEST_DOWNLOAD_URL := https://downloads.example.com/initlock/releases
# The test release builds the images and the kubectl-initlock archive for
# this machine's platform only: every further platform is a full compile,
# which would double the cold build time in CI, and the code is the same for
# every platform (hack/release/oci tests an index of two).
RELEASE_TEST_PLATFORMS := linux/$(shell $(GO) env GOARCH)
RELEASE_RUN = cd hack/release && $(GO) run . -root $(CURDIR) -registry $(REGISTRY) -download-url $(DOWNLOAD_URL) -out $(abspath $(DIST)) -platforms $(PLATFORMS) -archive-platforms $(ARCHIVE_PLATFORMS)

.PHONY: images
images: ## Build the images as OCI layouts under dist/images, reproducibly (VERSION=v0.1.0, default v0.0.0-dev; PLATFORMS=linux/amd64,linux/arm64); refuses a DIST that holds a release.
	$(RELEASE_RUN) -images-only -version $(or $(VERSION),v0.0.0-dev)

.PHONY: release
release: ## Build every release artefact into dist/: make release VERSION=v0.1.0 [REGISTRY=...] [DOWNLOAD_URL=...].
	@if [ -z "$(VERSION)" ]; then echo "usage: make release VERSION=vX.Y.Z [REGISTRY=registry/namespace] [DOWNLOAD_URL=https://...]" >&2; exit 1; fi
	$(RELEASE_RUN) -version $(VERSION)

# test-release builds a release into a temporary folder and tests every
# artefact: reproducible images, checksums, digests in the manifests, the
# registry and download location in every reference, krew's own validation
# and install of each archive, make images refusing to delete the release
# (hack/release); the clusterctl components read from a local repository by
# the clusterctl library (hack/capi); the images pushed to a local registry
# as docs/release.md publishes them, each keeping its digest of images.txt
# (test/release/publish); install.yaml applied with server-side dry-run,
# monitoring.yaml against the Prometheus Operator's CRDs, and each image
# unpacked and run on the local control plane, the manager scraped as the
# ServiceMonitor does (test/release, build tag release).
.PHONY: test-release
test-release: kube ## Build a release into a temporary folder and test every artefact and image.
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	start=$$(date +%s); \
	$(MAKE) -s release VERSION=$(RELEASE_TEST_VERSION) DIST="$$tmp/dist" PLATFORMS=$(RELEASE_TEST_PLATFORMS) ARCHIVE_PLATFORMS=$(RELEASE_TEST_PLATFORMS) \
		REGISTRY=$(RELEASE_TEST_REGISTRY) DOWNLOAD_URL=$(RELEASE_TEST_DOWNLOAD_URL); \
	echo "test-release: release built in $$(( $$(date +%s) - start ))s" >&2; \
	export INITLOCK_DIST="$$tmp/dist" INITLOCK_REGISTRY=$(RELEASE_TEST_REGISTRY) INITLOCK_DOWNLOAD_URL=$(RELEASE_TEST_DOWNLOAD_URL); \
	(cd hack/release && \
		INITLOCK_PLATFORMS=$(RELEASE_TEST_PLATFORMS) INITLOCK_ARCHIVE_PLATFORMS=$(RELEASE_TEST_PLATFORMS) $(GO) test -count=1 -timeout=20m ./...); \
	(cd hack/capi && GOFLAGS=$(CAPI_GOFLAGS) $(GO) test -count=1 -timeout=10m ./release/...); \
	(cd test/release/publish && $(GO) test -count=1 -timeout=10m ./...); \
	$(GO) vet -tags release ./test/... ; \
	KUBEBUILDER_ASSETS="$$(hack/kube.sh 2>/dev/null)" \
		$(GO) test -tags release -count=1 -timeout=20m -run 'TestRelease' ./test/release/... ./test/manifests/...; \
	echo "test-release: done in $$(( $$(date +%s) - start ))s" >&2
