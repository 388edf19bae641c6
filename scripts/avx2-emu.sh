#!/usr/bin/env bash
# avx2-emu.sh: the kernels' SIMD tests and convert's golden outputs on an emulated CPU that has
# AVX2 and no AVX-512 (qemu-x86_64 -cpu EPYC-Rome, user-mode emulation). On a machine with
# AVX-512 the AVX2 loops only ever run beside the AVX-512 ones, so an AVX-512 instruction slipped
# into an AVX2 loop (it happened twice: package-level vectors, then a BF16 narrowing) passes every
# test there and stops an AVX2-only CPU with SIGILL. TestSIMDSelected checks that the avx2 set is
# the one in use. Without qemu-x86_64 (Debian: qemu-user) it says so and exits 0, unless CI=true.
#
#   scripts/avx2-emu.sh [BIN_DIR]      # test binaries go to BIN_DIR/emu (default bin)
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v qemu-x86_64 >/dev/null; then
	echo "avx2-emu.sh: no qemu-x86_64 (Debian package qemu-user): skipped" >&2
	[[ "${CI:-}" == true ]] && exit 1
	exit 0
fi
dir=${1:-bin}/emu
case $dir in /*) ;; *) dir=$PWD/$dir ;; esac # absolute: the binaries run from their package directories
mkdir -p "$dir"
export GOEXPERIMENT=${GOEXPERIMENT-simd}
go test -c -o "$dir/kernels.test" ./kernels
go test -c -o "$dir/convert.test" ./quantize/convert
# run PKG BINARY ARGS...: a test binary in its package directory under the emulated CPU; qemu's
# notes about CPU features its emulator lacks (none of them AVX) are dropped.
run() {
	local pkg=$1 bin=$2
	shift 2
	(cd "$pkg" && PDQ_WANT_SIMD=avx2 qemu-x86_64 -cpu EPYC-Rome "$bin" -test.count=1 "$@" 2>&1) | grep -v '^qemu-x86_64: warning: TCG'
}
run kernels "$dir/kernels.test" -test.short -test.run 'SIMDSelected|Golden|SIMD|Fused|NonFinite|BF16|F16|E4M3'
run quantize/convert "$dir/convert.test" -test.run 'Golden'
echo "avx2-emu.sh: AVX2-only CPU (qemu EPYC-Rome): kernels and golden outputs pass"
