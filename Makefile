# no8s developer entry points. Run `make help` for the list.
SHELL := /bin/bash
BIN   := $(CURDIR)/bin
export PATH := $(BIN):$(PATH)
export GOFLAGS := -buildvcs=false

BUF_VERSION          := v1.75.0
PROTOC_GEN_GO        := v1.36.12
PROTOC_GEN_GO_GRPC   := v1.6.2
STATICCHECK_VERSION  := v0.8.2
GOCYCLO_VERSION      := v0.6.0
NATS_SERVER_VERSION  := v2.15.2
GRPCURL_VERSION      := v1.9.4
NATSCLI_VERSION      := v0.5.0
# GitHub's published OpenAPI description, which the fake GitHub's every
# exchange is validated against (services/internal/githubfake). Installed
# from the npm registry into a git-ignored directory: it is far over 1 MiB.
OCTOKIT_OPENAPI_VERSION := 23.0.2
GITHUB_OPENAPI_DIR      := $(CURDIR)/.cache/github-openapi

# The version every binary answers --version with, stamped from git (the
# image's tag too). Binaries are static (CGO_ENABLED=0) and built with
# -trimpath, so that `make build` makes what the image holds.
VERSION ?= $(shell git describe --tags --always --dirty --abbrev=12 2>/dev/null || echo unknown)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
# Expanded once: a file edited while make runs must not change the tag midway.
VERSION := $(VERSION)
COMMIT  := $(COMMIT)
GO_LDFLAGS := -X github.com/no8s/no8s/services/internal/version.version=$(VERSION) -X github.com/no8s/no8s/services/internal/version.commit=$(COMMIT)
GO_BUILD   := CGO_ENABLED=0 go build -trimpath -ldflags '$(GO_LDFLAGS)'

# The image: every service binary, FROM scratch (deploy/Containerfile), for
# each platform; built with podman (Debian's), no base image pulled.
IMAGE           ?= localhost/no8s
IMAGE_PLATFORMS ?= amd64 arm64
IMAGE_BINARIES  := no8s no8s-store no8s-admission no8s-gateway no8s-scheduler no8s-registry-sync no8s-reconciler
IMAGE_DIR       := $(BIN)/image

# Unit, integration and end-to-end tests of every module. Keep under 15 minutes
# (the end-to-end package, the longest, took 12.7 in CI beside the others; the
# timeout leaves room for a slower machine, it is not the budget).
TEST_TIMEOUT ?= 22m

.PHONY: help run build build-failpoint image image-check deploy-check upgrade-from test stress bench bench-scale bench-peer lint check-large-files check-cyclo check-proto-breaking check-user-docs check-rules generate generate-check tools k8s-tools k8s-tools-dir k8s-tools-test nats-server grpcurl natscli github-openapi promtool clean $(BIN)/gocyclo

