# pdq build, test and measurement targets. Everything a fresh machine needs is installed by the
# targets themselves (Go modules, the versitygw S3 server for the object-store tests) into
# $(CACHE), outside the repository.

GO        ?= go
CACHE     ?= $(HOME)/.cache/pdq
BIN       := bin
PKGS      := ./...
VERSITYGW_VERSION := v1.8.0
VERSITYGW := $(CACHE)/bin/versitygw
DEMO      ?= out/demo

export CGO_ENABLED ?= 0
# The CPU kernels' AVX2 loops use Go's simd/archsimd (kernels/simd_avx2.go); without the
# experiment the scalar loops build and give the same bytes.
export GOEXPERIMENT ?= simd

.PHONY: all build test test-direct test-short test-simd test-avx2-emu test-slurm test-deploy lint bench quality demo tools clean

all: lint build test

## build: the pdq binary (pure Go) in bin/
build:
	$(GO) build -trimpath -o $(BIN)/pdq ./cmd/pdq

## test: every test, including the object-store tests against a local versitygw S3 server, then
## test-direct
test: tools
	VERSITYGW=$(VERSITYGW) $(GO) test -timeout 30m $(PKGS)
	$(MAKE) --no-print-directory test-direct

## test-direct: the golden, resume, cancellation and band tests with every large output write
## direct (PDQ_DIRECT_IO=1): the outputs of a test run fit in the 1 GiB a process writes through
## the cache first, so the plain run meets direct and background writes only in internal/fsutil
## and TestFullDiskDirect
DIRECT_TESTS := -count=1 -run 'Golden|Resume|Cancel|Determin|Bands|Copy|Concurrent|Writer' ./quantize/convert ./safetensors
test-direct:
	PDQ_DIRECT_IO=1 $(GO) test $(DIRECT_TESTS)

## test-simd: the golden hashes, the SIMD-against-scalar tests and the legacy-SSE listing test
## (TestNoLegacySSEInVectorCode) under every build the kernels
## have: without the experiment (scalar only), GOAMD64=v1 and v3 (and v4 on an AVX-512 CPU), and
## with the SIMD loops switched off at run time (PDQ_NOSIMD=1)
SIMD_TESTS := -count=1 -run 'Golden|SIMD|Fused|NonFinite|NoAllocations|BF16|F16|E4M3|LegacySSE' ./kernels ./quantize/convert
test-simd:
	GOEXPERIMENT= $(GO) test $(SIMD_TESTS)
	GOAMD64=v1 $(GO) test $(SIMD_TESTS)
	GOAMD64=v3 $(GO) test $(SIMD_TESTS)
	if grep -qw avx512f /proc/cpuinfo; then GOAMD64=v4 $(GO) test $(SIMD_TESTS); fi
	PDQ_NOSIMD=1 $(GO) test $(SIMD_TESTS)

## test-avx2-emu: the SIMD tests and golden outputs on an emulated CPU with AVX2 and no AVX-512
## (qemu-x86_64 -cpu EPYC-Rome; Debian's qemu-user), where an AVX-512 instruction in an AVX2 loop
## would stop the program (scripts/avx2-emu.sh)
test-avx2-emu:
	scripts/avx2-emu.sh $(BIN)

## test-slurm: deploy/slurm on a real one-node Slurm cluster started from a temporary directory
## (needs root and Debian's slurmctld slurmd slurm-client munge; skips without them unless CI=true):
## a 4-part job array plus the dependent merge, byte-compared with one convert
test-slurm: build
	scripts/slurm-e2e.sh $(BIN)/pdq

## test-deploy: the Kubernetes manifests decoded strictly into the k8s.io/api types and checked
## (deploy/k8stest, a module of its own so the main module does not depend on k8s.io/api; every
## flag they pass must be in bin/pdq's convert --help), and the Slurm scripts parsed by bash
test-deploy: build
	@out=$$(gofmt -l deploy/k8stest); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	cd deploy/k8stest && $(GO) vet ./... && PDQ_BIN=$(CURDIR)/$(BIN)/pdq $(GO) test -count=1 ./...
	for f in deploy/slurm/*.sh deploy/slurm/*.sbatch scripts/slurm-e2e.sh scripts/parts-bench.sh; do bash -n $$f || exit 1; done

## test-short: the fast tests only
test-short:
	$(GO) test -short $(PKGS)

## lint: gofmt and go vet
lint:
	@out=$$(gofmt -l cmd quantize safetensors calib kernels internal publish tools serving reportview synth); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	GOOS=linux GOARCH=arm64 $(GO) vet $(PKGS)
	GOOS=darwin GOARCH=arm64 $(GO) vet $(PKGS)
	GOOS=freebsd GOARCH=amd64 $(GO) vet $(PKGS)

## bench: codec, quantization and publishing benchmarks (one core, as the docs quote them);
## BenchmarkKernel* in ./kernels report every SIMD level side by side
bench:
	$(GO) test -run '^$$' -bench . -benchmem -cpu 1 ./safetensors ./quantize/... ./kernels/... ./publish/zipnn

## quality: the quantization quality table of docs/QUALITY.md
quality:
	$(GO) run ./cmd/qualitytable -check

## demo: the main job end to end on a generated checkpoint (see README)
demo: build
	rm -rf $(DEMO)
	$(BIN)/pdq testdata gen --out $(DEMO)/src --style deepseek --fp8 --layers 8 --moe-intermediate 1024
	$(BIN)/pdq inspect $(DEMO)/src
	$(BIN)/pdq plan $(DEMO)/src
	$(BIN)/pdq convert $(DEMO)/src --out $(DEMO)/out
	$(BIN)/pdq verify $(DEMO)/src $(DEMO)/out/decode
	$(BIN)/pdq report $(DEMO)/out --output decode --top 5 --plot $(DEMO)/out/report.png --html $(DEMO)/out/report.html
	$(BIN)/pdq publish $(DEMO)/out/decode file://$(CURDIR)/$(DEMO)/store/tiny/decode --source $(DEMO)/src --compress
	$(BIN)/pdq publish $(DEMO)/out/prefill file://$(CURDIR)/$(DEMO)/store/tiny/prefill --source $(DEMO)/src
	$(BIN)/pdq verify file://$(CURDIR)/$(DEMO)/store/tiny/decode --deep
	$(BIN)/pdq pull file://$(CURDIR)/$(DEMO)/store/tiny/decode $(DEMO)/pulled/decode
	diff -r -x report.json $(DEMO)/out/decode $(DEMO)/pulled/decode && echo "pulled decode checkpoint is byte-identical"

## tools: test dependencies, cached outside the repository
tools: $(VERSITYGW)

$(VERSITYGW):
	mkdir -p $(CACHE)/bin
	CGO_ENABLED=0 GOBIN=$(CACHE)/bin $(GO) install github.com/versity/versitygw/cmd/versitygw@$(VERSITYGW_VERSION)

clean:
	rm -rf $(BIN) out

# CUDA build, vet and PTX targets live beside the kernels.
-include kernels/cuda.mk
