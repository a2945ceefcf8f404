# fedbr's build. `make test` is what CI runs; `make help` lists the targets.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo v0.0.0-dev)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X github.com/fedbr/fedbr/internal/version.version=$(VERSION) \
           -X github.com/fedbr/fedbr/internal/version.commit=$(COMMIT)

GOLANGCI_LINT_VERSION := v2.15.0
GOLANGCI_LINT := .cache/bin/golangci-lint-$(GOLANGCI_LINT_VERSION)
CONTROLLER_GEN := go tool controller-gen
# helm renders and lints charts/ in test/charts; its version is the one hack/tools/helm pins.
HELM_VERSION := $(shell awk '$$1 == "helm.sh/helm/v3" {print $$2}' hack/tools/helm/go.mod)
HELM := .cache/bin/helm-$(HELM_VERSION)
# As Helm's release build: its version, and its default Kubernetes version (lint, capabilities)
# that of its client-go.
HELM_LDFLAGS := -s -w -X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION) \
	-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=37 \
	-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=37
# promtool checks and unit-tests the alerting rules in test/charts; its version is the one
# hack/tools/promtool pins, built without Prometheus' service-discovery plugins (promtool's rule
# commands do not use them; the build takes half as long).
PROMTOOL_VERSION := $(shell awk '$$1 == "github.com/prometheus/prometheus" {print $$2}' hack/tools/promtool/go.mod)
PROMTOOL := .cache/bin/promtool-$(PROMTOOL_VERSION)
# Generated files, checked by verify-generated.
GENERATED := api config test/fixtures/crd charts/fedbr-manager/crds charts/fedbr-agent/crds \
	charts/fedbr-manager/files/manager_role.yaml charts/fedbr-agent/files/agent_role.yaml \
	charts/fedbr-agent/files/manager_dataplane_role.yaml charts/fedbr-agent/files/dataplane_viewer_role.yaml \
	$(foreach c,fedbr-manager fedbr-agent,charts/$(c)/files/leader_election_role.yaml) \
	$(foreach c,fedbr-manager fedbr-agent,$(foreach f,_helpers.tpl service.yaml servicemonitor.yaml serviceaccount.yaml metrics-reader.yaml leader-election.yaml,charts/$(c)/templates/$(f)))

# Flags of `make unit`. `make test` and `make test-long` run hack/test.sh, which groups the
# packages (race detector, parallelism) and prints their times.
GOTEST_FLAGS ?= -race -count=1 -timeout 30m

.PHONY: help
help: ## List the targets.
	@grep -E '^[a-zA-Z0-9_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

.PHONY: build
build: ## Build bin/fedbr (what users install) and bin/fedbr-lab (fedbr plus the lab).
	CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS)' -o bin/ ./cmd/fedbr ./cmd/fedbr-lab
	@stat -c %s bin/fedbr | awk '{printf "bin/fedbr: %.1f MiB (%d bytes)\n", $$1 / 1048576, $$1}'

# The image, built by hack/image without a Docker daemon, from scratch (docs/install.md).
IMAGE ?= ghcr.io/fedbr/fedbr:$(VERSION)
IMAGE_PLATFORMS ?= linux/amd64,linux/arm64
IMAGE_DIR ?= _output/image
IMAGE_SOURCE ?= https://github.com/fedbr/fedbr
# The image's creation time and its files' times: the commit's, so a commit builds one image.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)

.PHONY: image
image: ## Build fedbr's image (cmd/fedbr, static) without Docker: OCI layout and docker-loadable tarballs in _output/image.
	cd hack/image && go run . build --repo $(CURDIR) --out $(abspath $(IMAGE_DIR)) --tag $(IMAGE) \
		--platforms $(IMAGE_PLATFORMS) --ldflags '$(LDFLAGS)' --version $(VERSION) --revision $(COMMIT) \
		--source $(IMAGE_SOURCE) --created $(SOURCE_DATE_EPOCH)