help:
	@echo "make run             run the whole control plane (no8s dev) on 127.0.0.1:8000 (ARGS=... for more flags)"
	@echo "make build           every binary into bin/ (static, -trimpath, version stamped from git)"
	@echo "make build-failpoint the store with failpoints compiled in (build tag failpoint), into bin/failpoint/, for tests only"
	@echo "make image           the one image, FROM scratch, every service binary, linux/amd64 and linux/arm64 (podman)"
	@echo "make image-check     list the image's files, run every amd64 binary's --version, check the arm64 ones' build info"
	@echo "make deploy-check    run docker-compose.yml as written, each service in its own network namespace, and check it (root); check the Helm chart against a real kube-apiserver (docs/deploy.md)"
	@echo "make test            run every module's tests (needs PostgreSQL; see README)"
	@echo "make stress          long soak versions of the outbox and concurrency tests"
	@echo "make bench           the performance figures the issues ask for"
	@echo "make bench-scale     how cost grows with the store: 10k, 100k, 1M resources (about 15 minutes)"
	@echo "make bench-peer      the same load against no8s and its Kubernetes peer, back to back (about 35 minutes; ARGS=-smoke: 2)"
	@echo "make check-rules     promtool check rules and promtool test rules on deploy/observability (make test runs it)"
	@echo "make lint            gofmt, go vet, staticcheck, no tracked file over 1 MiB, check-cyclo, check-proto-breaking, check-user-docs"
	@echo "make check-cyclo     no production Go function over cyclomatic complexity 25 (gocyclo; DIR=... for one directory)"
	@echo "make check-proto-breaking  buf breaking: proto/ against the merge-base with main (on main: HEAD^1; BUF_BREAKING_AGAINST=<rev>)"
	@echo "make check-user-docs what users read (docs, READMEs, libs, examples) cites no seed, issue, invariant or HARD-PARTS"
	@echo "make generate        regenerate protobuf code with buf"
	@echo "make generate-check  regenerate and fail if the committed code differs"
	@echo "make natscli         the pinned nats CLI into bin/ (built once, kept)"
	@echo "make github-openapi  install GitHub's OpenAPI description (@octokit/openapi, npm) for the fake GitHub's tests"
	@echo "make k8s-tools       kube-apiserver, etcd, helm and the noop controller (tools/k8s) into a cache outside the repo (cold: 15-30 min)"
	@echo "make -s k8s-tools-dir  print that cache directory"
	@echo "make k8s-tools-test  the noop controller's tests against that kube-apiserver and etcd"

# Builds bin/no8s (incrementally: only the first build is slow), then becomes
# it; no8s dev exits 0 on Ctrl-C, so make does too. It builds as make build
# does, so that either one after the other finds bin/no8s up to date and
# leaves it alone (a no8s started from it keeps running).
run:
	@mkdir -p $(BIN)
	@echo "make run: building bin/no8s (the first build takes about a minute)..."
	@cd services && $(GO_BUILD) -o $(BIN)/no8s ./cmd/no8s
	@echo "make run: starting no8s dev (all state in ~/.cache/no8s/dev unless ARGS say otherwise: remove it to start afresh); Ctrl-C stops it"
	@exec $(BIN)/no8s dev $(ARGS)

build:
	@mkdir -p $(BIN)
	cd services && $(GO_BUILD) -o $(BIN)/ ./cmd/...

# The store with failpoints compiled in (services/internal/failpoint: the
# build tag failpoint, enabled by NO8S_FAILPOINTS), for the tests that stop
# it at an exact point ($NO8S_FAILPOINT_BIN). A directory of its own, so
# that nothing takes it for a release binary: build, image and every
# release are built without the tag (GO_BUILD carries no -tags, and the
# GOFLAGS exported above replaces the environment's).
FAILPOINT_BIN := $(BIN)/failpoint
build-failpoint:
	@mkdir -p $(FAILPOINT_BIN)
	cd services && $(GO_BUILD) -tags failpoint -o $(FAILPOINT_BIN)/ ./cmd/no8s-store

