#!/usr/bin/env bash
# parts-bench.sh: wall and CPU time of one conversion split into 1, 2, 4, ... parts that run at
# once on this machine, one worker each, then merged, beside single runs with 1 and all workers;
# every merged output is compared byte for byte with the single run. The numbers behind
# docs/SCALE.md's table.
#
#   scripts/parts-bench.sh SRC "1 2 4" [convert flags...]
#
# The configurations are run in turn, ROUNDS times (default 3), so that load from other work on
# a shared machine falls on all of them alike; the summary gives the least wall time of each, the
# CPU time (user+sys, which load does not inflate much) of that run, and their ratio: how many
# CPUs the run actually got while other work shared the machine.
# Environment: PDQ (default bin/pdq), ROUNDS, WORK (scratch directory, default a new temporary
# one, removed at the end).
set -euo pipefail

src=${1:?usage: parts-bench.sh SRC "1 2 4" [convert flags...]}
counts=${2:?usage: parts-bench.sh SRC "1 2 4" [convert flags...]}
shift 2
pdq=${PDQ:-bin/pdq}
rounds=${ROUNDS:-3}
work=${WORK:-$(mktemp -d -t pdq-parts.XXXXXX)}
[[ -n "${WORK:-}" ]] || trap 'rm -rf "$work"' EXIT
TIMEFORMAT='%R %U %S'
cpus=$(nproc)

# same compares two output directories, every file but hidden journal files.
same() {
	diff <(cd "$1" && find . -type f ! -name '.*' | sort) <(cd "$2" && find . -type f ! -name '.*' | sort) >/dev/null || return 1
	(cd "$1" && find . -type f ! -name '.*' -print0) | while IFS= read -r -d '' f; do cmp -s "$1/$f" "$2/$f" || exit 1; done
}

# split runs N parts at once into $2 and merges; prints the parts' and the merge's wall time.
split() {
	local n=$1 out=$2 i rc=0 t0 t1 t2
	shift 2
	t0=$(date +%s.%N)
	for ((i = 0; i < n; i++)); do
		"$pdq" convert "$src" --out "$out" --part "$i/$n" --workers 1 --quiet "$@" &
	done
	for ((i = 0; i < n; i++)); do wait -n || rc=1; done
	((rc == 0)) || { echo "a part failed" >&2; return 1; }
	t1=$(date +%s.%N)
	"$pdq" convert "$src" --out "$out" --merge --workers 1 --quiet "$@" >/dev/null
	t2=$(date +%s.%N)
	awk -v a="$t0" -v b="$t1" -v c="$t2" 'BEGIN { printf "%.2f %.2f", b - a, c - b }' >"$work/split"
}

echo "# config round real user sys (s) [parts-wall merge-wall]"
for ((r = 1; r <= rounds; r++)); do
	for w in 1 "$cpus"; do
		rm -rf "$work/single-$w"
		t=$({ time "$pdq" convert "$src" --out "$work/single-$w" --workers "$w" --quiet "$@" >/dev/null; } 2>&1)
		echo "single-w$w $r $t"
	done
	same "$work/single-1" "$work/single-$cpus" || { echo "--workers changed the output" >&2; exit 1; }
	for n in $counts; do
		rm -rf "$work/parts-$n"
		t=$({ time split "$n" "$work/parts-$n" "$@"; } 2>&1)
		same "$work/single-1" "$work/parts-$n" || { echo "parts=$n: output differs from the single run" >&2; exit 1; }
		echo "parts-$n $r $t $(cat "$work/split")"
	done
done | tee "$work/runs"

echo "# least wall time of $rounds rounds (all outputs byte-identical to the single run)"
echo "# config real user+sys cores (user+sys / real: the CPUs the run got)"
awk '$1 != "#" { cpu = $4 + $5; if (!($1 in best) || $3 < best[$1]) { best[$1] = $3; c[$1] = cpu } }
	END { for (k in best) printf "%s %.2f %.2f %.2f\n", k, best[k], c[k], c[k] / best[k] }' "$work/runs" | sort
