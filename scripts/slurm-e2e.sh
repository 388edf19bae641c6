#!/usr/bin/env bash
# slurm-e2e.sh: run deploy/slurm on a real one-node Slurm cluster and compare with a single run.
#
#   make test-slurm                  # or: scripts/slurm-e2e.sh [PDQ]   (PDQ defaults to bin/pdq)
#
# Starts munged, slurmctld and slurmd from a temporary directory (no systemd, no /etc/slurm, loopback
# only, ports of its own), generates a small checkpoint with `pdq testdata gen`, submits the
# project's own deploy/slurm/submit.sh as a PARTS-task array plus the dependent merge, waits for
# both to leave the queue, and compares the output byte for byte with one `pdq convert` of the
# same source and options (every file except hidden journal files). Then it runs the failure
# story of docs/SCALE.md: one part fails (injected), the dependent merge is cancelled, that index
# alone is rerun with deploy/slurm/pdq-part.sbatch and merged again, and the output must again be
# byte-identical. Every daemon is stopped by its recorded PID on every exit path.
#
# Needs root and Debian's `slurmctld slurmd slurm-client munge`. Without them it skips with the
# reason and exits 0, except under CI=true, where a skip is a failure.
# Environment: PARTS (default 4), KEEP=1 keeps the temporary directory, SLURM_E2E_TIMEOUT seconds
# for the jobs (default 600).
set -euo pipefail
cd "$(dirname "$0")/.."

log() { echo "slurm-e2e: $*"; }
fail() { echo "slurm-e2e: FAIL: $*" >&2; exit 1; }
skip() {
	[[ "${CI:-}" == true ]] && fail "cannot run under CI=true: $*"
	log "SKIP: $*"
	exit 0
}

pdq=$(realpath "${1:-bin/pdq}")
parts=${PARTS:-4}
timeout=${SLURM_E2E_TIMEOUT:-600}
[[ -x "$pdq" ]] || fail "no pdq binary at $pdq (make build)"
[[ $(id -u) == 0 ]] || skip "needs root: slurmd runs the jobs as root here"
for c in munged mungekey munge unmunge slurmctld slurmd sbatch squeue sinfo scontrol ss; do
	command -v "$c" >/dev/null || skip "$c not found (apt-get install slurmctld slurmd slurm-client munge)"
done
# Read the help whole first: grep -q stops at the first match, and with pipefail the writer's
# SIGPIPE would fail the pipeline.
help=$("$pdq" convert --help 2>&1)
grep -q -- '--part ' <<<"$help" || fail "$pdq convert has no --part"

work=$(mktemp -d -t pdq-slurm.XXXXXX)
chmod 755 "$work" # munged wants its socket's directory searchable by everyone
mkdir -p "$work"/{munge,state,spool,log,jobs}
chmod 755 "$work/munge"
pids=()

# running: whether process $1 exists and is not a zombie waiting to be reaped.
running() { [[ -r /proc/$1/stat && "$(cut -d' ' -f3 "/proc/$1/stat" 2>/dev/null)" != Z ]]; }