# One image for every platform of IMAGE_PLATFORMS, tagged $(IMAGE):$(VERSION)-<arch>.
# The binaries are cross-compiled here; the Containerfile only copies (no RUN,
# so no emulation). No local manifest list: Debian's podman 4.3 then fails
# `podman images` (podman issue 19757); docs/deploy.md shows how to publish one.
image:
	@command -v podman >/dev/null || (echo "make image needs podman (apt-get install podman buildah)"; exit 1)
	@test -s /etc/ssl/certs/ca-certificates.crt || (echo "make image needs the CA bundle /etc/ssl/certs/ca-certificates.crt (apt-get install ca-certificates)"; exit 1)
	rm -rf $(IMAGE_DIR) && mkdir -p $(IMAGE_DIR)/rootfs/etc/ssl/certs
	cp deploy/image/passwd deploy/image/group $(IMAGE_DIR)/rootfs/etc/
	mkdir -p $(IMAGE_DIR)/rootfs/var/lib/no8s $(IMAGE_DIR)/state/ca $(IMAGE_DIR)/state/identity $(IMAGE_DIR)/state/nats
	chmod 0700 $(IMAGE_DIR)/state/ca && chmod 0755 $(IMAGE_DIR)/state/identity $(IMAGE_DIR)/state/nats
	cp /etc/ssl/certs/ca-certificates.crt $(IMAGE_DIR)/rootfs/etc/ssl/certs/
	set -e; for arch in $(IMAGE_PLATFORMS); do \
		(cd services && GOOS=linux GOARCH=$$arch $(GO_BUILD) -o $(IMAGE_DIR)/linux-$$arch/ $(addprefix ./cmd/,$(IMAGE_BINARIES))); \
		podman build -q --platform linux/$$arch --build-arg TARGETARCH=$$arch \
			--label org.opencontainers.image.version=$(VERSION) --label org.opencontainers.image.revision=$(COMMIT) \
			-f deploy/Containerfile -t $(IMAGE):$(VERSION)-$$arch $(IMAGE_DIR); \
	done
	@echo "make image: $(foreach a,$(IMAGE_PLATFORMS),$(IMAGE):$(VERSION)-$(a))"

# Reads the images back out of podman's storage (podman save + tar) and
# checks them (services/deploycheck/imagecheck).
image-check: image
	cd services && NO8S_IMAGE=$(IMAGE) NO8S_IMAGE_VERSION=$(VERSION) NO8S_IMAGE_COMMIT=$(COMMIT) NO8S_IMAGE_BINARIES="$(IMAGE_BINARIES)" NO8S_IMAGE_PLATFORMS="$(IMAGE_PLATFORMS)" \
		go test -count=1 -tags deploycheck -run TestImage -v ./deploycheck/imagecheck/

# The release the upgrade check starts from: that commit's own
# docker-compose.yml on its `make build` binaries, checked out and built once
# into the git-ignored .cache/. 889ed2e is the last commit whose Compose file
# ran without identities and with NATS open (its schema is that of a209d47,
# the earlier pin, whose Compose file built images and cannot run here).
UPGRADE_FROM ?= 889ed2e
UPGRADE_DIR  := $(CURDIR)/.cache/upgrade-from-$(UPGRADE_FROM)
upgrade-from: $(UPGRADE_DIR)/bin/no8s-store
$(UPGRADE_DIR)/bin/no8s-store:
	rm -rf $(UPGRADE_DIR) && mkdir -p $(UPGRADE_DIR)
	git archive $(UPGRADE_FROM) | tar -x -C $(UPGRADE_DIR)
	$(MAKE) -C $(UPGRADE_DIR) build

# The Compose topology exercised (services/deploycheck/composerun): the
# image is checked, then docker-compose.yml runs as written, each service in
# its own network namespace on the binaries taken out of the image, with the
# flow through the gateways' published ports; then copies broken on purpose,
# the sweep and an interrupted run. Needs root (or CAP_NET_ADMIN and
# CAP_SYS_ADMIN), docker-compose, Debian's PostgreSQL; fails otherwise.
DEPLOY_CHECK_RUN ?= TestCompose|TestBrokenCompose|TestUpgrade|TestSweep|TestInterrupted|TestPreflightWithoutRoot|TestParse|TestRunID|TestPlan
#
# Then the Helm chart (services/deploycheck/helmcheck): helm lint and helm
# template of deploy/helm/no8s for the default values and ci/production.yaml,
# the rendered objects' wiring, every rendered object applied with a
# server-side dry run to a real kube-apiserver (make k8s-tools) in a
# restricted namespace, any Warning failing; the schema's refusals. And the
# rendered topology exercised (services/deploycheck/kuberun): every pod a
# process in its own network namespace on the image's binaries, every
# Service a virtual address forwarding to ready pods, the flow through the
# gateway Service; broken copies of the chart failing.
deploy-check: image-check nats-server upgrade-from k8s-tools
	cd services && NO8S_IMAGE_REF=$(IMAGE):$(VERSION)-$$(go env GOARCH) NO8S_IMAGE_BINARIES="$(IMAGE_BINARIES)" NO8S_NATS_SERVER=$(BIN)/nats-server \
		NO8S_UPGRADE_FROM_BIN=$(UPGRADE_DIR)/bin NO8S_UPGRADE_FROM_DIR=$(UPGRADE_DIR) \
		go test -count=1 -tags deploycheck -timeout 25m -run '$(DEPLOY_CHECK_RUN)' -v ./deploycheck/composerun/
	cd services && NO8S_K8S_TOOLS="$$(../tools/k8s/build.sh --dir)" NO8S_IMAGE_REF=$(IMAGE):$(VERSION)-$$(go env GOARCH) NO8S_IMAGE_BINARIES="$(IMAGE_BINARIES)" \
		NO8S_NATS_SERVER=$(BIN)/nats-server go test -count=1 -p 1 -tags deploycheck -timeout 20m -v ./internal/kubeapi/ ./deploycheck/helmcheck/ ./deploycheck/kuberun/