.PHONY: release
release: $(HELM) ## make release VERSION=vX.Y.Z: set the charts' versions, then (committed) build the image and chart packages in _output/release, checking they agree (docs/development.md).
	@[[ "$(origin VERSION)" == "command line" ]] || { echo "release: give VERSION=vX.Y.Z" >&2; exit 2; }
	HELM="$(abspath $(HELM))" bash hack/release.sh $(VERSION)

.PHONY: image-push
image-push: image ## Build the image and push every platform of it to IMAGE, with docker login's credentials.
	cd hack/image && go run . push --layout $(abspath $(IMAGE_DIR))/oci --ref $(IMAGE)

DEMO_DIR ?= _output/demo
# DEMO_FLAGS go to `fedbr-lab lab demo`, e.g. `make demo DEMO_FLAGS=--tls`.
DEMO_FLAGS ?=

# BENCH_SCALE_FLAGS go to hack/benchscale, e.g. --regions 100000 --steps pause.
BENCH_SCALE_FLAGS ?=

.PHONY: bench-scale
bench-scale: build k8s-bin ## Scale in two tables: the heaviest steps at a million regions over 100 stores, each a process of its own beside the doubles' (wall, CPU, peak RSS per phase), then the controllers after months of schedules (bench-scale-controllers). Run it on a quiet machine.
	go run ./hack/benchscale --fedbr bin/fedbr --fedbr-lab bin/fedbr-lab $(BENCH_SCALE_FLAGS)
	$(MAKE) --no-print-directory bench-scale-controllers

.PHONY: bench-scale-controllers
bench-scale-controllers: k8s-bin ## The manager restarted over 1,000 complete backups (3,000 members over 3 planes), 100 schedules and 50 restores, and an agent over 1,000 backup and 50 restore members: heap, time to idle and reconcile times (run it on a quiet machine).
	KUBEBUILDER_ASSETS="$$(bash hack/k8s-bin.sh)" FEDBR_SCALE=1 go test -p 1 -count=1 -timeout 30m -run '^TestScale$$' -v ./internal/manager/ ./internal/cmd/agent/ 2>&1 | grep -v '^[IWE][0-9]\{4\} '

.PHONY: demo
demo: build k8s-bin $(HELM) ## Run the main job in the lab, fedbr installed through its charts: backup under load, restore into fresh clusters, check, timeline.
	-bin/fedbr-lab lab down --dir $(DEMO_DIR) >/dev/null 2>&1
	rm -rf $(DEMO_DIR) # a fresh lab every time: the demo creates fixed names
	bin/fedbr-lab lab up --dir $(DEMO_DIR)
	rc=0; FEDBR_HELM="$(abspath $(HELM))" bin/fedbr-lab lab demo --dir $(DEMO_DIR) --install $(DEMO_FLAGS) || rc=$$?; bin/fedbr-lab lab down --dir $(DEMO_DIR); exit $$rc

