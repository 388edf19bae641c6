#!/usr/bin/env bash
# GPU check of the CUDA backend, on a machine with an NVIDIA GPU and its driver but no Go: runs
# the prebuilt binaries of `make build-cuda test-cuda-bin` (bin/pdq-cuda, bin/gpucheck,
# bin/cuda.test), from the repository root or a copy of it. Budget: at most 6 minutes on a
# 16-core machine with one H200 (every step prints its time).
#
#   scripts/gpu-check.sh [SIZE]     SIZE of the generated checkpoint, default 4GiB
#
# 1. the parity tests (bin/cuda.test): every kernel, the fused pass and GPTQ against the CPU on
#    fresh random data, on every visible GPU;
# 2. bin/gpucheck: the parity suite again with its own seed, the device copy bandwidth, every
#    kernel's throughput on device-resident data as a fraction of it (CUDA events, median of 21
#    runs), the fused pass end to end, and GPTQ of a 2048x6144 expert on the CPU and the device;
# 3. a whole `pdq convert` of a generated BF16 checkpoint with --device cuda (every GPU),
#    cuda:0 (with more than one GPU) and cpu, timed against reading the source with `cat`, outputs compared byte for byte
#    (report.json aside: it names the device);
# 4. the same binary with the driver hidden (PDQ_LIBCUDA names no library): it must start, say
#    it converts on the CPU, and write the same bytes.
# It stops at the first failure. WORK (default /tmp/pdq-gpu-check) holds the checkpoints.
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE=${1:-4GiB}
WORK=${WORK:-/tmp/pdq-gpu-check}

for b in bin/pdq-cuda bin/gpucheck bin/cuda.test; do
	[ -x "$b" ] || { echo "gpu-check: $b missing: build it with 'make build-cuda test-cuda-bin'" >&2; exit 2; }
done
# The driver library may sit outside the loader's path (containers mount it there).
if ! grep -q 'libcuda\.so\.1' <<<"$(ldconfig -p 2>/dev/null)" && [ -e /usr/local/nvidia/lib64/libcuda.so.1 ]; then
	export LD_LIBRARY_PATH=/usr/local/nvidia/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
echo "cores: $(nproc)"

secs() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(secs)" 'BEGIN { printf "%.1f", b - a }'; }

echo "== 1. parity tests"
t=$(secs)
bin/cuda.test -test.run '^TestParity$' -test.count=1
echo "parity tests: $(elapsed "$t") s"

echo "== 2. gpucheck"
bin/gpucheck -bench-gib 4 -runs 21

echo "== 3. conversion of a generated ${SIZE} checkpoint"
rm -rf "$WORK"
mkdir -p "$WORK"
t=$(secs)
bin/pdq-cuda testdata gen --out "$WORK/src" --style deepseek --size "$SIZE" >/dev/null
echo "generated $(du -sh "$WORK/src" | cut -f1) in $(elapsed "$t") s"
cat "$WORK"/src/*.safetensors >/dev/null # every run starts from the page cache
t=$(secs)
cat "$WORK"/src/*.safetensors >/dev/null
echo "reading the source from the page cache (cat): $(elapsed "$t") s"
# cuda:0 only where it differs from cuda (more than one GPU), to keep within the budget.
devs="cuda cpu"
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
[ "${gpus:-0}" -gt 1 ] && devs="cuda cuda:0 cpu"
for dev in $devs; do
	t=$(secs)
	bin/pdq-cuda convert "$WORK/src" --out "$WORK/out-$dev" --device "$dev" --quiet
	echo "convert --device $dev: $(elapsed "$t") s"
done
same() {
	if diff -r -x report.json -x .pdq-journal.json "$1" "$2" >/dev/null; then
		echo "outputs $(basename "$1") and $(basename "$2"): byte-identical"
	else
		echo "outputs $(basename "$1") and $(basename "$2"): DIFFER" >&2
		diff -rq -x report.json -x .pdq-journal.json "$1" "$2" >&2 || true
		exit 1
	fi
}
same "$WORK/out-cuda" "$WORK/out-cpu"
[ -d "$WORK/out-cuda:0" ] && same "$WORK/out-cuda:0" "$WORK/out-cpu"

echo "== 4. the same binary without the driver"
bin/pdq-cuda testdata gen --out "$WORK/small" --size 64MiB >/dev/null
bin/pdq-cuda convert "$WORK/small" --out "$WORK/small-cpu" --device cpu --quiet
PDQ_LIBCUDA="$WORK/absent/libcuda.so.1" bin/pdq-cuda convert "$WORK/small" --out "$WORK/small-nodriver" --quiet 2>"$WORK/nodriver.err"
cat "$WORK/nodriver.err"
grep -q 'no usable GPU, converting on the CPU' "$WORK/nodriver.err"
same "$WORK/small-cpu" "$WORK/small-nodriver"
rm -rf "$WORK"
echo "gpu-check: all passed"
