# enaprobe: `make help` lists the targets.
GO        ?= go
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -X main.version=$(VERSION)
BIN       := bin/enaprobe
# Release: static binaries per architecture and their checksums.
DIST      ?= dist
ARCHES    ?= amd64 arm64
# Benchmarks: packages with BPF_PROG_TEST_RUN and overhead benchmarks.
BENCH_PKGS ?= ./loader ./analyzer ./internal/ena ./internal/lab/... ./test/e2e

export BPF2GO_CFLAGS := -O2 -g -Wall -Werror

.PHONY: help deps generate build release image test test-short kernels bench soak fuzz lint clean

help: ## list the targets (docs/development.md says what each does and costs)
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

deps: ## install what the tests need from Debian (iproute2, nftables, ethtool, chromium)
	./.ci/deps

generate: ## rebuild the eBPF objects and their Go bindings with clang (installs clang, llvm, libbpf-dev), and docs/cli.md
	./.ci/deps --generate
	$(GO) generate ./bpf/... ./internal/lab/... ./cmd/enaprobe

build: ## build bin/enaprobe
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/enaprobe

release: ## static binaries for linux amd64 and arm64, version-stamped, with SHA256SUMS, into dist/
	rm -rf $(DIST) && mkdir -p $(DIST)
	for arch in $(ARCHES); do \
	  CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -trimpath -ldflags "-s -w $(LDFLAGS)" \
	    -o $(DIST)/enaprobe-linux-$$arch ./cmd/enaprobe || exit 1; \
	done
	cd $(DIST) && sha256sum enaprobe-linux-* > SHA256SUMS

image: release ## the container image for linux/amd64 and arm64 with buildah (reproducible), as dist/enaprobe-image.tar: scripts/image
	DIST=$(DIST) VERSION=$(VERSION) ./scripts/image

test: ## run every test and every benchmark once, as root (through sudo when not root), about 20 minutes: scripts/test
	./scripts/test

kernels: ## the kernel matrix: datapath tests and a trace on 5.10, 6.1, 6.12, arm64 6.1 (qemu) and the host; ARGS='-kernels 6.1 -repo DIR'
	./scripts/kernels $(ARGS)

test-short: ## unit tests only: no root, no kernel
	$(GO) test -short ./internal/record ./bpf/countrules ./internal/ena/counters ./analyzer ./internal/limits ./internal/report/... ./internal/capture

bench: ## benchmarks with ratios measured in one run (see docs/cost.md)
	$(GO) test -p 1 -count=1 -run '^$$' -bench . -benchtime=1x $(BENCH_PKGS)

soak: ## serve's soak test, long form: 10 minutes of mixed traffic in the lab (CI runs 90 s); SOAK=30m to change
	ENAPROBE_SOAK=$${SOAK:-10m} $(GO) test -p 1 -count=1 -timeout 2h -run TestServeSoak -v ./test/e2e

fuzz: ## fuzz the datapath against the Go reference, then the recording reader, 2 minutes each
	$(GO) test -run '^$$' -fuzz FuzzDatapath -fuzztime 2m ./loader
	$(GO) test -run '^$$' -fuzz FuzzRead -fuzztime 2m ./internal/record

lint: ## gofmt, go vet, staticcheck
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

clean: ## remove build output
	rm -rf bin $(DIST)
