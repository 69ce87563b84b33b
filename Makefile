# Skiff's development and test entry points. Everything runs as root on
# Debian 12 (see /work/shared/ENVIRONMENT.md for why each piece is set up
# the way it is).
#
#   make up     build; start the dev containerd, a local control plane
#               (etcd, apiserver, controller-manager, scheduler) and Skiff as
#               its node; run an example Deployment and the add-ons
#               (kube-proxy, CoreDNS, metrics-server) as pods
#   make down   stop all of it (and every pod they ran)
#   make test   lint (gofmt, go vet, staticcheck, code limits), unit and
#               fuzz tests, then the end-to-end suite against the dev
#               containerd (2.x, then 1.6) and a real control plane
#   make lint   the lint step alone
#   make bench  Skiff vs the upstream kubelet, side by side (bench/results)

SHELL := /bin/bash
export PATH := /usr/local/go/bin:$(PATH)

CRI_ENDPOINT := unix:///run/skiff-dev/containerd.sock
# End-to-end runs hold this lock: two kubelets on one containerd remove each
# other's pods, so runs from several work trees take turns.
E2E_LOCK := /run/skiff-dev/e2e.lock
# make e2e RUN=TestName limits the end-to-end run (go test -run).
RUN ?= .
# make e2e E2EFLAGS=-v passes flags to that go test.
E2EFLAGS ?=
# How many of the tests on the shared node run at once (t.Parallel).
E2E_PARALLEL ?= 8
# The containerd the end-to-end tests (and make runtime/up) run on:
# containerd (Debian's 1.6) or containerd2 (2.x, built into
# _output/containerd2/bin). hack/containerd.sh and the tests read it.
SKIFF_RUNTIME ?= containerd
export SKIFF_RUNTIME

.PHONY: deps build runtime tools lint test fuzz e2e bench bench-imports no-e2e up down

# apt packages (containerd, runc, CNI plugins, busybox-static, ...); idempotent.
deps:
	hack/install-deps.sh

# Static, as the binary a node runs: no libc, no cgo resolver.
build:
	CGO_ENABLED=0 go build -o bin/skiff ./cmd/skiff
	CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o bin/pause ./cmd/pause

# Skiff's own containerd on $(CRI_ENDPOINT), with the local images imported.
runtime: deps
	hack/containerd.sh start

# Upstream kube-apiserver, controller-manager, scheduler, kubectl, kubelet,
# kube-proxy, etcd, CoreDNS, metrics-server, a registry and staticcheck in
# _output/bin/ (separate tools modules; cached).
tools:
	hack/build-tools.sh

# gofmt -l, go vet, staticcheck (pinned in hack/tools/staticcheck) and the
# code limits (hack/codelimits: no non-test file over 400 lines, no
# function over 80) over Skiff's module; any finding fails.
lint:
	hack/build-tools.sh staticcheck
	hack/lint.sh

# make test runs every phase through hack/test.sh, which prints each
# phase's time against its budget and the slowest end-to-end tests, and
# stops with a message naming them once TEST_CAP_MINUTES is reached (well
# inside CI's 90 minutes). The budgets are for a cold machine (no Go build
# cache, no _output) with 2 cores. The whole end-to-end suite runs on
# containerd 2.x and on 1.6, in turn.
TEST_CAP_MINUTES := 85
TEST_BUDGETS := tools=15 lint=4 unit=5 fuzz=5 cluster=2 e2e-containerd2=22 e2e-containerd=22
E2E_RUNTIMES := containerd2 containerd
test:
	TEST_CAP_MINUTES=$(TEST_CAP_MINUTES) TEST_BUDGETS='$(TEST_BUDGETS)' E2E_RUNTIMES='$(E2E_RUNTIMES)' hack/test.sh

