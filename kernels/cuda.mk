# CUDA targets (included by the top Makefile). The default build stays pure Go; these build the
# `cuda`-tagged code against the CUDA driver API header and link stub, fetched from Debian's
# non-free nvidia-cuda-dev package into $(CUDA_CACHE), outside the repository (NVIDIA's licence
# forbids committing cuda.h). Everything is cached: a second run does no network work.
#
#   make build-cuda      bin/pdq-cuda (pdq with --device cuda) and bin/gpucheck
#   make vet-cuda        go vet -tags cuda of the CUDA packages
#   make test-cuda-bin   bin/cuda.test, the parity tests (go test -c -tags cuda)
#   make test-cuda-emu   the parity suite on pdq.cu compiled for the host (no GPU)
#   make ptx             regenerate kernels/pdq.ptx from kernels/pdq.cu (needs nvcc 11.8+)
#
# The binaries need libcuda.so.1 (the NVIDIA driver) and a GPU to start at all.

CUDA_CACHE   ?= $(CACHE)/cuda
CUDA_INC     := $(CUDA_CACHE)/usr/include
CUDA_STUBS   := $(CUDA_CACHE)/usr/lib/x86_64-linux-gnu/stubs
CUDA_HEADER  := $(CUDA_INC)/cuda.h
NONFREE_LIST := /etc/apt/sources.list.d/nonfree.sources
CUDA_ENV     := CGO_ENABLED=1 CGO_CFLAGS="-I$(CUDA_INC)" CGO_LDFLAGS="-L$(CUDA_STUBS)"
CUDA_PKGS    := ./kernels/cuda/... ./cmd/gpucheck ./cmd/pdq
NVCC         ?= nvcc
NVCC_FLAGS   := -ptx -arch=compute_90 -fmad=false -O3 -std=c++14

.PHONY: build-cuda vet-cuda test-cuda-bin test-cuda-emu ptx cuda-headers cuda-nonfree

## build-cuda: pdq with the CUDA backend (bin/pdq-cuda) and the GPU check program (bin/gpucheck)
build-cuda: $(CUDA_HEADER)
	$(CUDA_ENV) $(GO) build -tags cuda -trimpath -ldflags="-s -w" -o $(BIN)/pdq-cuda ./cmd/pdq
	$(CUDA_ENV) $(GO) build -tags cuda -trimpath -ldflags="-s -w" -o $(BIN)/gpucheck ./cmd/gpucheck

## vet-cuda: go vet of the cuda-tagged packages (and gofmt of their files)
vet-cuda: $(CUDA_HEADER)
	@out=$$(gofmt -l kernels/cuda cmd/gpucheck cmd/pdq); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(CUDA_ENV) $(GO) vet -tags cuda $(CUDA_PKGS)

## test-cuda-bin: compile the CUDA parity tests into bin/cuda.test (run it on a GPU machine)
test-cuda-bin: $(CUDA_HEADER)
	$(CUDA_ENV) $(GO) test -c -tags cuda -ldflags="-s -w" -o $(BIN)/cuda.test ./kernels/cuda

cuda-headers: $(CUDA_HEADER)

# The header and the link stub, from the nvidia-cuda-dev package (only these two files).
$(CUDA_HEADER):
	@$(MAKE) --no-print-directory cuda-nonfree
	rm -rf $(CUDA_CACHE).tmp && mkdir -p $(CUDA_CACHE).tmp
	cd $(CUDA_CACHE).tmp && apt-get download nvidia-cuda-dev
	dpkg-deb --fsys-tarfile $(CUDA_CACHE).tmp/nvidia-cuda-dev_*.deb | \
		tar -x -C $(CUDA_CACHE).tmp ./usr/include/cuda.h ./usr/lib/x86_64-linux-gnu/stubs/libcuda.so
	rm -f $(CUDA_CACHE).tmp/nvidia-cuda-dev_*.deb
	rm -rf $(CUDA_CACHE) && mv $(CUDA_CACHE).tmp $(CUDA_CACHE)

# Debian's contrib/non-free components, added once (as root) when nvidia-cuda-dev is not
# already installable, reusing the machine's own debian.sources entry.
cuda-nonfree:
	@if apt-cache policy nvidia-cuda-dev 2>/dev/null | grep -q 'Candidate: [0-9]'; then exit 0; fi; \
	if [ -f /etc/apt/sources.list.d/debian.sources ] && [ ! -f $(NONFREE_LIST) ]; then \
		sed 's/^Components: main$$/Components: contrib non-free non-free-firmware/' \
			/etc/apt/sources.list.d/debian.sources > $(NONFREE_LIST).tmp && \
		mv $(NONFREE_LIST).tmp $(NONFREE_LIST); \
	elif [ -f /etc/apt/sources.list ] && [ ! -f /etc/apt/sources.list.d/nonfree.list ]; then \
		sed -n 's/^\(deb .*\) main$$/\1 contrib non-free non-free-firmware/p' /etc/apt/sources.list \
			> /etc/apt/sources.list.d/nonfree.list.tmp && \
		mv /etc/apt/sources.list.d/nonfree.list.tmp /etc/apt/sources.list.d/nonfree.list; \
	fi; \
	apt-get update

## ptx: regenerate kernels/pdq.ptx (nvcc from Debian's nvidia-cuda-toolkit)
ptx:
	@command -v $(NVCC) >/dev/null || { $(MAKE) --no-print-directory cuda-nonfree && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends nvidia-cuda-toolkit; }
	$(NVCC) $(NVCC_FLAGS) -o kernels/pdq.ptx.tmp kernels/pdq.cu && mv kernels/pdq.ptx.tmp kernels/pdq.ptx

## test-cuda-emu: the parity suite on pdq.cu compiled for the host (no GPU needed; needs g++)
test-cuda-emu:
	CGO_ENABLED=1 CGO_CXXFLAGS="-O2 -DPDQ_CU_SHA256=$$(sha256sum kernels/pdq.cu | cut -c1-64)" \
		$(GO) test -count=1 -tags cudaemu ./kernels/cuda/emu