.PHONY: generate
generate: ## Regenerate deepcopy code and CRD manifests from api/ (and the charts' copies).
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...
	$(CONTROLLER_GEN) crd:allowDangerousTypes=true paths="./api/federation/...;./api/dataplane/..." output:crd:artifacts:config=config/crd/bases
	# The TidbCluster stand-in replaces tidb-operator's CRD: only tests and the lab install it.
	$(CONTROLLER_GEN) crd:allowDangerousTypes=true paths=./api/pingcap/... output:crd:artifacts:config=test/fixtures/crd
	# Each chart installs its group's CRDs from its crds/ folder and its ClusterRoles from files/:
	# copies of config/crd/bases and config/rbac.
	rm -f charts/fedbr-manager/crds/*.yaml charts/fedbr-agent/crds/*.yaml
	cp config/crd/bases/federation.pingcap.com_*.yaml charts/fedbr-manager/crds/
	cp config/crd/bases/dataplane.fedbr.io_*.yaml charts/fedbr-agent/crds/
	cp config/rbac/manager_role.yaml config/rbac/leader_election_role.yaml charts/fedbr-manager/files/
	cp config/rbac/agent_role.yaml config/rbac/manager_dataplane_role.yaml config/rbac/dataplane_viewer_role.yaml config/rbac/leader_election_role.yaml charts/fedbr-agent/files/
	# Templates both charts use, word for word.
	for c in fedbr-manager fedbr-agent; do cp charts/shared-templates/{_helpers.tpl,service.yaml,servicemonitor.yaml,serviceaccount.yaml,metrics-reader.yaml,leader-election.yaml} charts/$$c/templates/; done

.PHONY: verify-generated
verify-generated: generate ## Fail when generated files differ from what is committed.
	@if [[ -n "$$(git status --porcelain -- $(GENERATED))" ]]; then \
		echo "generated files are stale; run 'make generate' and commit:"; \
		git status --porcelain -- $(GENERATED); git --no-pager diff --stat -- $(GENERATED); exit 1; \
	fi

.PHONY: fmt
fmt: $(GOLANGCI_LINT) ## Format the code.
	$(GOLANGCI_LINT) fmt ./...

.PHONY: vet
# With the flags of make test's builds that run without the race detector (hack/test.sh), so
# that vet's compiled dependencies serve them. make test does not run it: golangci-lint's govet
# runs the same analyzers as go vet (its defaults are cmd/vet's list), in make lint.
vet: ## Run go vet.
	CGO_ENABLED=0 go vet -trimpath ./...
	cd hack/image && CGO_ENABLED=0 go vet -trimpath ./...

.PHONY: lint
# With make vet's compile flags: golangci-lint loads the dependencies' export data through the
# go command, which otherwise compiles the whole graph a third time (cold: 274 s instead of 74).
lint: $(GOLANGCI_LINT) ## Run golangci-lint (.golangci.yml).
	CGO_ENABLED=0 GOFLAGS="$$GOFLAGS -trimpath" $(GOLANGCI_LINT) run ./...
	cd hack/image && CGO_ENABLED=0 GOFLAGS="$$GOFLAGS -trimpath" $(CURDIR)/$(GOLANGCI_LINT) run ./...

# The chart tests (test/charts) run this helm; without it they skip, unless FEDBR_HELM names it.
.PHONY: helm
helm: $(HELM) ## Build (once) the pinned helm CLI the chart tests render and lint with.

$(HELM):
	@echo "building helm $(HELM_VERSION) (first time only)"
	@mkdir -p .cache/bin
	cd hack/tools/helm && go build -trimpath -ldflags '$(HELM_LDFLAGS)' -o ../../../$(HELM).tmp helm.sh/helm/v3/cmd/helm
	mv $(HELM).tmp $(HELM)

# The chart tests (test/charts) run this promtool on the alerting rules; without it they skip,
# unless FEDBR_PROMTOOL names it.
.PHONY: promtool
promtool: $(PROMTOOL) ## Build (once) the pinned promtool the chart tests check the alerting rules with.

$(PROMTOOL):
	@echo "building promtool $(PROMTOOL_VERSION) (first time only)"
	@mkdir -p .cache/bin
	cd hack/tools/promtool && go build -trimpath -tags remove_all_sd -ldflags '-s -w -X github.com/prometheus/common/version.Version=$(PROMTOOL_VERSION)' -o ../../../$(PROMTOOL).tmp github.com/prometheus/prometheus/cmd/promtool
	mv $(PROMTOOL).tmp $(PROMTOOL)

$(GOLANGCI_LINT):
	@echo "building golangci-lint $(GOLANGCI_LINT_VERSION) (first time only)"
	@mkdir -p .cache/bin
	cd hack/tools/lint && go build -o ../../../$(GOLANGCI_LINT).tmp github.com/golangci/golangci-lint/v2/cmd/golangci-lint
	mv $(GOLANGCI_LINT).tmp $(GOLANGCI_LINT)

.PHONY: k8s-bin
k8s-bin: ## Build (once) the pinned kube-apiserver, controller-manager, scheduler, kubectl and etcd.
	bash hack/k8s-bin.sh >/dev/null

NEGATIVE_RUNS ?= 10

.PHONY: negative-controls
negative-controls: ## Run every negative control of docs/testing.md NEGATIVE_RUNS times (default 10); each must fail as stated every time.
	rc=0; \
	go test -v -count=$(NEGATIVE_RUNS) -timeout 120m -run 'TestNegativeControl|TestStoresRestartedAfterRecoverRegionAreReplanned|TestStaggeredCaptureWithoutPauseIsCaught' ./test/protocol/ 2>&1 | grep -E '^(--- |ok|FAIL)|_test.go:[0-9]+: ' || rc=1; \
	go test -v -count=$(NEGATIVE_RUNS) -timeout 120m -run 'TestBackupWithProtocolRestoresExactly|TestWrongLeaderChoiceIsDetected|TestStaggeredSnapshotsWithoutProtocolAreDetected' ./internal/lab/bank/ 2>&1 | grep -E '^(--- |ok|FAIL)|_test.go:[0-9]+: ' || rc=1; \
	exit $$rc

.PHONY: crash
crash: k8s-bin ## Run every point of the crash suite (test/crash; CI runs a rotating subset) and print its table.
	set -o pipefail; FEDBR_CRASH_POINTS=all go test -v -count=1 -timeout 180m -run TestCrashAnywhere ./test/crash/ 2>&1 | tee /tmp/fedbr-crash.log | grep -E "^(--- |ok|FAIL)|crash point|^\s*\| "

# hack/image's test (its own module): it builds fedbr statically and an image of it. No race
# detector: one goroutine gzips the binary, which -race slows several times over.
IMAGE_TEST := cd hack/image && go test -count=1 -timeout 30m ./...

.PHONY: unit
unit: $(HELM) $(PROMTOOL) ## Run the unit tests only (no API server).
	FEDBR_HELM="$(abspath $(HELM))" FEDBR_PROMTOOL="$(abspath $(PROMTOOL))" go test -short $(GOTEST_FLAGS) ./...
	$(IMAGE_TEST)

# The tools make test needs, built concurrently on a cold machine: the builds' serial stretches
# (big packages, links) leave a core idle that another build fills.
.PHONY: tools
tools: ## Build (once) the Kubernetes binaries, golangci-lint, helm and promtool, at once.
	$(MAKE) --no-print-directory -j4 k8s-bin $(GOLANGCI_LINT) $(HELM) $(PROMTOOL)

.PHONY: test
test: tools lint verify-generated k8s-bin $(HELM) $(PROMTOOL) ## Lint (go vet's analyzers among golangci-lint's), check generated files, run every test (a slice of the long suites) and print the packages' times.
	KUBEBUILDER_ASSETS="$$(bash hack/k8s-bin.sh)" FEDBR_HELM="$(abspath $(HELM))" FEDBR_PROMTOOL="$(abspath $(PROMTOOL))" \
		GOTEST_TIMEOUT=30m bash hack/test.sh

.PHONY: test-long
test-long: tools lint verify-generated k8s-bin $(HELM) $(PROMTOOL) ## make test with every part of the long suites (all crash points, e2e runs, day-2 scenarios), then make negative-controls.
	KUBEBUILDER_ASSETS="$$(bash hack/k8s-bin.sh)" FEDBR_HELM="$(abspath $(HELM))" FEDBR_PROMTOOL="$(abspath $(PROMTOOL))" \
		FEDBR_LONG=1 GOTEST_TIMEOUT=180m bash hack/test.sh
	$(MAKE) negative-controls