test: build build-failpoint nats-server grpcurl natscli github-openapi check-rules
	NO8S_BIN=$(BIN)/no8s NO8S_BUILD_BIN=$(BIN) NO8S_FAILPOINT_BIN=$(FAILPOINT_BIN) go test -count=1 -timeout $(TEST_TIMEOUT) work
	cd services && go test -count=1 -tags failpoint ./internal/failpoint/
	cd examples/hello-reconciler && NO8S_BIN=$(BIN)/no8s GOWORK=off go test -count=1 ./...

stress: build nats-server github-openapi
	NO8S_STRESS=1 go test -count=1 -timeout 60m -run 'Stress|Outbox|Concurrency|Watch|Exclusion|Chaos|NATS|QueueInput' -v ./services/e2e/

bench: build nats-server
	cd services && go run ./cmd/no8s-bench

bench-scale: build nats-server
	cd services && go run ./cmd/no8s-bench -run scale -identities -nats-auth -gateway-tls $(ARGS)

# bench-peer: no8s (separate services on PostgreSQL, identities, NATS users and
# API authentication on) against kube-apiserver + etcd + a controller-runtime
# noop controller from make k8s-tools, the same scenarios back to back
# (docs/design/performance.md, "The Kubernetes peer"). ARGS=-smoke checks the
# harness in a couple of minutes, keeping no figures.
bench-peer: build nats-server k8s-tools
	cd services && go run ./cmd/no8s-bench -run '^peer$$' -identities -nats-auth -gateway-tls -k8s-tools "$$(../tools/k8s/build.sh --dir)" $(ARGS)

lint: $(BIN)/staticcheck check-large-files check-cyclo check-proto-breaking check-user-docs
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); echo "gofmt: files above need formatting"; exit 1)
	go vet work
	staticcheck work
	cd services && go vet -tags deploycheck ./deploycheck/... ./internal/kubeapi/ && $(BIN)/staticcheck -tags deploycheck ./deploycheck/... ./internal/kubeapi/
	cd services && go vet -tags failpoint ./internal/failpoint/ ./store/outbox/ ./cmd/no8s-store/ && $(BIN)/staticcheck -tags failpoint ./internal/failpoint/ ./store/outbox/ ./cmd/no8s-store/
	cd examples/hello-reconciler && GOWORK=off go vet ./... && GOWORK=off $(BIN)/staticcheck ./...

# A committed binary or dump bloats every clone: tracked files over 1 MiB
# are refused outside testdata/.
check-large-files:
	@.ci/check-large-files

# A function over cyclomatic complexity 25 is several steps in one body:
# production code only (tests, generated code, the store's conformance
# helpers and the benchmark tool are left out; see .ci/check-cyclo).
check-cyclo:
	@.ci/check-cyclo $(DIR)

