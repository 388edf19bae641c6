#!/usr/bin/env bash
# submit.sh: submit a pdq conversion to Slurm as a job array of PARTS parts plus the merge job that
# depends on it, and print both job IDs.
#
#   SRC=/models/GLM-5-FP8 OUT=/shared/glm5 PARTS=16 CPUS=32 deploy/slurm/submit.sh
#   array 4242
#   merge 4243
#
# Size PARTS with `pdq plan SRC --parts N` (per-part shards, bytes and estimated cost). Watch with
# `squeue -j ARRAY,MERGE`; a task's log is LOGDIR/pdq-part-ARRAY_INDEX.out. If a task fails the merge
# is cancelled; rerun that index (it resumes) and submit the merge again:
#
#   SRC=... OUT=... PARTS=16 sbatch --array=5 deploy/slurm/pdq-part.sbatch        # prints NEWID
#   SRC=... OUT=... sbatch --dependency=afterok:NEWID deploy/slurm/pdq-merge.sbatch
#
# Environment:
#   SRC, OUT, PARTS     source, shared output directory, number of parts (required; see pdq-part.sbatch)
#   PDQ                 pdq binary reachable from every node (default: pdq on PATH)
#   PDQ_FLAGS           further convert flags for every part and the merge (default: none)
#   PDQ_MAX_MEMORY_GIB  pdq --max-memory in GiB (default 4); each task requests --mem of this plus 1 GiB
#   PDQ_MODULES         environment modules the jobs load first (default: none)
#   CPUS                --cpus-per-task of each part, pdq's --workers (default 8)
#   TIME                --time of each part (default 24:00:00)
#   MAX_RUNNING         at most this many parts at once (--array=0-N%MAX_RUNNING; default: no limit)
#   LOGDIR              directory for the job logs (default: the current directory)
#   SBATCH_ARGS         further sbatch options for both jobs, word-split (e.g. "--partition=cpu --account=ml");
#                       sbatch's own SBATCH_PARTITION, SBATCH_ACCOUNT, SBATCH_QOS are honoured as well
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

: "${SRC:?submit.sh: set SRC to the source checkpoint}"
: "${OUT:?submit.sh: set OUT to the shared output directory}"
: "${PARTS:?submit.sh: set PARTS to the number of parts}"
[[ "$PARTS" =~ ^[1-9][0-9]*$ ]] || { echo "submit.sh: PARTS=$PARTS is not a positive number" >&2; exit 2; }
maxmem=${PDQ_MAX_MEMORY_GIB:-4}
[[ "$maxmem" =~ ^[1-9][0-9]*$ ]] || { echo "submit.sh: PDQ_MAX_MEMORY_GIB=$maxmem is not a whole number of GiB" >&2; exit 2; }
logdir=${LOGDIR:-$PWD}
mkdir -p "$logdir"
export SRC OUT PARTS PDQ_MAX_MEMORY_GIB="$maxmem"

read -r -a extra <<<"${SBATCH_ARGS:-}"
array_spec="0-$((PARTS - 1))${MAX_RUNNING:+%$MAX_RUNNING}"

# --parsable prints "JOBID" or "JOBID;CLUSTER".
mem="$(((maxmem + 1) * 1024))M"
array=$(sbatch --parsable --array="$array_spec" \
	--cpus-per-task="${CPUS:-8}" --mem="$mem" --time="${TIME:-24:00:00}" \
	--output="$logdir/pdq-part-%A_%a.out" "${extra[@]}" "$here/pdq-part.sbatch")
array=${array%%;*}
merge=$(sbatch --parsable --dependency="afterok:$array" --kill-on-invalid-dep=yes --mem="$mem" \
	--output="$logdir/pdq-merge-%j.out" "${extra[@]}" "$here/pdq-merge.sbatch")
merge=${merge%%;*}
echo "array $array"
echo "merge $merge"
