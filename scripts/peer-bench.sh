#!/usr/bin/env bash
# peer-bench.sh: pdq convert beside ggml's Q4_0 quantizer on the same routed-expert weights, in one
# run: the figures behind docs/QUALITY.md's "Speed beside the peers". Not part of CI; needs no
# network.
#
#   scripts/peer-bench.sh [SRC]
#
# SRC is a checkpoint; without it one is generated (pdq testdata gen --size $SIZE, default 1GiB,
# BF16; FP8=1 adds --fp8). The INT4 targets of its conversion plan (the routed experts) are dumped
# as float32 (scripts/peer/dump). Then, ROUNDS times (default 3), alternating, for 1 worker and for
# all CPUs:
#   pdq convert SRC --out O --only decode --method rtn -q --workers W    (bash time: wall, user+sys)
#   the same with --method mse
#   each ggml driver in GGML_Q4_0 with -t W: ggml's quantize_q4_0 (quantize_row_q4_0_ref; ggml-cpu's
#   quantize_row_q4_0 is the same function on x86) on exactly the dumped values; its wall and CPU
#   time cover the quantization alone (getrusage, clock_gettime), its float32 read is given apart
#   ("ggmlI" rows)
#   each driver again end to end (-e, "e2eI" rows), as llama-quantize converts a BF16 GGUF: the
#   same weights as BF16 (the source's bytes for a BF16 source), each thread reading its rows,
#   converting them to float32 with ggml's own routine, quantizing and writing Q4_0 to a file
# The summary gives each configuration's least wall time and least CPU time over the rounds, both
# also in ns per expert weight (the weights both tools quantize), and the ratios of pdq's to the
# fastest ggml build's at the same thread count, quantizer alone ("x") and end to end ("x e2e")
# (on a shared machine the CPU time is the steadier figure). pdq does the whole decode conversion: it reads
# the BF16 (or FP8) source, writes the INT4 experts, the rest as BF16 and report.json, and hashes.
#
# The ggml driver is built outside the repository (ggml's code is not part of it):
#   git clone <the ggml repository, github.com/ggml-org/ggml> ggml
#   scripts/peer/build-ggml.sh ggml /tmp/ggml-base                       # ggml's Release flags
#   CFLAGS=-march=native scripts/peer/build-ggml.sh ggml /tmp/ggml-native # tuned to this CPU
#   GGML_Q4_0="/tmp/ggml-base/q4_0_bench /tmp/ggml-native/q4_0_bench" scripts/peer-bench.sh
# Without GGML_Q4_0 (or with drivers that are not there) the ggml rows are skipped with a message.
#
# Environment: PDQ (default bin/pdq, built by make build), ROUNDS, SIZE, FP8, WORKERS (default
# "1 $(nproc)"), WORK (scratch directory, default a new temporary one, removed at the end),
# PROFILE=1 (then CPU profiles of one rtn and one mse run with all workers, go tool pprof -top).
set -euo pipefail

pdq=${PDQ:-bin/pdq}
rounds=${ROUNDS:-3}
workers=${WORKERS:-"1 $(nproc)"}
work=${WORK:-$(mktemp -d -t pdq-peer.XXXXXX)}
[[ -n "${WORK:-}" ]] || trap 'rm -rf "$work"' EXIT
mkdir -p "$work"
TIMEFORMAT='%R %U %S'
[[ -x "$pdq" ]] || { echo "peer-bench.sh: no pdq binary at $pdq (make build, or set PDQ)" >&2; exit 1; }

drivers=()
for d in ${GGML_Q4_0:-}; do
	if [[ -x "$d" ]]; then drivers+=("$d"); else echo "peer-bench.sh: skipping ggml driver $d: not an executable" >&2; fi