# The protobuf API breaks no client of the previous main: buf breaking with
# buf.yaml's rules, the working tree's proto/ against the merge-base with
# main (on main, HEAD^1; BUF_BREAKING_AGAINST=<rev> names another); passes,
# saying why, when that revision is not in the clone (a shallow clone).
check-proto-breaking: $(BIN)/buf
	@BUF=$(BIN)/buf .ci/check-proto-breaking

# What users read (docs/, README.md, libs/ with the SDK's package docs,
# examples/) says what the behaviour is: it never cites the seed documents,
# issue numbers, numbered invariants, HARD-PARTS or ARCHITECTURE.md, which
# users have never seen. Design history goes in docs/design/, in plain words.
check-user-docs:
	@found=$$(grep -rniwE "seeds?|issue [0-9]+|invariants? [0-9]|hard-parts" docs README.md libs examples; \
		grep -rnF "ARCHITECTURE.md" docs README.md libs examples); \
	test -z "$$found" || { echo "$$found"; echo "check-user-docs: the lines above cite what users have never seen (a seed, an issue, an invariant number, HARD-PARTS, ARCHITECTURE.md): say what the behaviour is instead"; exit 1; }

# The alert rules of deploy/observability: they parse, and each alert's
# unit test (alerts_test.yml) fires on the series built to fire it and stays
# silent on the one built not to.
check-rules: $(BIN)/promtool
	cd deploy/observability && $(BIN)/promtool check rules alerts.yml && $(BIN)/promtool test rules alerts_test.yml

generate: $(BIN)/buf $(BIN)/protoc-gen-go $(BIN)/protoc-gen-go-grpc
	buf lint
	buf generate
	cd services && go test -count=1 -run '^TestSecurityGuideTableIsThePolicy$$' ./internal/authz -update

generate-check: generate
	@git diff --exit-code -- proto/gen || (echo "generated protobuf code is out of date: run make generate and commit"; exit 1)
	@git diff --exit-code -- docs/security.md || (echo "docs/security.md's generated tables (gRPC policy, REST rules) are out of date: run make generate and commit"; exit 1)
	@test -z "$$(git status --porcelain -- proto/gen)" || (git status --porcelain -- proto/gen; echo "untracked generated files"; exit 1)

tools: $(BIN)/buf $(BIN)/protoc-gen-go $(BIN)/protoc-gen-go-grpc $(BIN)/staticcheck $(BIN)/gocyclo nats-server grpcurl natscli github-openapi promtool

# promtool: checks and unit-tests the alert rules. Built from the module
# tools/prometheus (outside go.work, so that nothing of the Prometheus
# server enters the workspace's modules), pinned by its go.mod; the first
# build takes many minutes.
promtool: $(BIN)/promtool

# k8s-tools: kube-apiserver, etcd, helm and the bench's noop controller,
# built from the modules pinned in tools/k8s (outside go.work, so that
# nothing of Kubernetes, etcd or Helm enters the workspace's modules) into
# ${XDG_CACHE_HOME:-~/.cache}/no8s/k8s-tools/<hash of their go.sum files and
# the Go version>, outside the repository: a fresh clone on the same machine
# finds them there ("k8s-tools: cache hit"). Cold, 15-30 minutes on 2 cores.
# `make -s k8s-tools-dir` prints the directory (tools/k8s/build.sh --dir).
k8s-tools:
	tools/k8s/build.sh

k8s-tools-dir:
	@tools/k8s/build.sh --dir

# k8s-tools-test: the noop controller's tests (tools/k8s/cmd/noop-controller),
# against the etcd and kube-apiserver of make k8s-tools (built as build.sh
# builds it, so that its compiled packages are reused).
k8s-tools-test: k8s-tools
	cd tools/k8s && NO8S_K8S_TOOLS="$$(./build.sh --dir)" GOWORK=off CGO_ENABLED=0 GOFLAGS=-buildvcs=false go test -count=1 ./cmd/noop-controller/