# Each fuzz target for a count of inputs (go test -fuzz takes one target of
# one package at a time). Counts, not durations: a duration's deadline races
# Go's fuzz coordinator (go.dev/issue/75804, fixed in Go 1.27) and fails a
# target that found nothing. The counts take about 10 s each here; FUZZTIME
# overrides them all (e.g. FUZZTIME=60s on a Go with the fix). Their seed
# corpora (f.Add and testdata/fuzz/) also run with the unit tests. A failing
# input is written to the package's testdata/fuzz/<target>/: fix the bug and
# commit it there.
FUZZTIME ?=
FUZZ_TARGETS := \
	./internal/podsource/file:FuzzBuildPod:20000x \
	./internal/volume:FuzzSubPath:4000x \
	./internal/volume/atomic:FuzzWrite:500x \
	./internal/logs:FuzzContainerLogsRequest:20000x \
	./internal/logs:FuzzParseRecord:20000x \
	./internal/logs:FuzzReadLogs:20000x \
	./internal/server:FuzzSystemLogsPath:20000x \
	./internal/volume/csi:FuzzVolData:2000x \
	./internal/volume/csi:FuzzRootDirOpen:2000x
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; rest=$${t#*:}; name=$${rest%%:*}; n=$${FUZZTIME:-$${rest#*:}}; \
		echo "fuzz $$name in $$pkg for $$n"; \
		go test -run='^$$' -fuzz="^$$name$$" -fuzztime=$$n "$$pkg"; \
	done

# containerd is (re)started inside the lock: a work tree whose containerd
# config or version differs restarts it, which must not happen under
# another's run. A run on a version other than the default stops that
# containerd (and its pods) at the end: the dev containerd rests on the
# default version, which checkouts whose hack/containerd.sh predates
# SKIFF_RUNTIME take for granted.
e2e: deps tools
	go build -o bin/testreport ./hack/testreport
	@if hack/skiff.sh running; then echo "make up's Skiff is running on the dev containerd; two kubelets on one containerd remove each other's pods: run 'make down' first" >&2; exit 1; fi
	mkdir -p $(dir $(E2E_LOCK))
	SKIFF_CRI_ENDPOINT=$(CRI_ENDPOINT) E2E_PARALLEL=$(E2E_PARALLEL) E2EFLAGS='$(E2EFLAGS)' flock -o $(E2E_LOCK) hack/e2e.sh '$(RUN)'

# Skiff vs the upstream kubelet (bench/cmd/skiffbench; results in
# bench/results, one file per runtime), on each runtime of BENCH_RUNTIMES
# in turn: containerd 2.x, then 1.6. BENCH_FLAGS passes flags, e.g.
# -rounds 2 -workloads a,b; BENCH_RUNTIMES=containerd2 benches one.
# containerd is (re)started inside the lock, as for e2e.
BENCH_FLAGS ?=
BENCH_RUNTIMES ?= containerd2 containerd
bench: deps tools build
	@if hack/skiff.sh running; then echo "make up's Skiff is running on the dev containerd: run 'make down' first" >&2; exit 1; fi
	mkdir -p $(dir $(E2E_LOCK))
	go build -o bin/skiffbench ./bench/cmd/skiffbench
	@set -e; for rt in $(BENCH_RUNTIMES); do \
		echo "bench on $$rt"; \
		SKIFF_RUNTIME=$$rt SKIFF_E2E_LOCK_HELD=1 flock -o $(E2E_LOCK) bash -c '\
			hack/containerd.sh start || exit; \
			bin/skiffbench "$$@"; rc=$$?; \
			if [[ $$SKIFF_RUNTIME != containerd ]]; then hack/containerd.sh stop; fi; \
			exit $$rc' _ $(BENCH_FLAGS); \
	done

# What Skiff's libraries cost a process: binary size and RSS of programs
# that import them (bench/results/<date>-import-cost.md).
bench-imports: deps
	go run ./bench/cmd/skiffbench -import-cost

# make up restarts the dev containerd, which an e2e run must have alone.
no-e2e:
	@mkdir -p $(dir $(E2E_LOCK))
	@if ! flock -n $(E2E_LOCK) true; then echo "an end-to-end run holds $(E2E_LOCK) and uses the dev containerd: run make up after it ends" >&2; exit 1; fi

up: no-e2e runtime tools build
	hack/cluster.sh up --api-port 6443
	hack/skiff.sh start
	hack/addons.sh up

# kube-proxy's rules outlive its pod: cleanup removes them once it is gone.
down:
	hack/skiff.sh stop
	hack/cluster.sh down
	hack/containerd.sh stop
	hack/addons.sh cleanup