stop() {
	local rc=$? pid i
	trap - EXIT INT TERM
	for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
	for pid in "${pids[@]}"; do
		for ((i = 0; i < 100; i++)); do running "$pid" || break; sleep 0.1; done
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	if ((rc != 0)); then
		for f in "$work"/log/*.log "$work"/jobs/*.out; do
			[[ -s "$f" ]] || continue
			echo "---- ${f#"$work"/}"
			tail -n 30 "$f"
		done >&2
	fi
	if [[ "${KEEP:-}" == 1 ]]; then log "kept $work"; else rm -rf "$work"; fi
	exit "$rc"
}
trap stop EXIT
trap 'exit 130' INT TERM

# free_port prints a TCP port nothing listens on.
free_port() {
	local p
	while :; do
		p=$((20000 + RANDOM % 40000))
		[[ -z "$(ss -Hltn "sport = :$p")" ]] && { echo "$p"; return; }
	done
}

# wait_for runs "$@" every 0.2 s until it succeeds, at most $1 seconds.
wait_for() {
	local secs=$1 i
	shift
	for ((i = 0; i < secs * 5; i++)); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
	return 1
}

# start runs a daemon in the background with its stdio redirected (a command substitution around
# an unredirected daemon never returns) and records its PID.
start() {
	local name=$1
	shift
	"$@" </dev/null >"$work/log/$name.stdout" 2>&1 &
	pids+=("$!")
}

log "munge"
sock=$work/munge/munge.sock
mungekey --create --keyfile="$work/munge/munge.key" >/dev/null 2>&1 || skip "mungekey --create failed"
chmod 600 "$work/munge/munge.key"
start munged munged -F --key-file="$work/munge/munge.key" --socket="$sock" \
	--pid-file="$work/munge/munged.pid" --log-file="$work/log/munged.log" --seed-file="$work/munge/seed"
wait_for 10 bash -c "munge -n -S '$sock' | unmunge -S '$sock'" || skip "munged did not start (log/munged.log)"

log "slurm.conf"
host=$(hostname -s)
node=$(slurmd -C | head -n1) # NodeName=... CPUs=... RealMemory=...
realmem=$(sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' <<<"$node")
node=$(sed -e "s/RealMemory=[0-9]*/RealMemory=$((realmem * 95 / 100))/" -e "s/^NodeName=[^ ]*/NodeName=$host NodeAddr=127.0.0.1/" <<<"$node")
ctldport=$(free_port)
while slurmdport=$(free_port) && [[ "$slurmdport" == "$ctldport" ]]; do :; done
export SLURM_CONF=$work/slurm.conf
cat >"$SLURM_CONF" <<EOF
ClusterName=pdqe2e
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctldport
SlurmdPort=$slurmdport
CommunicationParameters=NoCtldInAddrAny,NoInAddrAny
AuthType=auth/munge
AuthInfo=socket=$sock
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/log/slurmctld.log
SlurmdLogFile=$work/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
MpiDefault=none
ReturnToService=2
MinJobAge=5
DependencyParameters=kill_invalid_depend
$node State=UNKNOWN
PartitionName=e2e Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF

log "slurmctld, slurmd"
start slurmctld slurmctld -D
start slurmd slurmd -D
node_idle() { [[ "$(sinfo -h -N -o %t 2>/dev/null)" == idle ]]; }
wait_for 30 node_idle || skip "the node did not come up idle: $(sinfo -h -N -o '%t %E' 2>&1)"

log "checkpoint"
# A BF16 DeepSeek-style source of a few layers; small output shards give every part work.
"$pdq" testdata gen --out "$work/src" --style deepseek --size 24MiB --max-shard-size 4MiB >/dev/null
flags="--max-shard-size 3MiB --group-size 64"
# shellcheck disable=SC2086
busy=$("$pdq" plan "$work/src" --parts "$parts" $flags | grep -cE "^ *[0-9]+/$parts +[1-9]") || true
((busy == parts)) || fail "pdq plan gives files to $busy of $parts parts: the test would not split the work"

# The job files' settings for this cluster; PDQ is overridden for the fault-injection run.
export SRC=$work/src PARTS=$parts PDQ=$pdq PDQ_FLAGS=$flags PDQ_MAX_MEMORY_GIB=1 CPUS=1 TIME=00:10:00 LOGDIR=$work/jobs

# await waits until the given jobs have left the queue. Accounting is off and MinJobAge=5 forgets
# finished jobs quickly, and a merge cancelled for a failed dependency "succeeds" too: verdicts
# come from the jobs' own logs and the output, never from exit codes.
await() {
	local ids=$1 t0=$SECONDS
	while [[ -n "$(squeue -h -j "$ids" -o %i 2>/dev/null)" ]]; do
		((SECONDS - t0 < timeout)) || fail "jobs $ids still queued after ${timeout}s: $(squeue -j "$ids" 2>&1)"
		sleep 1
	done
	log "jobs $ids done in $((SECONDS - t0)) s"
}

# submit runs deploy/slurm/submit.sh into OUT=$1 and sets array and merge to the job IDs.
submit() {
	local out
	out=$(OUT=$1 deploy/slurm/submit.sh)
	array=$(awk '$1 == "array" {print $2}' <<<"$out")
	merge=$(awk '$1 == "merge" {print $2}' <<<"$out")
	[[ -n "$array" && -n "$merge" ]] || fail "submit.sh printed no job IDs: $out"
	log "array $array, merge $merge"
}

# part_ok and merge_ok check the last line the job files print.
part_ok() { grep -qx "pdq-part: part $2/$parts exit 0" "$work/jobs/pdq-part-${1}_$2.out" 2>/dev/null; }
merge_ok() { grep -qx "pdq-merge: exit 0" "$work/jobs/pdq-merge-$1.out" 2>/dev/null; }

# compare fails unless directory $1 holds the same files as the single run, byte for byte.
compare() {
	local f n=0
	(cd "$1" && find . -type f ! -name '.*' | sort) >"$work/split.files"
	diff -u "$work/single.files" "$work/split.files" >&2 || fail "${1#"$work"/} and the single run hold different files"
	while read -r f; do
		cmp -s "$work/out-single/$f" "$1/$f" || fail "$f differs between the single run and ${1#"$work"/}"
		n=$((n + 1))
	done <"$work/single.files"
	log "${1#"$work"/} is byte-identical to the single run ($n files)"
}

log "single-machine convert"
# shellcheck disable=SC2086
"$pdq" convert "$work/src" --out "$work/out-single" --max-memory 1GiB $flags --quiet
(cd "$work/out-single" && find . -type f ! -name '.*' | sort) >"$work/single.files"
for f in ./report.json ./decode/model.safetensors.index.json ./prefill/model.safetensors.index.json; do
	grep -qxF "$f" "$work/single.files" || fail "the single run wrote no $f"
done

log "submit $parts parts and the merge"
submit "$work/out-slurm"
await "$array,$merge"
for ((i = 0; i < parts; i++)); do part_ok "$array" "$i" || fail "part $i did not finish (jobs/pdq-part-${array}_$i.out)"; done
merge_ok "$merge" || fail "the merge did not finish (jobs/pdq-merge-$merge.out)"
compare "$work/out-slurm"
"$pdq" verify "$work/src" "$work/out-slurm/decode" >/dev/null || fail "pdq verify refuses the merged decode checkpoint"

log "a failing part cancels the merge; rerunning that index alone and merging again completes it"
bad=$((parts / 2))
cat >"$work/pdq-faulty" <<EOF
#!/usr/bin/env bash
# The real pdq, except that part $bad fails while $work/fault exists.
if [[ -e "$work/fault" && " \$* " == *" --part $bad/$parts "* ]]; then echo "injected failure" >&2; exit 1; fi
exec "$pdq" "\$@"
EOF
chmod +x "$work/pdq-faulty"
touch "$work/fault"
PDQ=$work/pdq-faulty submit "$work/out-rerun"
await "$array,$merge"
part_ok "$array" "$bad" && fail "the injected failure of part $bad did not happen"
[[ -e "$work/jobs/pdq-merge-$merge.out" ]] && fail "the merge ran although part $bad failed"
rm "$work/fault"
# The rerun as docs/SCALE.md gives it: the same settings, one index, then the merge again.
rerun=$(OUT=$work/out-rerun sbatch --parsable --array="$bad" --cpus-per-task=1 --mem=2G \
	--output="$work/jobs/pdq-part-%A_%a.out" deploy/slurm/pdq-part.sbatch)
rerun=${rerun%%;*}
merge=$(OUT=$work/out-rerun sbatch --parsable --dependency="afterok:$rerun" --kill-on-invalid-dep=yes --mem=2G \
	--output="$work/jobs/pdq-merge-%j.out" deploy/slurm/pdq-merge.sbatch)
merge=${merge%%;*}
await "$rerun,$merge"
part_ok "$rerun" "$bad" || fail "the rerun of part $bad did not finish (jobs/pdq-part-${rerun}_$bad.out)"
merge_ok "$merge" || fail "the merge after the rerun did not finish (jobs/pdq-merge-$merge.out)"
compare "$work/out-rerun"

echo "slurm-e2e: PASS: a $parts-part Slurm array plus merge, and one whose failed part was rerun alone, are byte-identical to one convert"