nats-server: $(BIN)/nats-server

# grpcurl: the e2e test lists and calls the store through gRPC reflection.
grpcurl: $(BIN)/grpcurl

# natscli: the nats CLI (the README's `nats request`; a plain subscriber in
# the event-contract test), built once from its pinned release module into
# bin/ and kept: skipped when bin/nats is already that release, built again
# only when the pin changes.
natscli:
	@if [ "$$(go version -m $(BIN)/nats 2>/dev/null | awk '$$1 == "mod" && $$2 == "github.com/nats-io/natscli" {print $$3}')" = "$(NATSCLI_VERSION)" ]; then \
		echo "make natscli: bin/nats is natscli $(NATSCLI_VERSION) already"; \
	else \
		echo "make natscli: building natscli $(NATSCLI_VERSION) into bin/ (once; a few minutes)"; \
		mkdir -p $(BIN) && GOWORK=off GOBIN=$(BIN) go install github.com/nats-io/natscli/nats@$(NATSCLI_VERSION); \
	fi

# Only api.github.com's description is kept (the package also holds GitHub
# Enterprise's and dereferenced copies, some 400 MB); the stamp names the
# version, so that changing the pin installs again.
github-openapi: $(GITHUB_OPENAPI_DIR)/.installed-$(OCTOKIT_OPENAPI_VERSION)
$(GITHUB_OPENAPI_DIR)/.installed-$(OCTOKIT_OPENAPI_VERSION):
	@command -v npm >/dev/null || (echo "make github-openapi needs npm (apt-get install npm)"; exit 1)
	rm -rf $(GITHUB_OPENAPI_DIR) && mkdir -p $(GITHUB_OPENAPI_DIR)
	npm install --prefix $(GITHUB_OPENAPI_DIR) --no-save --no-audit --no-fund --ignore-scripts --loglevel=error @octokit/openapi@$(OCTOKIT_OPENAPI_VERSION)
	find $(GITHUB_OPENAPI_DIR)/node_modules/@octokit/openapi/generated -name '*.json' ! -name api.github.com.json -delete
	test -s $(GITHUB_OPENAPI_DIR)/node_modules/@octokit/openapi/generated/api.github.com.json
	touch $@

# buf needs a pre-release protobuf module: install it on its own, never in go.work.
$(BIN)/buf:
	GOWORK=off GOBIN=$(BIN) go install github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION)
$(BIN)/protoc-gen-go:
	GOWORK=off GOBIN=$(BIN) go install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO)
$(BIN)/protoc-gen-go-grpc:
	GOWORK=off GOBIN=$(BIN) go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC)
$(BIN)/promtool: tools/prometheus/go.mod
	cd tools/prometheus && GOWORK=off go build -o $(BIN)/promtool github.com/prometheus/prometheus/cmd/promtool
$(BIN)/staticcheck:
	GOWORK=off GOBIN=$(BIN) go install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
# Phony: installed again when bin/gocyclo is not the pinned release.
$(BIN)/gocyclo:
	@if [ "$$(go version -m $@ 2>/dev/null | awk '$$1 == "mod" && $$2 == "github.com/fzipp/gocyclo" {print $$3}')" != "$(GOCYCLO_VERSION)" ]; then \
		mkdir -p $(BIN) && GOWORK=off GOBIN=$(BIN) go install github.com/fzipp/gocyclo/cmd/gocyclo@$(GOCYCLO_VERSION); \
	fi
$(BIN)/nats-server:
	GOWORK=off GOBIN=$(BIN) go install github.com/nats-io/nats-server/v2@$(NATS_SERVER_VERSION)
$(BIN)/grpcurl:
	GOWORK=off GOBIN=$(BIN) go install github.com/fullstorydev/grpcurl/cmd/grpcurl@$(GRPCURL_VERSION)

clean:
	rm -rf $(BIN) $(GITHUB_OPENAPI_DIR)