done
((${#drivers[@]})) || echo "peer-bench.sh: no ggml driver (GGML_Q4_0 unset or absent): the ggml rows are skipped; see this script's header to build one" >&2

src=${1:-}
if [[ -z "$src" ]]; then
	src=$work/src
	gen=(--out "$src" --size "${SIZE:-1GiB}" --max-shard-size 512MiB)
	[[ "${FP8:-}" == 1 ]] && gen+=(--fp8)
	echo "# pdq testdata gen ${gen[*]}"
	"$pdq" testdata gen "${gen[@]}" >/dev/null
fi

GOEXPERIMENT=${GOEXPERIMENT-simd} go build -o "$work/dump" ./scripts/peer/dump
read -r experts total < <("$work/dump" --out "$work/experts.f32" "$src")
"$work/dump" --bf16 --out "$work/experts.bf16" "$src" >/dev/null
echo "# $src: $total weights, $experts in the INT4 targets (routed experts), dumped to float32 and BF16"
cat "$src"/*.safetensors "$work/experts.f32" "$work/experts.bf16" >/dev/null # page cache: every tool reads warm files

# pdqrun METHOD W: one conversion; prints "real user sys".
pdqrun() {
	rm -rf "$work/out"
	{ time "$pdq" convert "$src" --out "$work/out" --only decode --method "$1" --workers "$2" -q >/dev/null; } 2>&1
}

echo "# config round wall cpu (s) [ggml: read_wall]"
for ((r = 1; r <= rounds; r++)); do
	for w in $workers; do
		for m in rtn mse; do
			read -r real user sys < <(pdqrun "$m" "$w")
			echo "pdq-$m-w$w $r $real $(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.3f", u + s }')"
		done
		for i in "${!drivers[@]}"; do
			line=$("${drivers[$i]}" -t "$w" "$work/experts.f32")
			kv() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$line"; }
			echo "ggml$i-w$w $r $(kv wall) $(kv cpu) $(kv read_wall)"
			echo "$line" >"$work/ggml$i.last"
			rm -f "$work/q4_0.out"
			line=$("${drivers[$i]}" -t "$w" -e "$work/q4_0.out" "$work/experts.bf16" "$work/experts.f32.idx")
			echo "e2e$i-w$w $r $(kv wall) $(kv cpu)"
			echo "$line" >"$work/e2e$i.last"
		done
	done
done | tee "$work/runs"

echo "# least wall time of $rounds rounds, and least CPU time (user+sys) of $rounds rounds, each also in ns per"
echo "# expert weight ($experts); x: pdq over the fastest ggml build at the same thread count"
echo "# (pdq per source weight: its ns per expert weight times $(awk -v e="$experts" -v t="$total" 'BEGIN { printf "%.3f", e / t }'))"
awk -v n="$experts" '$1 != "#" {
		if (!($1 in bw) || $3 < bw[$1]) bw[$1] = $3
		if (!($1 in bc) || $4 < bc[$1]) bc[$1] = $4
	}
	END {
		for (k in bw) if (k ~ /^(ggml|e2e)/) {
			w = k; sub(/^[a-z0-9]*-/, "", w)
			kind = k ~ /^e2e/ ? "e" : "q"
			if (!((kind, w) in gw) || bw[k] < gw[kind, w]) gw[kind, w] = bw[k]
			if (!((kind, w) in gc) || bc[k] < gc[kind, w]) gc[kind, w] = bc[k]
		}
		printf "%-14s %8s %8s %10s %10s %7s %7s %9s %9s\n", "config", "wall s", "cpu s", "wall ns/w", "cpu ns/w", "wall x", "cpu x", "wall x e2e", "cpu x e2e"
		for (k in bw) {
			w = k; sub(/^.*-/, "", w)
			rw = rc = ew = ec = "-"
			if (k ~ /^pdq/ && (("q", w) in gw)) { rw = sprintf("%.2f", bw[k] / gw["q", w]); rc = sprintf("%.2f", bc[k] / gc["q", w]) }
			if (k ~ /^pdq/ && (("e", w) in gw)) { ew = sprintf("%.2f", bw[k] / gw["e", w]); ec = sprintf("%.2f", bc[k] / gc["e", w]) }
			printf "%-14s %8.3f %8.3f %10.3f %10.3f %7s %7s %9s %9s\n", k, bw[k], bc[k], 1e9 * bw[k] / n, 1e9 * bc[k] / n, rw, rc, ew, ec
		}
	}' "$work/runs" | sort
for i in "${!drivers[@]}"; do
	echo "# ggml$i = ${drivers[$i]}: $(cat "$work/ggml$i.last")"
	echo "# e2e$i = ${drivers[$i]} -e: $(cat "$work/e2e$i.last")"
done

# Quality on the same weights: pdq's mean SQNR of the INT4 experts beside Q4_0's.
for m in rtn mse; do
	pdqrun "$m" "$(nproc)" >/dev/null
	echo "# pdq $m: mean SQNR of the INT4 routed experts $("$pdq" report "$work/out" | awk '$1 == "decode" && $3 == "int4" { print $(NF - 3) " dB" }')"
done

if [[ "${PROFILE:-}" == 1 ]]; then
	for m in rtn mse; do
		rm -rf "$work/out"
		"$pdq" --cpuprofile "$work/$m.prof" convert "$src" --out "$work/out" --only decode --method "$m" -q
		echo "# pdq --cpuprofile P convert SRC --out O --only decode --method $m -q; go tool pprof -top P"
		go tool pprof -top "$pdq" "$work/$m.prof" 2>/dev/null | head -30
	done
fi
