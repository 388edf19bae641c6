#!/usr/bin/env bash
# slurm-e2e.sh: run deploy/slurm on a real one-node Slurm cluster and compare with a single run.
#
#   make test-slurm                  # or: scripts/slurm-e2e.sh [PDQ]   (PDQ defaults to bin/pdq)
#
# Starts munged, slurmctld and slurmd from a temporary directory (no systemd, no /etc/slurm, loopback
# only, ports of its own), generates a small checkpoint with `pdq testdata gen`, submits the
# project's own deploy/slurm/submit.sh as a PARTS-task array plus the dependent merge, waits for
# both to leave the queue, then converts the same source with one `pdq convert` and compares the
# two output directories byte for byte (every file except hidden journal files). Every daemon is
# stopped by its recorded PID on every exit path.
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
"$pdq" convert --help 2>&1 | grep -q -- '--part ' || fail "$pdq convert has no --part"

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
export SLURM_CONF=$work/slurm.conf
cat >"$SLURM_CONF" <<EOF
ClusterName=pdqe2e
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
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

log "submit $parts parts and the merge"
subout=$(SRC=$work/src OUT=$work/out-slurm PARTS=$parts PDQ=$pdq PDQ_FLAGS=$flags PDQ_MAX_MEMORY_GIB=1 \
	CPUS=1 TIME=00:10:00 LOGDIR=$work/jobs deploy/slurm/submit.sh)
array=$(awk '$1 == "array" {print $2}' <<<"$subout")
merge=$(awk '$1 == "merge" {print $2}' <<<"$subout")
[[ -n "$array" && -n "$merge" ]] || fail "submit.sh printed no job IDs: $subout"
log "array $array, merge $merge"

# Wait until both jobs left the queue. Accounting is off and MinJobAge=5 forgets finished jobs
# quickly, and a merge cancelled for a failed dependency "succeeds" too: the verdict comes from the
# jobs' own logs and the output, not from exit codes.
start_s=$SECONDS
while [[ -n "$(squeue -h -j "$array,$merge" -o %i 2>/dev/null)" ]]; do
	((SECONDS - start_s < timeout)) || fail "jobs still queued after ${timeout}s: $(squeue -j "$array,$merge" 2>&1)"
	sleep 1
done
log "jobs done in $((SECONDS - start_s)) s"

for ((i = 0; i < parts; i++)); do
	f=$work/jobs/pdq-part-${array}_$i.out
	grep -qx "pdq-part: part $i/$parts exit 0" "$f" 2>/dev/null || fail "part $i did not finish (${f#"$work"/})"
done
f=$(ls "$work"/jobs/pdq-merge-"$merge".out 2>/dev/null) || fail "the merge never ran (cancelled after a failed part?)"
grep -qx "pdq-merge: exit 0" "$f" || fail "the merge failed (${f#"$work"/})"

log "single-machine convert"
# shellcheck disable=SC2086
"$pdq" convert "$work/src" --out "$work/out-single" --max-memory 1GiB $flags --quiet

log "compare"
(cd "$work/out-single" && find . -type f ! -name '.*' | sort) >"$work/single.files"
(cd "$work/out-slurm" && find . -type f ! -name '.*' | sort) >"$work/slurm.files"
diff -u "$work/single.files" "$work/slurm.files" >&2 || fail "the two outputs hold different files"
for f in ./report.json ./decode/model.safetensors.index.json ./prefill/model.safetensors.index.json; do
	grep -qxF "$f" "$work/single.files" || fail "the single run wrote no $f"
done
n=0
while read -r f; do
	cmp -s "$work/out-single/$f" "$work/out-slurm/$f" || fail "$f differs between the single run and the $parts-part Slurm run"
	n=$((n + 1))
done <"$work/single.files"
echo "slurm-e2e: PASS: $parts-part Slurm array plus merge is byte-identical to one convert ($n files)"
